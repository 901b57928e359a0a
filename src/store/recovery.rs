//! Restart recovery (SPEC §8): decide, for each job that held GPUs, whether its supervisor
//! still runs (adopt it), finished while nobody watched (its recorded exit status), or
//! vanished (queue it again, `LOST_ON_RESTART`), from the attempt's run files (their
//! layout and formats are `exec::state::runfiles`'). What is left of a vanished supervisor's
//! attempt is killed before its GPUs are handed out again (SPEC §7).

use super::record::Observed;
use super::rows::Recovered;
use super::{Store, StoreError};
use crate::exec::containment::session;
use crate::exec::state::runfiles::{self, SupervisorStatus};
use crate::model::JobId;
use crate::sched::{Event, RestoredJob, Sched, Time};
use std::path::Path;
use std::time::Duration;

/// How long recovery waits for the processes of a vanished supervisor's attempt to die
/// after SIGKILL.
const LEFTOVER_WAIT: Duration = Duration::from_secs(10);

/// A supervisor found alive: the runtime watches it again (exit file, timers, and the
/// stop still under way when the job was being stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adopted {
    pub job: JobId,
    pub attempt: u32,
    pub pid: u32,
}

/// What a restart does, decided from the store and the run files.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryPlan {
    /// Every queued or holding job, in id order, for `Sched::restore_job`.
    pub restore: Vec<RestoredJob>,
    /// Jobs whose supervisor still runs: they keep their GPUs.
    pub adopted: Vec<Adopted>,
    /// Exits and releases that happened while nobody watched, to feed after restoring.
    pub observed: Vec<Observed>,
    /// Jobs requeued with reason `LOST_ON_RESTART` (restored as queued).
    pub lost: Vec<JobId>,
    /// The first id a new submission may take.
    pub next_job_id: JobId,
    /// Jobs that ended SUCCEEDED and arrays (parent, size), for dependencies (SPEC §13).
    pub succeeded: Vec<JobId>,
    pub arrays: Vec<(JobId, u32)>,
}

/// Classify every recovered job. Jobs being stopped whose processes are gone count as
/// released (their stop is complete), not lost.
pub fn plan(state_dir: &Path, recovered: &Recovered) -> RecoveryPlan {
    plan_with(state_dir, recovered, None)
}

/// [`plan`], with the Slurm executor's view (SPEC §10): `live` says whether Slurm still
/// runs an attempt's batch job (found by name). Then a supervisor is alive when its job
/// is, whatever this machine's `/proc` says (it may run on another node), and nothing is
/// killed here (the processes are not on this machine). A gang's attempt (SPEC §16)
/// ended when each of its ranks' records has its status; while its job is live it is
/// adopted whole, and its ranks left without a status when it is not are lost.
pub fn plan_with(
    state_dir: &Path,
    recovered: &Recovered,
    live: Option<&dyn Fn(JobId, u32) -> bool>,
) -> RecoveryPlan {
    let mut p = RecoveryPlan {
        restore: Vec::with_capacity(recovered.jobs.len()),
        adopted: Vec::new(),
        observed: Vec::new(),
        lost: Vec::new(),
        next_job_id: JobId(recovered.max_job_id.0 + 1),
        succeeded: recovered.succeeded.clone(),
        arrays: recovered.arrays.clone(),
    };
    for job in &recovered.jobs {
        let Some(h) = &job.holding else {
            p.restore.push(job.restored(false));
            continue;
        };
        let stopping = h.stopping.is_some();
        let owner = &recovered.owner;
        if let Some(live) = live {
            // A gang (SPEC §16) has ended when every rank has its status.
            let exit = match job.spec.num_nodes.filter(|&n| n > 1) {
                Some(n) => runfiles::read_gang_exit(state_dir, job.id, h.attempt, n, owner),
                None => runfiles::read_exit(state_dir, job.id, h.attempt, owner),
            };
            let status = match exit {
                Some(st) => SupervisorStatus::Exited(st),
                None if live(job.id, h.attempt) => SupervisorStatus::Alive { pid: 0 },
                None => SupervisorStatus::Vanished { session: None },
            };
            p.take(job, h.attempt, stopping, status);
            continue;
        }
        let mut status = runfiles::probe(state_dir, job.id, h.attempt, owner);
        if status == (SupervisorStatus::Vanished { session: None })
            && !runfiles::AttemptRecord::claimed(state_dir, job.id, h.attempt)
            && !matches!(
                runfiles::claim_lost(state_dir, job.id, h.attempt, &owner.db),
                Ok(true)
            )
        {
            // A supervisor was starting while the scheduler died: it has written its pid
            // file just now. Look again (a failed claim also ends here, and then the
            // supervisor, which checks the same file, decides).
            status = runfiles::probe(state_dir, job.id, h.attempt, owner);
        }
        if let SupervisorStatus::Vanished { session: Some(sid) } = status
            && !session::kill_and_wait(sid, LEFTOVER_WAIT)
        {
            tracing::error!(job = %job.id, session = sid, "processes of a vanished supervisor's attempt survive SIGKILL");
        }
        p.take(job, h.attempt, stopping, status);
    }
    p
}

impl RecoveryPlan {
    /// What becomes of one holding job, by what its supervisor's status says.
    fn take(
        &mut self,
        job: &super::rows::StoredJob,
        attempt: u32,
        stopping: bool,
        status: SupervisorStatus,
    ) {
        match status {
            SupervisorStatus::Alive { pid } => self.adopted.push(Adopted {
                job: job.id,
                attempt,
                pid,
            }),
            SupervisorStatus::Exited(st) if stopping => self.observed.push(Observed::Released {
                job: job.id,
                code: Some(st.code),
            }),
            SupervisorStatus::Exited(st) => self
                .observed
                .push(Observed::ended(job.id, st.code, st.signal)),
            SupervisorStatus::Vanished { .. } if stopping => {
                self.observed.push(Observed::Released {
                    job: job.id,
                    code: None,
                })
            }
            SupervisorStatus::Vanished { .. } => {
                self.lost.push(job.id);
                self.restore.push(job.restored(false));
                return;
            }
        }
        self.restore.push(job.restored(true));
    }
}

impl RecoveryPlan {
    /// Carry the plan out on a fresh scheduler (config applied, nothing submitted yet):
    /// record the `LOST_ON_RESTART` requeues, restore every job, feed the exits that came
    /// while nobody watched, run one pass and record it. Returns that pass's decisions,
    /// already stored, for the runtime to carry out.
    pub fn apply(
        &self,
        store: &mut Store,
        sched: &mut Sched,
        now: Time,
    ) -> Result<Vec<Event>, StoreError> {
        store.record_lost(now, &self.lost)?;
        sched.reserve_ids_below(self.next_job_id);
        sched.restore_history(self.succeeded.iter().copied(), self.arrays.iter().copied());
        for r in &self.restore {
            sched
                .restore_job(r.clone(), now)
                .map_err(|e| StoreError::bad_record(store.path(), e.to_string()))?;
        }
        // Usage before the jobs' exits: an exit that came while nobody watched releases
        // GPUs the restored figure counts up to its instant.
        sched.restore_usage(&store.user_usage()?, now);
        for o in &self.observed {
            o.apply(sched, now);
        }
        sched.pass(now);
        let events = sched.take_events();
        store.record(now, &self.observed, &events, sched)?;
        Ok(events)
    }
}
