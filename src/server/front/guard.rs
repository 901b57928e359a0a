//! What the control socket checks and records around each request (SPEC §9): the rules
//! of [`crate::access`] applied before anything is sent to the runtime (a refused request
//! changes nothing), the submitter stamped on every submission, accepted actions written
//! to the audit trail, and the two requests that only the socket answers: a job's log for
//! callers who cannot read the file, and the audit trail.

use super::protocol::{ErrorCode, LOG_CHUNK, LogChunk, Request, Response};
use crate::access::{Caller, Denied, JobAction};
use crate::exec::StateDir;
use crate::model::{JobId, Submitter};
use crate::server::runtime::audit::{Audit, AuditEntry};
use crate::server::runtime::input::{Input, check_before_submit};
use crate::snapshot::{JobView, Place, Snapshot};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

/// The socket's side of the rules: where logs are and where accepted actions go.
#[derive(Debug, Clone)]
pub struct Guard {
    state: StateDir,
    audit: Audit,
    /// Where committed decision lines arrive, for `events` followers.
    pub(crate) feed: crate::server::runtime::events::EventFeed,
    /// Submit latency goes here.
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    /// Why the runtime stopped, once it did (set before it refuses what waited).
    fatal: watch::Receiver<Option<String>>,
}

/// Where a job's owner was found.
enum Owner {
    Known(Option<Submitter>),
    /// Not a job the scheduler has in view (finished long ago, or no such id): the runtime
    /// answers, and changes nothing.
    NotInView,
}

impl Guard {
    pub fn new(state: StateDir, audit: Audit) -> Guard {
        Guard {
            state,
            audit,
            feed: Default::default(),
            metrics: Default::default(),
            fatal: watch::channel(None).1,
        }
    }

    /// The guard of a runtime: its decision feed, metrics, and why it stopped.
    pub(crate) fn observing(
        mut self,
        feed: crate::server::runtime::events::EventFeed,
        metrics: Arc<crate::metrics::Metrics>,
        fatal: watch::Receiver<Option<String>>,
    ) -> Guard {
        self.feed = feed;
        self.metrics = metrics;
        self.fatal = fatal;
        self
    }

    /// `ShuttingDown` once the runtime has stopped: a request it refused then was refused
    /// because it stopped, not for what the request said.
    pub(crate) fn stopped(&self) -> Option<ErrorCode> {
        self.fatal
            .borrow()
            .is_some()
            .then_some(ErrorCode::ShuttingDown)
    }

    /// The state directory (its database is read for `events` and `report`).
    pub(crate) fn state_root(&self) -> std::path::PathBuf {
        self.state.root().to_path_buf()
    }

    /// Usage figures over [since, until] from the history (the caller was admitted;
    /// `users`: with per-user figures).
    pub async fn report(
        &self,
        since: i64,
        until: i64,
        users: bool,
        fair_share: Vec<crate::sched::UserStanding>,
    ) -> Response {
        if until < since {
            return Response::error(
                ErrorCode::BadRequest,
                format!(
                    "report: --until ({}) is before --since ({})",
                    crate::events::seconds(until),
                    crate::events::seconds(since)
                ),
            );
        }
        let root = self.state_root();
        let read = tokio::task::spawn_blocking(move || {
            let store = crate::store::Store::open_read_only(&root).map_err(|e| e.to_string())?;
            let window = store
                .history_window(since, until)
                .map_err(|e| e.to_string())?;
            let mut summary = crate::report::figures(&window, since, until, 1000);
            if !users {
                summary.users.clear();
            }
            Ok::<_, String>(crate::report::Report {
                since,
                until,
                users_shown: users,
                fair_share: if users { fair_share } else { Vec::new() },
                summary,
            })
        });
        match read.await {
            Ok(Ok(report)) => Response {
                report: Some(report),
                ..Response::ok()
            },
            Ok(Err(e)) => Response::error(
                ErrorCode::Unavailable,
                format!("cannot read the history: {e}"),
            ),
            Err(e) => Response::error(
                ErrorCode::Unavailable,
                format!("cannot read the history: {e}"),
            ),
        }
    }

