//! The scheduler's end of the report channel: a TCP listener that supervisors in Slurm
//! allocations connect back to (as `srun` connects back to its submit host). Each
//! connection proves its attempt with the token of the attempt's root-private launch
//! spec; then the relay writes what the supervisor reports into the state directory, as
//! the scheduler's user: the pid file (claimed once, as `runfiles` says), the log (opened
//! as `state_perms` says, through a [`LogSink`] with the attempt's cap and the reserve)
//! and the exit file. One thread per connection: a connection is one running attempt.
//!
//! The port is kept in `<state>/report.port` and taken again after a restart, so that
//! the supervisors of adopted attempts find the new scheduler where the old one was.
//!
//! What it wrote is also pushed to its owner as [`Heard`] (a claimed start, a written
//! exit), so that an end is noticed the moment it is on disk, not at the next look.

use super::{Hello, Kind, LOST, OK, REFUSED, ReportTo, SILENT_LIMIT, Started, read_frame};
use crate::exec::state::log_sink::LogSink;
use crate::exec::state::runfiles::{self, ExitStatus, LaunchSpec, Owner};
use crate::model::JobId;
use std::io::{self, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// At most this many connections at once (each is a thread); more are closed at once.
const MAX_CONNECTIONS: usize = 4096;
/// A connection has this long to say whom it speaks for.
const HELLO_LIMIT: Duration = Duration::from_secs(10);

/// What the relay heard from a supervisor, told once it is written into the state
/// directory (so a scheduler restarted right after finds it there too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// The supervisor claimed the attempt (a gang's `rank`, SPEC §16; 0 for a plain
    /// job): its command is about to run. Told again after a reconnect.
    Started { job: JobId, attempt: u32, rank: u32 },
    /// The attempt's (or the rank's) exit is written.
    Exited {
        job: JobId,
        attempt: u32,
        rank: u32,
        status: ExitStatus,
    },
    /// A supervisor's connection ended without its exit status: it died (`kill -9`, its
    /// node lost), or it will connect again.
    Gone { job: JobId, attempt: u32, rank: u32 },
    /// The job reported a checkpoint through its supervisor (SPEC §14).
    Checkpoint {
        job: JobId,
        attempt: u32,
        note: Option<String>,
    },
}

/// Whom the relay tells what it heard (called on the connection's thread: it must not
/// block).
pub type Tell = Arc<dyn Fn(Heard) + Send + Sync>;

/// The listening end; it stops with the scheduler's process.
#[derive(Debug)]
pub struct Relay {
    host: String,
    port: u16,
}

impl Relay {
    /// Listen (on every interface, on the port of last time when it is free) and serve
    /// supervisors of `owner`'s attempts under `state`, telling `tell` what they report.
    pub fn start(state: &Path, owner: Owner, tell: Tell) -> io::Result<Relay> {
        let port_file = state.join("report.port");
        let earlier = std::fs::read_to_string(&port_file)
            .ok()
            .and_then(|t| t.trim().parse::<u16>().ok());
        let listener = match earlier.map(|p| TcpListener::bind(("0.0.0.0", p))) {
            Some(Ok(l)) => l,
            Some(Err(e)) => {
                tracing::warn!(
                    port = earlier,
                    "the report port of the previous scheduler is taken ({e}): supervisors \
                     of attempts started before the restart cannot report to this one"
                );
                TcpListener::bind(("0.0.0.0", 0))?
            }
            None => TcpListener::bind(("0.0.0.0", 0))?,
        };
        let port = listener.local_addr()?.port();
        runfiles::write_atomic(&port_file, format!("{port}\n").as_bytes())?;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")?
            .trim()
            .to_string();
        let root = state.to_path_buf();
        std::thread::Builder::new()
            .name("shareq-report-relay".to_string())
            .spawn(move || accept(listener, root, owner, tell))?;
        tracing::info!(host = %host, port, "supervisors report on this port");
        Ok(Relay { host, port })
    }

    /// Where an attempt's supervisor reports, with a fresh token.
    pub fn report_to(&self) -> io::Result<ReportTo> {
        Ok(ReportTo {
            host: self.host.clone(),
            port: self.port,
            token: super::new_token()?,
        })
    }
}

fn accept(listener: TcpListener, root: PathBuf, owner: Owner, tell: Tell) {
    let open = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let (root, owner, open, tell) = (root.clone(), owner.clone(), open.clone(), tell.clone());
        let spawned = std::thread::Builder::new()
            .name("shareq-report".to_string())
            .spawn(move || {
                let peer = stream.peer_addr().ok();
                if let Err(e) = serve(stream, &root, &owner, &tell) {
                    tracing::debug!(?peer, "a report connection ended: {e}");
                }
                open.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            tracing::warn!("cannot start a thread for a supervisor's report connection");
        }
    }
}

