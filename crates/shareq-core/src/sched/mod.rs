//! The pure scheduling core (SPEC §1.3-§4): a deterministic state machine with no clock,
//! no I/O and no threads.
//!
//! Inputs go in through methods (`submit`, `cancel`, `set_priority`, `apply_config`,
//! `job_exited`, `gpus_released`, `checkpoint`, `device_lost`, `timeout`), and `pass` runs one
//! scheduling pass. Every decision is appended to an outbox of [`Event`]s that the caller
//! drains with [`Sched::take_events`]. `shareq replay` drives it on simulated seconds;
//! the live runtime on wall-clock milliseconds. The time unit is the caller's: the core
//! only compares instants.
//!
//! The state is kept incrementally: per share and unit a [`state::Lane`] holds the queue
//! in scheduling order, the queue by quantity and the running jobs in victim order, and
//! each unit keeps the totals that `available` needs. A pass therefore touches a handful
//! of index entries per decision instead of rescanning every job.

mod accounting;
mod clock;
mod event;
mod fair;
mod inputs;
mod install;
mod keys;
mod links;
mod pass;
mod place;
mod preempt;
pub mod queue;
mod reasons;
mod rejection;
mod report;
mod reserve;
mod restore;
pub mod state;
mod wake;

pub use clock::Clock;
pub use event::Event;
pub use fair::{SavedUsage, UserStanding};
pub use keys::{QKey, Time};
pub use links::UnknownRef;
pub use links::{ArrayCounts, DepStatus, array_state, counts_text};
pub use rejection::{LargerThanAnyNode, PriorityError, Rejection, is_larger_than_any_node};
pub use report::{LendEdge, ShareUnitStats};
pub use reserve::{Backfill, Declared, Reservation, RunGuess};
pub use restore::RestoreError;
pub use restore::{RestoredHolding, RestoredJob};
pub use state::{
    ArrayLink, Checkpoint, FailReason, Job, Lost, Phase, PreemptReason, StopCause, StopPlan,
};

use crate::model::{JobId, UnitCapacity, ValidConfig};
use keys::{NodeIx, ShareIx, UnitIx};
use state::{NodeState, ShareState, UnitState};
use std::collections::HashMap;

/// The scheduler.
#[derive(Debug, Clone)]
pub struct Sched {
    /// Slab of jobs: index = id - 1. Forgotten jobs leave `None`.
    jobs: Vec<Option<state::Job>>,
    units: Vec<UnitState>,
    unit_ix: HashMap<String, UnitIx>,
    /// Nodes by stable index (SPEC §10); one implicit node without `nodes`.
    nodes: Vec<NodeState>,
    node_ix: HashMap<String, NodeIx>,
    /// The config lists `nodes`: placement and `waiting` are judged per node, and the
    /// events say which node a job started on.
    multi_node: bool,
    /// Pending gangs (SPEC §16), nominated or not: the quantity-indexed searches of steps 1
    /// to 3 judge one node's room, so gangs are judged apart, one by one (they are few).
    gangs: std::collections::BTreeSet<JobId>,
    shares: Vec<ShareState>,
    share_ix: HashMap<String, ShareIx>,
    /// Share indexes in name order (lent attribution and stable output).
    share_order: Vec<ShareIx>,
    next_id: u64,
    start_seq: u64,
    grace: u32,
    /// `preemption.spreadSeconds` in the driver's instants (SPEC §4.1): the victim order's
    /// credit per past preemption.
    spread: Time,
    /// `reserveAfterSeconds` in the driver's instants (SPEC §3); 0 = never.
    reserve_after: Time,
    /// Backfill under a reservation: a study, off by default (`sched::reserve`).
    backfill: reserve::Backfill,
    /// Some share has a minimum runtime (else no candidate is ever protected: the victim
    /// walk skips the per-candidate check).
    protections: bool,
    /// Whose clock the instants are on: it gives the time unit (so that
    /// `minRuntimeSeconds` can be compared with instants) and whether starts and stops
    /// take time.
    clock: Clock,
    /// Local time minus UTC, in seconds, for the times of day reasons name (live only).
    utc_offset_secs: i32,
    env_name: String,
    events: Vec<Event>,
    now: Time,
    /// Lapse retries (SPEC §3): (instant, job id, attempts started at the lapse), one
    /// second after each lapse.
    retries: std::collections::BTreeSet<(Time, u64, u32)>,
    /// Jobs others wait for (SPEC §13), by id: the PENDING jobs that wait for each.
    dependents: HashMap<u64, Vec<JobId>>,
    /// Bit set of the ids that ended SUCCEEDED (dependencies on forgotten jobs).
    succeeded: Vec<u64>,
    /// Every array: parent id → number of children.
    arrays: std::collections::BTreeMap<u64, u32>,
    /// Jobs that ended and whose dependents and parent are still to be told.
    settling: std::collections::VecDeque<JobId>,
    draining: bool,
}

impl Sched {
    /// A scheduler for `config`, with the devices each unit has.
    /// How far local time is from UTC (seconds), so that a reason naming a time of day
    /// (`reserved … since 14:02`) reads as the operator's clock does. The core reads no
    /// clock or time zone itself.
    pub fn set_utc_offset(&mut self, secs: i32) {
        self.utc_offset_secs = secs;
    }

