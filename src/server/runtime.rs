//! The runtime task: the one owner of the scheduler. It drains its input channel in
//! batches, runs one scheduling pass per batch on the real clock, carries the decisions
//! out through `exec` and publishes an immutable snapshot after changes (at most one per
//! 20 ms while inputs pour in; `Input::Sync` forces one).

use super::carry::Executor;
use super::input::{CancelOutcome, ConfigUpdate, ExecKind, ExecReport, Input};
use crate::config::{LoadedConfig, load_dir};
use crate::exec::telemetry::Samples;
use crate::exec::{Discovery, StateDir, now_ms};
use crate::model::{Command, JobId, JobSpec, JobState};
use crate::sched::{Event, Sched, UnitCapacity};
use crate::snapshot::{ConfigStatus, JobView, Snapshot};
use crate::store::recovery::Adopted;
use crate::store::{Observed, StateLock, Store};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// How to start a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    pub state: StateDir,
    /// The config directory (re-read on `Input::Reload`).
    pub config_dir: PathBuf,
    /// The `shareq` binary that runs supervisors (`shareq __supervise`).
    pub supervisor_exe: PathBuf,
    /// The GPUs found on this machine (`Discovery::skipped()` for fake-only configs).
    pub discovery: Discovery,
}

/// A running runtime: send it inputs, watch its snapshots.
#[derive(Debug)]
pub struct RuntimeHandle {
    pub inputs: mpsc::UnboundedSender<Input>,
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    /// Set when the runtime stopped scheduling on its own because a batch of decisions
    /// could not be stored (then none of them was carried out): the reason.
    pub fatal: watch::Receiver<Option<String>>,
    task: JoinHandle<()>,
    /// The config directory watcher started by `boot::start`, stopped with the handle.
    pub(crate) watcher: Option<WatcherGuard>,
    /// The control socket's accept loop and the socket file (set by `boot::start`).
    server: Option<(JoinHandle<()>, PathBuf)>,
}