/// One supervisor's connection, until its exit is written or it goes away.
fn serve(mut stream: TcpStream, root: &Path, owner: &Owner, tell: &Tell) -> io::Result<()> {
    stream.set_read_timeout(Some(HELLO_LIMIT))?;
    let refuse = |stream: &mut TcpStream, why: String| -> io::Result<()> {
        let _ = stream.write_all(&[REFUSED]);
        Err(io::Error::new(io::ErrorKind::PermissionDenied, why))
    };
    let hello: Hello = match read_frame(&mut stream)? {
        Some((Kind::Hello, body)) => serde_json::from_slice(&body)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?,
        _ => return refuse(&mut stream, "no hello".to_string()),
    };
    let (job, attempt, rank) = (JobId(hello.job), hello.attempt, hello.rank);
    // A gang's rank (SPEC §16) speaks for its own node: its devices, record and log.
    let Some(spec) = runfiles::read_spec(root, job, attempt)
        .filter(|s| s.db == owner.db)
        .filter(|s| {
            s.report
                .as_ref()
                .is_some_and(|r| super::same_token(&r.token, &hello.token))
        })
        .and_then(|s| match s.gang {
            Some(_) => s.as_rank(rank),
            None => (rank == 0).then_some(s),
        })
    else {
        return refuse(
            &mut stream,
            format!("job {job} attempt {attempt} rank {rank}: no such attempt or a wrong token"),
        );
    };
    if runfiles::read_rank_exit(root, job, attempt, rank, owner).is_some() {
        return refuse(
            &mut stream,
            format!("job {job} attempt {attempt} rank {rank} has its exit status already"),
        );
    }
    stream.write_all(&[OK])?;
    let ended = serve_attempt(stream, spec, tell);
    if !matches!(ended, Ok(true)) {
        tell(Heard::Gone { job, attempt, rank });
    }
    ended.map(drop)
}

/// What one supervisor reports, once it said whom it speaks for: `Ok(true)` once its
/// exit status is written.
fn serve_attempt(mut stream: TcpStream, spec: LaunchSpec, tell: &Tell) -> io::Result<bool> {
    let (job, attempt) = (spec.job, spec.attempt);
    let rank = spec.gang.as_ref().map_or(0, |g| g.rank);
    stream.set_read_timeout(Some(SILENT_LIMIT))?;
    let mut attempt_files = Files {
        spec,
        log: None,
        unwritable: false,
    };
    while let Some((kind, body)) = read_frame(&mut stream)? {
        let answer = match kind {
            Kind::Hello => REFUSED,
            Kind::Started => {
                let s: Started = serde_json::from_slice(&body)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                let answer = attempt_files.started(s)?;
                if answer == OK {
                    tell(Heard::Started { job, attempt, rank });
                }
                answer
            }
            Kind::Log => {
                if let Some(log) = attempt_files.log() {
                    log.write(&body);
                }
                continue;
            }
            Kind::Note => {
                if let Some(log) = attempt_files.log() {
                    log.note(&String::from_utf8_lossy(&body));
                }
                continue;
            }
            Kind::Exit => {
                let status: ExitStatus = serde_json::from_slice(&body)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                attempt_files.exited(status)?;
                tell(Heard::Exited {
                    job,
                    attempt,
                    rank,
                    status,
                });
                stream.write_all(&[OK])?;
                return Ok(true);
            }
            Kind::Beat => continue,
            Kind::Checkpoint => {
                let saved: super::Saved = serde_json::from_slice(&body)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                let most = crate::model::CHECKPOINT_NOTE_MAX;
                if saved.note.as_ref().is_some_and(|n| n.len() > most) {
                    REFUSED
                } else {
                    tell(Heard::Checkpoint {
                        job,
                        attempt,
                        note: saved.note,
                    });
                    OK
                }
            }
        };
        stream.write_all(&[answer])?;
    }
    Ok(false)
}

/// What the relay writes for one attempt.
struct Files {
    spec: LaunchSpec,
    log: Option<LogSink>,
    /// The log cannot be opened (a link planted where it should be, say): its output is
    /// dropped, and the reason was logged once.
    unwritable: bool,
}

impl Files {
    /// Claim the attempt for the supervisor (once; the same supervisor again after a
    /// reconnect is answered the same). [`LOST`]: a restarted scheduler declared it lost.
    fn started(&mut self, s: Started) -> io::Result<u8> {
        let path = self.spec.pid_path();
        if runfiles::claim_pid_remote(&path, s.pid, s.start, &self.spec.db)? {
            return Ok(OK);
        }
        let same = runfiles::read_pid_record(&path).is_some_and(|r| {
            r.pid == s.pid && r.start == s.start && r.db.as_deref() == Some(&self.spec.db)
        });
        Ok(if same { OK } else { LOST })
    }

    /// The attempt's log, opened on first use (appending: a reconnect goes on where the
    /// last connection stopped, and the cap counts what is there); `None` when it cannot
    /// be opened.
    fn log(&mut self) -> Option<&mut LogSink> {
        if self.log.is_none() && !self.unwritable {
            match crate::exec::supervisor::open_log(&self.spec, None) {
                Ok(file) => {
                    self.log = Some(
                        LogSink::from_file(file, self.spec.log_cap, self.spec.free_reserve)
                            .for_user(self.spec.user_log.clone(), &self.spec.log),
                    )
                }
                Err(e) => {
                    tracing::warn!(
                        job = %self.spec.job,
                        attempt = self.spec.attempt,
                        "the attempt's output is dropped: cannot open its log: {e}"
                    );
                    self.unwritable = true;
                }
            }
        }
        self.log.as_mut()
    }

    /// The attempt's (or the gang rank's) exit, into its record.
    fn exited(&mut self, status: ExitStatus) -> io::Result<()> {
        let rec = runfiles::ExitRecord {
            status,
            db: Some(self.spec.db.clone()),
        };
        runfiles::write_exit_at(&self.spec.pid_path(), &rec)
    }
}
