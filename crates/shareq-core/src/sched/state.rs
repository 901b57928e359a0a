//! The scheduler's state: jobs, per-unit capacity, per-share lanes and the ordered indexes
//! that let a pass find the next startable job without rescanning the queue.

use super::keys::{NodeIx, QKey, ShareIx, SlotIx, Time, UnitIx};
use crate::model::{JobId, JobSpec, JobState, Strategy};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// Victim-candidate order (SPEC §4.1, §14): lowest priority first, then the latest
/// *effective last save* first (the current attempt's last checkpoint report, or its start
/// when it has none, minus `spreadSeconds` per preemption so far: the attempt that loses
/// the least work goes first, and a job preempted again and again is spared as if it had
/// run longer), then the later start (by start sequence) first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VKey {
    pub prio: u32,
    pub effective: Reverse<Time>,
    pub started: Reverse<u64>,
    pub id: u64,
}

/// Why a job holding GPUs is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    Preempt {
        by: Option<JobId>,
        reason: PreemptReason,
    },
    Cancel,
    Timeout,
    /// Its processes held more GPU memory than its slice, with `overuse: STOP` (SPEC §15).
    OverMemory,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PreemptReason {
    CrossShareReclaim,
    InSharePriority,
    DeviceLost,
}

impl PreemptReason {
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptReason::CrossShareReclaim => "CROSS_SHARE_RECLAIM",
            PreemptReason::InSharePriority => "IN_SHARE_PRIORITY",
            PreemptReason::DeviceLost => "DEVICE_LOST",
        }
    }
}

/// How a stop goes, fixed when it begins (SPEC §14: a share's settings are read when the
/// stop begins; a reload changes only later stops).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopPlan {
    /// The notice sent first, for a preemption of a job whose share has one (never for a
    /// cancel, a timeout or `DEVICE_LOST`).
    pub notice: Option<crate::model::Notice>,
    /// Seconds from SIGTERM to SIGKILL.
    pub grace: u32,
}

impl StopPlan {
    /// Seconds from the stop's first signal to SIGTERM.
    pub fn notice_seconds(&self) -> u32 {
        self.notice.map_or(0, |n| n.seconds)
    }

    /// The longest a stop may take, from its first signal to SIGKILL, in seconds.
    pub fn longest(&self) -> u32 {
        self.notice_seconds().saturating_add(self.grace)
    }
}

/// The work a preemption lost (SPEC §14): the victim's GPUs × (the release of its GPUs −
/// its attempt's last save), reported with the `requeued` or `failed` that ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    pub gpus: u32,
    /// The attempt's last save: its latest checkpoint report, or its start.
    pub since: Time,
    /// The release of its GPUs.
    pub until: Time,
    /// The attempt had reported a checkpoint (`since` is that report, not the start).
    pub checkpointed: bool,
    /// The stop began with a notice.
    pub noticed: bool,
}

impl Lost {
    /// GPUs × instants lost (GPU-seconds on a clock of seconds).
    pub fn gpu_ticks(&self) -> i64 {
        i64::from(self.gpus).saturating_mul(self.until.saturating_sub(self.since).max(0))
    }
}

/// A victim of a nomination: the job and the attempt that was stopped for it. A victim
/// counts as "still releasing GPUs for this preemption" (SPEC §3) only while that same
/// attempt is being stopped: once it has released its GPUs (and maybe started again) it
/// no longer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VictimRef {
    pub job: JobId,
    pub attempt: u32,
}

/// A nominated job's claim (SPEC §4.4, §10, §15): the victims it waits for and the slot
/// (node, or sliced device) they run on, where it will start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nomination {
    pub victims: Vec<VictimRef>,
    pub slot: SlotIx,
    /// A gang's other nodes (SPEC §16), after `slot`, in node order; empty for a plain job.
    pub more: Vec<SlotIx>,
}

impl Nomination {
    /// Every slot the nomination sets room aside on.
    pub fn slots(&self) -> impl Iterator<Item = SlotIx> + '_ {
        std::iter::once(self.slot).chain(self.more.iter().copied())
    }
}