/// Keeps the config watcher alive.
pub(crate) struct WatcherGuard(#[allow(dead_code)] pub(crate) crate::config::Watcher);

impl std::fmt::Debug for WatcherGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

/// What a durable runtime starts from (built by `boot::start`): the store and lock it
/// keeps, the scheduler restored from the store, and what recovery decided.
pub(crate) struct Durable {
    pub lock: StateLock,
    pub store: Store,
    pub sched: Sched,
    /// The decisions of the first pass after recovery, already stored.
    pub events: Vec<Event>,
    pub adopted: Vec<Adopted>,
    pub preemptions: Vec<crate::snapshot::PreemptionRecord>,
    pub finished: Vec<JobView>,
    pub retain_days: u32,
    pub config_hash: Option<String>,
    /// The database's identity, recorded in every run file.
    pub owner: crate::exec::runfiles::Owner,
}

/// The store the runtime writes to, and what it keeps for it.
struct Persist {
    store: Store,
    _lock: StateLock,
    retain_days: u32,
    config_hash: Option<String>,
}

/// How many finished jobs `jobs --all` reads from the database.
pub const HISTORY_LISTED: usize = 10_000;

/// How often old history is pruned while running.
const PRUNE_EVERY: Duration = Duration::from_secs(24 * 3600);

impl RuntimeHandle {
    /// Start the runtime task on the current tokio runtime with an initial config.
    pub fn start(opts: RuntimeOptions, initial: LoadedConfig) -> RuntimeHandle {
        RuntimeHandle::start_with(opts, initial, None)
    }

    /// Start with a store (see `boot::start`), or in memory only (`None`).
    pub(crate) fn start_with(
        opts: RuntimeOptions,
        initial: LoadedConfig,
        durable: Option<Durable>,
    ) -> RuntimeHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let now = now_ms();
        let (capacity, warnings) = opts.discovery.capacity(&initial.config);
        for w in &warnings {
            tracing::warn!("{w}");
        }
        let (sched, durable) = match durable {
            Some(mut d) => {
                let sched =
                    std::mem::replace(&mut d.sched, Sched::new(&initial.config, &capacity, false));
                (sched, Some(d))
            }
            None => (Sched::new(&initial.config, &capacity, false), None),
        };
        let config = ConfigStatus {
            source: opts.config_dir.display().to_string(),
            applied_at: Some(now),
            hash: Some(initial.hash.clone()),
            error: None,
            error_at: None,
        };
        let snapshot = Snapshot::build(&sched, now, 0, config.clone(), Vec::new(), &Samples::new());
        let (snap_tx, snap_rx) = watch::channel(Arc::new(snapshot));
        start_telemetry(&capacity, &initial, &tx);
        crate::exec::device_health::start_fake(
            &opts.state,
            fake_devices(&capacity, &initial),
            device_lost_sink(&tx),
            {
                let tx = tx.clone();
                move || !tx.is_closed()
            },
        );
        let mut exec = Executor::new(opts.state.clone(), opts.supervisor_exe.clone(), tx.clone());
        exec.log_limits = initial.config.env.logs.unwrap_or_default();
        let (fatal_tx, fatal_rx) = watch::channel(None);
        let mut rt = Runtime {
            sched,
            opts,
            config,
            exec,
            samples: Samples::new(),
            version: 0,
            snapshots: snap_tx,
            finished: VecDeque::new(),
            maybe_done: Vec::new(),
            dirty: false,
            last_publish: None,
            flush_pending: false,
            tx: tx.clone(),
            persist: None,
            observed: Vec::new(),
            fatal: fatal_tx,
            tokens: Default::default(),
            halted: None,
            lost_devices: Default::default(),
        };
        if let Some(d) = durable {
            let (sched, exec) = (&mut rt.sched, &mut rt.exec);
            exec.owner = d.owner;
            exec.seed_preemptions(d.preemptions);
            for a in &d.adopted {
                // Its supervisor recorded itself, so the command runs (or is about to).
                if sched
                    .job(a.job)
                    .is_some_and(|j| matches!(j.state, JobState::Scheduled | JobState::Starting))
                {
                    sched.set_running_state(a.job, JobState::Running);
                    rt.observed.push(Observed::StateChanged { job: a.job });
                }
                exec.adopt(sched, a.job, a.attempt, a.pid, now);
            }
            // Recovery's first pass, already stored: carry it out now.
            exec.carry_out(sched, d.events, now);
            rt.maybe_done = rt
                .sched
                .jobs()
                .filter(|j| j.state.is_finished())
                .map(|j| j.id)
                .collect();
            rt.finished = d.finished.into_iter().collect();
            rt.persist = Some(Persist {
                store: d.store,
                _lock: d.lock,
                retain_days: d.retain_days,
                config_hash: d.config_hash,
            });
            let tx = tx.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(PRUNE_EVERY).await;
                    if tx.send(Input::Exec(ExecReport(ExecKind::Prune))).is_err() {
                        return;
                    }
                }
            });
        }
        rt.archive_finished();
        rt.publish(now);
        let task = tokio::spawn(rt.run(rx));
        RuntimeHandle {
            inputs: tx,
            snapshots: snap_rx,
            fatal: fatal_rx,
            task,
            watcher: None,
            server: None,
        }
    }

    /// A callback that hands config updates to the runtime, in the shape the directory
    /// watcher wants: `config::Watcher::start(dir, handle.config_sink())`.
    pub fn config_sink(&self) -> Box<dyn FnMut(ConfigUpdate) + Send> {
        let tx = self.inputs.clone();
        Box::new(move |u| drop(tx.send(Input::Config(u))))
    }

    /// Serve the control socket from this runtime until shutdown.
    pub(crate) fn serve_socket(
        &mut self,
        listener: tokio::net::UnixListener,
        path: PathBuf,
        limits: super::conn_limits::SocketLimits,
    ) {
        let task = tokio::spawn(super::socket::serve(
            listener,
            self.inputs.clone(),
            self.snapshots.clone(),
            limits,
        ));
        self.server = Some((task, path));
    }

    /// Stop scheduling and wait for the runtime to end (see `Input::Shutdown`).
    pub async fn shutdown(mut self, stop_jobs: bool) {
        self.watcher = None;
        if let Some((task, path)) = self.server.take() {
            task.abort();
            let _ = std::fs::remove_file(path);
        }
        let (reply, done) = oneshot::channel();
        if self
            .inputs
            .send(Input::Shutdown {
                stop_jobs,
                reply: Some(reply),
            })
            .is_ok()
        {
            let _ = done.await;
        }
        let _ = self.task.await;
    }
}

