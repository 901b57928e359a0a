//! The inputs of the state machine (submit, cancel, priority, exits, releases, timeouts)
//! and the state transitions they share: start, stop, release, requeue, finish.

use super::keys::SlotIx;
use super::rejection::{PriorityError, Rejection};
use super::state::{FailReason, Job, Lost, Phase, PreemptReason, StopCause, StopPlan};
use super::{Event, Sched, Time};
use crate::model::{JobId, JobSpec, JobState, MAX_NODES, MAX_PRIORITY};

impl Sched {
    /// Accept or reject a submission (SPEC §2). Accepted jobs are RUNNABLE until a pass.
    pub fn submit(&mut self, spec: JobSpec, now: Time) -> Result<JobId, Rejection> {
        self.submit_with_stop(spec, 0, now)
    }

    /// `submit`, with the replay's `stopAfter` (seconds the job takes to exit on SIGTERM).
    pub fn submit_with_stop(
        &mut self,
        spec: JobSpec,
        stop_after: u32,
        now: Time,
    ) -> Result<JobId, Rejection> {
        self.now = now;
        let checked = self
            .check_submission(&spec)
            .and_then(|lane| Ok((lane, self.check_links(&spec)?)));
        match checked {
            Err(error) => {
                self.emit(Event::Rejected {
                    name: spec.job_name.clone(),
                    share: spec.quota_share_name.clone(),
                    error: error.to_string(),
                });
                Err(error)
            }
            Ok((lane, plan)) => Ok(self.create(spec, plan, lane, stop_after, now)),
        }
    }

    /// Would this submission be accepted? Returns the share and unit indexes.
    pub(crate) fn check_submission(&self, spec: &JobSpec) -> Result<(usize, usize), Rejection> {
        let name = &spec.quota_share_name;
        let Some(&s) = self.share_ix.get(name).filter(|&&s| self.shares[s].present) else {
            return Err(Rejection::UnknownShare {
                share: name.clone(),
                known: self.share_names().map(str::to_string).collect(),
            });
        };
        let share = &self.shares[s];
        if !share.enabled {
            return Err(Rejection::ShareDisabled {
                share: name.clone(),
            });
        }
        if spec.job_name.is_empty() || spec.job_name.chars().count() > 128 {
            return Err(Rejection::JobName);
        }
        if spec.quantity < 1 {
            return Err(Rejection::Quantity);
        }
        match spec.num_nodes {
            Some(1) => {
                return Err(Rejection::Gang(
                    "numNodes 1: a plain job has no numNodes (a multi-node job has 2 to 64)"
                        .to_string(),
                ));
            }
            Some(n) if !(2..=MAX_NODES).contains(&n) => {
                return Err(Rejection::Gang(format!(
                    "numNodes {n} is out of range 2..{MAX_NODES}"
                )));
            }
            Some(_) if !self.multi_node => {
                return Err(Rejection::Gang(
                    "--nodes needs an environment with nodes".to_string(),
                ));
            }
            _ => {}
        }
        if spec.scheduling_priority > MAX_PRIORITY {
            return Err(Rejection::Priority {
                priority: spec.scheduling_priority,
                max: MAX_PRIORITY,
            });
        }
        if let Some(r) = &spec.retry_strategy
            && !(1..=10).contains(&r.attempts)
        {
            return Err(Rejection::RetryAttempts {
                attempts: r.attempts,
            });
        }
        let units: Vec<usize> = (0..self.units.len())
            .filter(|&u| self.units[u].present)
            .collect();
        let u = match &spec.capacity_unit {
            Some(unit) => match self.unit_ix.get(unit).filter(|&&u| self.units[u].present) {
                Some(&u) => u,
                None => {
                    return Err(Rejection::UnknownUnit {
                        unit: unit.clone(),
                        units: self.unit_names().map(str::to_string).collect(),
                    });
                }
            },
            None if units.len() == 1 => units[0],
            None => {
                return Err(Rejection::UnitRequired {
                    units: self.unit_names().map(str::to_string).collect(),
                });
            }
        };
        let lane = &share.lanes[u];
        if lane.limit == 0 {
            return Err(Rejection::NoLimit {
                share: name.clone(),
                unit: self.units[u].name.clone(),
            });
        }
        if spec.num_nodes.is_some() && self.units[u].slice.is_some() {
            return Err(Rejection::Gang(format!(
                "numNodes needs whole GPUs: {} is sliced by memory",
                self.units[u].name
            )));
        }
        // A sliced unit's job larger than a device is refused before any count (SPEC §15).
        if self.units[u].slice.is_some()
            && let Some(why) = self.larger_than_any_node(u, spec.quantity)
        {
            return Err(Rejection::LargerThanAnyNode(why));
        }
        let max = self.max_request(s, u);
        let total = spec.total_quantity();
        if i64::from(total) > max {
            return Err(Rejection::LimitExceeded {
                quantity: total,
                share: name.clone(),
                max,
            });
        }
        if let Some(why) = self.larger_than_any_node(u, spec.quantity) {
            return Err(Rejection::LargerThanAnyNode(why));
        }
        if let Some(why) = self.gang_never_fits(u, spec.quantity, spec.nodes()) {
            return Err(Rejection::Gang(why));
        }
        Ok((s, u))
    }