/// Where a job is in its life, from the scheduler's point of view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// RUNNABLE. `nominated` holds the victims it is waiting for (SPEC §4.4).
    Pending { nominated: Option<Nomination> },
    /// SCHEDULED / STARTING / RUNNING: holds `devices` of `slot` until they are released;
    /// on a sliced device, `gib` are the GiB of it that the job holds (numbered 0..memoryGiB
    /// on that device; none for a whole-GPU unit).
    Holding {
        slot: SlotIx,
        devices: Vec<u32>,
        gib: Vec<u32>,
        start_seq: u64,
        started_at: Time,
        stopping: Option<(StopCause, Time)>,
        /// A gang's other nodes and its devices on each (SPEC §16), after `slot` in node
        /// order (its ranks 1..N−1); empty for a plain job.
        more: Vec<(SlotIx, Vec<u32>)>,
    },
    /// PENDING (SPEC §13): waits for its dependencies; in no queue, no index.
    Dependent,
    /// An array's parent (SPEC §13): never scheduled; its children are.
    Parent,
    /// SUCCEEDED or FAILED.
    Done,
}

/// A job's place in an array (SPEC §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayLink {
    /// The parent of `size` children, ids `id + 1 ..= id + size`; `left`: children not
    /// ended yet, `failed`: children that ended FAILED.
    Parent { size: u32, left: u32, failed: u32 },
    /// Child `index` of `parent` (id `parent + 1 + index`).
    Child { parent: JobId, index: u32 },
}

/// Why a job ended in FAILED.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailReason {
    PreemptionRetriesExhausted,
    NonZeroExit(i32),
    /// Its command was killed by this signal, not by shareq (from outside: an admin, the
    /// kernel's OOM killer). Its code is NON_ZERO_EXIT's, the API's reason code.
    Signalled(i32),
    Timeout,
    /// Stopped for holding more GPU memory than its slice (SPEC §15); never retried.
    OverMemory,
    Cancelled(String),
    /// A job it depends on ended FAILED (SPEC §13): `label` is how that job is named
    /// (`12`, or `12:3` for an array's child).
    DependencyFailed {
        job: JobId,
        label: String,
    },
    /// An array parent whose children ended with `failed` of `size` FAILED.
    ChildrenFailed {
        failed: u32,
        size: u32,
    },
}

impl FailReason {
    pub fn code(&self) -> &'static str {
        match self {
            FailReason::PreemptionRetriesExhausted => "PREEMPTION_RETRIES_EXHAUSTED",
            FailReason::NonZeroExit(_) | FailReason::Signalled(_) => "NON_ZERO_EXIT",
            FailReason::Timeout => "TIMEOUT",
            FailReason::OverMemory => "OVER_MEMORY",
            FailReason::Cancelled(_) => "CANCELLED",
            FailReason::DependencyFailed { .. } => "DEPENDENCY_FAILED",
            FailReason::ChildrenFailed { .. } => "ARRAY_CHILDREN_FAILED",
        }
    }

    /// The signal that killed the command from outside, by name (`SIGKILL`), when one did.
    pub fn signal(&self) -> Option<String> {
        match self {
            FailReason::Signalled(sig) => Some(signal_name(*sig)),
            _ => None,
        }
    }

    /// The signal's name in a reason as [`FailReason`]'s `Display` wrote it (a stored
    /// job's `NON_ZERO_EXIT: killed by SIGKILL (not by shareq)`), when it names one.
    pub fn signal_in(shown: &str) -> Option<&str> {
        shown
            .strip_prefix(KILLED_BY)?
            .strip_suffix(NOT_BY_SHAREQ)
            .filter(|name| !name.is_empty())
    }
}

/// How [`FailReason::Signalled`] reads: `NON_ZERO_EXIT: killed by SIGKILL (not by shareq)`.
const KILLED_BY: &str = "NON_ZERO_EXIT: killed by ";
const NOT_BY_SHAREQ: &str = " (not by shareq)";

