//! Carrying the scheduler's decisions out, whatever the backend: launch each start
//! through the `exec::backend::Backend` in force, stop attempts (a preemption's notice,
//! SIGTERM, grace, SIGKILL) for preemptions, cancels and timeouts, arm their timers in
//! the runtime's timer set, keep the attempt table and the preemption log (with each
//! preemption's lost work).

use super::timers::{Timer, Timers};
use crate::exec::backend::Backend;
use crate::exec::start::Stop;
use crate::exec::state::runfiles::{AttemptKey, AttemptToken, Gang, Owner, SavedBefore};
use crate::exec::{LaunchSpec, StateDir};
use crate::model::{Command, JobId, LogLimits, Notice};
use crate::sched::{Event, Sched, StopPlan};
use crate::snapshot::PreemptionRecord;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// How many preemption records are kept in memory (newest first).
const PREEMPTION_LOG_LEN: usize = 1000;

/// One attempt that has not ended yet, as far as the runtime knows; what its backend
/// knows of it (a pid, a batch job) is the backend's own.
#[derive(Debug)]
struct Attempt {
    attempt: u32,
    /// The strongest stop asked for so far (the backend delivers it once it can).
    stop: Option<Stop>,
    /// The notice its supervisor sends when asked (its share's at its start, SPEC §14).
    notice: Option<Notice>,
}

/// The attempt table and the stop path, in front of the backend that carries attempts out
/// (`exec::backend`).
pub(crate) struct Carry {
    pub(super) state: StateDir,
    backend: Box<dyn Backend>,
    running: HashMap<JobId, Attempt>,
    preemptions: VecDeque<PreemptionRecord>,
    /// The log changed since [`Carry::take_preemption_log`] last read it.
    preemptions_changed: bool,
    stopped_all: bool,
    /// The database whose run files these are, recorded in each attempt's spec.
    owner: Owner,
    /// `logs:` of the config in force, for the next starts.
    pub(crate) log_limits: LogLimits,
    /// `limits.pidsPerJob` of the config in force, for the next starts.
    pub(crate) pids_per_job: u64,
    /// The users' log bytes, for each start's share of its user's budget.
    pub(crate) log_budget: super::log_budget::LogBudget,
    /// The key attempt tokens are made from (SPEC §14), once read.
    attempt_key: Option<AttemptKey>,
    /// The MIG units' instances of the config in force (SPEC §15): a MIG job's devices
    /// are instance numbers, told to it as UUIDs.
    pub(crate) mig: crate::exec::gpu::mig::MigUnits,
}

impl Carry {
    pub(crate) fn new(state: StateDir, owner: Owner, backend: Box<dyn Backend>) -> Self {
        Carry {
            log_budget: super::log_budget::LogBudget::watch(state.clone()),
            state,
            backend,
            running: HashMap::new(),
            preemptions: VecDeque::new(),
            preemptions_changed: true,
            stopped_all: false,
            owner,
            log_limits: LogLimits::default(),
            pids_per_job: crate::model::UserLimits::default().pids_per_job,
            attempt_key: None,
            mig: Default::default(),
        }
    }

    /// The identity of a runtime without a store, for its run files.
    pub(crate) fn memory_owner() -> Owner {
        Owner {
            db: format!("memory-{}-{}", std::process::id(), crate::exec::now_ms()),
            legacy_below: 0,
        }
    }

    /// What the backend says the console header must show (SPEC §7), if anything.
    pub(crate) fn warning(&self) -> Option<String> {
        self.backend.warning()
    }

    pub(crate) fn running_count(&self) -> usize {
        self.running.len()
    }

    pub(crate) fn is_current(&self, job: JobId, attempt: u32) -> bool {
        self.running.get(&job).is_some_and(|a| a.attempt == attempt)
    }

    /// The attempt ended: forget it and its timers. False for a stale report.
    pub(crate) fn finished(&mut self, timers: &mut Timers, job: JobId, attempt: u32) -> bool {
        if self.is_current(job, attempt) {
            self.running.remove(&job);
            self.backend.forget(job, attempt);
            timers.cancel_attempt(job, attempt);
            true
        } else {
            false
        }
    }

    /// Everything taken so far is stored (see `Backend::stored`).
    pub(crate) fn stored(&mut self) {
        self.backend.stored();
    }

