//! Carrying the scheduler's decisions out: start a supervisor for each start, stop
//! attempts (SIGTERM, grace, SIGKILL) for preemptions, cancels and timeouts, arm their
//! timers in the runtime's timer set, and keep the preemption log.

use super::input::{ExecKind, ExecReport, Input};
use super::timers::{Timer, Timers};
use crate::exec::proc::{self, Stop};
use crate::exec::runfiles::{self, Owner, SupervisorStatus};
use crate::exec::{LaunchSpec, StateDir};
use crate::model::{Command, JobId, LogLimits};
use crate::sched::{Event, Sched};
use crate::snapshot::PreemptionRecord;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often an adopted attempt's run files are looked at.
const ADOPTED_POLL: Duration = Duration::from_millis(200);

/// How many preemption records are kept in memory (newest first).
const PREEMPTION_LOG_LEN: usize = 1000;

/// One attempt whose supervisor has not ended yet.
#[derive(Debug)]
pub(super) struct Attempt {
    pub(super) attempt: u32,
    /// Known once the supervisor is started (off the runtime task, see `start`).
    pub(super) pid: Option<i32>,
    /// The strongest stop asked for so far; sent as soon as the pid (or Slurm job) is
    /// known.
    pub(super) stop: Option<Stop>,
    /// With the Slurm executor: the batch job, once `sbatch` answered or a look at
    /// `squeue` found it by name (adoption).
    pub(super) slurm: Option<u64>,
    /// With the Slurm executor: its supervisor reported in (RUNNING).
    pub(super) reported: bool,
}

/// What carries attempts out (SPEC §10): supervisors started on this machine, or batch
/// jobs on a Slurm partition running the same supervisor. Everything else (timers, the
/// stop path's grace period, the preemption log) is the same for both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Backend {
    Local,
    Slurm { partition: String },
}

impl Backend {
    pub(crate) fn of(config: &crate::model::ValidConfig) -> Backend {
        match config.executor() {
            crate::model::Executor::Local => Backend::Local,
            crate::model::Executor::Slurm(s) => Backend::Slurm {
                partition: s.partition,
            },
        }
    }
}

pub(crate) struct Executor {
    pub(super) state: StateDir,
    pub(super) exe: PathBuf,
    pub(super) tx: mpsc::UnboundedSender<Input>,
    pub(super) running: HashMap<JobId, Attempt>,
    /// Where attempts run.
    pub(crate) backend: Backend,
    preemptions: VecDeque<PreemptionRecord>,
    /// The log changed since [`Executor::take_preemption_log`] last read it.
    preemptions_changed: bool,
    stopped_all: bool,
    /// The database whose run files these are (an identity of this process's own for a
    /// runtime without a store).
    pub(crate) owner: Owner,
    /// `logs:` of the config in force, for the next starts.
    pub(crate) log_limits: LogLimits,
}

impl Executor {
    pub(crate) fn new(state: StateDir, exe: PathBuf, tx: mpsc::UnboundedSender<Input>) -> Self {
        Executor {
            state,
            exe,
            tx,
            running: HashMap::new(),
            backend: Backend::Local,
            preemptions: VecDeque::new(),
            preemptions_changed: true,
            stopped_all: false,
            owner: Owner {
                db: format!("memory-{}-{}", std::process::id(), crate::exec::now_ms()),
                legacy_below: 0,
            },
            log_limits: LogLimits::default(),
        }
    }

    /// The runtime's own input channel (for work done off its task).
    pub(crate) fn inputs(&self) -> mpsc::UnboundedSender<Input> {
        self.tx.clone()
    }

    pub(crate) fn running_count(&self) -> usize {
        self.running.len()
    }

    pub(crate) fn is_current(&self, job: JobId, attempt: u32) -> bool {
        self.running.get(&job).is_some_and(|a| a.attempt == attempt)
    }

    /// The attempt's supervisor ended: forget it and its timers. False for a stale report.
    pub(crate) fn finished(&mut self, timers: &mut Timers, job: JobId, attempt: u32) -> bool {
        if self.is_current(job, attempt) {
            self.running.remove(&job);
            timers.cancel_attempt(job, attempt);
            true
        } else {
            false
        }
    }

    pub(crate) fn kill_if_current(&mut self, job: JobId, attempt: u32) {
        if let Some(a) = self.running.get_mut(&job).filter(|a| a.attempt == attempt) {
            tracing::info!(job = %job, attempt, "grace period over: SIGKILL");
            a.stop = Some(Stop::Kill);
            Self::signal(a, Stop::Kill);
        }
    }

