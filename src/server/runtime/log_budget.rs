//! Each user's log budget (`logs.maxMiBPerUser`, SPEC §7): one user's output cannot fill
//! the state filesystem for everyone. A thread sums, every [`EVERY`], the bytes of each
//! user's logs under `<state>/logs/` (the jobs the runtime says are theirs); when a user
//! holds their budget or more, each of their logs not yet marked gets a cut mark
//! (`<attempt>.log.cut`, saying why) that the supervisor's log sink looks for as it
//! writes. A new attempt may write what is left of its user's budget at its start
//! ([`LogBudget::room`]), so that one attempt never passes it between two sums. The
//! thread ends once its owner is gone.

use crate::exec::StateDir;
use crate::exec::state::log_sink::{UserLog, mib};
use crate::model::JobId;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How often the logs are summed.
pub(crate) const EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct Shared {
    /// Jobs that may have logs, with their submitter's uid and name.
    owners: HashMap<JobId, (u32, String)>,
    /// The budget in force (bytes); `None`: none.
    budget: Option<u64>,
    /// Each user's log bytes at the last sum.
    totals: HashMap<u32, u64>,
}

/// The users' log bytes, summed off the runtime task.
#[derive(Debug)]
pub(crate) struct LogBudget(Arc<Mutex<Shared>>);

impl LogBudget {
    /// Sum the logs of `state` every [`EVERY`], on a thread.
    pub(crate) fn watch(state: StateDir) -> LogBudget {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let weak = Arc::downgrade(&shared);
        let summer = move || {
            loop {
                std::thread::sleep(EVERY);
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                sweep(&state, &shared);
            }
        };
        let started = std::thread::Builder::new()
            .name("shareq-log-budget".into())
            .spawn(summer);
        if let Err(e) = started {
            // Each attempt is still held to what was left at its start.
            tracing::warn!("cannot sum the users' logs: {e}");
        }
        LogBudget(shared)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `job`'s logs are `uid`'s (`name`).
    pub(crate) fn owner(&self, job: JobId, uid: u32, name: &str) {
        self.lock().owners.insert(job, (uid, name.to_string()));
    }

    /// The bytes of `uid`'s logs at the last sum.
    pub(crate) fn held(&self, uid: u32) -> u64 {
        self.lock().totals.get(&uid).copied().unwrap_or(0)
    }

    /// Each user's log bytes at the last sum, by uid.
    pub(crate) fn totals(&self) -> HashMap<u32, u64> {
        self.lock().totals.clone()
    }

    /// `jobs` were pruned with their logs: they count no more.
    pub(crate) fn forget(&self, jobs: &[JobId]) {
        let mut s = self.lock();
        for j in jobs {
            s.owners.remove(j);
        }
    }

    /// What a new attempt of `job` (its user's `uid`, `name`) may write under `budget`
    /// (bytes; `None`: no budget), by the last sum; the job's logs count for its user
    /// from now on.
    pub(crate) fn room(
        &self,
        job: JobId,
        uid: u32,
        name: &str,
        budget: Option<u64>,
    ) -> Option<UserLog> {
        let mut s = self.lock();
        s.owners.insert(job, (uid, name.to_string()));
        s.budget = budget;
        let budget = budget?;
        let held = s.totals.get(&uid).copied().unwrap_or(0);
        Some(UserLog {
            user: name.to_string(),
            room: budget.saturating_sub(held),
            budget,
        })
    }
}

/// One sum: each user's log bytes, and a cut mark on each log of a user at the budget.
fn sweep(state: &StateDir, shared: &Mutex<Shared>) {
    let lock = || shared.lock().unwrap_or_else(PoisonError::into_inner);
    let (owners, budget) = {
        let s = lock();
        (s.owners.clone(), s.budget)
    };
    let mut totals: HashMap<u32, u64> = HashMap::new();
    let mut logs: HashMap<u32, Vec<PathBuf>> = HashMap::new();
    for (job, (uid, _)) in &owners {
        let Ok(dir) = std::fs::read_dir(state.job_logs(*job)) else {
            continue;
        };
        for entry in dir.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|x| x != "log") {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            *totals.entry(*uid).or_default() += meta.len();
            logs.entry(*uid).or_default().push(path);
        }
    }
    if let Some(budget) = budget {
        for (uid, &held) in &totals {
            if held < budget {
                continue;
            }
            let name = owners
                .values()
                .find(|(u, _)| u == uid)
                .map_or_else(|| uid.to_string(), |(_, n)| n.clone());
            let why = format!(
                "the logs of user {name} hold {}, their budget is {} (logs.maxMiBPerUser)",
                mib(held),
                mib(budget)
            );
            for log in logs.get(uid).into_iter().flatten() {
                let mark = UserLog::mark_of(log);
                if !mark.exists()
                    && let Err(e) = std::fs::write(&mark, &why)
                {
                    tracing::warn!("cannot mark {} to be cut: {e}", log.display());
                }
            }
        }
    }
    lock().totals = totals;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_at_the_budget_has_each_log_marked_and_no_room_left() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().to_path_buf());
        let b = LogBudget::watch(state.clone());
        for (job, len) in [(1, 600), (2, 500)] {
            let log = state.attempt_log(JobId(job), 1);
            std::fs::create_dir_all(log.parent().unwrap()).unwrap();
            std::fs::write(&log, vec![b'x'; len]).unwrap();
        }
        let other = state.attempt_log(JobId(3), 1);
        std::fs::create_dir_all(other.parent().unwrap()).unwrap();
        std::fs::write(&other, b"bob's").unwrap();
        // Nothing summed yet: the whole budget.
        let room = b.room(JobId(1), 1000, "alice", Some(1000)).unwrap();
        assert_eq!((room.room, room.budget), (1000, 1000));
        b.owner(JobId(2), 1000, "alice");
        b.owner(JobId(3), 1001, "bob");
        sweep(&state, &b.0);
        // 1100 bytes: both of alice's logs are marked, bob's is not.
        for job in [1, 2] {
            let mark = UserLog::mark_of(&state.attempt_log(JobId(job), 1));
            let why = std::fs::read_to_string(mark).unwrap();
            assert!(
                why.contains("user alice hold") && why.contains("logs.maxMiBPerUser"),
                "{why}"
            );
        }
        assert!(!UserLog::mark_of(&other).exists());
        assert_eq!(b.room(JobId(4), 1000, "alice", Some(1000)).unwrap().room, 0);
        assert_eq!(b.room(JobId(5), 1001, "bob", Some(1000)).unwrap().room, 995);
        assert!(b.room(JobId(5), 1001, "bob", None).is_none());
        // Pruned: alice's logs count no more.
        b.forget(&[JobId(1), JobId(2), JobId(4)]);
        sweep(&state, &b.0);
        assert_eq!(
            b.room(JobId(6), 1000, "alice", Some(1000)).unwrap().room,
            1000
        );
    }
}
