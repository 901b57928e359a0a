//! The Slurm executor (SPEC §10): an attempt is one batch job (`sbatch`, pinned to the
//! node and GPUs shareq chose, submitted as the job's submitter when `serve` is root)
//! that runs shareq's supervisor, so the stop path is the local executor's own; the
//! supervisor runs as the submitter and reports over the report channel, whose relay
//! here writes the same run files and log (`exec::supervisor::report`). What differs is how an attempt is started
//! and signalled (`scancel --full --signal=TERM`, a plain `scancel` as the backstop) and
//! how its start and end are seen: told by the relay the moment it writes them, and
//! besides, a look twice a second at the run files, `squeue --json` and `sinfo --json`,
//! off the runtime task. A job Slurm lost without an exit status is a vanished
//! supervisor (SPEC §8); a node DOWN is node loss (DEVICE_LOST). A gang (SPEC §16) is
//! one heterogeneous batch job with a supervisor per node, watched in [`gang`].

pub mod commands;
mod gang;

use super::{ExitStatus, LaunchSpec};
use crate::exec::backend::{Backend, Context, Report, Shared, not_started};
use crate::exec::start::Stop;
use crate::exec::state::runfiles::{self, Owner};
use crate::exec::supervisor::report::relay::{Heard, Relay};
use crate::model::{JobId, SlurmStart};
use commands::{SlurmError, SlurmJob, SlurmNode};
use gang::GangWatch;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Looks in a row that found its batch job RUNNING with no step (its `srun` died and
    /// left the allocation behind).
    stepless: u8,
    /// `start: srun`: a watch waits for its `srun`, and reports its end once `srun` has
    /// gone, i.e. once Slurm has its GPUs back (a successor started before that would
    /// wait for Slurm's next scheduling pass).
    srun: bool,
    /// The exit status heard meanwhile, and the looks that saw it while `srun` lingered.
    heard: Option<ExitStatus>,
    exit_looks: u8,
    /// A gang's ranks (SPEC §16); `None` for a plain job.
    gang: Option<GangWatch>,
}

impl SlurmAttempt {
    /// Whether a signal must reach a batch script (`scancel --full`): a plain job's under
    /// `start: sbatch`. A gang's supervisors are its job's steps, and its batch script is
    /// the `srun` of them, which a signal must not reach (it would end the steps at once).
    fn signal_batch(&self, batch: bool) -> bool {
        batch && self.gang.is_none()
    }

    /// Whether it runs on the node `name` (any of a gang's).
    fn runs_on(&self, name: &str) -> bool {
        self.node.as_deref() == Some(name)
            || self
                .gang
                .as_ref()
                .is_some_and(|g| g.nodes.iter().any(|n| n == name))
    }
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
    /// With `start: srun`: the jobs that have a step (`None`: not asked, or unreadable).
    steps: Option<std::collections::HashSet<u64>>,
    /// Per watched attempt: whether its batch job was known when the look began (only
    /// then can its absence from `squeue` mean it was lost), its exit status if written,
    /// and whether its supervisor reported in (its pid file exists).
    attempts: Vec<(JobId, u32, bool, Option<ExitStatus>, bool)>,
    /// Per watched gang (SPEC §16): each rank's exit status if written, and whether its
    /// supervisor claimed its part.
    gangs: HashMap<(JobId, u32), Vec<RankSeen>>,
}

/// One gang rank's record as a look read it: its exit status if written, and whether its
/// supervisor claimed its part.
type RankSeen = (Option<ExitStatus>, bool);

pub struct Slurm {
    ctx: Context,
    partition: String,
    start: SlurmStart,
    state: Shared<State>,
    /// Where the supervisors report (they run as the submitter and may not write the
    /// state directory, SPEC §7/§10), or why there is no such place.
    relay: Arc<Result<Relay, String>>,
}

