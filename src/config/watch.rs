//! Watching a config directory and handing each settled, changed state to a callback:
//! `Applied` for a fully valid set, `Rejected` with every error otherwise.
//!
//! Runtime-agnostic: one plain thread owns the file watcher and calls the callback, so
//! the tokio runtime, `shareq check --watch` and the tests use it alike.
//!
//! What it copes with, and how:
//! - bursts of saves and editors' temp-file + rename: the debouncer
//!   (`notify-debouncer-full`, [`DEBOUNCE`]) waits for quiet, then the *whole* directory
//!   is re-read, so it does not matter which events came or in what order. Our own reads
//!   cause open/close/atime events; those are ignored, or every read would cause another;
//! - a file caught half-written: a read is used only once nothing under the directory
//!   was modified for [`DEBOUNCE`] (by the files' and directories' times) and no file
//!   changed while it was read; an invalid read is confirmed by a second read after
//!   another quiet period before it is reported. A writer that pauses mid-file for
//!   longer than that shows up as at most one rejection;
//! - the directory removed and created again: its parent is watched too, and the
//!   directory's watch is re-armed whenever its identity (device, inode) changes; while it
//!   is missing it is also polled, in case the parent went as well;
//! - repeats: a state is delivered only when the content hash or the validity changed,
//!   so events that change nothing (a swap file, `git status`) cost a read and no more.
//! - a state refused by a read elsewhere (the scheduler's explicit `reload`), which this
//!   watcher may never have seen (the file removed right after): told to it
//!   ([`Refusals`]), so that the change undoing it is delivered and clears the error.

use super::dir::{DirSnapshot, LoadedConfig};
use super::error::ConfigError;
use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
use notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

/// How long the directory must be quiet before it is read.
pub const DEBOUNCE: Duration = Duration::from_millis(100);
/// How often a missing directory (or a read that found a busy writer) is looked at again.
const POLL: Duration = Duration::from_millis(250);
/// Pause between reads while a writer is busy.
const SETTLE: Duration = Duration::from_millis(30);
const SETTLE_TRIES: u32 = 20;

/// What the watcher hands over after a change.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigUpdate {
    /// A fully valid configuration: apply it.
    Applied(Box<LoadedConfig>),
    /// The directory as it is now is not valid: keep the previous configuration.
    Rejected(Vec<ConfigError>),
}

enum Msg {
    Changed,
    ReloadNow,
    /// A read elsewhere (an explicit `reload`) refused the directory with this content
    /// hash, and that is what its owner now reports.
    Refused(String),
    Stop,
}

/// Tells a watcher what a read elsewhere refused (`Watcher::refused_elsewhere`), so that
/// the change that undoes it is delivered even when the watcher never saw it.
#[derive(Debug, Clone)]
pub struct Refusals(Sender<Msg>);

impl Refusals {
    /// The directory with content hash `hash` was refused and is reported so: from now
    /// on, a directory that differs from it is delivered.
    pub fn refused(&self, hash: String) {
        let _ = self.0.send(Msg::Refused(hash));
    }
}

/// Watches a config directory until dropped.
pub struct Watcher {
    tx: Sender<Msg>,
    worker: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Start watching `dir`. Before returning, reads the directory and delivers its
    /// state once (`Applied` or `Rejected`, also when the directory does not exist yet).
    /// Fails only when the system's file watcher cannot be set up.
    pub fn start(
        dir: PathBuf,
        on_update: Box<dyn FnMut(ConfigUpdate) + Send>,
    ) -> Result<Watcher, ConfigError> {
        Watcher::start_from(dir, on_update, None)
    }

