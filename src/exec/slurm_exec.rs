//! The Slurm executor (SPEC §10): an attempt is one batch job (`sbatch`, pinned to the
//! node and GPUs shareq chose, submitted as the job's submitter when `serve` is root)
//! that runs shareq's supervisor, so the stop path is the local executor's own; the
//! supervisor runs as the submitter and reports over the report channel, whose relay
//! here writes the same run files and log (`exec::report`). What differs is how an attempt is started
//! and signalled (`scancel --full --signal=TERM`, a plain `scancel` as the backstop) and
//! how its start and end are seen: told by the relay the moment it writes them, and
//! besides, a look twice a second at the run files, `squeue --json` and `sinfo --json`,
//! off the runtime task. A job Slurm lost without an exit status is a vanished
//! supervisor (SPEC §8); a node DOWN is node loss (DEVICE_LOST).

use super::backend::{Backend, Context, Report, Shared, not_started};
use super::proc::Stop;
use super::report::relay::{Heard, Relay};
use super::runfiles::{self, Owner};
use super::slurm::{self, SlurmError, SlurmJob, SlurmNode};
use super::{ExitStatus, LaunchSpec};
use crate::model::JobId;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How often shareq looks at Slurm and the run files of its attempts.
pub(crate) const SLURM_POLL: Duration = Duration::from_millis(500);

/// What the Slurm executor knows of one attempt.
#[derive(Debug, Default)]
struct SlurmAttempt {
    /// Its batch job, once `sbatch` answered or a look at `squeue` found it by name
    /// (adoption).
    id: Option<u64>,
    /// The strongest stop asked for so far; sent as soon as the batch job is known.
    stop: Option<Stop>,
    /// Its supervisor reported in (RUNNING).
    reported: bool,
    /// Its end was reported (the relay told it): the looks leave it alone until the
    /// runtime forgets it.
    ended: bool,
    /// Where the core placed it.
    node: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    attempts: HashMap<(JobId, u32), SlurmAttempt>,
    /// Nodes seen DOWN (their loss was reported once).
    down: HashSet<String>,
    /// A look is under way.
    looking: bool,
}

/// What one look found.
#[derive(Debug)]
struct SlurmView {
    /// `squeue --json` (shareq's jobs of the partition), or why it could not be read.
    jobs: Result<Vec<SlurmJob>, SlurmError>,
    nodes: Result<Vec<SlurmNode>, SlurmError>,
    /// Per watched attempt: whether its batch job was known when the look began (only
    /// then can its absence from `squeue` mean it was lost), its exit status if written,
    /// and whether its supervisor reported in (its pid file exists).
    attempts: Vec<(JobId, u32, bool, Option<ExitStatus>, bool)>,
}

pub struct Slurm {
    ctx: Context,
    partition: String,
    state: Shared<State>,
    /// Where the supervisors report (they run as the submitter and may not write the
    /// state directory, SPEC §7/§10), or why there is no such place.
    relay: Arc<Result<Relay, String>>,
}

impl Slurm {
    pub fn new(ctx: Context, partition: String) -> Slurm {
        let state = Shared::new(State::default());
        let tell = {
            let (state, reports) = (state.clone(), ctx.reports.clone());
            Arc::new(move |heard| {
                if let Some(r) = heard_report(&mut state.lock(), heard) {
                    reports.send(r);
                }
            })
        };
        let relay = Relay::start(ctx.state.root(), ctx.owner.clone(), tell).map_err(|e| {
            let why = format!("cannot listen for the supervisors' reports: {e}");
            tracing::error!("{why}; no attempt can start on Slurm");
            why
        });
        Slurm {
            ctx,
            partition,
            state,
            relay: Arc::new(relay),
        }
    }
}

/// What the relay heard, as a report, the moment it is written: a start or an end is
/// seen without waiting for the next look (an end noticed at the look came 0.2 s p50
/// after Slurm's, by then past the controller's next scheduling tick). Once for each
/// attempt still watched; the looks skip an attempt whose end was told.
fn heard_report(st: &mut State, heard: Heard) -> Option<Report> {
    match heard {
        Heard::Started { job, attempt } => {
            let a = st.attempts.get_mut(&(job, attempt))?;
            if a.reported || a.ended {
                return None;
            }
            a.reported = true;
            Some(Report::Running { job, attempt })
        }
        Heard::Exited {
            job,
            attempt,
            status,
        } => {
            let a = st.attempts.get_mut(&(job, attempt))?;
            if std::mem::replace(&mut a.ended, true) {
                return None;
            }
            Some(Report::Ended {
                job,
                attempt,
                status,
            })
        }
    }
}