/// `SIGKILL` for 9: the signals a job is commonly killed by, by their Linux numbers;
/// `signal 42` for the others.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

impl std::fmt::Display for FailReason {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            FailReason::NonZeroExit(c) => write!(f, "NON_ZERO_EXIT (exit code {c})"),
            FailReason::Signalled(sig) => {
                write!(f, "{KILLED_BY}{}{NOT_BY_SHAREQ}", signal_name(*sig))
            }
            FailReason::Cancelled(by) => write!(f, "CANCELLED: by {by}"),
            FailReason::DependencyFailed { label, .. } => {
                write!(f, "DEPENDENCY_FAILED: job {label} FAILED")
            }
            FailReason::ChildrenFailed { failed, size } => {
                write!(
                    f,
                    "ARRAY_CHILDREN_FAILED: {failed} of {size} children failed"
                )
            }
            other => f.write_str(other.code()),
        }
    }
}

/// One job, as the scheduler sees it.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: JobId,
    /// Shared, so that a copy of the scheduler (forecasts, dry runs) does not copy every
    /// job's command and environment.
    pub spec: std::sync::Arc<JobSpec>,
    pub share: ShareIx,
    pub unit: UnitIx,
    /// GPUs in all: for a gang (SPEC §16) `nodes` × its per-node quantity, the figure
    /// every count uses.
    pub quantity: u32,
    /// Distinct nodes it runs on: 1, or a gang's `numNodes` (SPEC §16).
    pub nodes: u32,
    pub priority: u32,
    pub submitted: Time,
    pub state: JobState,
    pub phase: Phase,
    /// Times the job was preempted (its GPUs released after a preemption).
    pub preempted_count: u32,
    /// Attempts that ended in a non-zero exit (or a timeout).
    pub failed_attempts: u32,
    /// Attempts started so far.
    pub attempts_started: u32,
    pub fail_reason: Option<FailReason>,
    /// The instant its last nomination lapsed: it may not preempt again at that instant.
    pub lapsed_at: Option<Time>,
    /// Its latest attempt started while it held its unit's reservation and, if it ended,
    /// was preempted (SPEC §3): pending again, it takes the reservation back as soon as it
    /// is first again, without a new wait.
    pub reserved_start: bool,
    /// The submitter's index among its share's users (SPEC §12).
    pub user: u32,
    /// The lane bucket the job is indexed in: `user` where the share orders or caps by
    /// user, else 0.
    pub bucket: u32,
    /// Replay only: seconds the job takes to exit after SIGTERM.
    pub stop_after: u32,
    /// Replay only: the stop delay fixed when the current stop began (SPEC §6: a reload
    /// that changes `gracePeriodSeconds` affects only stops that begin later).
    pub stop_delay: Option<u32>,
    /// The current stop's notice and grace, fixed when it began (SPEC §14).
    pub stop_plan: Option<StopPlan>,
    /// The current attempt's last checkpoint report (SPEC §14); `None` until it reports.
    pub last_save: Option<Time>,
    /// GPUs × ticks lost over all its preemptions so far (SPEC §14: each one's
    /// [`Lost::gpu_ticks`]); GPU-ms on the live clock.
    pub lost_ticks: i64,
    /// The job's latest checkpoint report of any attempt, with its note (SPEC §14): shown,
    /// and handed to its next attempt. Kept over requeues, unlike `last_save`.
    pub checkpoint: Option<Box<Checkpoint>>,
    pub finished_at: Option<Time>,
    /// The jobs it waits for, resolved to ids (SPEC §13; an array child's N_TO_N and
    /// SEQUENTIAL partners included).
    pub deps: Box<[JobId]>,
    /// How many of `deps` have not SUCCEEDED yet (PENDING while > 0).
    pub unmet: u32,
    /// Its place in an array, if it is in one.
    pub array: Option<ArrayLink>,
}

