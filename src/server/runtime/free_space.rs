//! The state filesystem's free bytes for the reserve check of a submit (SPEC §8), read on
//! a thread of its own every [`EVERY`] so that the runtime task does not call `statvfs`
//! for each submit while there is room. Each accepted submit is charged what it will
//! take on disk ([`cost`]); near the reserve (the reading less what was charged since)
//! the filesystem is read again and the submits of the batch not yet committed are
//! counted, so that parallel submits never take the filesystem below the reserve, and a
//! refusal never rests on an old reading. The first reading is taken before the task
//! starts; the thread ends once the runtime is gone.

use crate::exec::StateDir;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often the free space is read again.
pub(crate) const EVERY: Duration = Duration::from_millis(250);

/// A reading no filesystem gives: the free space is not known (`statvfs` failed).
const UNKNOWN: u64 = u64::MAX;

/// Below this much above the reserve, every submit reads the filesystem again.
const NEAR: u64 = 16 << 20;

/// What a job takes on the state filesystem, at most: its command and env twice (the
/// write-ahead log, then the database) and its rows around them.
pub(crate) fn cost(spec: &crate::model::JobSpec) -> u64 {
    let jobs = spec.array_properties.map_or(1, |a| u64::from(a.size) + 1);
    (2 * spec.carried_bytes() as u64 + (4 << 10)).saturating_mul(jobs)
}

/// The latest reading, and what submits took since.
#[derive(Debug)]
pub(crate) struct FreeSpace {
    cell: Arc<AtomicU64>,
    /// Charged by submits since this task last read the filesystem itself (a newer
    /// reading of the thread already holds some: counting them again only reads sooner).
    spent: u64,
    /// Charged by submits not yet committed: in no reading.
    pending: u64,
}

impl FreeSpace {
    /// Read the free space of `state` now, then every [`EVERY`] on a thread.
    pub(crate) fn watch(state: StateDir) -> FreeSpace {
        let cell = Arc::new(AtomicU64::new(state.free_bytes().unwrap_or(UNKNOWN)));
        let weak = Arc::downgrade(&cell);
        let reader = move || {
            loop {
                std::thread::sleep(EVERY);
                let Some(cell) = weak.upgrade() else {
                    return;
                };
                cell.store(state.free_bytes().unwrap_or(UNKNOWN), Ordering::Relaxed);
            }
        };
        let started = std::thread::Builder::new()
            .name("shareq-free-space".into())
            .spawn(reader);
        if let Err(e) = started {
            // The first reading stays: the reserve is still checked, against it.
            tracing::warn!("cannot watch the state filesystem's free space: {e}");
        }
        FreeSpace {
            cell,
            spent: 0,
            pending: 0,
        }
    }

    /// Free bytes for unprivileged writers at the latest reading; `None` when unknown.
    pub(crate) fn latest(&self) -> Option<u64> {
        match self.cell.load(Ordering::Relaxed) {
            UNKNOWN => None,
            bytes => Some(bytes),
        }
    }

    /// Charge a write of `cost` bytes (a submit), unless it would leave less than
    /// `reserve` free: then the free bytes as judged (a fresh reading, less the batch not
    /// yet committed). Not known: no check, as no reading can tell.
    pub(crate) fn take(&mut self, cost: u64, reserve: u64, state: &StateDir) -> Result<(), u64> {
        let Some(latest) = self.latest() else {
            return Ok(());
        };
        let needed = reserve.saturating_add(cost);
        let mut free = latest.saturating_sub(self.spent);
        if free < needed.saturating_add(NEAR) {
            let fresh = state.free_bytes();
            self.cell.store(fresh.unwrap_or(UNKNOWN), Ordering::Relaxed);
            let Some(fresh) = fresh else {
                return Ok(());
            };
            self.spent = self.pending;
            free = fresh.saturating_sub(self.pending);
        }
        if free < needed {
            return Err(free);
        }
        self.spent += cost;
        self.pending += cost;
        Ok(())
    }

    /// The submits charged so far are committed: the filesystem shows them now.
    pub(crate) fn committed(&mut self) {
        self.pending = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reading_follows_the_filesystem_and_the_thread_ends_with_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().to_path_buf());
        let free = FreeSpace::watch(state.clone());
        let first = free.latest().expect("a reading");
        assert!(first > 0);
        // Taken again: a reading near the filesystem's own (others write meanwhile).
        std::thread::sleep(EVERY * 2);
        let again = free.latest().expect("a reading");
        let now = state.free_bytes().unwrap();
        assert!(again.abs_diff(now) < 1 << 30, "{again} vs {now}");
        let weak = Arc::downgrade(&free.cell);
        drop(free);
        std::thread::sleep(EVERY * 2);
        assert!(weak.upgrade().is_none(), "the reader let go");
        // A directory that is none: unknown, so no reserve is checked against it.
        let missing = StateDir::new(dir.path().join("missing"));
        let mut gone = FreeSpace::watch(missing.clone());
        assert_eq!(gone.latest(), None);
        assert_eq!(gone.take(1, u64::MAX - 1, &missing), Ok(()));
    }

    #[test]
    fn a_refusal_rests_on_a_fresh_reading_and_counts_the_batch() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().to_path_buf());
        let mut free = FreeSpace::watch(state.clone());
        let now = free.latest().unwrap();
        // Room: taken.
        assert_eq!(free.take(1, 0, &state), Ok(()));
        // An old reading says full, the filesystem has room: not refused, and the
        // reading is set right.
        free.cell.store(0, Ordering::Relaxed);
        assert_eq!(free.take(1, 1, &state), Ok(()));
        assert!(free.latest().unwrap() > 0);
        // Below a reserve larger than the filesystem: refused, with the fresh reading.
        let got = free.take(1, u64::MAX - 1, &state).unwrap_err();
        assert!(got.abs_diff(now) < 1 << 30, "{got} vs {now}");
        // The batch not yet committed counts: with the reserve 1 GiB under what is free,
        // one write of 600 MiB is taken, a second is not, until it is committed (and then
        // the filesystem itself says, here still with room: nothing was written). Others
        // may write meanwhile: the margins are hundreds of MiB.
        let mut free = FreeSpace::watch(state.clone());
        let room = state.free_bytes().unwrap();
        if room < 2 << 30 {
            eprintln!("skipped the batch check: {room} bytes free here");
            return;
        }
        let reserve = room - (1 << 30);
        assert_eq!(free.take(600 << 20, reserve, &state), Ok(()));
        let left = free.take(600 << 20, reserve, &state).unwrap_err();
        assert!(left < reserve + (600 << 20), "{left}");
        free.committed();
        assert_eq!(free.take(600 << 20, reserve, &state), Ok(()));
    }

    #[test]
    fn a_job_costs_its_command_and_env_twice() {
        let mut spec = crate::model::JobSpec::new("j", "a", 1, 0);
        spec.env.insert("E".into(), "x".repeat(60 << 10));
        assert!(cost(&spec) >= 2 * (60 << 10));
        assert!(cost(&spec) < 2 * (60 << 10) + (8 << 10));
    }
}