/// `--uid`/`--gid` of an attempt's batch job: its submitter's, when `serve` is root and
/// the submitter is someone else (SPEC §10).
fn batch_user(spec: &LaunchSpec) -> Result<Option<(u32, u32)>, String> {
    let Some(s) = spec.submitter.as_ref() else {
        return Ok(None);
    };
    if !nix::unistd::geteuid().is_root() || s.uid == 0 {
        return Ok(None);
    }
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(s.uid))
        .map_err(|e| format!("cannot look up uid {} ({}): {e}", s.uid, s.name))?
        .ok_or_else(|| {
            format!(
                "the job's submitter {} (uid {}) is not in the user database",
                s.name, s.uid
            )
        })?;
    Ok(Some((user.uid.as_raw(), user.gid.as_raw())))
}

/// Signal a batch job (TERM or KILL to the batch script through `--full`; a KILL is
/// followed by a plain `scancel`, the backstop). Off the runtime task.
fn cancel(id: u64, how: Stop) {
    tokio::task::spawn_blocking(move || {
        let sig = match how {
            Stop::Term => "TERM",
            Stop::Kill => "KILL",
        };
        if let Err(e) = slurm::scancel(id, Some(sig)) {
            tracing::warn!(slurm_job = id, "{e}");
        }
        if how == Stop::Kill
            && let Err(e) = slurm::scancel(id, None)
        {
            tracing::warn!(slurm_job = id, "{e}");
        }
    });
}

impl Backend for Slurm {
    /// Submit an attempt as a batch job; `Accepted` once Slurm has it, `Running` when its
    /// supervisor reports in (seen by a look).
    fn launch(&mut self, spec: LaunchSpec, node: &str) {
        let (job, attempt) = (spec.job, spec.attempt);
        self.state.lock().attempts.insert(
            (job, attempt),
            SlurmAttempt {
                node: Some(node.to_string()),
                ..SlurmAttempt::default()
            },
        );
        let exe = self.ctx.exe.clone();
        let (reports, state) = (self.ctx.reports.clone(), self.state.clone());
        let (partition, node) = (self.partition.clone(), node.to_string());
        let relay = self.relay.clone();
        tokio::task::spawn_blocking(move || {
            let mut spec = spec;
            let submitted = (*relay)
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|r| {
                    r.report_to()
                        .map_err(|e| format!("cannot make the attempt's token: {e}"))
                })
                .and_then(|to| {
                    spec.report = Some(to);
                    // The state directory's copy (root-private) is what the relay checks
                    // the token against; the batch script carries the same spec.
                    runfiles::write_spec(&spec)
                        .map_err(|e| format!("cannot write the attempt's spec: {e}"))?;
                    let json = serde_json::to_vec(&spec).map_err(|e| e.to_string())?;
                    let run_as = batch_user(&spec)?;
                    slurm::sbatch(&slurm::Submit {
                        partition: &partition,
                        node: &node,
                        devices: &spec.devices,
                        job,
                        attempt,
                        exe: &exe,
                        spec: &json,
                        run_as,
                    })
                    .map_err(|e| e.to_string())
                });
            let id = match submitted {
                Ok(id) => id,
                Err(e) => {
                    tracing::error!(job = %job, attempt, "cannot submit to Slurm: {e}");
                    return not_started(&reports, job, attempt);
                }
            };
            tracing::info!(job = %job, attempt, slurm_job = id, node = %node, "submitted to Slurm");
            // Remember the batch job and deliver a stop asked for meanwhile.
            let current = match state.lock().attempts.get_mut(&(job, attempt)) {
                Some(a) => {
                    a.id = Some(id);
                    if let Some(how) = a.stop {
                        cancel(id, how);
                    }
                    true
                }
                None => false,
            };
            if current {
                reports.send(Report::Accepted { job, attempt });
            } else {
                // Ended (cancelled) before Slurm answered: take the batch job back.
                cancel(id, Stop::Kill);
            }
        });
    }

    fn signal(&mut self, job: JobId, attempt: u32, how: Stop) {
        if let Some(a) = self.state.lock().attempts.get_mut(&(job, attempt)) {
            a.stop = Some(how);
            // Never by pid: its supervisor may run on another node.
            if let Some(id) = a.id {
                cancel(id, how);
            }
        }
    }

    /// Watched by the looks at Slurm, which also find its batch job by name.
    fn adopt(&mut self, job: JobId, attempt: u32, _pid: u32, node: Option<&str>) {
        let a = SlurmAttempt {
            reported: true,
            node: node.map(str::to_string),
            ..SlurmAttempt::default()
        };
        self.state.lock().attempts.insert((job, attempt), a);
    }

    fn forget(&mut self, job: JobId, attempt: u32) {
        self.state.lock().attempts.remove(&(job, attempt));
    }

    /// Slurm is looked at all the time: its nodes go down and are drained whether or not
    /// shareq runs anything there.
    fn poll_every(&self) -> Option<Duration> {
        Some(SLURM_POLL)
    }

    /// Look at Slurm and the watched attempts' run files, off the runtime task, and
    /// report what changed.
    fn poll(&mut self) {
        let watched: Vec<(JobId, u32, bool)> = {
            let mut st = self.state.lock();
            if st.looking {
                return;
            }
            st.looking = true;
            st.attempts
                .iter()
                .map(|(&(j, at), a)| (j, at, a.id.is_some()))
                .collect()
        };
        let (root, owner) = (self.ctx.state.root().to_path_buf(), self.ctx.owner.clone());
        let (reports, state) = (self.ctx.reports.clone(), self.state.clone());
        let partition = self.partition.clone();
        tokio::task::spawn_blocking(move || {
            let view = look(&root, &owner, &partition, watched);
            let out = reconcile(&mut state.lock(), view);
            for r in out {
                if !reports.send(r) {
                    break;
                }
            }
        });
    }
}