/// A checkpoint report (SPEC §14, `shareq checkpoint`): when, by which attempt, and its
/// note (at most [`Checkpoint::NOTE_MAX`] bytes, checked by whoever takes the report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub at: Time,
    pub attempt: u32,
    pub note: Option<std::sync::Arc<str>>,
}

impl Checkpoint {
    /// The longest note a report may carry, in bytes.
    pub const NOTE_MAX: usize = crate::model::CHECKPOINT_NOTE_MAX;
}

impl Job {
    /// The parent of an array child.
    pub fn parent(&self) -> Option<JobId> {
        match self.array {
            Some(ArrayLink::Child { parent, .. }) => Some(parent),
            _ => None,
        }
    }

    /// An array child's index.
    pub fn array_index(&self) -> Option<u32> {
        match self.array {
            Some(ArrayLink::Child { index, .. }) => Some(index),
            _ => None,
        }
    }

    /// An array parent's size.
    pub fn array_size(&self) -> Option<u32> {
        match self.array {
            Some(ArrayLink::Parent { size, .. }) => Some(size),
            _ => None,
        }
    }

    /// How users name it: `12`, or `12:3` for child 3 of array 12.
    pub fn label(&self) -> String {
        match self.array {
            Some(ArrayLink::Child { parent, index }) => format!("{parent}:{index}"),
            _ => self.id.to_string(),
        }
    }

    /// PENDING: waits for its dependencies.
    pub fn is_dependent(&self) -> bool {
        matches!(self.phase, Phase::Dependent)
    }

    pub fn is_parent(&self) -> bool {
        matches!(self.phase, Phase::Parent)
    }

    /// The job's key without any fair-share penalty: what the lanes store.
    pub fn base_key(&self) -> QKey {
        QKey::new(self.priority, self.submitted, self.id)
    }

    /// The job's place in the victim order (SPEC §4.1), with `spread` = `spreadSeconds`
    /// in the driver's instants; `None` unless it holds GPUs.
    pub fn vkey(&self, spread: Time) -> Option<VKey> {
        match &self.phase {
            Phase::Holding {
                start_seq,
                started_at,
                ..
            } => Some(VKey {
                prio: self.priority,
                effective: Reverse(
                    self.last_save
                        .unwrap_or(*started_at)
                        .saturating_sub(spread.saturating_mul(i64::from(self.preempted_count))),
                ),
                started: Reverse(*start_seq),
                id: self.id.0,
            }),
            _ => None,
        }
    }

    pub fn is_pending(&self) -> bool {
        matches!(self.phase, Phase::Pending { .. })
    }

    pub fn is_nominated(&self) -> bool {
        matches!(self.phase, Phase::Pending { nominated: Some(_) })
    }

    pub fn is_holding(&self) -> bool {
        matches!(self.phase, Phase::Holding { .. })
    }

    /// Holding GPUs and being stopped (preempted, cancelled or timed out).
    pub fn is_stopping(&self) -> bool {
        matches!(
            self.phase,
            Phase::Holding {
                stopping: Some(_),
                ..
            }
        )
    }

    pub fn stop_cause(&self) -> Option<StopCause> {
        match &self.phase {
            Phase::Holding {
                stopping: Some((c, _)),
                ..
            } => Some(*c),
            _ => None,
        }
    }

    /// When the stop began, for a job being stopped.
    pub fn stopping_since(&self) -> Option<Time> {
        match &self.phase {
            Phase::Holding {
                stopping: Some((_, since)),
                ..
            } => Some(*since),
            _ => None,
        }
    }

    pub fn devices(&self) -> &[u32] {
        match &self.phase {
            Phase::Holding { devices, .. } => devices,
            _ => &[],
        }
    }

    /// A gang (SPEC §16): it runs on several nodes at once.
    pub fn is_gang(&self) -> bool {
        self.nodes > 1
    }

    /// What it takes on each of its nodes: `quantity` for a plain job, a gang's per-node
    /// quantity.
    pub fn per_node(&self) -> u32 {
        self.quantity / self.nodes.max(1)
    }