    pub(crate) fn kill_if_current(&mut self, job: JobId, attempt: u32) {
        if let Some(a) = self.running.get_mut(&job).filter(|a| a.attempt == attempt) {
            tracing::info!(job = %job, attempt, "grace period over: SIGKILL");
            a.stop = Some(Stop::Kill);
            self.backend.signal(job, attempt, Stop::Kill);
        }
    }

    /// Keep the backend's look armed while it wants one.
    pub(crate) fn watch(&self, timers: &mut Timers) {
        if let Some(every) = self.backend.poll_every()
            && !timers.is_set(Timer::Watch)
        {
            timers.set(Timer::Watch, every);
        }
    }

    /// The backend's look is due.
    pub(crate) fn look(&mut self, timers: &mut Timers) {
        self.backend.poll();
        self.watch(timers);
    }

    /// Seed the preemption log with what the store remembers (newest first).
    pub(crate) fn seed_preemptions(&mut self, records: Vec<PreemptionRecord>) {
        self.preemptions = records.into_iter().take(PREEMPTION_LOG_LEN).collect();
        self.preemptions_changed = true;
    }

    /// Watch an attempt whose supervisor outlived the previous scheduler (SPEC §8): its
    /// backend reports its end; its timeout is armed again for the time left; a stop
    /// that was under way is resumed.
    pub(crate) fn adopt(
        &mut self,
        sched: &Sched,
        timers: &mut Timers,
        job: JobId,
        attempt: u32,
        pid: u32,
        now: i64,
    ) {
        if i32::try_from(pid).is_err() {
            return;
        }
        let j = sched.job(job);
        let node = j
            .and_then(|j| sched.job_node(j))
            .map(|n| sched.node_name(n));
        // A Slurm attempt's supervisor runs on its node: no pid here to name.
        if pid > 0 {
            tracing::info!(job = %job, attempt, pid, "adopted a running attempt");
        } else {
            tracing::info!(
                job = %job,
                attempt,
                node = node.unwrap_or("?"),
                "adopted a running attempt (its supervisor runs on its node)"
            );
        }
        self.running.insert(
            job,
            Attempt {
                attempt,
                stop: None,
                // Not known from here: what its share has now, as its stop plan.
                notice: sched.share_notice(job),
            },
        );
        let places = j.map(|j| sched.job_places(j)).unwrap_or_default();
        if places.len() > 1 {
            // A gang (SPEC §16): every rank is watched again.
            let nodes: Vec<String> = places.into_iter().map(|(n, _)| n).collect();
            tracing::info!(job = %job, attempt, nodes = %nodes.join(","), "adopted a gang's ranks");
            self.backend
                .adopt_gang(job, attempt, &nodes, stop_grace(sched, job));
        } else {
            self.backend.adopt(job, attempt, pid, node);
        }
        self.watch(timers);
        let Some(j) = j else { return };
        if j.is_stopping() {
            // Asked again: a supervisor whose notice is under way keeps its times.
            self.stop(timers, job, stop_plan(sched, job));
        } else if let Some(secs) = j.spec.timeout_seconds {
            let started = j.started_at().unwrap_or(now);
            let backstop = timeout_backstop(secs, sched, job);
            let left_ms = i64::try_from(backstop.as_millis())
                .unwrap_or(i64::MAX / 2)
                .saturating_sub(now - started)
                .max(0);
            let left = Duration::from_millis(left_ms as u64);
            timers.set(Timer::Timeout { job, attempt }, left);
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
            self.stop(
                timers,
                job,
                StopPlan {
                    notice: None,
                    grace,
                },
            );
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
        for e in events {
            // The stop's notice and grace (SPEC §14: its share's, read when it began).
            let plan = |job| stop_plan(sched, job);
            match e {
                Event::Started {
                    job, devices, more, ..
                } => self.start(sched, timers, job, devices, more),
                Event::Preempted { job, by, reason } => {
                    self.record_preemption(sched, job, by, reason.as_str(), now);
                    match by {
                        Some(b) => {
                            tracing::info!(job = %job, by = %b, reason = reason.as_str(), "preempted")
                        }
                        None => tracing::info!(job = %job, reason = reason.as_str(), "preempted"),
                    }
                    self.stop(timers, job, plan(job));
                }
                Event::Cancelled { job, stop } => {
                    tracing::info!(job = %job, stop, "cancelled");
                    if stop {
                        self.stop(timers, job, plan(job));
                    }
                }
                Event::TimedOut { job } => {
                    tracing::info!(job = %job, "timed out");
                    self.stop(timers, job, plan(job));
                }
                Event::OverMemory {
                    job,
                    held_gib,
                    of_gib,
                    stop,
                } => {
                    tracing::warn!(job = %job, stop, "OVER_MEMORY: job {job} holds {held_gib} GiB of its {of_gib}");
                    self.note_over_memory(job, held_gib, of_gib, stop);
                    if stop {
                        self.stop(timers, job, plan(job));
                    }
                }
                Event::Requeued { job, lost } => {
                    tracing::info!(job = %job, "requeued");
                    self.set_outcome(job, "requeued".to_string(), lost);
                }
                Event::Failed { job, reason, lost } => {
                    tracing::info!(job = %job, reason = %reason, "failed");
                    self.set_outcome(job, format!("failed ({})", reason.code()), lost);
                }
                Event::Succeeded { job } => tracing::info!(job = %job, "succeeded"),
                Event::Released { job } => {
                    tracing::info!(job = %job, "dependencies met: runnable")
                }
                Event::Submitted { job } => tracing::debug!(job = %job, "queued"),
                Event::Rejected { name, error, .. } => {
                    tracing::info!(name = %name, error = %error, "rejected")
                }
                Event::Reprioritized { job, priority, .. } => {
                    tracing::info!(job = %job, priority, "reprioritized")
                }
                Event::ConfigApplied | Event::ConfigRejected { .. } => {}
            }
        }
        // A start prepared for this batch and not launched by it (none should be) must not
        // leave a supervisor waiting for a spec that never comes.
        self.backend.unprepare();
    }

    /// Tell the job itself, in its attempt's log (what `shareq logs` shows), that it was
    /// found over its slice (SPEC §15) and what comes of it. Written off the runtime task.
    fn note_over_memory(&self, job: JobId, held_gib: u64, of_gib: u64, stop: bool) {
        let Some(a) = self.running.get(&job) else {
            return;
        };
        let log = self.state.attempt_log(job, a.attempt);
        let line = over_memory_line(held_gib, of_gib, stop);
        let write = move || {
            if let Err(e) = crate::exec::state::log_sink::append_note(&log, &line) {
                tracing::warn!(job = %job, "cannot write the OVER_MEMORY line into {}: {e}", log.display());
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn_blocking(write)),
            Err(_) => write(),
        }
    }

    /// The batch's starts are about to be written: the backend may get them ready
    /// meanwhile ([`Backend::prepare`]). Not a MIG job's: its device set (parent GPUs
    /// and caps) is known from its launch spec only, so it is made at the launch.
    pub(crate) fn prepare(&mut self, sched: &Sched, events: &[Event]) {
        for e in events {
            if let Event::Started { job, devices, .. } = e
                && let Some(j) = sched.job(*job)
                && !self.mig.0.contains_key(sched.unit_name(j.unit))
            {
                self.backend
                    .prepare(*job, j.attempts_started, sched.unit_name(j.unit), devices);
            }
        }
    }

    /// The batch was not written: undo what [`Carry::prepare`] began.
    pub(crate) fn unprepare(&mut self) {
        self.backend.unprepare();
    }

    /// Launch a start: a gang's (SPEC §16, `more`: its other nodes and their devices) as
    /// one attempt whose spec names every rank's node and devices.
    fn start(
        &mut self,
        sched: &Sched,
        timers: &mut Timers,
        job: JobId,
        devices: Vec<u32>,
        more: Vec<(String, Vec<u32>)>,
    ) {
        let Some(j) = sched.job(job) else { return };
        let node = sched.job_node(j).map(|n| sched.node_name(n).to_string());
        let gang = (!more.is_empty()).then(|| Gang {
            ranks: std::iter::once((node.clone().unwrap_or_default(), devices.clone()))
                .chain(more)
                .collect(),
            rank: 0,
            main: None,
        });
        let attempt = j.attempts_started;
        let budget = self.log_limits.user_budget_bytes();
        let user_log = j
            .spec
            .submitter
            .as_deref()
            .and_then(|s| self.log_budget.room(job, s.uid, &s.name, budget));
        let spec = LaunchSpec {
            job,
            attempt,
            name: j.name().to_string(),
            share: sched.share_name(j.share).to_string(),
            preempted_count: j.preempted_count,
            devices: devices.clone(),
            gpu_memory_gib: sched.slice_of(j.unit).map(|_| j.spec.quantity),
            command: j.spec.command.clone().unwrap_or(Command::Argv(Vec::new())),
            env: array_env(j),
            working_directory: j.spec.working_directory.clone(),
            log: self.state.attempt_log(job, attempt),
            state: self.state.root().to_path_buf(),
            db: self.owner.db.clone(),
            grace_seconds: stop_grace(sched, job),
            notice: sched.share_notice(job),
            log_cap: self.log_limits.cap_bytes(),
            free_reserve: self.log_limits.reserve_bytes(),
            pids_max: self.pids_per_job,
            user_log,
            submitter: j.spec.submitter.as_deref().cloned(),
            timeout_seconds: j.spec.timeout_seconds,
            unit: sched.unit_name(j.unit).to_string(),
            mig: self.mig.access(sched.unit_name(j.unit), &devices),
            cgroup: Vec::new(),
            report: None,
            token: self.attempt_token(job, attempt),
            last_checkpoint: j.checkpoint.as_ref().map(|c| SavedBefore {
                at: c.at,
                note: c.note.as_deref().map(str::to_string),
            }),
            gang,
        };
        // Every node of a gang (SPEC §16), as the console and `jobs` name them.
        let on = crate::snapshot::job_places_text(sched, j, crate::snapshot::PlaceStyle::Listed);
        tracing::info!(job = %job, attempt, devices = %on, "started");
        self.running.insert(
            job,
            Attempt {
                attempt,
                stop: None,
                notice: spec.notice,
            },
        );
        self.backend
            .launch(spec, node.as_deref().unwrap_or_default());
        if let Some(secs) = j.spec.timeout_seconds {
            // The supervisor enforces the timeout on its own clock (SPEC §7); this is the
            // backstop for one that cannot (it stops answering, say).
            timers.set(
                Timer::Timeout { job, attempt },
                timeout_backstop(secs, sched, job),
            );
        }
        self.watch(timers);
    }

    /// Stop an attempt as `plan` says (SPEC §4.4, §14): with a notice, its supervisor
    /// sends the notice now and SIGTERM when the notice is over ([`Stop::Notice`]); else
    /// SIGTERM now. SIGKILL when the grace period after SIGTERM is over, if it still runs.
    /// An attempt started before its share had a notice gets none (its environment did
    /// not announce one).
    fn stop(&mut self, timers: &mut Timers, job: JobId, plan: StopPlan) {
        let Some(a) = self.running.get_mut(&job) else {
            return;
        };
        match a.stop {
            None => {}
            // A cancel cut the notice short (`Sched::cut_notice_short`): SIGTERM now (the
            // supervisor ends the notice on it), SIGKILL after the grace from now.
            Some(Stop::Notice) if plan.notice.is_none() => {
                tracing::info!(job = %job, "notice cut short: SIGTERM now");
            }
            Some(_) => return,
        }
        let notice = a.notice.filter(|_| plan.notice.is_some());
        let (how, kill_after) = match notice {
            Some(n) => (Stop::Notice, n.seconds.saturating_add(plan.grace)),
            None if plan.grace == 0 => (Stop::Kill, 0),
            None => (Stop::Term, plan.grace),
        };
        if let Some(n) = notice {
            tracing::info!(
                job = %job,
                signal = n.signal.as_str(),
                seconds = n.seconds,
                "notice: SIGTERM after it"
            );
        }
        a.stop = Some(how);
        self.backend.signal(job, a.attempt, how);
        if how == Stop::Kill {
            return;
        }
        let attempt = a.attempt;
        timers.set(
            Timer::Grace { job, attempt },
            Duration::from_secs(u64::from(kill_after)),
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
            lost: None,
            victim_placements: crate::snapshot::gang_placements(sched, v),
        });
        self.preemptions.truncate(PREEMPTION_LOG_LEN);
        self.preemptions_changed = true;
    }