    /// The supervisor of an attempt started: deliver a stop asked for meanwhile.
    pub(crate) fn spawned(&mut self, job: JobId, attempt: u32, pid: i32) {
        if let Some(a) = self.running.get_mut(&job).filter(|a| a.attempt == attempt) {
            a.pid = Some(pid);
            if let Some(how) = a.stop {
                Self::signal(a, how);
            }
        }
    }

    /// Seed the preemption log with what the store remembers (newest first).
    pub(crate) fn seed_preemptions(&mut self, records: Vec<PreemptionRecord>) {
        self.preemptions = records.into_iter().take(PREEMPTION_LOG_LEN).collect();
        self.preemptions_changed = true;
    }

    /// Watch an attempt whose supervisor outlived the previous scheduler (SPEC §8): its
    /// exit is picked up from the exit file when the supervisor is gone; its timeout is
    /// armed again for the time left; a stop that was under way is resumed.
    pub(crate) fn adopt(
        &mut self,
        sched: &Sched,
        timers: &mut Timers,
        job: JobId,
        attempt: u32,
        pid: u32,
        now: i64,
    ) {
        let Ok(pid_i) = i32::try_from(pid) else {
            return;
        };
        // A Slurm attempt is signalled through its batch job, never by pid (its
        // supervisor may run on another node; pid 0 would be our own process group).
        let pid_i = (self.backend == Backend::Local && pid_i > 0).then_some(pid_i);
        tracing::info!(job = %job, attempt, pid, "adopted a running attempt");
        self.running.insert(
            job,
            Attempt {
                attempt,
                pid: pid_i,
                stop: None,
                slurm: None,
                reported: true,
            },
        );
        // A Slurm attempt is watched by the executor's look at Slurm, which also finds
        // its batch job by name.
        if self.backend == Backend::Local {
            timers.set(Timer::Probe { job, attempt }, ADOPTED_POLL);
        } else {
            self.slurm_watch(timers);
        }
        let Some(j) = sched.job(job) else { return };
        if j.is_stopping() {
            self.stop(timers, job, sched.grace_period_seconds());
        } else if let Some(secs) = j.spec.timeout_seconds {
            let started = j.started_at().unwrap_or(now);
            let backstop = timeout_backstop(secs, sched);
            let left_ms = i64::try_from(backstop.as_millis())
                .unwrap_or(i64::MAX / 2)
                .saturating_sub(now - started)
                .max(0);
            let left = Duration::from_millis(left_ms as u64);
            timers.set(Timer::Timeout { job, attempt }, left);
        }
    }