    pub fn new(config: &ValidConfig, capacity: &[UnitCapacity], clock: Clock) -> Sched {
        let mut s = Sched {
            jobs: Vec::new(),
            units: Vec::new(),
            unit_ix: HashMap::new(),
            nodes: Vec::new(),
            node_ix: HashMap::new(),
            multi_node: false,
            gangs: std::collections::BTreeSet::new(),
            shares: Vec::new(),
            share_ix: HashMap::new(),
            share_order: Vec::new(),
            next_id: 1,
            start_seq: 0,
            grace: 30,
            spread: 3600,
            reserve_after: 86400,
            backfill: reserve::Backfill::Off,
            protections: false,
            clock,
            utc_offset_secs: 0,
            env_name: String::new(),
            events: Vec::new(),
            now: 0,
            retries: Default::default(),
            dependents: HashMap::new(),
            succeeded: Vec::new(),
            arrays: Default::default(),
            settling: Default::default(),
            draining: false,
        };
        s.install_config(config, capacity, 0);
        s
    }

    /// Drain the decisions and reports made since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// The decisions made since the last `take_events`, without draining them.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub fn job(&self, id: JobId) -> Option<&state::Job> {
        let ix = usize::try_from(id.0.checked_sub(1)?).ok()?;
        self.jobs.get(ix)?.as_ref()
    }

    pub(crate) fn job_mut(&mut self, id: JobId) -> Option<&mut state::Job> {
        let ix = usize::try_from(id.0.checked_sub(1)?).ok()?;
        self.jobs.get_mut(ix)?.as_mut()
    }

    /// Every job the scheduler still remembers, in id order.
    pub fn jobs(&self) -> impl Iterator<Item = &state::Job> {
        self.jobs.iter().flatten()
    }

    /// Drop a finished job from memory (the store keeps the history).
    pub fn forget(&mut self, id: JobId) {
        if self.job(id).is_some_and(|j| j.state.is_finished())
            && let Some(ix) = id.0.checked_sub(1)
            && let Some(slot) = self.jobs.get_mut(ix as usize)
        {
            *slot = None;
        }
    }

    /// The id the next accepted submission gets.
    pub fn next_job_id(&self) -> JobId {
        JobId(self.next_id)
    }

    /// Ids below `id` are never handed out again (recovery continues the sequence).
    pub fn reserve_ids_below(&mut self, id: JobId) {
        self.next_id = self.next_id.max(id.0);
    }

    pub fn grace_period_seconds(&self) -> u32 {
        self.grace
    }

    /// The instant until which a running job is protected by its share's minimum runtime
    /// (SPEC §11), if it is; `None` for jobs not holding GPUs, being stopped, or of a share
    /// without one.
    pub fn protected_until(&self, id: JobId) -> Option<Time> {
        let j = self.job(id)?;
        let min = self.shares[j.share].min_runtime;
        if min == 0 || j.is_stopping() {
            return None;
        }
        Some(j.started_at()? + i64::from(min) * self.clock.ticks_per_second())
    }

    /// Is a running job still protected at the current instant?
    pub(crate) fn is_protected(&self, id: JobId) -> bool {
        self.protections
            && self
                .protected_until(id)
                .is_some_and(|until| until > self.now)
    }

    /// The earliest end of a minimum-runtime protection after `now`: the live runtime runs
    /// a pass then (SPEC §11: the end of a protection makes an instant).
    /// Costs the running jobs of the shares that have a minimum runtime, not the queue.
    pub fn next_protection_end(&self, now: Time) -> Option<Time> {
        if !self.protections {
            return None;
        }
        self.shares
            .iter()
            .filter(|s| s.min_runtime > 0)
            .flat_map(|s| s.lanes.iter().flat_map(|l| l.running.iter()))
            .filter_map(|k| self.protected_until(JobId(k.id)))
            .filter(|&t| t > now)
            .min()
    }

    /// Instants per second of the driver's clock.
    pub fn ticks_per_second(&self) -> i64 {
        self.clock.ticks_per_second()
    }

    pub fn env_name(&self) -> &str {
        &self.env_name
    }

    pub fn share_name(&self, s: ShareIx) -> &str {
        &self.shares[s].name
    }

    /// A share's name by index, if the index exists.
    pub fn share_name_checked(&self, s: ShareIx) -> Option<&str> {
        self.shares.get(s).map(|sh| sh.name.as_str())
    }

    pub fn unit_name(&self, u: UnitIx) -> &str {
        &self.units[u].name
    }

    /// A node's name by index.
    pub fn node_name(&self, n: NodeIx) -> &str {
        self.nodes.get(n).map_or("?", |x| x.name.as_str())
    }

    /// The config lists `nodes` (SPEC §10).
    pub fn has_nodes(&self) -> bool {
        self.multi_node
    }

    /// Is unit u placed slot by slot (SPEC §10, §15): with `nodes`, or sliced by memory?
    /// Then `waiting` counts only work some slot has room for, the victim walk goes slot
    /// by slot, and `FRAGMENTED` says so. Without either there is one slot and these
    /// rules change nothing.
    pub(crate) fn slotted(&self, u: UnitIx) -> bool {
        self.multi_node || self.units.get(u).is_some_and(|x| x.slice.is_some())
    }

    /// The GiB of each device of a unit sliced by memory (SPEC §15); `None`: whole GPUs.
    pub fn slice_of(&self, u: UnitIx) -> Option<u32> {
        self.units.get(u).and_then(|x| x.slice)
    }

    /// A sliced unit's `overuse` (SPEC §15): whether a job over its GiB is stopped.
    pub fn overuse_stops(&self, u: UnitIx) -> bool {
        self.units
            .get(u)
            .is_some_and(|x| x.slice.is_some() && x.overuse == crate::model::Overuse::Stop)
    }

    /// Where a holding job runs: each of its nodes (by name) with its devices there, in
    /// node order (rank order for a gang, SPEC §16); one entry for a plain job. Empty
    /// unless it holds. A sliced job's entry names its one device.
    pub fn job_places(&self, j: &state::Job) -> Vec<(String, Vec<u32>)> {
        let state::Phase::Holding {
            slot,
            devices,
            more,
            ..
        } = &j.phase
        else {
            return Vec::new();
        };
        let node_of = |s: keys::SlotIx| {
            self.units
                .get(j.unit)
                .and_then(|u| u.slots.get(s))
                .map_or(s, |sl| sl.node)
        };
        std::iter::once((*slot, devices))
            .chain(more.iter().map(|(s, d)| (*s, d)))
            .map(|(s, d)| (self.node_name(node_of(s)).to_string(), d.clone()))
            .collect()
    }

    /// The node a holding job runs on (a gang's first node).
    pub fn job_node(&self, j: &state::Job) -> Option<NodeIx> {
        let slot = j.slot()?;
        Some(
            self.units
                .get(j.unit)
                .and_then(|u| u.slots.get(slot))
                .map_or(slot, |s| s.node),
        )
    }

    /// How a slot reads: its node, and for a sliced device `device 1` (on its node with
    /// `nodes`).
    pub(crate) fn slot_name(&self, u: UnitIx, slot: keys::SlotIx) -> String {
        let Some(sl) = self.units.get(u).and_then(|x| x.slots.get(slot)) else {
            return self.node_name(slot).to_string();
        };
        match sl.device {
            None => self.node_name(sl.node).to_string(),
            Some(d) if self.multi_node => format!("{} device {d}", self.node_name(sl.node)),
            Some(d) => format!("device {d}"),
        }
    }

    /// Names of the nodes in the applied config, in listing order.
    pub fn node_names(&self) -> impl Iterator<Item = &str> {
        self.nodes
            .iter()
            .filter(|n| n.present)
            .map(|n| n.name.as_str())
    }

    /// Names of the shares in the applied config, in name order.
    pub fn share_names(&self) -> impl Iterator<Item = &str> {
        self.share_order
            .iter()
            .filter(|&&s| self.shares[s].present)
            .map(|&s| self.shares[s].name.as_str())
    }

    /// Names of the units in the applied config.
    pub fn unit_names(&self) -> impl Iterator<Item = &str> {
        self.units
            .iter()
            .filter(|u| u.present)
            .map(|u| u.name.as_str())
    }

    /// RUNNABLE jobs in global scheduling order (priority, effective submission,
    /// submission, id), as of the last pass.
    pub fn queue(&self) -> Vec<JobId> {
        let mut keys: Vec<QKey> = self
            .shares
            .iter()
            .flat_map(|s| s.lanes.iter())
            .flat_map(|l| l.queue.keys())
            .collect();
        keys.sort_unstable();
        keys.into_iter().map(|k| k.job()).collect()
    }

    /// Number of RUNNABLE jobs.
    pub fn queue_len(&self) -> usize {
        self.shares
            .iter()
            .flat_map(|s| s.lanes.iter())
            .map(|l| l.queue.len())
            .sum()
    }

    pub(crate) fn alloc_id(&mut self) -> JobId {
        let id = JobId(self.next_id);
        self.next_id += 1;
        id
    }

    pub(crate) fn insert_job(&mut self, job: state::Job) {
        let ix = (job.id.0 - 1) as usize;
        if self.jobs.len() <= ix {
            self.jobs.resize_with(ix + 1, || None);
        }
        self.jobs[ix] = Some(job);
    }

    /// A job's key in the share's and the global order, with its user's penalty.
    pub fn qkey(&self, j: &state::Job) -> QKey {
        j.base_key().shift(self.shares[j.share].users.pen(j.user))
    }

    /// A job's place in the victim order under the applied `spreadSeconds`.
    pub(crate) fn vkey(&self, j: &state::Job) -> Option<state::VKey> {
        j.vkey(self.spread)
    }

    fn emit(&mut self, e: Event) {
        self.events.push(e);
        // What waits for a job that just ended hears of it right after the job's own
        // event (SPEC §13: down the chain, in the same batch).
        if !self.settling.is_empty() {
            self.settle();
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ckpt;
#[cfg(test)]
mod tests_slice;