    /// Cancel a job (SPEC §4.4 item 5). Returns false when it was already finished.
    pub fn cancel(&mut self, id: JobId, by: &str, now: Time) -> bool {
        self.now = now;
        let Some(job) = self.job(id) else {
            return false;
        };
        if job.state.is_finished() || matches!(job.stop_cause(), Some(StopCause::Cancel)) {
            return false;
        }
        let reason = FailReason::Cancelled(by.to_string());
        match &job.phase {
            Phase::Pending { .. } => {
                self.unindex_pending(id);
                self.finish(id, JobState::Failed, Some(reason), now);
                self.emit(Event::Cancelled {
                    job: id,
                    stop: false,
                });
            }
            Phase::Holding { stopping, .. } => {
                let already = stopping.is_some();
                // During a live notice the stop goes on from SIGTERM now.
                let cut = already && self.cut_notice_short(id, now);
                self.mark_stopping(id, StopCause::Cancel, now);
                if let Some(j) = self.job_mut(id) {
                    j.fail_reason = Some(reason);
                }
                self.emit(Event::Cancelled {
                    job: id,
                    stop: !already || cut,
                });
                if !already && self.releases_at_once(id) {
                    self.gpus_released(id, now);
                }
            }
            Phase::Dependent => {
                self.finish(id, JobState::Failed, Some(reason), now);
                self.emit(Event::Cancelled {
                    job: id,
                    stop: false,
                });
            }
            Phase::Parent => return self.cancel_array(id, by, now),
            Phase::Done => return false,
        }
        self.settle();
        true
    }

    /// Change a job's priority. Returns false when it was already finished.
    pub fn set_priority(
        &mut self,
        id: JobId,
        priority: u32,
        now: Time,
    ) -> Result<bool, PriorityError> {
        self.set_priority_by(id, priority, None, now)
    }

    /// [`Sched::set_priority`] on behalf of user `by` (named in the `reprioritized` event).
    pub fn set_priority_by(
        &mut self,
        id: JobId,
        priority: u32,
        by: Option<&str>,
        now: Time,
    ) -> Result<bool, PriorityError> {
        self.now = now;
        if priority > MAX_PRIORITY {
            return Err(PriorityError::OutOfRange {
                priority,
                max: MAX_PRIORITY,
            });
        }
        let Some(job) = self.job(id) else {
            return Err(PriorityError::NoJob(id));
        };
        if job.state.is_finished() || matches!(job.stop_cause(), Some(StopCause::Cancel)) {
            return Ok(false);
        }
        match job.phase {
            Phase::Pending { .. } => {
                self.unindex_pending(id);
                if let Some(j) = self.job_mut(id) {
                    j.priority = priority;
                }
                self.index_pending(id);
            }
            Phase::Holding { .. } => {
                let (s, u, old) = (job.share, job.unit, self.vkey(job));
                let stopping = job.is_stopping();
                if let Some(j) = self.job_mut(id) {
                    j.priority = priority;
                }
                if !stopping {
                    self.rekey_running(id, s, u, old);
                }
            }
            Phase::Dependent => {
                if let Some(j) = self.job_mut(id) {
                    j.priority = priority;
                }
            }
            Phase::Parent => {
                // The parent's priority is its children's.
                if let Some(j) = self.job_mut(id) {
                    j.priority = priority;
                }
                let size = self.job(id).and_then(Job::array_size).unwrap_or(0);
                for i in 0..size {
                    let child = super::links::child(id, i);
                    self.set_priority_by(child, priority, by, now)?;
                }
            }
            Phase::Done => return Ok(false),
        }
        self.emit(Event::Reprioritized {
            job: id,
            priority,
            by: by.map(str::to_string),
        });
        Ok(true)
    }