    /// The open preemption of `job` is over: what became of its victim, and the work it
    /// lost (SPEC §14) when a preemption ended it.
    fn set_outcome(&mut self, job: JobId, outcome: String, lost: Option<crate::sched::Lost>) {
        if let Some(r) = self
            .preemptions
            .iter_mut()
            .find(|r| r.victim == job && r.outcome.is_none())
        {
            r.outcome = Some(outcome);
            r.lost = lost.as_ref().map(crate::snapshot::LostWork::of);
            self.preemptions_changed = true;
        }
    }
}

/// How a stop of `job` goes (SPEC §14): its share's notice (a preemption's only) and
/// `gracePeriodSeconds` where set, else the environment's grace, as the core planned the
/// stop (a stop under way keeps the times it began with).
fn stop_plan(sched: &Sched, job: JobId) -> StopPlan {
    sched.stop_plan(job).unwrap_or(StopPlan {
        notice: None,
        grace: sched.grace_period_seconds(),
    })
}

/// Seconds from SIGTERM to SIGKILL for a stop of `job` ([`stop_plan`]'s grace).
fn stop_grace(sched: &Sched, job: JobId) -> u32 {
    stop_plan(sched, job).grace
}

/// When the runtime stops an attempt that is still running past its timeout: the
/// supervisor stops it at `timeoutSeconds` itself, so only one that could not (it hangs)
/// gets here, a grace period and 10 s later.
fn timeout_backstop(secs: u64, sched: &Sched, job: JobId) -> Duration {
    Duration::from_secs(secs.saturating_add(u64::from(stop_grace(sched, job)) + 10))
}