/// The fake devices of a config: (unit, index).
fn fake_devices(capacity: &[UnitCapacity], initial: &LoadedConfig) -> Vec<(String, u32)> {
    use crate::model::Devices;
    capacity
        .iter()
        .filter(|c| {
            initial
                .config
                .env
                .capacity_limits
                .iter()
                .any(|l| l.capacity_unit == c.unit && matches!(l.devices, Devices::Fake(_)))
        })
        .flat_map(|c| c.devices.iter().map(|&d| (c.unit.clone(), d)))
        .collect()
}

/// Where device health reports go: the runtime's channel, as `DeviceLost`.
fn device_lost_sink(
    tx: &mpsc::UnboundedSender<Input>,
) -> impl Fn(crate::exec::device_health::Lost) -> bool + Send + 'static {
    let tx = tx.clone();
    move |l| {
        tx.send(Input::Exec(ExecReport(ExecKind::DeviceLost {
            unit: l.unit,
            device: l.device,
            why: l.why,
        })))
        .is_ok()
    }
}

fn start_telemetry(
    capacity: &[UnitCapacity],
    initial: &LoadedConfig,
    tx: &mpsc::UnboundedSender<Input>,
) {
    use crate::model::Devices;
    let real: Vec<(String, u32)> = capacity
        .iter()
        .filter(|c| {
            initial
                .config
                .env
                .capacity_limits
                .iter()
                .any(|l| l.capacity_unit == c.unit && !matches!(l.devices, Devices::Fake(_)))
        })
        .flat_map(|c| c.devices.iter().map(|&d| (c.unit.clone(), d)))
        .collect();
    let tx = tx.clone();
    let every = std::time::Duration::from_secs(3);
    let lost = device_lost_sink(&tx);
    if let Err(why) = crate::exec::telemetry::start(
        real,
        every,
        move |s| {
            tx.send(Input::Exec(ExecReport(ExecKind::Telemetry(s))))
                .is_ok()
        },
        lost,
    ) {
        tracing::info!("no GPU telemetry: {why}");
    }
}

struct Runtime {
    sched: Sched,
    opts: RuntimeOptions,
    config: ConfigStatus,
    exec: Executor,
    samples: Samples,
    version: u64,
    snapshots: watch::Sender<Arc<Snapshot>>,
    /// Finished jobs, newest first, moved out of the scheduler so that its tables (and
    /// each snapshot) stay the size of the live work. Until the store keeps history,
    /// this is what `jobs --all` lists.
    finished: VecDeque<JobView>,
    /// Jobs that may have finished in this batch.
    maybe_done: Vec<JobId>,
    /// Something changed since the last snapshot.
    dirty: bool,
    last_publish: Option<Instant>,
    /// A `Flush` timer is on its way.
    flush_pending: bool,
    tx: mpsc::UnboundedSender<Input>,
    /// The store every batch is recorded in before it is carried out (`None`: memory
    /// only, as in tests of the runtime alone).
    persist: Option<Persist>,
    /// Facts fed to the scheduler since the last recorded batch.
    observed: Vec<Observed>,
    fatal: watch::Sender<Option<String>>,
    tokens: super::tokens::ClientTokens,
    /// Set when the state directory was deleted or replaced: stop at once.
    halted: Option<String>,
    /// GPUs telemetry found lost: never handed out again by this runtime, whatever the
    /// config says.
    lost_devices: std::collections::BTreeSet<(String, u32)>,
}

/// Snapshots are published at most this often while inputs pour in (a reader that must
/// see its own change asks with `Input::Sync`).
const PUBLISH_EVERY: Duration = Duration::from_millis(20);

/// How many finished jobs the runtime remembers.
const FINISHED_KEPT: usize = 20_000;
/// How many of them each snapshot carries.
const FINISHED_IN_SNAPSHOT: usize = 200;

/// Answers held back until the batch's decisions are carried out (and, with a store,
/// recorded): a job is accepted only once that is done.
enum Deferred {
    Submit(
        oneshot::Sender<Result<JobId, String>>,
        Result<JobId, String>,
    ),
    Cancel(oneshot::Sender<Vec<CancelOutcome>>, Vec<CancelOutcome>),
    Priority(oneshot::Sender<Result<bool, String>>, Result<bool, String>),
    Reload(oneshot::Sender<Result<(), String>>, Result<(), String>),
}