    /// The job's command ended by itself with `code` (live). An exit during a stop for
    /// preemption is the preemption, whatever its status (SPEC §14): requeued, or FAILED
    /// with `PREEMPTION_RETRIES_EXHAUSTED`; never SUCCEEDED, never a retry attempt. The
    /// release that follows it is then ignored, as is an exit after the release.
    pub fn job_exited(&mut self, id: JobId, code: i32, now: Time) {
        self.command_ended(id, code, FailReason::NonZeroExit(code), now);
    }

    /// The job's command was killed by `signal` from outside (shareq stopped nothing):
    /// as [`Sched::job_exited`] with a non-zero code, its reason naming the signal.
    pub fn job_killed(&mut self, id: JobId, signal: i32, now: Time) {
        self.command_ended(id, 128 + signal, FailReason::Signalled(signal), now);
    }

    /// A command ended with `code`; `failed`: the reason when it is not 0.
    fn command_ended(&mut self, id: JobId, code: i32, failed: FailReason, now: Time) {
        self.now = now;
        if self
            .job(id)
            .is_some_and(|j| matches!(j.stop_cause(), Some(StopCause::Preempt { .. })))
        {
            self.preemption_ended(id, now);
            self.settle();
            return;
        }
        self.work_ended(id, code, failed, now);
    }

    /// Replay: the job's `duration` ran out, so it finished its work (SPEC §6: a victim
    /// whose duration runs out before its stop releases its GPUs finishes normally,
    /// succeeded or failed by its exit code).
    pub fn job_finished(&mut self, id: JobId, code: i32, now: Time) {
        self.now = now;
        self.work_ended(id, code, FailReason::NonZeroExit(code), now);
    }

    /// The job's work ended with `code` (`failed`: the reason when it is not 0), outside a
    /// preemption stop.
    fn work_ended(&mut self, id: JobId, code: i32, failed: FailReason, now: Time) {
        let Some(job) = self.job(id) else { return };
        if !job.is_holding() {
            return;
        }
        match job.stop_cause() {
            Some(StopCause::Cancel) => {
                self.release(id, now);
                self.finish(id, JobState::Failed, None, now);
            }
            Some(StopCause::Timeout) => {
                self.release(id, now);
                self.attempt_failed(id, FailReason::Timeout, now);
            }
            Some(StopCause::OverMemory) => {
                self.release(id, now);
                self.over_memory_failed(id, now);
            }
            _ => {
                self.release(id, now);
                if code == 0 {
                    self.finish(id, JobState::Succeeded, None, now);
                    self.emit(Event::Succeeded { job: id });
                } else {
                    self.attempt_failed(id, failed, now);
                }
            }
        }
        self.settle();
    }

    /// Every process of a stopped job is gone: its GPUs are free again (SPEC §4.4 item 3).
    pub fn gpus_released(&mut self, id: JobId, now: Time) {
        self.now = now;
        let Some(job) = self.job(id) else { return };
        let Some(cause) = job.stop_cause() else {
            return;
        };
        match cause {
            StopCause::Preempt { .. } => self.preemption_ended(id, now),
            StopCause::Cancel => {
                self.release(id, now);
                self.finish(id, JobState::Failed, None, now);
            }
            StopCause::Timeout => {
                self.release(id, now);
                self.attempt_failed(id, FailReason::Timeout, now);
            }
            StopCause::OverMemory => {
                self.release(id, now);
                self.over_memory_failed(id, now);
            }
        }
        self.settle();
    }