    /// Every slot it holds room of and that room (devices, or a sliced device's GiB): one
    /// for a plain job, one per node in node order for a gang. Empty unless it holds.
    pub fn holdings(&self) -> Vec<(SlotIx, &[u32])> {
        match &self.phase {
            Phase::Holding {
                slot,
                more,
                gib,
                devices,
                ..
            } => {
                let first: &[u32] = if gib.is_empty() { devices } else { gib };
                std::iter::once((*slot, first))
                    .chain(more.iter().map(|(s, d)| (*s, d.as_slice())))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// The slot (node, or sliced device) whose room the job holds; its node is
    /// [`super::Sched::job_node`].
    pub fn slot(&self) -> Option<SlotIx> {
        match &self.phase {
            Phase::Holding { slot, .. } => Some(*slot),
            _ => None,
        }
    }

    /// What the job takes of its slot's room: its devices, or on a sliced device its GiB.
    pub fn parts(&self) -> &[u32] {
        match &self.phase {
            Phase::Holding { gib, .. } if !gib.is_empty() => gib,
            Phase::Holding { devices, .. } => devices,
            _ => &[],
        }
    }

    /// The nomination of a nominated job.
    pub fn nomination(&self) -> Option<&Nomination> {
        match &self.phase {
            Phase::Pending { nominated } => nominated.as_ref(),
            _ => None,
        }
    }

    /// The current attempt's last save (SPEC §14): its latest checkpoint report, or its
    /// start; `None` unless it holds GPUs.
    pub fn last_save_or_start(&self) -> Option<Time> {
        self.started_at().map(|t0| self.last_save.unwrap_or(t0))
    }

    pub fn started_at(&self) -> Option<Time> {
        match &self.phase {
            Phase::Holding { started_at, .. } => Some(*started_at),
            _ => None,
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.job_name
    }

    /// GPUs this job still holds for the stop of `victim.attempt`: its quantity while that
    /// very attempt is being stopped, 0 once it released them (or ended, or restarted).
    pub fn releasing_for(&self, victim: VictimRef) -> u32 {
        if self.id == victim.job && self.is_stopping() && self.attempts_started == victim.attempt {
            self.quantity
        } else {
            0
        }
    }

    /// GPUs this job still holds on slot `n` for the stop of `victim.attempt` (a gang
    /// holds its per-node quantity on each of its nodes).
    pub fn releasing_on(&self, victim: VictimRef, n: SlotIx) -> u32 {
        if self.releasing_for(victim) == 0 {
            return 0;
        }
        self.holdings()
            .iter()
            .filter(|(s, _)| *s == n)
            .map(|(_, d)| d.len() as u32)
            .sum()
    }
}

/// A share's standing on one unit, with the indexes the passes need.
#[derive(Debug, Clone, Default)]
pub struct Lane {
    pub limit: u32,
    /// The share lists this unit in its `capacityLimits` (SPEC §1.2: for a unit it does not
    /// list, limit and borrow cap are 0).
    pub listed: bool,
    /// Borrow cap in GPUs; `None` = unlimited. 0 for shares that never borrow.
    pub cap: Option<u32>,
    /// GPUs held by the share's jobs on this unit (stopping jobs included).
    pub usage: u32,
    /// The part of `usage` held by jobs being stopped.
    pub releasing: u32,
    /// How many jobs are being stopped.
    pub stopping: u32,
    /// RUNNABLE jobs and what each user holds (see [`super::queue`]).
    pub queue: super::queue::Queue,
    /// Jobs holding GPUs and not being stopped: the victim candidates.
    pub running: BTreeSet<VKey>,
    /// This lane's contribution to its unit's `held_back` total.
    pub hb_term: u32,
    /// The lane's first pending job and since when it has been first (SPEC §3: a big
    /// job first this long takes its unit's reservation).
    pub head: Option<(JobId, Time)>,
}

impl Lane {
    pub fn idle(&self) -> u32 {
        self.limit.saturating_sub(self.usage)
    }

    pub fn borrowed(&self) -> u32 {
        self.usage.saturating_sub(self.limit)
    }

    pub fn is_empty(&self) -> bool {
        self.usage == 0 && self.queue.is_empty()
    }

    /// The first nominated job's key: the lane's jobs after it may not start.
    pub fn block(&self) -> Option<QKey> {
        self.queue.block()
    }

    /// Σ quantity of RUNNABLE, not nominated jobs with quantity ≤ `threshold` that their
    /// user's `userLimit` lets start.
    pub fn waiting_upto(&self, threshold: u32) -> u64 {
        self.queue.waiting_upto(threshold)
    }

    /// `min(cap, waiting_ahead)`: GPUs asked for by RUNNABLE, not nominated jobs of
    /// quantity ≤ `threshold` that come before `before` in global order, counted up to
    /// `cap` (the oversubscribed rule of SPEC §3 needs no more than the idle guarantee).
    pub fn waiting_ahead_upto(&self, threshold: u32, before: QKey, cap: u32) -> u32 {
        self.queue.waiting_ahead_upto(threshold, before, cap)
    }
}

#[derive(Debug, Clone)]
pub struct ShareState {
    pub name: String,
    /// In the applied config (a removed share keeps its jobs, with limit 0).
    pub present: bool,
    pub enabled: bool,
    pub strategy: Strategy,
    pub in_share: bool,
    /// Percent; -1 = unlimited (only meaningful for LEND_AND_BORROW).
    pub borrow_limit: i64,
    /// `minRuntimeSeconds` (SPEC §11): running jobs are no preemption candidates until
    /// their current attempt has run this long.
    pub min_runtime: u32,
    /// `preemptionConfiguration.gracePeriodSeconds` (SPEC §14); `None` = the environment's.
    pub grace: Option<u32>,
    /// `preemptionConfiguration.notice` (SPEC §14): sent first when a job of the share is
    /// preempted.
    pub notice: Option<crate::model::Notice>,
    /// One lane per unit index.
    pub lanes: Vec<Lane>,
    /// The share's users, their decayed usage, and its fair-share policy (SPEC §12).
    pub users: super::fair::Users,
    /// Pending jobs per priority level (all units): step 2's merge needs the levels.
    pub levels: BTreeMap<u32, u32>,
}

impl ShareState {
    pub fn borrows(&self) -> bool {
        self.present && self.strategy == Strategy::LendAndBorrow
    }
}

/// One node of the environment.
#[derive(Debug, Clone)]
pub struct NodeState {
    pub name: String,
    /// In the applied config.
    pub present: bool,
}

/// Room of one unit in one place (SPEC §10, §15): a whole-GPU unit's devices on one node,
/// or one device of a unit sliced by memory with its GiB. Placement, nominations and the
/// victim walk see only this room, so both are one mechanism: the room is `free.len()`,
/// and a job takes some of `free` (devices, or GiB numbered 0..memoryGiB).
#[derive(Debug, Clone, Default)]
pub struct Slot {
    /// The node the slot is on.
    pub node: NodeIx,
    /// A sliced device: its index (the device the job's `devices` name).
    pub device: Option<u32>,
    /// The slot's place in listing order (nodes as listed; a sliced unit's devices by
    /// node, then index): best-fit ties go to the first.
    pub order: usize,
    /// Room the config gives this slot (devices, or a sliced device's GiB), healthy or
    /// not.
    pub configured: u32,
    /// Healthy room, sorted: device indices, or a healthy sliced device's GiB.
    pub devices: Vec<u32>,
    /// Room of `devices` that no job holds.
    pub free: BTreeSet<u32>,
    /// The node is drained (SPEC §10): it takes no new job, and each device leaves
    /// `devices` (and so `usable`) when its job releases it; they wait in `parked`.
    pub drained: bool,
    pub parked: Vec<u32>,
}

#[derive(Debug, Clone)]
pub struct UnitState {
    pub name: String,
    pub present: bool,
    pub max_capacity: u32,
    /// A unit sliced by memory (SPEC §15): each device's GiB. `None`: whole GPUs.
    pub slice: Option<u32>,
    /// What a sliced unit does to a job over its GiB (`slicing.overuse`).
    pub overuse: crate::model::Overuse,
    /// Per slot: for a whole-GPU unit, one per node (by node index); for a sliced unit,
    /// one per device, indexed by `slot_ix`.
    pub slots: Vec<Slot>,
    /// A sliced unit's slot of each (node, device): stable across reloads.
    pub slot_ix: BTreeMap<(NodeIx, u32), SlotIx>,
    /// (free room, order, slot) of every slot with healthy room of this unit: best fit
    /// is the first entry with enough free room (SPEC §10, §15).
    pub by_free: BTreeSet<(u32, usize, SlotIx)>,
    /// The most devices of this unit the config gives one node: larger jobs never fit.
    pub largest: u32,
    /// With `nodes`: the most free devices of this unit on one node, devices set aside for
    /// nominations included (they are room for waiting work). `waiting` counts only jobs
    /// up to this (SPEC §10). Kept with the lanes' `hb_term`s, which depend on it; it
    /// depends on the free devices only, so every change goes through `refresh_room`.
    pub room_max: u32,
    /// min(maxCapacity, healthy devices).
    pub usable: u32,
    /// Σ usage over shares.
    pub used: u32,
    /// Σ hb_term over the lanes of this unit.
    pub hb_total: u64,
    /// Nominated jobs of this unit.
    pub nominated: Vec<JobId>,
    /// Σ limit over the present shares.
    pub guaranteed: u64,
    /// The unit's reservation for a big job (SPEC §3).
    pub reservation: Option<super::reserve::Reservation>,
    /// A gang's reservation (SPEC §16): its nodes after `reservation.node`.
    pub reserved_more: Vec<SlotIx>,
    /// Which job holds each (slot, part) of this unit (a device, or a sliced device's
    /// GiB), kept with the holdings (`index_holding`): the device map reads it instead of
    /// every job.
    pub held: BTreeMap<(SlotIx, u32), JobId>,
    /// Devices something outside this scheduler holds for now (a process of an earlier
    /// scheduler, SPEC §8), with why: out of `devices` until they are given back, yet
    /// counted in what a share may ever hold, so that a request for them waits.
    pub withheld: BTreeMap<(NodeIx, u32), String>,
}

impl UnitState {
    /// A unit not (yet) in the applied config: no devices, nothing usable.
    pub fn new(name: &str) -> UnitState {
        UnitState {
            name: name.to_string(),
            present: false,
            max_capacity: 0,
            slice: None,
            overuse: crate::model::Overuse::Report,
            slots: Vec::new(),
            slot_ix: BTreeMap::new(),
            by_free: BTreeSet::new(),
            largest: 0,
            room_max: 0,
            usable: 0,
            used: 0,
            hb_total: 0,
            nominated: Vec::new(),
            guaranteed: 0,
            reservation: None,
            reserved_more: Vec::new(),
            held: BTreeMap::new(),
            withheld: BTreeMap::new(),
        }
    }

    pub fn free(&self) -> i64 {
        i64::from(self.usable) - i64::from(self.used)
    }

    /// Σ limit(·,u) > usable(u): guarantees overlap (SPEC §1.2, §3).
    pub fn oversubscribed(&self) -> bool {
        self.guaranteed > u64::from(self.usable)
    }

    /// What `usable` will be once the withheld devices are given back.
    pub fn usable_to_come(&self) -> u32 {
        let per = self.slice.unwrap_or(1);
        self.max_capacity
            .min(self.healthy() + self.withheld.len() as u32 * per)
    }

    /// The slots on node `n`: the node itself for a whole-GPU unit, its devices for a
    /// sliced one.
    pub fn slots_on(&self, n: NodeIx) -> Vec<SlotIx> {
        if self.slice.is_none() {
            return if n < self.slots.len() {
                vec![n]
            } else {
                Vec::new()
            };
        }
        self.slot_ix
            .range((n, 0)..=(n, u32::MAX))
            .map(|(_, &s)| s)
            .collect()
    }

    /// The slot device `d` of node `n` is in, and what of that slot it is (the device,
    /// or every GiB of a sliced device).
    pub fn slot_of(&self, n: NodeIx, d: u32) -> Option<(SlotIx, Vec<u32>)> {
        match self.slice {
            None => Some((n, vec![d])),
            Some(_) => {
                let &s = self.slot_ix.get(&(n, d))?;
                Some((s, self.slots[s].devices.clone()))
            }
        }
    }

    /// Healthy devices on all nodes.
    pub fn healthy(&self) -> u32 {
        self.slots.iter().map(|s| s.devices.len() as u32).sum()
    }

    /// The most free devices on one node that takes new jobs.
    pub fn most_free_on_a_node(&self) -> u32 {
        self.by_free.last().map_or(0, |x| x.0)
    }

    /// Free devices on all nodes.
    pub fn free_devices(&self) -> u32 {
        self.slots.iter().map(|s| s.free.len() as u32).sum()
    }

    /// Is device `d` of node `n` healthy?
    pub fn has_device(&self, n: NodeIx, d: u32) -> bool {
        match self.slice {
            None => self
                .slots
                .get(n)
                .is_some_and(|s| s.devices.binary_search(&d).is_ok()),
            Some(_) => self
                .slot_ix
                .get(&(n, d))
                .is_some_and(|&s| !self.slots[s].devices.is_empty()),
        }
    }

    /// Take room of slot `n` (a job starts or is restored on it).
    pub fn take(&mut self, n: SlotIx, devices: &[u32]) {
        let Some(slot) = self.slots.get_mut(n) else {
            return;
        };
        let before = slot.free.len() as u32;
        for d in devices {
            slot.free.remove(d);
        }
        let (after, order) = (slot.free.len() as u32, slot.order);
        if before != after && self.by_free.remove(&(before, order, n)) {
            self.by_free.insert((after, order, n));
        }
    }

    /// Give room of slot `n` back (what is still healthy).
    pub fn give(&mut self, n: SlotIx, devices: &[u32]) {
        let Some(slot) = self.slots.get_mut(n) else {
            return;
        };
        let before = slot.free.len() as u32;
        let drained = slot.drained;
        for &d in devices {
            if drained {
                if let Ok(i) = slot.devices.binary_search(&d) {
                    slot.devices.remove(i);
                    slot.parked.push(d);
                }
            } else if slot.devices.binary_search(&d).is_ok() {
                slot.free.insert(d);
            }
        }
        let (after, order) = (slot.free.len() as u32, slot.order);
        if before != after && self.by_free.remove(&(before, order, n)) {
            self.by_free.insert((after, order, n));
        }
        if drained {
            self.usable = self.max_capacity.min(self.healthy());
        }
    }

    /// Rebuild the by-free-room index from the slots.
    pub fn reindex(&mut self) {
        self.by_free = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.devices.is_empty() && !s.drained)
            .map(|(n, s)| (s.free.len() as u32, s.order, n))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::FailReason;

    /// A kill from outside reads as the signal, keeps NON_ZERO_EXIT's code, and its stored
    /// text gives the signal back; an exit with the same status names no signal.
    #[test]
    fn a_signal_death_reads_and_reads_back_as_its_signal() {
        let killed = FailReason::Signalled(9);
        assert_eq!(killed.code(), "NON_ZERO_EXIT");
        let shown = killed.to_string();
        assert_eq!(shown, "NON_ZERO_EXIT: killed by SIGKILL (not by shareq)");
        assert_eq!(killed.signal().as_deref(), Some("SIGKILL"));
        assert_eq!(FailReason::signal_in(&shown), Some("SIGKILL"));
        let exited = FailReason::NonZeroExit(137);
        assert_eq!(exited.signal(), None);
        assert_eq!(FailReason::signal_in(&exited.to_string()), None);
        assert_eq!(
            FailReason::signal_in(&FailReason::Signalled(42).to_string()),
            Some("signal 42")
        );
    }
}