impl Runtime {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Input>) {
        let mut shutting_down: Option<(bool, Vec<oneshot::Sender<()>>)> = None;
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < 8192 {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            let now = now_ms();
            let mut deferred = Vec::new();
            let mut needs_pass = false;
            let mut changed = false;
            let mut syncs = Vec::new();
            for input in batch {
                match input {
                    Input::Sync { reply } => syncs.push(reply),
                    Input::Shutdown { stop_jobs, reply } => {
                        let entry = shutting_down.get_or_insert((stop_jobs, Vec::new()));
                        entry.0 |= stop_jobs;
                        entry.1.extend(reply);
                    }
                    Input::AllJobs { reply } => {
                        let mut all = Snapshot::all_jobs(&self.sched);
                        all.retain(|j| !j.state.is_finished());
                        match &self.persist {
                            Some(p) => match p.store.history(HISTORY_LISTED, 0) {
                                Ok(h) => all.extend(h.iter().map(|r| r.view())),
                                Err(e) => {
                                    tracing::warn!("cannot read the history: {e}");
                                    all.extend(self.finished.iter().cloned());
                                }
                            },
                            None => all.extend(self.finished.iter().cloned()),
                        }
                        let _ = reply.send(all);
                    }
                    other => {
                        let (pass, change) = self.handle(other, now, &mut deferred);
                        needs_pass |= pass;
                        changed |= change;
                    }
                }
            }
            if let Some(why) = self.halted.take() {
                // Nothing of this batch is carried out or stored: another scheduler may
                // own these GPUs now (SPEC §8).
                self.fail(why, deferred, syncs, shutting_down);
                return;
            }
            if let Some((stop_jobs, _)) = &shutting_down {
                if *stop_jobs && self.exec.stop_all_once(self.sched.grace_period_seconds()) {
                    tracing::info!("stopping every running job before exit");
                }
                needs_pass = false; // never start anything once shutting down
            }
            if needs_pass {
                self.sched.pass(now);
            }
            let events = self.sched.take_events();
            // Write-ahead: the batch's decisions (and the facts that led to them) are
            // stored in one transaction before anything is carried out or answered.
            if let Err(why) = self.persist_batch(now, &events) {
                let why = format!(
                    "cannot store the scheduler's decisions, so none was carried out and \
                     scheduling stopped: {why}"
                );
                self.fail(why, deferred, syncs, shutting_down);
                return;
            }
            changed |= !events.is_empty();
            self.exec.carry_out(&self.sched, events, now);
            self.archive_finished();
            // Publish at most every PUBLISH_EVERY, and always before answering a `Sync`,
            // so a reader that asks after its answer sees what it did.
            self.dirty |= changed;
            if self.dirty {
                let since = self.last_publish.map(|t| t.elapsed());
                if since.is_none_or(|d| d >= PUBLISH_EVERY)
                    || !syncs.is_empty()
                    || shutting_down.is_some()
                {
                    self.publish(now);
                } else if !self.flush_pending {
                    self.flush_pending = true;
                    let wait = PUBLISH_EVERY.saturating_sub(since.unwrap_or_default());
                    let tx = self.tx.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(wait).await;
                        let _ = tx.send(Input::Exec(ExecReport(ExecKind::Flush)));
                    });
                }
            }
            for d in deferred {
                match d {
                    Deferred::Submit(tx, v) => drop(tx.send(v)),
                    Deferred::Cancel(tx, v) => drop(tx.send(v)),
                    Deferred::Priority(tx, v) => drop(tx.send(v)),
                    Deferred::Reload(tx, v) => drop(tx.send(v)),
                }
            }
            for tx in syncs {
                let _ = tx.send(());
            }
            if let Some((stop_jobs, _)) = &shutting_down
                && (!*stop_jobs || self.exec.running_count() == 0)
            {
                break;
            }
        }
        if let Some((_, replies)) = shutting_down {
            tracing::info!(
                running = self.exec.running_count(),
                "runtime stopped; jobs still running keep running under their supervisors"
            );
            for r in replies {
                let _ = r.send(());
            }
        }
    }

    /// Record a batch. Nothing to do without a store or without news.
    fn persist_batch(&mut self, now: i64, events: &[Event]) -> Result<(), String> {
        let observed = std::mem::take(&mut self.observed);
        let Some(p) = &mut self.persist else {
            return Ok(());
        };
        if events.is_empty() && observed.is_empty() {
            return Ok(());
        }
        p.store
            .record(now, &observed, events, &self.sched)
            .map_err(|e| e.to_string())?;
        self.tokens.stored();
        Ok(())
    }

    /// A batch could not be stored: carry none of it out, refuse what waits for an
    /// answer, and stop scheduling. Jobs keep running under their supervisors; a restart
    /// recovers from what was stored.
    fn fail(
        &mut self,
        msg: String,
        deferred: Vec<Deferred>,
        syncs: Vec<oneshot::Sender<()>>,
        shutting_down: Option<(bool, Vec<oneshot::Sender<()>>)>,
    ) {
        tracing::error!("{msg}");
        for d in deferred {
            match d {
                Deferred::Submit(tx, _) => drop(tx.send(Err(msg.clone()))),
                Deferred::Cancel(tx, v) => drop(
                    tx.send(
                        v.into_iter()
                            .map(|o| CancelOutcome {
                                cancelled: false,
                                error: Some(msg.clone()),
                                ..o
                            })
                            .collect(),
                    ),
                ),
                Deferred::Priority(tx, _) => drop(tx.send(Err(msg.clone()))),
                Deferred::Reload(tx, _) => drop(tx.send(Err(msg.clone()))),
            }
        }
        drop(syncs);
        self.fatal.send_replace(Some(msg));
        if let Some((_, replies)) = shutting_down {
            for r in replies {
                let _ = r.send(());
            }
        }
    }

    /// Move jobs that finished out of the scheduler into `finished`.
    fn archive_finished(&mut self) {
        for id in std::mem::take(&mut self.maybe_done) {
            if self.sched.job(id).is_some_and(|j| j.state.is_finished())
                && let Some(view) = Snapshot::job(&self.sched, id)
            {
                self.finished.push_front(view);
                self.sched.forget(id);
            }
        }
        self.finished.truncate(FINISHED_KEPT);
    }

    fn publish(&mut self, now: i64) {
        self.dirty = false;
        self.last_publish = Some(Instant::now());
        self.version += 1;
        let mut snap = Snapshot::build(
            &self.sched,
            now,
            self.version,
            self.config.clone(),
            self.exec.preemption_log(),
            &self.samples,
        );
        snap.finished = self
            .finished
            .iter()
            .take(FINISHED_IN_SNAPSHOT)
            .cloned()
            .collect();
        self.snapshots.send_replace(Arc::new(snap));
    }

    /// Apply one input. Returns (needs a pass, changed the picture).
    fn handle(&mut self, input: Input, now: i64, deferred: &mut Vec<Deferred>) -> (bool, bool) {
        match input {
            Input::Submit { spec, reply } => {
                let result = self.submit(spec, now);
                tracing::info!(?result, "submit");
                if let Some(tx) = reply {
                    deferred.push(Deferred::Submit(tx, result));
                }
                (true, true)
            }
            Input::Cancel { ids, by, reply } => {
                let outcomes: Vec<CancelOutcome> = ids
                    .into_iter()
                    .map(|id| {
                        if self.sched.job(id).is_none() {
                            if self.existed(id) {
                                // Finished and archived: nothing to do.
                                return CancelOutcome {
                                    id,
                                    cancelled: false,
                                    error: None,
                                };
                            }
                            return CancelOutcome {
                                id,
                                cancelled: false,
                                error: Some(format!("no job {id}")),
                            };
                        }
                        let cancelled = self.sched.cancel(id, &by, now);
                        self.maybe_done.push(id);
                        tracing::info!(job = %id, by = %by, cancelled, "cancel");
                        CancelOutcome {
                            id,
                            cancelled,
                            error: None,
                        }
                    })
                    .collect();
                if let Some(tx) = reply {
                    deferred.push(Deferred::Cancel(tx, outcomes));
                }
                (true, true)
            }
            Input::SetPriority {
                id,
                priority,
                reply,
            } => {
                let r = if self.sched.job(id).is_none() && self.existed(id) {
                    Ok(false)
                } else {
                    self.sched.set_priority(id, priority, now)
                };
                tracing::info!(job = %id, priority, ?r, "priority");
                if let Some(tx) = reply {
                    deferred.push(Deferred::Priority(tx, r));
                }
                (true, true)
            }
            Input::Config(update) => {
                self.apply_config(update, now);
                (true, true)
            }
            Input::Reload { reply } => {
                // Reading and validating the directory can take long (a huge or odd file):
                // never on this task. The result comes back as `Reloaded`.
                let (dir, tx) = (self.opts.config_dir.clone(), self.tx.clone());
                tokio::spawn(async move {
                    let loaded = tokio::task::spawn_blocking(move || load_dir(&dir))
                        .await
                        .unwrap_or_else(|e| {
                            Err(vec![crate::config::ConfigError::new(format!(
                                "reading the config failed: {e}"
                            ))])
                        });
                    let _ = tx.send(Input::Exec(ExecReport(ExecKind::Reloaded {
                        loaded,
                        reply,
                    })));
                });
                (false, false)
            }
            Input::Exec(ExecReport(ExecKind::Reloaded { loaded, reply })) => {
                let result = match loaded {
                    Ok(loaded) => {
                        self.apply_config(ConfigUpdate::Applied(loaded), now);
                        Ok(())
                    }
                    Err(errors) => {
                        let text = errors_text(&errors);
                        self.apply_config(ConfigUpdate::Rejected(errors), now);
                        Err(text)
                    }
                };
                if let Some(tx) = reply {
                    deferred.push(Deferred::Reload(tx, result));
                }
                (true, true)
            }
            Input::Exec(ExecReport(ExecKind::StateLost(why))) => {
                self.halted = Some(why);
                (false, false)
            }
            Input::Exec(ExecReport(kind)) => self.exec_report(kind, now),
            Input::AllJobs { .. } | Input::Shutdown { .. } | Input::Sync { .. } => (false, false),
        }
    }

    /// Was this id ever handed out? (Finished jobs leave the scheduler's tables.)
    fn existed(&self, id: JobId) -> bool {
        id.0 >= 1 && id < self.sched.next_job_id()
    }

    fn submit(&mut self, spec: JobSpec, now: i64) -> Result<JobId, String> {
        match &spec.command {
            None => return Err("command is required".to_string()),
            Some(Command::Argv(v)) if v.is_empty() => {
                return Err("command is empty".to_string());
            }
            Some(Command::Shell(s)) if s.trim().is_empty() => {
                return Err("command is empty".to_string());
            }
            _ => {}
        }
        if let Some(dir) = &spec.working_directory
            && !std::path::Path::new(dir).is_dir()
        {
            return Err(format!("workingDirectory `{dir}` is not a directory"));
        }
        let token = spec.client_token.clone();
        if let Some(t) = &token {
            super::tokens::ClientTokens::check(t)?;
            if let Some(id) = self
                .tokens
                .lookup(t, self.persist.as_ref().map(|p| &p.store))
            {
                tracing::info!(job = %id, "submit retried with the same client token");
                return Ok(id);
            }
        }
        let id = self.sched.submit(spec, now).map_err(|r| r.0)?;
        if let Some(t) = token {
            self.tokens.remember(t, id);
        }
        Ok(id)
    }

    fn apply_config(&mut self, update: ConfigUpdate, now: i64) {
        match update {
            ConfigUpdate::Applied(loaded) => {
                let (mut capacity, warnings) = self.opts.discovery.capacity(&loaded.config);
                for c in &mut capacity {
                    c.devices
                        .retain(|d| !self.lost_devices.contains(&(c.unit.clone(), *d)));
                }
                for w in &warnings {
                    tracing::warn!("{w}");
                }
                self.sched.apply_config(&loaded.config, &capacity, now);
                self.exec.log_limits = loaded.config.env.logs.unwrap_or_default();
                if let Some(p) = &mut self.persist {
                    p.retain_days = retain_days(&loaded);
                    if p.config_hash.as_deref() != Some(loaded.hash.as_str()) {
                        let source = self.opts.config_dir.display().to_string();
                        match p.store.record_config(&loaded.hash, &source, now) {
                            Ok(()) => p.config_hash = Some(loaded.hash.clone()),
                            Err(e) => tracing::warn!("cannot record the applied config: {e}"),
                        }
                    }
                }
                self.config.applied_at = Some(now);
                self.config.hash = Some(loaded.hash);
                self.config.error = None;
                self.config.error_at = None;
                tracing::info!("config applied");
            }
            ConfigUpdate::Rejected(errors) => {
                let text = errors_text(&errors);
                tracing::warn!("config rejected, the previous one stays in force: {text}");
                self.sched.config_rejected(text.clone(), now);
                self.config.error = Some(text);
                self.config.error_at = Some(now);
            }
        }
    }

    fn exec_report(&mut self, kind: ExecKind, now: i64) -> (bool, bool) {
        match kind {
            ExecKind::Spawned { job, attempt, pid } => {
                self.exec.spawned(job, attempt, pid);
                let starting = self
                    .sched
                    .job(job)
                    .is_some_and(|j| j.state == crate::model::JobState::Scheduled);
                if starting && self.exec.is_current(job, attempt) {
                    // SCHEDULED → STARTING: the supervisor exists, the command not yet.
                    self.sched
                        .set_running_state(job, crate::model::JobState::Starting);
                    self.observed.push(Observed::StateChanged { job });
                    return (false, true);
                }
                (false, false)
            }
            ExecKind::Running { job, attempt } => {
                if self.exec.is_current(job, attempt) {
                    self.sched
                        .set_running_state(job, crate::model::JobState::Running);
                    self.observed.push(Observed::StateChanged { job });
                    return (false, true);
                }
                (false, false)
            }
            ExecKind::Exited {
                job,
                attempt,
                status,
            } => {
                if !self.exec.finished(job, attempt) {
                    return (false, false);
                }
                let stopping = self.sched.job(job).is_some_and(|j| j.is_stopping());
                tracing::info!(job = %job, attempt, code = status.code, stopping, "attempt ended");
                self.maybe_done.push(job);
                let fact = if stopping {
                    Observed::Released {
                        job,
                        code: Some(status.code),
                    }
                } else {
                    Observed::Exited {
                        job,
                        code: status.code,
                    }
                };
                fact.apply(&mut self.sched, now);
                self.observed.push(fact);
                (true, true)
            }
            ExecKind::GraceOver { job, attempt } => {
                self.exec.kill_if_current(job, attempt);
                (false, false)
            }
            ExecKind::TimeoutOver { job, attempt } => {
                if self.exec.is_current(job, attempt) {
                    tracing::info!(job = %job, "timeout");
                    self.sched.timeout(job, now);
                    return (true, true);
                }
                (false, false)
            }
            ExecKind::Flush => {
                self.flush_pending = false;
                (false, false)
            }
            ExecKind::Prune => {
                if let Some(p) = &mut self.persist {
                    match p.store.prune_jobs(p.retain_days, now) {
                        Ok(ids) => {
                            tracing::info!(
                                jobs = ids.len(),
                                days = p.retain_days,
                                "history pruned"
                            );
                            let state = self.opts.state.clone();
                            tokio::task::spawn_blocking(move || {
                                crate::exec::runfiles::remove_jobs(&state, &ids)
                            });
                        }
                        Err(e) => tracing::warn!("cannot prune the history: {e}"),
                    }
                }
                (false, false)
            }
            ExecKind::Telemetry(samples) => {
                let changed = samples != self.samples;
                self.samples = samples;
                (false, changed)
            }
            ExecKind::DeviceLost { unit, device, why } => {
                if !self.lost_devices.insert((unit.clone(), device)) {
                    return (false, false);
                }
                tracing::error!(unit = %unit, device, "GPU lost ({why}): its jobs are preempted (DEVICE_LOST) and it is no longer handed out");
                self.sched.device_lost(&unit, device, now);
                (true, true)
            }
            // Handled in `handle`.
            ExecKind::Reloaded { .. } | ExecKind::StateLost(_) => (false, false),
        }
    }
}

/// `history.retainDays` of a config (default 30).
pub(crate) fn retain_days(loaded: &LoadedConfig) -> u32 {
    loaded
        .config
        .env
        .history
        .as_ref()
        .map_or(crate::store::DEFAULT_RETAIN_DAYS, |h| h.retain_days)
}

fn errors_text(errors: &[crate::config::ConfigError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}