    /// A preempted attempt is over (its GPUs released, or its command exited during the
    /// stop): count the preemption, requeue or fail the job, and report the work lost.
    fn preemption_ended(&mut self, id: JobId, now: Time) {
        let Some(j) = self.job(id) else { return };
        let Some(since) = j.last_save_or_start() else {
            return;
        };
        let lost = Lost {
            gpus: j.quantity,
            since,
            until: now,
            checkpointed: j.last_save.is_some(),
            noticed: j.stop_plan.is_some_and(|p| p.notice.is_some()),
        };
        let limit = j.spec.preemption_retries_before_termination;
        self.release(id, now);
        let count = {
            let Some(j) = self.job_mut(id) else { return };
            j.preempted_count += 1;
            j.lost_ticks = j.lost_ticks.saturating_add(lost.gpu_ticks());
            j.preempted_count
        };
        if limit.is_some_and(|l| count > l) {
            let reason = FailReason::PreemptionRetriesExhausted;
            self.finish(id, JobState::Failed, Some(reason.clone()), now);
            self.emit(Event::Failed {
                job: id,
                reason,
                lost: Some(lost),
            });
        } else {
            self.requeue(id, Some(lost));
        }
    }

    /// A job reports that attempt `attempt` (its `attempts_started` when it reported)
    /// saved its work at `at` (SPEC §14: `shareq checkpoint`; the replay's saves). Its
    /// last save moves the job in the victim order. A report for another attempt, for a
    /// job not holding GPUs, or older than the attempt's last save changes nothing;
    /// returns whether it was taken. A report while a stop is under way is taken too.
    pub fn checkpoint(&mut self, id: JobId, attempt: u32, at: Time) -> bool {
        let Some(j) = self.job(id) else { return false };
        let Some(current) = j.last_save_or_start() else {
            return false;
        };
        if j.attempts_started != attempt || at < current || j.last_save == Some(at) {
            return false;
        }
        let (s, u, stopping, old) = (j.share, j.unit, j.is_stopping(), self.vkey(j));
        if let Some(j) = self.job_mut(id) {
            j.last_save = Some(at);
        }
        if !stopping {
            self.rekey_running(id, s, u, old);
        }
        true
    }

    /// A live checkpoint report (SPEC §14, `shareq checkpoint`): attempt `attempt` of job
    /// `id` saved at `at`, with `note`. Taken (`true`) when that attempt holds the job's GPUs
    /// (being stopped included): it becomes the attempt's last save ([`Sched::checkpoint`])
    /// and the job's latest [`Checkpoint`], kept over requeues. A second report at the
    /// same instant replaces the note. The caller checked who reports and the note's size.
    pub fn report_checkpoint(
        &mut self,
        id: JobId,
        attempt: u32,
        at: Time,
        note: Option<std::sync::Arc<str>>,
    ) -> bool {
        let Some(j) = self.job(id) else { return false };
        if !j.is_holding() || j.attempts_started != attempt {
            return false;
        }
        // Never before the attempt's last save (a clock that stepped back).
        let at = j.last_save_or_start().map_or(at, |t| at.max(t));
        self.checkpoint(id, attempt, at);
        if let Some(j) = self.job_mut(id) {
            j.checkpoint = Some(Box::new(super::state::Checkpoint { at, attempt, note }));
        }
        true
    }

    /// A running job's victim key changed (its priority, its last save): move it in its
    /// lane's running set from `old` to its key now.
    fn rekey_running(
        &mut self,
        id: JobId,
        s: super::keys::ShareIx,
        u: super::keys::UnitIx,
        old: Option<super::state::VKey>,
    ) {
        let new = self.job(id).and_then(|j| self.vkey(j));
        let lane = &mut self.shares[s].lanes[u];
        if let Some(k) = old {
            lane.running.remove(&k);
        }
        if let Some(k) = new {
            lane.running.insert(k);
        }
    }

    /// How a stop of this job for `cause` would go now (SPEC §14): its share's grace (or
    /// the environment's), and its share's notice for a preemption other than
    /// `DEVICE_LOST`.
    pub(crate) fn plan_stop(&self, j: &Job, cause: StopCause) -> StopPlan {
        let share = &self.shares[j.share];
        let notice = match cause {
            StopCause::Preempt { reason, .. } if reason != PreemptReason::DeviceLost => {
                share.notice
            }
            _ => None,
        };
        StopPlan {
            notice,
            grace: share.grace.unwrap_or(self.grace),
        }
    }

