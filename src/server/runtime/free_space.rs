//! The state filesystem's free bytes for the reserve check of a submit (SPEC §8), read on
//! a thread of its own every [`EVERY`] so that the runtime task does not call `statvfs`
//! for each submit while there is room. A reading below the reserve is confirmed by a
//! fresh one before a submit is refused: space just freed takes jobs again at once, and
//! a refusal never rests on an old reading. The first reading is taken before the task
//! starts; the thread ends once the runtime is gone.

use crate::exec::StateDir;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often the free space is read again.
pub(crate) const EVERY: Duration = Duration::from_millis(250);

/// A reading no filesystem gives: the free space is not known (`statvfs` failed).
const UNKNOWN: u64 = u64::MAX;

/// The latest reading.
#[derive(Debug)]
pub(crate) struct FreeSpace(Arc<AtomicU64>);

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
        FreeSpace(cell)
    }

    /// Free bytes for unprivileged writers at the latest reading; `None` when unknown.
    pub(crate) fn latest(&self) -> Option<u64> {
        match self.0.load(Ordering::Relaxed) {
            UNKNOWN => None,
            bytes => Some(bytes),
        }
    }

    /// The free bytes when they are below `reserve`, confirmed by reading `state` again
    /// (kept as the latest reading); `None` when there is room or it is not known.
    pub(crate) fn below(&self, reserve: u64, state: &StateDir) -> Option<u64> {
        self.latest().filter(|&free| free < reserve)?;
        let fresh = state.free_bytes();
        self.0.store(fresh.unwrap_or(UNKNOWN), Ordering::Relaxed);
        fresh.filter(|&free| free < reserve)
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
        let weak = Arc::downgrade(&free.0);
        drop(free);
        std::thread::sleep(EVERY * 2);
        assert!(weak.upgrade().is_none(), "the reader let go");
        // A directory that is none: unknown, so no reserve is checked against it.
        let missing = StateDir::new(dir.path().join("missing"));
        let gone = FreeSpace::watch(missing.clone());
        assert_eq!(gone.latest(), None);
        assert_eq!(gone.below(u64::MAX - 1, &missing), None);
    }

    #[test]
    fn a_refusal_rests_on_a_fresh_reading() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().to_path_buf());
        let free = FreeSpace::watch(state.clone());
        let now = free.latest().unwrap();
        // Room: no reading is taken, none refuses.
        assert_eq!(free.below(1, &state), None);
        // An old reading says full, the filesystem has room: not refused, and the
        // reading is set right.
        free.0.store(0, Ordering::Relaxed);
        assert_eq!(free.below(1, &state), None);
        assert!(free.latest().unwrap() > 0);
        // Below a reserve larger than the filesystem: refused, with the fresh reading.
        let got = free.below(u64::MAX - 1, &state).expect("below");
        assert!(got.abs_diff(now) < 1 << 30, "{got} vs {now}");
    }
}