    /// [`Watcher::start`] for a caller that already applied the directory's valid state
    /// with content hash `applied` (the scheduler at boot): the first read delivers only
    /// what changed since, so the same config is not applied (and recorded) twice.
    pub fn start_from(
        dir: PathBuf,
        on_update: Box<dyn FnMut(ConfigUpdate) + Send>,
        applied: Option<String>,
    ) -> Result<Watcher, ConfigError> {
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let events = tx.clone();
        let worker = std::thread::Builder::new()
            .name("shareq-config-watch".into())
            .spawn(move || {
                let mut w = match Worker::new(dir, events, on_update) {
                    Ok(w) => w,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let force = applied.is_none();
                if let Some(hash) = applied {
                    w.last = Some(Delivered {
                        hash: Some(hash),
                        valid: true,
                    });
                }
                w.reload(force);
                let _ = ready_tx.send(Ok(()));
                w.run(&rx);
            })
            .map_err(|e| ConfigError::new(format!("cannot start the config watcher: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Watcher {
                tx,
                worker: Some(worker),
            }),
            Ok(Err(e)) => {
                let _ = worker.join();
                Err(e)
            }
            Err(_) => {
                let _ = worker.join();
                Err(ConfigError::new(
                    "the config watcher stopped while starting",
                ))
            }
        }
    }

    /// Read the directory again now and deliver the result, even if nothing changed
    /// (the console's `r` key: the operator wants to see an answer).
    pub fn reload_now(&self) {
        let _ = self.tx.send(Msg::ReloadNow);
    }

    /// How a read made elsewhere tells this watcher what it refused.
    pub fn refusals(&self) -> Refusals {
        Refusals(self.tx.clone())
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(h) = self.worker.take() {
            // Dropped from inside the callback: the thread ends by itself after it.
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

/// (device, inode) on unix: tells a re-created directory from the one being watched.
#[cfg(unix)]
fn identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).ok().filter(|m| m.is_dir())?;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(p: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(p)
        .ok()
        .filter(|m| m.is_dir())
        .map(|_| (0, 0))
}

/// The last state delivered: its content hash (`None`: the directory could not be read)
/// and whether it was valid.
#[derive(PartialEq, Eq, Clone)]
struct Delivered {
    hash: Option<String>,
    valid: bool,
}

struct Worker {
    /// As given: file names in errors read the way the operator wrote them.
    dir: PathBuf,
    /// Absolute, to recognise the events that concern the directory.
    abs: PathBuf,
    parent: Option<PathBuf>,
    debouncer: Debouncer<RecommendedWatcher, RecommendedCache>,
    watched: Option<(u64, u64)>,
    parent_watched: Option<(u64, u64)>,
    last: Option<Delivered>,
    /// A read found a busy writer; look again after [`POLL`].
    retry: bool,
    on_update: Box<dyn FnMut(ConfigUpdate) + Send>,
}

/// Does an event on `path` concern the config directory `abs`? Anything inside it may:
/// even hidden names, since Kubernetes ConfigMap volumes update by swapping a hidden
/// `..data` symlink. Events that change nothing cost one read and are not delivered.
fn relevant(abs: &Path, path: &Path) -> bool {
    path.starts_with(abs)
}

/// Could this event change what the directory says? Opening, reading and the access
/// time are not (and are what our own reads cause).
fn changes_content(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        _ => true,
    }
}

impl Worker {
    fn new(
        dir: PathBuf,
        events: Sender<Msg>,
        on_update: Box<dyn FnMut(ConfigUpdate) + Send>,
    ) -> Result<Worker, ConfigError> {
        let abs = std::path::absolute(&dir).unwrap_or_else(|_| dir.clone());
        let parent = abs.parent().map(Path::to_path_buf);
        let filter_dir = abs.clone();
        let debouncer = new_debouncer(DEBOUNCE, None, move |res: DebounceEventResult| {
            // On a watcher error (e.g. the kernel's event queue overflowed) events may be
            // lost: re-reading everything is always correct.
            let hit = match res {
                // No path: a rescan request (events were dropped): re-read.
                Ok(evs) => evs.iter().any(|e| {
                    changes_content(&e.kind)
                        && (e.paths.is_empty() || e.paths.iter().any(|p| relevant(&filter_dir, p)))
                }),
                Err(_) => true,
            };
            if hit {
                let _ = events.send(Msg::Changed);
            }
        })
        .map_err(|e| {
            ConfigError::new(format!("cannot watch the config directory: {e}")).at(
                Some(&dir.display().to_string()),
                None,
                None,
            )
        })?;
        let mut w = Worker {
            dir,
            abs,
            parent,
            debouncer,
            watched: None,
            parent_watched: None,
            last: None,
            retry: false,
            on_update,
        };
        w.rearm();
        Ok(w)
    }

    /// Make sure the directory (recursively) and its parent are watched, re-arming
    /// after either was removed and created again. Returns whether anything changed.
    fn rearm(&mut self) -> bool {
        let abs = self.abs.clone();
        let mut changed = false;
        if let Some(parent) = self.parent.clone() {
            let id = identity(&parent);
            if id != self.parent_watched {
                let d = &mut self.debouncer;
                let _ = d.unwatch(&parent);
                self.parent_watched =
                    id.filter(|_| d.watch(&parent, RecursiveMode::NonRecursive).is_ok());
                changed = true;
            }
        }
        let id = identity(&abs);
        if id != self.watched {
            let d = &mut self.debouncer;
            let _ = d.unwatch(&abs);
            self.watched = id.filter(|_| d.watch(&abs, RecursiveMode::Recursive).is_ok());
            changed = true;
        }
        changed
    }

    fn run(&mut self, rx: &Receiver<Msg>) {
        loop {
            let polling = self.watched.is_none() || self.retry;
            let msg = if polling {
                match rx.recv_timeout(POLL) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => Msg::Changed,
                    Err(RecvTimeoutError::Disconnected) => Msg::Stop,
                }
            } else {
                rx.recv().unwrap_or(Msg::Stop)
            };
            let mut force = matches!(msg, Msg::ReloadNow);
            match msg {
                Msg::Stop => return,
                Msg::Refused(hash) => self.refused(hash),
                Msg::Changed | Msg::ReloadNow => {}
            }
            // Everything queued meanwhile is covered by the one read below.
            while let Ok(m) = rx.try_recv() {
                match m {
                    Msg::Stop => return,
                    Msg::ReloadNow => force = true,
                    Msg::Refused(hash) => self.refused(hash),
                    Msg::Changed => {}
                }
            }
            self.rearm();
            self.reload(force);
        }
    }

    /// What its owner reports now is the refusal of `hash` (read elsewhere): the next
    /// read delivers the directory unless it is still that.
    fn refused(&mut self, hash: String) {
        self.last = Some(Delivered {
            hash: Some(hash),
            valid: false,
        });
    }

    /// Read until the directory holds still, then deliver what it says when that differs
    /// from what was delivered last (or always, when forced).
    fn reload(&mut self, force: bool) {
        self.retry = false;
        let mut confirmed: Option<String> = None;
        for round in 0.. {
            let snap = match self.read_settled() {
                Ok(Some(s)) => s,
                Ok(None) => {
                    self.retry = true;
                    return;
                }
                Err(e) => {
                    self.deliver(None, ConfigUpdate::Rejected(vec![e]), force);
                    return;
                }
            };
            let unchanged = self.last.as_ref().and_then(|l| l.hash.as_deref()) == Some(&snap.hash);
            if unchanged && !force {
                return;
            }
            match snap.load() {
                Ok(cfg) => {
                    self.deliver(Some(snap.hash), ConfigUpdate::Applied(Box::new(cfg)), force);
                    return;
                }
                // Seen twice, a quiet period apart: not a writer caught mid-file.
                Err(errors) if confirmed.as_deref() == Some(&snap.hash) || round >= 10 => {
                    self.deliver(Some(snap.hash), ConfigUpdate::Rejected(errors), force);
                    return;
                }
                Err(_) => {
                    confirmed = Some(snap.hash);
                    std::thread::sleep(DEBOUNCE);
                }
            }
        }
    }

    /// A snapshot read while no file changed under it, after nothing was modified for
    /// [`DEBOUNCE`]; `None` when a writer stayed busy.
    fn read_settled(&self) -> Result<Option<DirSnapshot>, ConfigError> {
        for _ in 0..SETTLE_TRIES {
            let snap = DirSnapshot::read(&self.dir)?;
            let age = snap
                .newest
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .unwrap_or(DEBOUNCE);
            if !snap.stable {
                std::thread::sleep(SETTLE);
            } else if age < DEBOUNCE {
                // Something was written a moment ago, whatever woke us: wait for quiet.
                std::thread::sleep(DEBOUNCE - age);
            } else {
                return Ok(Some(snap));
            }
        }
        Ok(None)
    }

    fn deliver(&mut self, hash: Option<String>, update: ConfigUpdate, force: bool) {
        let now = Delivered {
            valid: matches!(update, ConfigUpdate::Applied(_)),
            hash,
        };
        if !force && self.last.as_ref() == Some(&now) {
            return;
        }
        self.last = Some(now);
        (self.on_update)(update);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, MetadataKind, RemoveKind};

    #[test]
    fn only_events_inside_the_directory_are_relevant() {
        let dir = Path::new("/srv/cfg");
        assert!(relevant(dir, Path::new("/srv/cfg")));
        assert!(relevant(dir, Path::new("/srv/cfg/teams/a.yaml")));
        assert!(relevant(dir, Path::new("/srv/cfg/..data")));
        // Siblings seen through the parent's watch are not.
        assert!(!relevant(dir, Path::new("/srv/other.yaml")));
        assert!(!relevant(dir, Path::new("/srv/cfg-old/a.yaml")));
    }

    #[test]
    fn our_own_reads_are_not_changes() {
        assert!(!changes_content(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!changes_content(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(!changes_content(&EventKind::Modify(ModifyKind::Metadata(
            MetadataKind::AccessTime
        ))));
        assert!(changes_content(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(changes_content(&EventKind::Modify(ModifyKind::Data(
            DataChange::Any
        ))));
        assert!(changes_content(&EventKind::Create(CreateKind::File)));
        assert!(changes_content(&EventKind::Remove(RemoveKind::Folder)));
    }
}