    /// The notice and grace of a job's stop: the ones fixed when its current stop began,
    /// or, for a job not being stopped, those a cancel or timeout would get now (no
    /// notice). The live runtime signals by it.
    pub fn stop_plan(&self, id: JobId) -> Option<StopPlan> {
        let j = self.job(id)?;
        match (j.stop_plan, j.stop_cause()) {
            (Some(plan), Some(_)) => Some(plan),
            _ => Some(self.plan_stop(j, StopCause::Cancel)),
        }
    }

    /// The notice a preemption of this job would send now (SPEC §14): its share's. What
    /// an attempt is told at its start (`SHAREQ_NOTICE_*`), and what its supervisor sends.
    pub fn share_notice(&self, id: JobId) -> Option<crate::model::Notice> {
        self.job(id).and_then(|j| self.shares[j.share].notice)
    }

    /// A running job passed its `timeoutSeconds`: stop it (the attempt fails on release).
    pub fn timeout(&mut self, id: JobId, now: Time) {
        self.now = now;
        let Some(job) = self.job(id) else { return };
        if !job.is_holding() || job.is_stopping() {
            return;
        }
        self.mark_stopping(id, StopCause::Timeout, now);
        self.emit(Event::TimedOut { job: id });
    }

    /// The runtime found a sliced job holding `held_gib` GiB of its `of_gib` on two samples
    /// in a row (SPEC §15): report it, and with `stop` (`overuse: STOP`) stop it, to end
    /// FAILED with `OVER_MEMORY` and no retry. A job not holding, or already stopping, is
    /// left alone.
    pub fn over_memory(&mut self, id: JobId, held_gib: u64, of_gib: u64, stop: bool, now: Time) {
        self.now = now;
        let Some(job) = self.job(id) else { return };
        if !job.is_holding() || job.is_stopping() {
            return;
        }
        if stop {
            self.mark_stopping(id, StopCause::OverMemory, now);
        }
        self.emit(Event::OverMemory {
            job: id,
            held_gib,
            of_gib,
            stop,
        });
    }

    /// A job stopped for overusing its slice is over: FAILED `OVER_MEMORY`, whatever
    /// attempts it has left.
    fn over_memory_failed(&mut self, id: JobId, now: Time) {
        let reason = FailReason::OverMemory;
        self.finish(id, JobState::Failed, Some(reason.clone()), now);
        self.emit(Event::Failed {
            job: id,
            reason,
            lost: None,
        });
    }

    /// The live runtime reports progress: SCHEDULED → STARTING → RUNNING.
    pub fn set_running_state(&mut self, id: JobId, state: JobState) {
        if let Some(j) = self.job_mut(id)
            && j.is_holding()
            && matches!(
                state,
                JobState::Scheduled | JobState::Starting | JobState::Running
            )
        {
            j.state = state;
        }
    }

    // ---- transitions ----

    pub(crate) fn start(&mut self, id: JobId, now: Time) {
        self.start_except(id, now, &[]);
    }

    /// Start a job on the best fit among the nodes other than `except` (a borrowed start
    /// while those nodes are reserved for a big job, SPEC §3); a gang on its N nodes at
    /// once (SPEC §16).
    pub(crate) fn start_except(&mut self, id: JobId, now: Time, except: &[SlotIx]) {
        let Some(job) = self.job(id) else { return };
        let (s, u, q) = (job.share, job.unit, job.per_node());
        let before = self.shares[s].lanes[u].borrowed();
        // Placement is judged before the job leaves the queue: a nominated job keeps its
        // own reserve on its node until then (SPEC §10).
        let noms = self.unit_noms(u);
        let slots = self.place(id, &noms, except).unwrap_or_else(|| vec![0]);
        let node = slots[0];
        let more: Vec<(SlotIx, Vec<u32>)> = slots[1..]
            .iter()
            .map(|&n| (n, self.lowest_free(u, n, q)))
            .collect();
        let reserved = self.units[u].reservation.is_some_and(|r| r.job == id);
        self.unindex_pending(id);
        // A slot's lowest free room: devices, or on a sliced device its lowest free GiB
        // (the job's `devices` then name that one device, SPEC §15).
        let parts = self.lowest_free(u, node, q);
        let (devices, gib) = match self.units[u].slots.get(node).and_then(|sl| sl.device) {
            Some(d) => (vec![d], parts),
            None => (parts, Vec::new()),
        };
        self.start_seq += 1;
        let seq = self.start_seq;
        let at_once = self.clock.acts_at_once();
        if let Some(j) = self.job_mut(id) {
            j.phase = Phase::Holding {
                slot: node,
                devices: devices.clone(),
                gib,
                start_seq: seq,
                started_at: now,
                stopping: None,
                more: more.clone(),
            };
            j.state = if at_once {
                JobState::Running
            } else {
                JobState::Scheduled
            };
            j.attempts_started += 1;
            j.reserved_start = reserved;
            j.last_save = None;
            j.stop_plan = None;
        }
        self.index_holding(id);
        self.usage_started(id, now);
        let after = self.shares[s].lanes[u].borrowed();
        let name = |n: SlotIx| {
            let on = self.units[u].slots.get(n).map_or(n, |sl| sl.node);
            self.node_name(on).to_string()
        };
        let node = self.multi_node.then(|| name(node));
        let more = more.into_iter().map(|(n, d)| (name(n), d)).collect();
        self.emit(Event::Started {
            job: id,
            node,
            devices,
            borrowed: after - before,
            more,
        });
    }