impl Carry {
    /// The attempt a process belongs to, where the backend can tell (its cgroup).
    pub(crate) fn attempt_of_process(&self, pid: i32) -> Option<(JobId, u32)> {
        self.backend.attempt_of_process(pid)
    }

    /// Is the process `pid` (a `shareq checkpoint` on the socket) one of attempt
    /// `attempt` of `job` (SPEC §14)? By the attempt's cgroup where the backend contains
    /// attempts and the process is in one (then only that one's may report), else by the
    /// attempt's token.
    pub(crate) fn is_of_attempt(
        &mut self,
        pid: Option<i32>,
        job: JobId,
        attempt: u32,
        token: Option<&AttemptToken>,
    ) -> bool {
        if let Some(of) = pid.and_then(|p| self.backend.attempt_of_process(p)) {
            return of == (job, attempt);
        }
        let db = self.owner.db.clone();
        match (token, self.attempt_key()) {
            (Some(t), Some(key)) => key.matches(&db, job, attempt, &t.0),
            _ => false,
        }
    }

    /// The state directory's attempt key, read (or made) once; `None` (a warning) when
    /// it cannot be: attempts then report only where their cgroup says whose they are.
    fn attempt_key(&mut self) -> Option<&AttemptKey> {
        if self.attempt_key.is_none() {
            match AttemptKey::of(self.state.root()) {
                Ok(k) => self.attempt_key = Some(k),
                Err(e) => tracing::warn!("cannot keep the key of attempt tokens: {e}"),
            }
        }
        self.attempt_key.as_ref()
    }