    /// Look at an adopted attempt's run files (on the blocking pool: it reads `/proc`),
    /// and report `Probed`. A supervisor gone without an exit status (killed from outside)
    /// is reported only once nothing of its attempt's session runs (SPEC §7).
    pub(crate) fn probe(&self, job: JobId, attempt: u32) {
        let (state, owner) = (self.state.clone(), self.owner.clone());
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let root = state.root().to_path_buf();
            let status =
                tokio::task::spawn_blocking(move || runfiles::probe(&root, job, attempt, &owner))
                    .await
                    .unwrap_or(SupervisorStatus::Alive { pid: 0 });
            let exit = match status {
                SupervisorStatus::Alive { .. } => None,
                SupervisorStatus::Exited(status) => Some(status),
                SupervisorStatus::Vanished { session } => {
                    if let Some(sid) = session {
                        tracing::warn!(job = %job, attempt, "adopted supervisor died without an exit status: killing what is left of its attempt");
                        proc::clear_session(sid).await;
                    }
                    Some(crate::exec::ExitStatus::ended_now(255))
                }
            };
            let _ = tx.send(Input::Exec(ExecReport(ExecKind::Probed {
                job,
                attempt,
                exit,
            })));
        });
    }

    /// Arm the next look at an adopted attempt that is still alive.
    pub(crate) fn probe_later(&self, timers: &mut Timers, job: JobId, attempt: u32) {
        if self.is_current(job, attempt) {
            timers.set(Timer::Probe { job, attempt }, ADOPTED_POLL);
        }
    }

    /// The preemption log, newest first, when it changed since the last call.
    pub(crate) fn take_preemption_log(&mut self) -> Option<Arc<Vec<PreemptionRecord>>> {
        if !std::mem::take(&mut self.preemptions_changed) {
            return None;
        }
        Some(Arc::new(self.preemptions.iter().cloned().collect()))
    }

    /// Stop every running attempt (once). Returns true the first time.
    pub(crate) fn stop_all_once(&mut self, timers: &mut Timers, grace: u32) -> bool {
        if self.stopped_all {
            return false;
        }
        self.stopped_all = true;
        let jobs: Vec<JobId> = self.running.keys().copied().collect();
        for job in jobs {
            self.stop(timers, job, grace);
        }
        true
    }

    /// Carry out one batch of decisions, in the order they were made.
    pub(crate) fn carry_out(
        &mut self,
        sched: &Sched,
        timers: &mut Timers,
        events: Vec<Event>,
        now: i64,
    ) {
        let grace = sched.grace_period_seconds();
        for e in events {
            match e {
                Event::Started { job, devices, .. } => self.start(sched, timers, job, devices),
                Event::Preempted { job, by, reason } => {
                    self.record_preemption(sched, job, by, reason.as_str(), now);
                    tracing::info!(job = %job, by = ?by.map(|b| b.0), reason = reason.as_str(), "preempted");
                    self.stop(timers, job, grace);
                }
                Event::Cancelled { job, stop } => {
                    tracing::info!(job = %job, stop, "cancelled");
                    if stop {
                        self.stop(timers, job, grace);
                    }
                }
                Event::TimedOut { job } => {
                    tracing::info!(job = %job, "timed out");
                    self.stop(timers, job, grace);
                }
                Event::Requeued { job } => {
                    tracing::info!(job = %job, "requeued");
                    self.set_outcome(job, "requeued".to_string());
                }
                Event::Failed { job, reason } => {
                    tracing::info!(job = %job, reason = %reason, "failed");
                    self.set_outcome(job, format!("failed ({})", reason.code()));
                }
                Event::Succeeded { job } => tracing::info!(job = %job, "succeeded"),
                Event::Submitted { job } => tracing::debug!(job = %job, "queued"),
                Event::Rejected { name, error, .. } => {
                    tracing::info!(name = %name, error = %error, "rejected")
                }
                Event::Reprioritized { job, priority } => {
                    tracing::info!(job = %job, priority, "reprioritized")
                }
                Event::ConfigApplied | Event::ConfigRejected { .. } => {}
            }
        }
    }

    fn start(&mut self, sched: &Sched, timers: &mut Timers, job: JobId, devices: Vec<u32>) {
        let Some(j) = sched.job(job) else { return };
        let attempt = j.attempts_started;
        let spec = LaunchSpec {
            job,
            attempt,
            name: j.name().to_string(),
            share: sched.share_name(j.share).to_string(),
            preempted_count: j.preempted_count,
            devices: devices.clone(),
            command: j.spec.command.clone().unwrap_or(Command::Argv(Vec::new())),
            env: j.spec.env.clone(),
            working_directory: j.spec.working_directory.clone(),
            log: self.state.attempt_log(job, attempt),
            state: self.state.root().to_path_buf(),
            db: self.owner.db.clone(),
            grace_seconds: sched.grace_period_seconds(),
            log_cap: self.log_limits.cap_bytes(),
            free_reserve: self.log_limits.reserve_bytes(),
            submitter: j.spec.submitter.as_deref().cloned(),
            timeout_seconds: j.spec.timeout_seconds,
        };
        let node = j.node().map(|n| sched.node_name(n).to_string());
        tracing::info!(job = %job, attempt, ?devices, node = node.as_deref().unwrap_or(""), "started");
        self.running.insert(
            job,
            Attempt {
                attempt,
                pid: None,
                stop: None,
                slurm: None,
                reported: false,
            },
        );
        self.launch(spec, node.unwrap_or_default());
        if let Some(secs) = j.spec.timeout_seconds {
            // The supervisor enforces the timeout on its own clock (SPEC §7); this is the
            // backstop for one that cannot (it stops answering, say).
            timers.set(
                Timer::Timeout { job, attempt },
                timeout_backstop(secs, sched),
            );
        }
        self.slurm_watch(timers);
    }

    // ---- the executor boundary: every start and signal goes through these two ----

    /// Start an attempt on `node` with the spec's devices. Its supervisor reports back as
    /// `Spawned` (local) or `SlurmSubmitted`, then `Running`, then `Exited`.
    fn launch(&mut self, spec: LaunchSpec, node: String) {
        match &self.backend {
            Backend::Local => self.local_start(spec),
            Backend::Slurm { partition } => {
                let partition = partition.clone();
                self.slurm_start(spec, node, partition);
            }
        }
    }

    /// Deliver a stop to an attempt's supervisor (SIGTERM or SIGKILL), once it is known.
    pub(super) fn signal(a: &Attempt, how: Stop) {
        if let Some(id) = a.slurm {
            super::slurm_exec::cancel(id, how);
        } else if let Some(pid) = a.pid {
            proc::signal(pid, how);
        }
    }

    /// The local executor: a supervisor process on this machine, started off the runtime
    /// task (starting a process blocks its parent until the child has exec'd, ~ms).
    fn local_start(&mut self, spec: LaunchSpec) {
        let (job, attempt) = (spec.job, spec.attempt);
        let tx = self.tx.clone();
        let report = move |k: ExecKind| drop(tx.send(Input::Exec(ExecReport(k))));
        let (exe, owner) = (self.exe.clone(), self.owner.clone());
        tokio::spawn(async move {
            let state = spec.state.clone();
            let launched = tokio::task::spawn_blocking(move || proc::launch(&exe, &spec)).await;
            let status = match launched {
                Ok(Ok(sup)) => {
                    report(ExecKind::Spawned {
                        job,
                        attempt,
                        pid: sup.pid,
                    });
                    sup.wait(&state, job, attempt, &owner, || {
                        report(ExecKind::Running { job, attempt })
                    })
                    .await
                }
                Ok(Err(e)) => {
                    tracing::error!(job = %job, attempt, "cannot start a supervisor: {e}");
                    // Reported like an attempt that could not run its command.
                    crate::exec::ExitStatus::ended_now(127)
                }
                Err(e) => {
                    tracing::error!(job = %job, attempt, "supervisor start task failed: {e}");
                    crate::exec::ExitStatus::ended_now(127)
                }
            };
            report(ExecKind::Exited {
                job,
                attempt,
                status,
            });
        });
    }

    /// SIGTERM now, SIGKILL when the grace period is over (if it is still running).
    fn stop(&mut self, timers: &mut Timers, job: JobId, grace: u32) {
        let Some(a) = self.running.get_mut(&job) else {
            return;
        };
        if a.stop.is_some() {
            return;
        }
        let how = if grace == 0 { Stop::Kill } else { Stop::Term };
        a.stop = Some(how);
        Self::signal(a, how);
        if how == Stop::Kill {
            return;
        }
        let attempt = a.attempt;
        timers.set(
            Timer::Grace { job, attempt },
            Duration::from_secs(u64::from(grace)),
        );
    }

    fn record_preemption(
        &mut self,
        sched: &Sched,
        job: JobId,
        by: Option<JobId>,
        reason: &str,
        now: i64,
    ) {
        let Some(v) = sched.job(job) else { return };
        let by_job = by.and_then(|b| sched.job(b));
        self.preemptions.push_front(PreemptionRecord {
            at: now,
            victim: job,
            victim_name: v.name().to_string(),
            victim_share: sched.share_name(v.share).to_string(),
            by,
            by_name: by_job.map(|b| b.name().to_string()),
            by_share: by_job.map(|b| sched.share_name(b.share).to_string()),
            reason: reason.to_string(),
            gpus: v.quantity,
            ran_for: v.started_at().map_or(0, |s| now - s),
            outcome: None,
            victim_user: v.spec.submitter.as_ref().map(|s| s.name.clone()),
            by_user: by_job.and_then(|b| b.spec.submitter.as_ref().map(|s| s.name.clone())),
        });
        self.preemptions.truncate(PREEMPTION_LOG_LEN);
        self.preemptions_changed = true;
    }

    fn set_outcome(&mut self, job: JobId, outcome: String) {
        if let Some(r) = self
            .preemptions
            .iter_mut()
            .find(|r| r.victim == job && r.outcome.is_none())
        {
            r.outcome = Some(outcome);
            self.preemptions_changed = true;
        }
    }
}

/// When the runtime stops an attempt that is still running past its timeout: the
/// supervisor stops it at `timeoutSeconds` itself, so only one that could not (it hangs)
/// gets here, a grace period and 10 s later.
fn timeout_backstop(secs: u64, sched: &Sched) -> Duration {
    Duration::from_secs(secs.saturating_add(u64::from(sched.grace_period_seconds()) + 10))
}