impl Slurm {
    pub fn new(ctx: Context, partition: String, start: SlurmStart) -> Slurm {
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
            start,
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
        Heard::Started { job, attempt, rank } => {
            let a = st.attempts.get_mut(&(job, attempt))?;
            if a.ended {
                return None;
            }
            if let Some(g) = a.gang.as_mut()
                && !g.started(rank)
            {
                return None;
            }
            if a.reported {
                return None;
            }
            a.reported = true;
            Some(Report::Running { job, attempt })
        }
        Heard::Exited {
            job,
            attempt,
            rank,
            status,
        } => {
            let a = st.attempts.get_mut(&(job, attempt))?;
            if let Some(g) = a.gang.as_mut() {
                // The gang ends when every rank has; a failure stops the others at the
                // next look.
                g.exited(rank, status);
                if g.lost_any() {
                    // The look ends it, and takes back what the lost rank left.
                    return None;
                }
                let status = g.ended()?;
                if std::mem::replace(&mut a.ended, true) {
                    return None;
                }
                return Some(Report::Ended {
                    job,
                    attempt,
                    status,
                });
            }
            if a.srun && !a.ended {
                a.heard.get_or_insert(status);
                return None;
            }
            if std::mem::replace(&mut a.ended, true) {
                return None;
            }
            Some(Report::Ended {
                job,
                attempt,
                status,
            })
        }
        Heard::Gone { job, attempt, rank } => {
            if let Some(g) = st
                .attempts
                .get_mut(&(job, attempt))
                .and_then(|a| a.gang.as_mut())
            {
                g.gone(rank, Instant::now());
            }
            None
        }
        Heard::Checkpoint { job, attempt, note } => {
            let a = st.attempts.get(&(job, attempt))?;
            (!a.ended).then_some(Report::Checkpoint { job, attempt, note })
        }
    }
}

/// Looks in a row (0.5 s apart) that must find an `srun` job without its step before it
/// counts as lost (between the allocation and the step's launch there is none).
const STEPLESS_LOOKS: u8 = 3;

/// Looks (0.5 s apart) that wait for an `srun` whose attempt's exit status is known
/// before its end is reported without it.
const SRUN_LINGER_LOOKS: u8 = 4;

/// What Slurm was handed for an attempt.
enum Handed {
    /// A batch job, with its id.
    Batch(u64),
    /// A running `srun` (its pid), whose job id a look finds by name.
    Srun(u32),
}

/// The `srun` of one attempt (`executor.start: srun`), waited for on a thread of its
/// own. Its end without the attempt's exit status means its step is gone (it was killed,
/// or failed to start): the job Slurm may keep for it is cancelled (a dead `srun`'s
/// allocation stays until then) and the attempt ends as lost (255), or as not started
/// (127) when its supervisor never reported in.
struct SrunWatch {
    reports: crate::exec::backend::Reports,
    state: Shared<State>,
    root: std::path::PathBuf,
    owner: Owner,
    partition: String,
    job: JobId,
    attempt: u32,
}