    /// The attempt's token (SPEC §14: `SHAREQ_ATTEMPT_TOKEN`), made from the state
    /// directory's key: nothing is written per attempt.
    fn attempt_token(&mut self, job: JobId, attempt: u32) -> Option<AttemptToken> {
        let db = self.owner.db.clone();
        self.attempt_key().map(|k| k.token(&db, job, attempt))
    }
}

/// A job's environment: its spec's, and an array child's index under both names (SPEC
/// §13: `SHAREQ_ARRAY_INDEX`, and AWS Batch's `AWS_BATCH_JOB_ARRAY_INDEX`).
fn array_env(j: &crate::sched::Job) -> std::collections::BTreeMap<String, String> {
    let mut env = j.spec.env.clone();
    if let Some(i) = j.array_index() {
        env.insert("SHAREQ_ARRAY_INDEX".to_string(), i.to_string());
        env.insert("AWS_BATCH_JOB_ARRAY_INDEX".to_string(), i.to_string());
    }
    env
}

/// The line an attempt's log gets when its job is found over its slice (SPEC §15).
pub(crate) fn over_memory_line(held_gib: u64, of_gib: u64, stop: bool) -> String {
    let then = if stop {
        "overuse: STOP): it is being stopped, and ends FAILED (OVER_MEMORY) without a retry"
    } else {
        "overuse: REPORT, not stopped)"
    };
    format!("OVER_MEMORY: this job held {held_gib} GiB of its {of_gib} GiB slice ({then}")
}
