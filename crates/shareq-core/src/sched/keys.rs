//! The scheduler's index types, its instant and the queue key: the leaf the state, the
//! fair-share accounts, the queues and the reservations all build on, importing none of
//! them (so those modules import one way: `state` → `fair`/`queue`/`reserve` → here).

use crate::model::{JobId, MAX_PRIORITY};

/// An instant, in the driver's unit (seconds in replay, milliseconds live).
pub type Time = i64;

/// A share's index in the scheduler's share table.
pub type ShareIx = usize;
/// A unit's index in the scheduler's unit table.
pub type UnitIx = usize;
/// A node's index: its place in the config's `nodes` list (SPEC §10), stable across
/// reloads by name.
pub type NodeIx = usize;
/// A slot's index in its unit's slot table: where a job's GPUs all are, and what
/// placement, nominations and the victim walk go over (SPEC §10, §15). For a whole-GPU
/// unit a slot is a node (the same index); for a unit sliced by memory, one device
/// (node, unit, index) whose room is its unassigned GiB.
pub type SlotIx = usize;

/// Global scheduling order: priority descending, then *effective* submission time (SPEC
/// §12: the submission time plus the user's fair-share penalty, in thousandths of an
/// instant; the submission time itself without `fairShare`), then submission time, then
/// job id.
///
/// The lanes store each job's *base* key (no penalty); a key handed out by a lane is
/// shifted by its user's current penalty ([`QKey::shift`]), and every comparison between
/// keys is between shifted ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QKey {
    pub inv_prio: u32,
    pub eff: i64,
    pub submitted: Time,
    pub id: u64,
}

/// `QKey::eff` counts thousandths of an instant, so that a penalty of half a second still
/// orders two jobs in replay.
pub const EFF_SCALE: i64 = 1000;

impl QKey {
    pub fn new(priority: u32, submitted: Time, id: JobId) -> QKey {
        QKey {
            inv_prio: MAX_PRIORITY - priority.min(MAX_PRIORITY),
            eff: submitted.saturating_mul(EFF_SCALE),
            submitted,
            id: id.0,
        }
    }
    pub fn priority(&self) -> u32 {
        MAX_PRIORITY - self.inv_prio
    }
    /// The FIFO key used between shares in step 2 (the plain submission time, SPEC §12).
    pub fn fifo(&self) -> (Time, u64) {
        (self.submitted, self.id)
    }
    pub fn job(&self) -> JobId {
        JobId(self.id)
    }
    /// The key moved later by a penalty (in `EFF_SCALE` units).
    pub fn shift(self, pen: i64) -> QKey {
        QKey {
            eff: self.eff.saturating_add(pen),
            ..self
        }
    }
    /// The key moved earlier by a penalty: a shifted key back in its bucket's base order.
    pub fn unshift(self, pen: i64) -> QKey {
        QKey {
            eff: self.eff.saturating_sub(pen),
            ..self
        }
    }
    /// The smallest and largest keys of a priority level.
    pub fn level_bounds(inv_prio: u32) -> (QKey, QKey) {
        (
            QKey {
                inv_prio,
                eff: i64::MIN,
                submitted: Time::MIN,
                id: 0,
            },
            QKey {
                inv_prio,
                eff: i64::MAX,
                submitted: Time::MAX,
                id: u64::MAX,
            },
        )
    }
}