/// One look: exit files first, then Slurm: an attempt that ended because its node went
/// down is seen with that node down (Slurm marks it before killing the job).
fn look(
    root: &Path,
    owner: &Owner,
    partition: &str,
    watched: Vec<(JobId, u32, bool)>,
) -> SlurmView {
    let mut attempts: Vec<(JobId, u32, bool, Option<ExitStatus>, bool)> = watched
        .into_iter()
        .map(|(job, attempt, known)| {
            let exit = runfiles::read_exit(root, job, attempt, owner);
            let pid = runfiles::read_pid(root, job, attempt, owner).is_some();
            (job, attempt, known, exit, pid)
        })
        .collect();
    let jobs = slurm::squeue(partition);
    let nodes = slurm::sinfo(partition);
    // And again for those without one: a job gone from squeue wrote its exit before it
    // went (or it was lost).
    for a in attempts.iter_mut().filter(|a| a.3.is_none()) {
        a.3 = runfiles::read_exit(root, a.0, a.1, owner);
    }
    SlurmView {
        jobs,
        nodes,
        attempts,
    }
}

/// What a look means: supervisors that reported in, batch jobs found by name, nodes that
/// went down (with the attempts that ran there), drained nodes, attempts that ended
/// (exit status, or gone from Slurm without one).
fn reconcile(st: &mut State, view: SlurmView) -> Vec<Report> {
    st.looking = false;
    let mut running = Vec::new();
    let mut ended = Vec::new();
    let jobs = match view.jobs {
        Ok(j) => Some(j),
        Err(e) => {
            tracing::warn!("cannot read Slurm's queue: {e}");
            None
        }
    };
    for (job, attempt, known, exit, pid) in view.attempts {
        let Some(a) = st.attempts.get_mut(&(job, attempt)).filter(|a| !a.ended) else {
            continue;
        };
        let name = slurm::job_name(job, attempt);
        // Its batch job, by id once known; found by name (adoption) only among the live
        // ones, newest first (an older shareq may have used the name).
        let in_slurm = jobs.as_ref().and_then(|js| match a.id {
            Some(id) => js.iter().find(|s| s.id == id && s.is_live()),
            None => js
                .iter()
                .filter(|s| s.name == name && s.is_live())
                .max_by_key(|s| s.id),
        });
        if a.id.is_none()
            && let Some(s) = in_slurm
        {
            tracing::info!(job = %job, attempt, slurm_job = s.id, "found its Slurm job by name");
            a.id = Some(s.id);
            if let Some(how) = a.stop {
                cancel(s.id, how);
            }
        }
        if let Some(status) = exit {
            a.ended = true;
            ended.push(Report::Ended {
                job,
                attempt,
                status,
            });
            continue;
        }
        if pid && !a.reported {
            a.reported = true;
            running.push(Report::Running { job, attempt });
        }
        // Submitted, and Slurm no longer has it, and no exit status: lost (SPEC §8).
        if known && jobs.is_some() && in_slurm.is_none() {
            a.ended = true;
            tracing::warn!(job = %job, attempt, "Slurm no longer has the attempt's job and it left no exit status: treated as a vanished supervisor");
            ended.push(Report::Ended {
                job,
                attempt,
                status: crate::exec::ExitStatus::ended_now(255),
            });
        }
    }
    let mut out = running;
    match view.nodes {
        Ok(nodes) => {
            for n in nodes.iter().filter(|n| n.is_down()) {
                if !st.down.insert(n.name.clone()) {
                    continue;
                }
                out.push(Report::NodeDown {
                    node: n.name.clone(),
                });
                // Nothing of its attempts can come back.
                let mut lost: Vec<(JobId, u32)> = st
                    .attempts
                    .iter_mut()
                    .filter(|(_, a)| !a.ended && a.node.as_deref() == Some(n.name.as_str()))
                    .map(|(&k, a)| {
                        a.ended = true;
                        k
                    })
                    .collect();
                lost.sort_unstable();
                out.extend(lost.into_iter().map(|(job, attempt)| Report::Ended {
                    job,
                    attempt,
                    status: crate::exec::ExitStatus::ended_now(255),
                }));
            }
            out.extend(nodes.iter().map(|n| Report::NodeDrained {
                node: n.name.clone(),
                drained: n.is_drained(),
            }));
        }
        Err(e) => tracing::warn!("cannot read Slurm's nodes: {e}"),
    }
    out.extend(ended);
    out
}