impl SrunWatch {
    fn wait(self, mut child: std::process::Child) {
        let mut said = Vec::new();
        if let Some(err) = child.stderr.take() {
            use std::io::Read;
            let _ = err.take(4096).read_to_end(&mut said);
        }
        let status = child.wait();
        let (job, attempt) = (self.job, self.attempt);
        let (id, reported, heard) = {
            let mut st = self.state.lock();
            let Some(a) = st.attempts.get_mut(&(job, attempt)) else {
                return;
            };
            if a.ended {
                return;
            }
            a.ended = true;
            (a.id, a.reported, a.heard.take())
        };
        let exit = heard.or_else(|| runfiles::read_exit(&self.root, job, attempt, &self.owner));
        if let Some(status) = exit {
            self.reports.send(Report::Ended {
                job,
                attempt,
                status,
            });
            return;
        }
        let said = String::from_utf8_lossy(&said);
        tracing::warn!(
            job = %job,
            attempt,
            "srun ended ({}) before the attempt's supervisor reported its exit: {}",
            status.map_or_else(|e| e.to_string(), |s| s.to_string()),
            said.trim()
        );
        take_back_now(id, (job, attempt), &self.partition);
        if reported {
            self.reports.send(Report::Ended {
                job,
                attempt,
                status: ExitStatus::ended_now(255),
            });
        } else {
            not_started(&self.reports, job, attempt);
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

/// Cancel what Slurm holds of an attempt that has ended without it: its job by id when
/// known, else by name (an `srun` whose job no look has found yet).
fn take_back_now(id: Option<u64>, (job, attempt): (JobId, u32), partition: &str) {
    let name = commands::job_name(job, attempt);
    if let Err(e) = commands::scancel(target(id, &name, partition), None) {
        tracing::warn!(job = %job, attempt, "{e}");
    }
}

/// An attempt's Slurm job: by its id when known, else by its name.
fn target<'a>(id: Option<u64>, name: &'a str, partition: &'a str) -> commands::Cancel<'a> {
    match id {
        Some(id) => commands::Cancel::Id(id),
        None => commands::Cancel::Named { name, partition },
    }
}

/// `take_back_now`, off the runtime task.
fn take_back(id: Option<u64>, key: (JobId, u32), partition: &str) {
    let partition = partition.to_string();
    tokio::task::spawn_blocking(move || take_back_now(id, key, &partition));
}

/// Signal an attempt's Slurm job (TERM or KILL; to a batch script through `--full`); a
/// KILL is followed by a plain `scancel`, the backstop. Off the runtime task.
fn cancel(id: u64, how: Stop, batch: bool) {
    tokio::task::spawn_blocking(move || signal_now(commands::Cancel::Id(id), how, batch));
}

/// [`cancel`] of an `srun` attempt whose job id no look has found yet: by its name, so
/// that a stop asked for in its first half second is not held until the next look.
/// (Its job may not be known to the controller yet; the look that finds it delivers the
/// stop again.)
fn cancel_named((job, attempt): (JobId, u32), how: Stop, partition: &str) {
    let partition = partition.to_string();
    tokio::task::spawn_blocking(move || {
        let name = commands::job_name(job, attempt);
        signal_now(
            commands::Cancel::Named {
                name: &name,
                partition: &partition,
            },
            how,
            false,
        );
    });
}

fn signal_now(to: commands::Cancel, how: Stop, batch: bool) {
    let sig = match how {
        Stop::Notice => crate::exec::supervisor::channel::NOTICE_REQUEST_NAME,
        Stop::Term => "TERM",
        Stop::Kill => "KILL",
    };
    if let Err(e) = commands::scancel(to, Some((sig, batch))) {
        tracing::warn!(slurm_job = ?to, "{e}");
    }
    if how == Stop::Kill
        && let Err(e) = commands::scancel(to, None)
    {
        tracing::warn!(slurm_job = ?to, "{e}");
    }
}

impl Backend for Slurm {
    /// Submit an attempt as a batch job; `Accepted` once Slurm has it, `Running` when its
    /// supervisor reports in (seen by a look).
    fn launch(&mut self, spec: LaunchSpec, node: &str) {
        let (job, attempt) = (spec.job, spec.attempt);
        let ranks: Vec<(String, Vec<u32>)> = spec
            .gang
            .as_ref()
            .map(|g| g.ranks.clone())
            .unwrap_or_default();
        let gang = spec.gang.as_ref().map(|g| {
            let nodes = g.ranks.iter().map(|(n, _)| n.clone()).collect();
            GangWatch::new(nodes, spec.grace_seconds)
        });
        let is_gang = gang.is_some();
        self.state.lock().attempts.insert(
            (job, attempt),
            SlurmAttempt {
                node: Some(node.to_string()),
                gang,
                ..SlurmAttempt::default()
            },
        );
        let exe = self.ctx.exe.clone();
        let (reports, state) = (self.ctx.reports.clone(), self.state.clone());
        let (partition, node) = (self.partition.clone(), node.to_string());
        let relay = self.relay.clone();
        // A gang is always a batch job: its batch script starts its ranks (SPEC §16).
        let start = if is_gang {
            SlurmStart::Sbatch
        } else {
            self.start
        };
        let (root, owner) = (self.ctx.state.root().to_path_buf(), self.ctx.owner.clone());
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
                    let submit = commands::Submit {
                        partition: &partition,
                        node: &node,
                        devices: &spec.devices,
                        job,
                        attempt,
                        exe: &exe,
                        spec: &json,
                        run_as: batch_user(&spec)?,
                        gang: &ranks,
                    };
                    match start {
                        SlurmStart::Sbatch => commands::sbatch(&submit)
                            .map(Handed::Batch)
                            .map_err(|e| e.to_string()),
                        SlurmStart::Srun => {
                            let user = crate::exec::supervisor::privdrop::RunAs::for_submitter(
                                spec.submitter.as_ref(),
                            )?;
                            let child = commands::srun(&submit, user.as_ref())
                                .map_err(|e| e.to_string())?;
                            let pid = child.id();
                            let stop =
                                state
                                    .lock()
                                    .attempts
                                    .get_mut(&(job, attempt))
                                    .and_then(|a| {
                                        a.srun = true;
                                        a.stop
                                    });
                            if let Some(how) = stop {
                                // Asked for while `srun` was being started.
                                cancel_named((job, attempt), how, &partition);
                            }
                            let watch = SrunWatch {
                                reports: reports.clone(),
                                state: state.clone(),
                                root,
                                owner,
                                partition: partition.clone(),
                                job,
                                attempt,
                            };
                            std::thread::Builder::new()
                                .name("shareq-srun".to_string())
                                .spawn(move || watch.wait(child))
                                .map_err(|e| format!("cannot watch srun: {e}"))?;
                            Ok(Handed::Srun(pid))
                        }
                    }
                });
            let id = match submitted {
                Ok(Handed::Batch(id)) => id,
                Ok(Handed::Srun(pid)) => {
                    // Its job id is found by name at the next look (a stop asked for
                    // meanwhile goes by name); Slurm allocates it as `srun` asks.
                    tracing::info!(job = %job, attempt, node = %node, srun = pid, "started on Slurm (srun)");
                    if state.lock().attempts.contains_key(&(job, attempt)) {
                        reports.send(Report::Accepted { job, attempt });
                    } else {
                        // Ended before it was handed over (its watch, finding the attempt
                        // forgotten, does nothing): `srun` goes, and the job it may have
                        // left pending or allocated is taken back by name.
                        if let Ok(p) = i32::try_from(pid) {
                            let _ = nix::sys::signal::kill(
                                nix::unistd::Pid::from_raw(p),
                                nix::sys::signal::Signal::SIGKILL,
                            );
                        }
                        take_back_now(None, (job, attempt), &partition);
                    }
                    return;
                }
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
                        cancel(id, how, a.signal_batch(true));
                    }
                    true
                }
                None => false,
            };
            if current {
                reports.send(Report::Accepted { job, attempt });
            } else {
                // Ended (cancelled) before Slurm answered: take the batch job back.
                cancel(id, Stop::Kill, true);
            }
        });
    }

    fn signal(&mut self, job: JobId, attempt: u32, how: Stop) {
        let batch = self.start == SlurmStart::Sbatch;
        if let Some(a) = self.state.lock().attempts.get_mut(&(job, attempt)) {
            a.stop = Some(how);
            // Never by pid: its supervisor may run on another node.
            if let Some(id) = a.id {
                cancel(id, how, a.signal_batch(batch));
            } else if a.srun {
                cancel_named((job, attempt), how, &self.partition);
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

    /// A gang (SPEC §16): every rank must connect to this scheduler again
    /// (`gang::ADOPTED_LIMIT`), or have left its status.
    fn adopt_gang(&mut self, job: JobId, attempt: u32, nodes: &[String], grace_seconds: u32) {
        let a = SlurmAttempt {
            reported: true,
            node: nodes.first().cloned(),
            gang: Some(GangWatch::adopted(
                nodes.to_vec(),
                grace_seconds,
                Instant::now(),
            )),
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
        let watched: Vec<(JobId, u32, bool, u32)> = {
            let mut st = self.state.lock();
            if st.looking {
                return;
            }
            st.looking = true;
            st.attempts
                .iter()
                .map(|(&(j, at), a)| {
                    let ranks = a.gang.as_ref().map_or(0, |g| g.nodes.len() as u32);
                    (j, at, a.id.is_some(), ranks)
                })
                .collect()
        };
        let (root, owner) = (self.ctx.state.root().to_path_buf(), self.ctx.owner.clone());
        let (reports, state) = (self.ctx.reports.clone(), self.state.clone());
        let partition = self.partition.clone();
        let batch = self.start == SlurmStart::Sbatch;
        tokio::task::spawn_blocking(move || {
            let view = look(&root, &owner, &partition, watched, !batch);
            let out = reconcile(&mut state.lock(), view, &partition, batch);
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
    watched: Vec<(JobId, u32, bool, u32)>,
    steps: bool,
) -> SlurmView {
    let gang_ranks = |watched: &[(JobId, u32, bool, u32)]| {
        watched
            .iter()
            .filter(|w| w.3 > 0)
            .map(|&(job, attempt, _, n)| {
                let ranks = (0..n)
                    .map(|r| {
                        (
                            runfiles::read_rank_exit(root, job, attempt, r, owner),
                            runfiles::rank_claimed(root, job, attempt, r, owner),
                        )
                    })
                    .collect();
                ((job, attempt), ranks)
            })
            .collect::<HashMap<_, Vec<_>>>()
    };
    let gangs_watched: Vec<(JobId, u32, bool, u32)> =
        watched.iter().filter(|w| w.3 > 0).copied().collect();
    let mut attempts: Vec<(JobId, u32, bool, Option<ExitStatus>, bool)> = watched
        .into_iter()
        .filter(|w| w.3 == 0)
        .map(|(job, attempt, known, _)| {
            let exit = runfiles::read_exit(root, job, attempt, owner);
            let pid = runfiles::read_pid(root, job, attempt, owner).is_some();
            (job, attempt, known, exit, pid)
        })
        .collect();
    let jobs = commands::squeue(partition);
    let nodes = commands::sinfo(partition);
    let steps = steps
        .then(|| commands::jobs_with_steps(partition))
        .and_then(|r| {
            r.map_err(|e| tracing::warn!("cannot read Slurm's job steps: {e}"))
                .ok()
        });
    // And again for those without one: a job gone from squeue wrote its exit before it
    // went (or it was lost).
    for a in attempts.iter_mut().filter(|a| a.3.is_none()) {
        a.3 = runfiles::read_exit(root, a.0, a.1, owner);
    }
    // A gang's ranks, read after Slurm's view as the others' second read is: a job gone
    // from `squeue` wrote its ranks' exits before it went. Its entry among the attempts
    // says only whether its job was known.
    let gangs = gang_ranks(&gangs_watched);
    attempts.extend(
        gangs_watched
            .iter()
            .map(|&(job, attempt, known, _)| (job, attempt, known, None, false)),
    );
    SlurmView {
        jobs,
        nodes,
        steps,
        attempts,
        gangs,
    }
}

/// What a look means: supervisors that reported in, batch jobs found by name, nodes that
/// went down (with the attempts that ran there), drained nodes, attempts that ended
/// (exit status, or gone from Slurm without one). `batch`: attempts are batch jobs
/// (`start: sbatch`), whose batch script a signal reaches only through `scancel --full`;
/// with `start: srun` that flag reaches nothing, and a plain `scancel --signal` reaches
/// the step.
fn reconcile(st: &mut State, view: SlurmView, partition: &str, batch: bool) -> Vec<Report> {
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
        let name = commands::job_name(job, attempt);
        // Its batch job, by id once known; found by name (adoption) only among the live
        // ones, newest first (an older shareq may have used the name).
        // A gang's job is heterogeneous: found by its leader's id, which reaches every
        // component.
        let in_slurm = jobs.as_ref().and_then(|js| match a.id {
            Some(id) => js.iter().find(|s| s.id == id && s.is_live()),
            None => js
                .iter()
                .filter(|s| s.name == name && s.is_live())
                .max_by_key(|s| (s.leader, s.leader == s.id)),
        });
        if a.id.is_none()
            && let Some(s) = in_slurm
        {
            tracing::info!(job = %job, attempt, slurm_job = s.leader, "found its Slurm job by name");
            a.id = Some(s.leader);
            if let Some(how) = a.stop {
                cancel(s.leader, how, a.signal_batch(batch));
            }
        }
        if let Some(g) = a.gang.as_mut() {
            for (r, &(exit, claimed)) in view
                .gangs
                .get(&(job, attempt))
                .into_iter()
                .flatten()
                .enumerate()
            {
                if claimed {
                    g.claimed(r as u32);
                }
                if let Some(status) = exit {
                    g.exited(r as u32, status);
                }
            }
            if !a.reported && g.all_reported() {
                a.reported = true;
                running.push(Report::Running { job, attempt });
            }
            if known && jobs.is_some() && in_slurm.is_none() {
                tracing::warn!(job = %job, attempt, "Slurm no longer has the gang's job: its ranks without an exit status are lost");
                g.lose_the_rest();
            }
            let due = g.due(Instant::now(), a.stop.is_some());
            if let Some(id) = a.id {
                if due.stop_others {
                    tracing::warn!(job = %job, attempt, "a rank of the gang failed or was lost: the other ranks are stopped");
                    cancel(id, Stop::Term, false);
                }
                if due.kill {
                    tracing::warn!(job = %job, attempt, "the gang's other ranks outlasted their grace: its Slurm job is cancelled");
                    cancel(id, Stop::Kill, false);
                }
            }
            if let Some(status) = due.ended {
                a.ended = true;
                if g.lost_any() {
                    // What a lost supervisor left in its allocation goes with the job.
                    take_back(a.id, (job, attempt), partition);
                }
                ended.push(Report::Ended {
                    job,
                    attempt,
                    status,
                });
            }
            continue;
        }
        if let Some(status) = exit {
            // `start: srun`: its watch reports the end when `srun` has gone; one that
            // lingers past a few looks is not waited for.
            if a.srun {
                a.exit_looks += 1;
                if a.exit_looks < SRUN_LINGER_LOOKS {
                    continue;
                }
            }
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
        // `start: srun`: a job RUNNING without a step lost its `srun` (with `serve`'s
        // machine, say) and keeps its allocation until cancelled: lost (SPEC §8).
        if let (Some(s), Some(steps)) = (in_slurm, view.steps.as_ref()) {
            if s.state == "RUNNING" && !steps.contains(&s.id) {
                a.stepless += 1;
            } else {
                a.stepless = 0;
            }
            if a.stepless >= STEPLESS_LOOKS {
                a.ended = true;
                tracing::warn!(job = %job, attempt, slurm_job = s.id, "the attempt's Slurm job runs no step any more (its srun is gone): cancelled, treated as a vanished supervisor");
                cancel(s.id, Stop::Kill, batch);
                ended.push(Report::Ended {
                    job,
                    attempt,
                    status: crate::exec::ExitStatus::ended_now(255),
                });
                continue;
            }
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
                // Nothing of its attempts can come back; what Slurm still holds of them
                // (a job pending for the node, its allocation) is taken back, so that it
                // cannot start a stale attempt when the node returns.
                let mut lost: Vec<(JobId, u32)> = st
                    .attempts
                    .iter_mut()
                    .filter(|(_, a)| !a.ended && a.runs_on(&n.name))
                    .map(|(&k, a)| {
                        a.ended = true;
                        take_back(a.id, k, partition);
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

#[cfg(test)]
mod tests {
    use super::*;

    const NOWHERE: &str = "shareq-unit-test-no-such-partition";

    fn view(jobs: Vec<SlurmJob>, steps: Option<HashSet<u64>>, exit: bool) -> SlurmView {
        SlurmView {
            jobs: Ok(jobs),
            nodes: Ok(Vec::new()),
            steps,
            attempts: vec![(
                JobId(1),
                1,
                true,
                exit.then(|| ExitStatus::ended_now(0)),
                true,
            )],
            gangs: HashMap::new(),
        }
    }

    fn running(id: u64) -> SlurmJob {
        SlurmJob {
            id,
            name: commands::job_name(JobId(1), 1),
            state: "RUNNING".to_string(),
            nodes: "n1".to_string(),
            gres: Vec::new(),
            leader: id,
        }
    }

    /// A runtime for the scancels a look sends off (to a partition that does not exist).
    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    fn ended(out: &[Report]) -> Vec<i32> {
        out.iter()
            .filter_map(|r| match r {
                Report::Ended { status, .. } => Some(status.code),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_srun_attempts_end_waits_for_its_srun_a_batch_jobs_does_not() {
        let mut st = State::default();
        for job in [1, 2] {
            st.attempts.insert(
                (JobId(job), 1),
                SlurmAttempt {
                    id: Some(job),
                    reported: true,
                    srun: job == 1,
                    ..SlurmAttempt::default()
                },
            );
        }
        let exited = |job| Heard::Exited {
            job: JobId(job),
            attempt: 1,
            rank: 0,
            status: ExitStatus::ended_now(3),
        };
        // The batch job's end is told at once; the srun's is kept for its watch.
        assert!(matches!(
            heard_report(&mut st, exited(2)),
            Some(Report::Ended { .. })
        ));
        assert_eq!(heard_report(&mut st, exited(1)), None);
        let a = &st.attempts[&(JobId(1), 1)];
        assert_eq!((a.ended, a.heard.map(|h| h.code)), (false, Some(3)));
        // A look that finds the exit leaves it to the watch for a while, then reports it.
        for _ in 1..SRUN_LINGER_LOOKS {
            let out = reconcile(&mut st, view(vec![running(1)], None, true), NOWHERE, false);
            assert!(ended(&out).is_empty(), "{out:?}");
        }
        let out = reconcile(&mut st, view(vec![running(1)], None, true), NOWHERE, false);
        assert_eq!(ended(&out), vec![0]);
        assert!(st.attempts[&(JobId(1), 1)].ended);
    }

    #[test]
    fn a_running_srun_job_without_its_step_is_lost_after_three_looks() {
        let rt = runtime();
        let _in = rt.enter();
        let mut st = State::default();
        st.attempts.insert(
            (JobId(1), 1),
            SlurmAttempt {
                reported: true,
                srun: true,
                ..SlurmAttempt::default()
            },
        );
        // With its step: never lost. Found by name on the first look.
        for _ in 0..5 {
            let steps = Some(HashSet::from([7]));
            let out = reconcile(
                &mut st,
                view(vec![running(7)], steps, false),
                NOWHERE,
                false,
            );
            assert!(ended(&out).is_empty(), "{out:?}");
        }
        assert_eq!(st.attempts[&(JobId(1), 1)].id, Some(7));
        // Without: a look that finds the step again starts the count over.
        let lose = |st: &mut State| {
            let steps = Some(HashSet::new());
            reconcile(st, view(vec![running(7)], steps, false), NOWHERE, false)
        };
        for _ in 1..STEPLESS_LOOKS {
            assert!(ended(&lose(&mut st)).is_empty());
        }
        let steps = Some(HashSet::from([7]));
        reconcile(
            &mut st,
            view(vec![running(7)], steps, false),
            NOWHERE,
            false,
        );
        for _ in 1..STEPLESS_LOOKS {
            assert!(ended(&lose(&mut st)).is_empty());
        }
        assert_eq!(ended(&lose(&mut st)), vec![255]);
        assert!(ended(&lose(&mut st)).is_empty(), "told once");
    }

    #[test]
    fn a_node_seen_down_ends_its_attempts_once_even_those_slurm_has_not_started() {
        let rt = runtime();
        let _in = rt.enter();
        let mut st = State::default();
        for (job, node) in [(1, "n1"), (2, "n2")] {
            st.attempts.insert(
                (JobId(job), 1),
                SlurmAttempt {
                    node: Some(node.to_string()),
                    srun: true,
                    ..SlurmAttempt::default()
                },
            );
        }
        let down = || SlurmView {
            jobs: Ok(Vec::new()),
            nodes: Ok(vec![SlurmNode {
                name: "n1".to_string(),
                state: "down".to_string(),
                flags: Vec::new(),
            }]),
            steps: None,
            attempts: Vec::new(),
            gangs: HashMap::new(),
        };
        let out = reconcile(&mut st, down(), NOWHERE, false);
        assert!(out.contains(&Report::NodeDown {
            node: "n1".to_string()
        }));
        assert_eq!(ended(&out), vec![255]);
        assert!(st.attempts[&(JobId(1), 1)].ended);
        assert!(!st.attempts[&(JobId(2), 1)].ended);
        assert!(ended(&reconcile(&mut st, down(), NOWHERE, false)).is_empty());
    }
}