    /// Begin stopping one holding job because of a preemption.
    pub(crate) fn preempt_one(
        &mut self,
        id: JobId,
        by: Option<JobId>,
        reason: PreemptReason,
        now: Time,
    ) {
        self.mark_stopping(id, StopCause::Preempt { by, reason }, now);
        self.emit(Event::Preempted {
            job: id,
            by,
            reason,
        });
        if self.releases_at_once(id) {
            self.gpus_released(id, now);
        }
    }

    /// In a simulation, a victim with a zero stop delay is gone at once.
    pub(crate) fn releases_at_once(&self, id: JobId) -> bool {
        self.clock.acts_at_once() && self.job(id).is_some() && self.stop_delay(id) == 0
    }

    /// The replay's stop delay for a job: min(stopAfter, notice + grace) with its share's
    /// settings (no notice but for a preemption), as it was when the job's current stop
    /// began (SPEC §6, §14), or as it would be for a cancel now.
    pub fn stop_delay(&self, id: JobId) -> u32 {
        self.job(id).map_or(0, |j| match j.stop_delay {
            Some(d) if j.is_stopping() => d,
            _ => j
                .stop_after
                .min(self.plan_stop(j, StopCause::Cancel).longest()),
        })
    }

    /// The instant a stopping job's stop releases its GPUs in a simulation.
    pub fn release_instant(&self, id: JobId) -> Option<Time> {
        let j = self.job(id)?;
        Some(j.stopping_since()? + i64::from(self.stop_delay(id)))
    }

    fn release(&mut self, id: JobId, now: Time) {
        self.usage_released(id, now);
        self.unindex_holding(id);
        if let Some(j) = self.job_mut(id) {
            j.phase = Phase::Done;
            j.finished_at = Some(now);
        }
    }

    fn requeue(&mut self, id: JobId, lost: Option<Lost>) {
        if let Some(j) = self.job_mut(id) {
            j.phase = Phase::Pending { nominated: None };
            j.state = JobState::Runnable;
            j.finished_at = None;
        }
        self.index_pending(id);
        self.emit(Event::Requeued { job: id, lost });
    }

    fn attempt_failed(&mut self, id: JobId, reason: FailReason, now: Time) {
        let Some(j) = self.job_mut(id) else { return };
        j.failed_attempts += 1;
        // Only a preempted attempt keeps its place at the reservation (SPEC §3).
        j.reserved_start = false;
        if j.failed_attempts < j.spec.attempts() {
            self.requeue(id, None);
        } else {
            self.finish(id, JobState::Failed, Some(reason.clone()), now);
            self.emit(Event::Failed {
                job: id,
                reason,
                lost: None,
            });
        }
    }

    pub(crate) fn finish(
        &mut self,
        id: JobId,
        state: JobState,
        reason: Option<FailReason>,
        now: Time,
    ) {
        if let Some(j) = self.job_mut(id) {
            j.phase = Phase::Done;
            j.state = state;
            if reason.is_some() {
                j.fail_reason = reason;
            }
            j.finished_at = Some(now);
            self.ended(id);
        }
    }
}