    /// Check a request against the rules in force; stamp a submission with its
    /// submitter. `Err` is the answer to send instead.
    pub async fn admit(
        &self,
        req: &mut Request,
        caller: &Caller,
        inputs: &mpsc::UnboundedSender<Input>,
        snapshots: &watch::Receiver<Arc<Snapshot>>,
    ) -> Result<(), Response> {
        let touches: Vec<(JobAction, JobId)> = match req {
            Request::Submit { job } => {
                job.submitter = Some(Arc::new(caller.submitter()));
                let access = snapshots.borrow().access.clone();
                access
                    .may_submit(caller, &job.quota_share_name)
                    .map_err(Response::denied)?;
                // What needs the file system is asked here, off the runtime task; in
                // order, as the next request waits for this one to be handed over.
                return check_before_submit(job)
                    .await
                    .map_err(|r| Response::refused(&r));
            }
            // A prediction is answered as the submit would be (issue 46): the same
            // member rule, and made for the caller (fair share, per-user limits).
            Request::Predict { job } => {
                job.submitter = Some(Arc::new(caller.submitter()));
                let access = snapshots.borrow().access.clone();
                return access
                    .may_submit(caller, &job.quota_share_name)
                    .map_err(Response::denied);
            }
            Request::Reload => {
                let access = snapshots.borrow().access.clone();
                return access
                    .may_administer(caller, "reload the config")
                    .map_err(Response::denied);
            }
            Request::PutConfig { .. } => {
                let access = snapshots.borrow().access.clone();
                return access
                    .may_administer(caller, "write the config")
                    .map_err(Response::denied);
            }
            Request::Whatif { .. } => {
                let access = snapshots.borrow().access.clone();
                return access
                    .may_administer(caller, "run a what-if on the scheduler's history")
                    .map_err(Response::denied);
            }
            Request::DryRun { .. } => {
                let access = snapshots.borrow().access.clone();
                return access
                    .may_administer(caller, "dry-run a config on the scheduler's jobs")
                    .map_err(Response::denied);
            }
            Request::Audit { .. } => {
                let access = snapshots.borrow().access.clone();
                return access
                    .may_administer(caller, "read the audit trail")
                    .map_err(Response::denied);
            }
            Request::Cancel { ids } => ids.iter().map(|&id| (JobAction::Cancel, id)).collect(),
            Request::Priority { id, .. } => vec![(JobAction::Priority, *id)],
            Request::Log { id, .. } => vec![(JobAction::Log, *id)],
            Request::Report { users, .. } => {
                let access = snapshots.borrow().access.clone();
                let admin = access.is_admin(caller);
                if *users == Some(true) && !admin {
                    return access
                        .may_administer(caller, "read per-user usage figures")
                        .map_err(Response::denied);
                }
                *users = Some(admin);
                return Ok(());
            }
            Request::Jobs { .. }
            | Request::Hello { .. }
            | Request::Job { .. }
            | Request::History { .. }
            | Request::Status
            | Request::Subscribe
            | Request::Events { .. } => return Ok(()),
            // Who may report is the runtime's to say: it knows the attempt's user, cgroup
            // and token (SPEC §14).
            Request::Checkpoint { .. } => return Ok(()),
        };
        let access = snapshots.borrow().access.clone();
        if access.is_admin(caller) {
            return Ok(());
        }
        // The owner of a job the caller just submitted must be in view: sync first.
        let (tx, rx) = oneshot::channel();
        if inputs.send(Input::Sync { reply: tx }).is_err() || rx.await.is_err() {
            return Err(Response::shutting_down());
        }
        let snap = snapshots.borrow().clone();
        let ids: Vec<JobId> = touches.iter().map(|(_, id)| *id).collect();
        let found = snap.find_jobs(&ids);
        let mut refused: Vec<Denied> = Vec::new();
        for (action, id) in touches {
            let owner = match owner_in(found.get(&id).map(|(_, j)| *j)) {
                Owner::Known(o) => o,
                Owner::NotInView if action == JobAction::Log => self.log_owner(id),
                Owner::NotInView => continue,
            };
            if let Err(d) = snap.access.may_touch(caller, action, id, owner.as_ref()) {
                refused.push(d);
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        let text = refused.into_iter().map(|d| d.0).collect::<Vec<_>>();
        Err(Response::denied(Denied(text.join("; "))))
    }

    /// The owner of a job the scheduler no longer has in view, from its database (logs
    /// belong to the scheduler, so their files no longer say whose they are).
    fn log_owner(&self, id: JobId) -> Option<Submitter> {
        let store = crate::store::Store::open_read_only(self.state.root()).ok()?;
        let record = store.job(id).ok()??;
        record.submitter.as_deref().cloned()
    }

    /// Write an accepted action to the audit trail.
    pub fn record(&self, req: &Request, caller: &Caller, answer: &Response) {
        let entry = |action: &str, job: Option<JobId>, detail: String| {
            self.audit
                .record(AuditEntry::new(caller, action, job, detail));
        };
        match req {
            Request::Submit { job } if answer.ok => entry(
                "submit",
                answer.id,
                format!("{} to {}", job.job_name, job.quota_share_name),
            ),
            Request::Cancel { .. } => {
                for o in answer.cancelled.iter().flatten().filter(|o| o.cancelled) {
                    entry("cancel", Some(o.id), String::new());
                }
            }
            Request::Priority { id, priority } if answer.ok && answer.changed == Some(true) => {
                entry("priority", Some(*id), format!("priority {priority}"))
            }
            Request::Reload if answer.ok => entry("reload", None, String::new()),
            Request::PutConfig { file, .. } => {
                if let Some(c) = answer.config.as_ref().filter(|c| c.written) {
                    entry("put_config", None, format!("{file} (hash {})", c.hash));
                }
            }
            _ => {}
        }
    }

    /// Part of a job's log (the caller was admitted).
    pub async fn log(
        &self,
        id: JobId,
        at: LogAt,
        snapshots: &watch::Receiver<Arc<Snapshot>>,
    ) -> Response {
        let state = self.state.clone();
        // Looked up off the runtime and outside the watch's lock (the queue is O(n)).
        let snap = snapshots.borrow().clone();
        let guard = self.clone();
        let read = tokio::task::spawn_blocking(move || {
            let found = snap.find_job(id);
            let attempts = Attempts::of(found);
            let owner = match owner_in(found.map(|(_, j)| j)) {
                Owner::Known(o) => o,
                Owner::NotInView => guard.log_owner(id),
            };
            read_log(&state, id, at, attempts).map(|mut c| {
                c.owner_uid = owner.map(|o| o.uid);
                c
            })
        });
        match read.await {
            Ok(Ok(chunk)) => Response {
                log: Some(chunk),
                ..Response::ok()
            },
            Ok(Err((code, e))) => Response::error(code, e),
            Err(e) => Response::error(ErrorCode::Unavailable, format!("cannot read the log: {e}")),
        }
    }

    /// The newest entries of the audit trail (the caller was admitted).
    pub async fn audit(&self, limit: usize) -> Response {
        let audit = self.audit.clone();
        let limit = limit.clamp(1, 100_000);
        match tokio::task::spawn_blocking(move || audit.read(limit)).await {
            Ok(Ok(rows)) => Response {
                audit: Some(rows),
                ..Response::ok()
            },
            Ok(Err(e)) => Response::error(ErrorCode::Unavailable, e.to_string()),
            Err(e) => Response::error(
                ErrorCode::Unavailable,
                format!("cannot read the audit trail: {e}"),
            ),
        }
    }
}

/// The owner of a job as the picture shows it (`None`: not in view).
fn owner_in(view: Option<&JobView>) -> Owner {
    view.map_or(Owner::NotInView, |j| {
        Owner::Known(j.submitter.as_deref().cloned())
    })
}

/// What the latest snapshot says of a job's attempts: a log is made only once the job
/// writes something, so a started attempt may have none yet.
#[derive(Debug, Clone, Copy, Default)]
struct Attempts {
    /// How many were started (0: none, or the job is not in view).
    started: u32,
    /// The one that runs now, if any.
    running: Option<u32>,
}

impl Attempts {
    /// From where the picture holds the job ([`Snapshot::find_job`]).
    fn of(found: Option<(Place, &JobView)>) -> Attempts {
        let started = found.map_or(0, |(_, j)| j.attempts);
        let running = found.and_then(|(p, j)| (p == Place::Running).then_some(j.attempts));
        Attempts { started, running }
    }
}

/// Which part of a job's log a `log` request asks for: the attempt (default: the latest),
/// the byte to start at, and a gang's rank (SPEC §16; 0: the first node's, the attempt's
/// own log).
#[derive(Debug, Clone, Copy)]
pub struct LogAt {
    pub attempt: Option<u32>,
    pub offset: u64,
    pub rank: u32,
}

fn read_log(
    state: &StateDir,
    id: JobId,
    LogAt {
        attempt,
        offset,
        rank,
    }: LogAt,
    attempts: Attempts,
) -> Result<LogChunk, (ErrorCode, String)> {
    use std::io::{Read, Seek, SeekFrom};
    let latest = state
        .latest_attempt(id)
        .max(Some(attempts.started).filter(|&a| a > 0));
    let Some(attempt) = attempt.or(latest) else {
        return Err((
            ErrorCode::NotFound,
            format!("job {id} has no log (it has not started yet, or the id is wrong)"),
        ));
    };
    let path = state.rank_log(id, attempt, rank);
    let failed = |what: &str, e: std::io::Error| {
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => ErrorCode::NotFound,
            _ => ErrorCode::Unavailable,
        };
        (code, format!("cannot {what} {}: {e}", path.display()))
    };
    // An attempt that was started and has written nothing has no log (yet).
    let ended = attempts.running != Some(attempt);
    let mut f = match crate::exec::state::perms::open_nofollow(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt <= attempts.started => {
            return Ok(LogChunk {
                attempt,
                offset,
                next: offset,
                data: String::new(),
                ended,
                owner_uid: None,
            });
        }
        opened => opened.map_err(|e| failed("open", e))?,
    };
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| failed("read", e))?;
    let mut buf = Vec::with_capacity(LOG_CHUNK.min(64 * 1024));
    f.take(LOG_CHUNK as u64)
        .read_to_end(&mut buf)
        .map_err(|e| failed("read", e))?;
    // Do not split a character between two answers.
    let keep = match std::str::from_utf8(&buf) {
        Ok(_) => buf.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => buf.len(),
    };
    buf.truncate(keep);
    Ok(LogChunk {
        attempt,
        offset,
        next: offset + keep as u64,
        data: String::from_utf8_lossy(&buf).into_owned(),
        ended,
        owner_uid: None,
    })
}

/// The control socket's mode and group (SPEC §9): with `controlSocket.group` 0660 and that
/// group; otherwise 0666 under root (peer credentials decide what each caller may do)
/// and 0600 for a scheduler run by an ordinary user.
pub fn socket_mode(group: Option<&str>) -> std::io::Result<(u32, Option<nix::unistd::Gid>)> {
    if let Some(g) = group {
        let found = nix::unistd::Group::from_name(g)
            .map_err(std::io::Error::from)?
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("controlSocket.group: there is no group named `{g}` on this machine"),
                )
            })?;
        return Ok((0o660, Some(found.gid)));
    }
    if nix::unistd::geteuid().is_root() {
        Ok((0o666, None))
    } else {
        Ok((0o600, None))
    }
}
