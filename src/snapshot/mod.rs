//! An immutable picture of the scheduler for the console and the control socket: shares,
//! lending, queue with reasons, running jobs, GPUs, preemption log and config state.
//! The runtime keeps it up to date change by change ([`Picture`]) and shares it as
//! `Arc<Snapshot>`; consecutive snapshots share every queue chunk that did not change,
//! and subscribers get [`Delta`]s. Readers never touch the live scheduler.
//! The utilisation history's windows ([`usage`]) are read the same way: the store fills
//! them, the console and the socket only read them.

use crate::access::Access;
use crate::exec::gpu::telemetry::Telemetry;
use crate::model::{JobId, JobState, Submitter};
use crate::sched::{LendEdge, Phase, QKey, Sched, ShareUnitStats, StopCause, Time};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

pub mod delta;
pub mod list;
mod picture;
pub mod stop;
pub mod usage;

pub use delta::{Change, ChangeLog, Delta, Update};
pub use list::JobList;
pub use picture::Picture;
pub use stop::{StopPhase, StopView};

/// The config as the runtime last saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigStatus {
    /// The config directory.
    pub source: String,
    /// When the config in force was applied (ms since the epoch).
    pub applied_at: Option<i64>,
    /// Hash of the applied files.
    pub hash: Option<String>,
    /// The last rejected edit, while it is the newest news: "file:line:col: what".
    pub error: Option<String>,
    pub error_at: Option<i64>,
    /// What applying the config in force did to the jobs, in one line ("2 now reclaimable,
    /// 1 impossible"), worked out on a copy of the state before it was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceView {
    /// The node the device is on (`local` without `nodes`).
    #[serde(default)]
    pub node: String,
    pub index: u32,
    pub job: Option<JobId>,
    pub job_name: Option<String>,
    pub share: Option<String>,
    /// Utilisation percent and memory (MiB), where NVML reports them.
    pub util: Option<u32>,
    pub mem_used: Option<u64>,
    pub mem_total: Option<u64>,
    /// A device the scheduler lost (health check, NVML): since when (ms). It is no
    /// longer handed out, and listed after the unit's usable devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_since: Option<i64>,
    /// A fake GPU of the config (`devices: {fake: N}`): nothing to measure on it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fake: bool,
    /// The MIG instance this device of a MIG unit is (SPEC §15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigView>,
    /// On a unit sliced by memory (SPEC §15): every job holding GiB of the device, in job
    /// id order (`job`, `job_name` and `share` are the first one's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<SliceView>,
}

/// A MIG instance as shown: `MIG 1g.10gb` of its parent GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigView {
    pub profile: String,
    /// The parent GPU's index; `None` for a fake instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    pub uuid: String,
}

impl MigView {
    /// `MIG 1g.10gb of GPU 4` (`MIG 1g.10gb` for a fake instance).
    pub fn label(&self) -> String {
        match self.parent {
            Some(p) => format!("MIG {} of GPU {p}", self.profile),
            None => format!("MIG {}", self.profile),
        }
    }
}

/// A job's GiB of a device sliced by memory (SPEC §15).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceView {
    pub job: JobId,
    pub job_name: String,
    pub share: String,
    pub gib: u32,
}

impl DeviceView {
    /// GiB of a sliced device held by its jobs.
    pub fn gib_used(&self) -> u32 {
        self.slices.iter().map(|s| s.gib).sum()
    }

    /// A device lost at `since` (ms): no job, no telemetry.
    pub fn lost(node: &str, index: u32, since: i64) -> DeviceView {
        DeviceView {
            node: node.to_string(),
            index,
            job: None,
            job_name: None,
            share: None,
            util: None,
            mem_used: None,
            mem_total: None,
            lost_since: Some(since),
            fake: false,
            mig: None,
            slices: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitView {
    pub name: String,
    pub usable: u32,
    pub used: u32,
    /// Σ maxCapacity of the shares.
    pub guaranteed: u64,
    pub devices: Vec<DeviceView>,
    /// The unit's reservation for a big job (SPEC §3), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationView>,
    /// Why the unit has no usable device on this machine, where that is known (a MIG
    /// profile that matches no instance, SPEC §15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unusable: Option<String>,
    /// A unit sliced by memory (SPEC §15): the GiB of each device. Its quantities
    /// (`usable`, `used`, `guaranteed`, jobs') are GiB, never GPUs.
    #[serde(rename = "memoryGiB", default, skip_serializing_if = "Option::is_none")]
    pub memory_gib: Option<u32>,
}

/// A unit's reservation: no other job borrows the unit (with `nodes`: on `node`) until
/// `job` starts (SPEC §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationView {
    pub job: JobId,
    pub job_name: String,
    pub share: String,
    /// When it was taken (the scheduler's instant: milliseconds since the epoch live).
    pub since: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

impl UnitView {
    /// A quantity of this unit as people read it: `20 GiB` on a sliced unit, `2` else.
    pub fn amount(&self, n: impl std::fmt::Display) -> String {
        match self.memory_gib {
            Some(_) => format!("{n} GiB"),
            None => n.to_string(),
        }
    }

    pub fn oversubscribed(&self) -> bool {
        self.guaranteed > u64::from(self.usable)
    }

    /// The devices grouped by node, nodes in listing order: what the console's GPU pane
    /// and `shareq status` show (SPEC §10).
    pub fn by_node(&self) -> Vec<(&str, Vec<&DeviceView>)> {
        let mut out: Vec<(&str, Vec<&DeviceView>)> = Vec::new();
        for d in &self.devices {
            match out.last_mut() {
                Some((n, v)) if *n == d.node => v.push(d),
                _ => out.push((d.node.as_str(), vec![d])),
            }
        }
        out
    }
}

/// How a job's devices read: `[0, 1]`, or `n2:[0, 1]` when the config lists nodes. A
/// gang's (several nodes) is [`places_text`].
pub fn devices_text(node: Option<&str>, devices: &[u32]) -> String {
    places_text(&[(node, devices)], PlaceStyle::Listed)
}

/// How [`places_text`] writes each node's devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceStyle {
    /// `gpu1:[0, 1]`: `jobs`, the job logs.
    Listed,
    /// `gpu1:0,1`: narrow cells and words (the console, `shareq events`).
    Compact,
}

/// Where a job runs, the one text for it (SPEC §10, §16): each of its nodes with its
/// devices there, in rank order, separated by spaces: `[0, 1]` (no `nodes` in the config),
/// `gpu1:[0, 1]`, or a gang's `gpu1:[0, 1] gpu2:[0, 1]` (`gpu1:0,1 gpu2:0,1` compact).
pub fn places_text(places: &[(Option<&str>, &[u32])], style: PlaceStyle) -> String {
    let mut out = String::new();
    for (i, (node, devices)) in places.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if let Some(n) = node {
            out.push_str(n);
            out.push(':');
        }
        match style {
            PlaceStyle::Listed => out.push_str(&format!("{devices:?}")),
            PlaceStyle::Compact => {
                let list: Vec<String> = devices.iter().map(u32::to_string).collect();
                out.push_str(&list.join(","));
            }
        }
    }
    out
}

/// One node of a gang and its devices there (`jobs --json`'s `placements`, SPEC §16).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub node: String,
    pub devices: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    pub id: JobId,
    pub name: String,
    pub share: String,
    pub unit: String,
    pub quantity: u32,
    pub priority: u32,
    pub state: JobState,
    pub submitted: i64,
    pub started: Option<i64>,
    pub finished: Option<i64>,
    pub devices: Vec<u32>,
    /// A running job of a MIG unit: its instances' UUIDs, in the order of `devices`
    /// (what its `CUDA_VISIBLE_DEVICES` names, SPEC §15).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uuids: Vec<String>,
    /// The node of `devices`, when the config lists nodes (SPEC §10); a gang's rank 0's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// A multi-node job (SPEC §16): its distinct nodes. Its `quantity` is the GPUs of all
    /// of them (nodes × its GPUs on each, [`JobView::per_node`]).
    #[serde(rename = "numNodes", default, skip_serializing_if = "Option::is_none")]
    pub num_nodes: Option<u32>,
    /// A gang that holds GPUs: every node with its devices there, in rank order (`node` and
    /// `devices` are the first one's, for readers that know one node).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<Placement>,
    /// How many of its GPUs are beyond its share's limit right now (running jobs).
    pub on_borrowed: bool,
    /// Among its borrowing share's running jobs, one that a reclaim of the share's
    /// borrowed GPUs would take (SPEC §4.1's victim order): the others are kept.
    #[serde(default)]
    pub reclaimed_first: bool,
    /// Why it waits (queued), or what it is doing. Empty for a queued row of a reason
    /// group: see [`Snapshot::reason`].
    pub reason: Arc<str>,
    /// A FAILED job whose command was killed from outside (not by shareq): the signal,
    /// by name (`SIGKILL`); its reason code stays `NON_ZERO_EXIT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The reason group of a queued row (`Snapshot::reasons`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_group: Option<u32>,
    /// Being stopped: why, and since when (ms).
    pub stopping: Option<(String, i64)>,
    /// Being stopped: its phase and the times of its signals (SPEC §14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopView>,
    /// A running job of a sliced unit found over its GiB (`OVER_MEMORY`, SPEC §15), by its
    /// current attempt; gone when that attempt ends.
    #[serde(
        rename = "overMemory",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub over_memory: Option<OverMemoryView>,
    pub attempts: u32,
    pub preempted_count: u32,
    /// GPU-ms its preemptions lost so far (SPEC §14); `lostGpuSeconds` in JSON.
    #[serde(rename = "lostGpuSeconds", default, with = "gpu_seconds")]
    pub lost_gpu_ms: i64,
    pub nominated: bool,
    /// Who submitted it (SPEC §9); `None` only for jobs stored before shareq knew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter: Option<Arc<Submitter>>,
    /// Queued jobs in a `jobs` answer: the forecast's estimated start (ms; SPEC §11: the
    /// median run's, or a lower bound), absent when none is estimated (see
    /// `estimateNote`).
    #[serde(
        rename = "estimatedStart",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub estimated_start: Option<i64>,
    /// Queued jobs in a `jobs` answer: the estimate's earliest start (ms: the 25th
    /// percentile run's, or the lower bound).
    #[serde(
        rename = "estimatedStartEarliest",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub estimated_start_earliest: Option<i64>,
    /// Queued jobs in a `jobs` answer: the estimate's latest start (ms: the 75th
    /// percentile run's); a lower bound has none.
    #[serde(
        rename = "estimatedStartLatest",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub estimated_start_latest: Option<i64>,
    /// Queued jobs in a `jobs` answer: `range`, `lower_bound`, `beyond_horizon` or
    /// `overdue` (absent: not estimated yet).
    #[serde(
        rename = "estimateKind",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub estimate_kind: Option<crate::forecast::EstimateKind>,
    /// Queued jobs in a `jobs` answer: `estimate` (a range), the job of unknown end a
    /// lower bound waits on (`job 7 (qs1) has no run-time history`), `not within 7d` or
    /// `not estimated yet`.
    #[serde(
        rename = "estimateNote",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub estimate_note: Option<String>,
    /// Queued jobs of a fair-share share in a `jobs` answer (SPEC §12): the delay the
    /// submitter's recent usage adds to the job's submission time, whole seconds.
    #[serde(
        rename = "fairShareDelaySeconds",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub fair_share_delay_seconds: Option<i64>,
    /// With `fairShareDelaySeconds`: the submitter's decayed usage of the share, whole
    /// GPU-seconds.
    #[serde(
        rename = "userUsageGpuSeconds",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub user_usage_gpu_seconds: Option<i64>,
    /// Its command as one line (an argv list shell-quoted, see `Command::line`).
    #[serde(default)]
    pub command: String,
    /// An array child's parent (SPEC §13); the child is `<parent>:<arrayIndex>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<JobId>,
    #[serde(
        rename = "arrayIndex",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub array_index: Option<u32>,
    /// The jobs it waits for (or waited for), with where each stands.
    #[serde(rename = "dependsOn", default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependencyView>,
    /// An array parent: its size and its children's counts by state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<ArrayView>,
    /// Its latest checkpoint report, of any attempt (SPEC §14); `null` when none.
    #[serde(rename = "lastCheckpoint", default)]
    pub last_checkpoint: Option<CheckpointView>,
    /// How often it says it saves (`checkpointEverySeconds`, SPEC §14).
    #[serde(
        rename = "checkpointEverySeconds",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub checkpoint_every_seconds: Option<u64>,
}

/// A checkpoint report as shown (`jobs --json`'s `lastCheckpoint`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointView {
    /// When (ms since the epoch, like the other times).
    pub at: i64,
    /// The attempt that reported it.
    pub attempt: u32,
    pub note: Option<String>,
}

impl From<&crate::sched::Checkpoint> for CheckpointView {
    fn from(c: &crate::sched::Checkpoint) -> CheckpointView {
        CheckpointView {
            at: c.at,
            attempt: c.attempt,
            note: c.note.as_deref().map(str::to_string),
        }
    }
}

/// What a running job's row says of its saves (SPEC §14), the one text `jobs` and the
/// console show: `saved 4m ago` for an attempt that reported, and a warning when an
/// attempt that declared `checkpointEverySeconds` C has not reported for 2×C (counted
/// from its start when it never did). `overdue` marks the warning. `None` for a job that
/// is not running, or runs without reports and without C.
pub fn saves_text(j: &JobView, now: i64) -> Option<SavesText> {
    let holding = matches!(
        j.state,
        JobState::Scheduled | JobState::Starting | JobState::Running
    );
    let started = j.started.filter(|_| holding && j.finished.is_none())?;
    let own = j
        .last_checkpoint
        .as_ref()
        .filter(|c| c.attempt == j.attempts && c.at >= started);
    let since = own.map_or(started, |c| c.at);
    let overdue = j
        .checkpoint_every_seconds
        .filter(|&c| c > 0)
        .filter(|&c| now - since > i64::try_from(c.saturating_mul(2_000)).unwrap_or(i64::MAX));
    let text = match (own, overdue) {
        (Some(c), None) => format!("saved {} ago", crate::duration::short(now - c.at)),
        (Some(c), Some(every)) => format!(
            "saved {} ago, expected every {}",
            crate::duration::short(now - c.at),
            crate::duration::short(i64::try_from(every).unwrap_or(i64::MAX / 1000) * 1000)
        ),
        (None, Some(every)) => format!(
            "no save in {}, expected every {}",
            crate::duration::short(now - since),
            crate::duration::short(i64::try_from(every).unwrap_or(i64::MAX / 1000) * 1000)
        ),
        (None, None) => return None,
    };
    Some(SavesText {
        text,
        overdue: overdue.is_some(),
    })
}

/// [`saves_text`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavesText {
    pub text: String,
    /// Not reported for twice its `checkpointEverySeconds`: shown with a mark.
    pub overdue: bool,
}

impl JobView {
    /// A multi-node job (SPEC §16).
    pub fn is_gang(&self) -> bool {
        self.num_nodes.is_some_and(|n| n > 1)
    }

    /// Its GPUs on each of its nodes: `quantity` for a job on one node.
    pub fn per_node(&self) -> u32 {
        self.quantity / self.num_nodes.unwrap_or(1).max(1)
    }

    /// Its size as the GPUS columns show it: `2`, a gang's `2×4` (nodes × GPUs on each),
    /// `20G` / `20 GiB` on a unit sliced by memory (`gib` is the suffix, SPEC §15).
    pub fn amount(&self, gib: Option<&str>) -> String {
        match (self.num_nodes.filter(|&n| n > 1), gib) {
            (Some(n), Some(g)) => format!("{n}×{}{g}", self.per_node()),
            (Some(n), None) => format!("{n}×{}", self.per_node()),
            (None, Some(g)) => format!("{}{g}", self.quantity),
            (None, None) => self.quantity.to_string(),
        }
    }

    /// Where it runs: each node (`None` without `nodes` in the config) with its devices,
    /// in rank order (one entry, with no devices, when it holds nothing).
    pub fn places(&self) -> Vec<(Option<&str>, &[u32])> {
        if !self.placements.is_empty() {
            return self
                .placements
                .iter()
                .map(|p| (Some(p.node.as_str()), p.devices.as_slice()))
                .collect();
        }
        vec![(self.node.as_deref(), self.devices.as_slice())]
    }

    /// [`places_text`] of [`JobView::places`].
    pub fn places_text(&self, style: PlaceStyle) -> String {
        places_text(&self.places(), style)
    }

    /// How users name it: `12`, or `12:3` for child 3 of array 12.
    pub fn label(&self) -> String {
        match (self.parent, self.array_index) {
            (Some(p), Some(i)) => format!("{p}:{i}"),
            _ => self.id.to_string(),
        }
    }
}

/// What an attempt of a sliced job held when it was found over its slice (SPEC §15): the
/// GiB its processes held (rounded up) and the GiB it asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverMemoryView {
    #[serde(rename = "heldGiB")]
    pub held_gib: u64,
    #[serde(rename = "ofGiB")]
    pub of_gib: u64,
}

impl OverMemoryView {
    /// `over 22/20 GiB`, as the console marks the job.
    pub fn text(&self) -> String {
        format!("over {}/{} GiB", self.held_gib, self.of_gib)
    }
}

/// One dependency of a job, as `jobs --json` and the console show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DependencyView {
    pub job: JobId,
    /// `12`, or `12:3` for an array's child.
    pub label: String,
    /// Its state; `None` when no such job is known.
    pub state: Option<JobState>,
}

/// An array parent's children (SPEC §13).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayView {
    pub size: u32,
    /// Children by state, states with none left out (`{"RUNNING": 8, "RUNNABLE": 30}`).
    pub counts: std::collections::BTreeMap<JobState, u32>,
}

impl ArrayView {
    /// `8 running, 30 queued, 12 succeeded`.
    pub fn counts_text(&self) -> String {
        let mut counts = [0u32; 8];
        for (s, n) in &self.counts {
            counts[s.ordinal()] = *n;
        }
        crate::sched::counts_text(&counts)
    }
}

/// Which list of the picture holds a job ([`Snapshot::find_job`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Running,
    Queued,
    /// PENDING (waiting on dependencies) or an array's parent.
    Linked,
    /// Ended, among those kept in view.
    Finished,
}

/// Jobs outside the queue that are not running either (SPEC §13): PENDING jobs and the
/// parents of arrays not yet settled, each in id order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Linked {
    pub pending: Vec<Arc<JobView>>,
    pub arrays: Vec<Arc<JobView>>,
}

/// One line of the preemption log (SPEC §4.4 item 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptionRecord {
    pub at: i64,
    pub victim: JobId,
    pub victim_name: String,
    pub victim_share: String,
    pub by: Option<JobId>,
    pub by_name: Option<String>,
    pub by_share: Option<String>,
    pub reason: String,
    pub gpus: u32,
    /// How long the victim had run (ms).
    pub ran_for: i64,
    /// "requeued", "failed (PREEMPTION_RETRIES_EXHAUSTED)", ... once known.
    pub outcome: Option<String>,
    /// The victim's submitter, and the preempting job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub victim_user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_user: Option<String>,
    /// What the preemption lost (SPEC §14), once its victim released its GPUs; `None`
    /// while it is stopping, and for one that ended otherwise (cancelled, finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<LostWork>,
    /// A gang victim (SPEC §16): every node it was stopped on, with its devices there,
    /// in rank order ([`gang_placements`] when it was preempted). New with gangs: named
    /// in camelCase only.
    #[serde(
        rename = "victimPlacements",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub victim_placements: Vec<Placement>,
}

impl PreemptionRecord {
    /// A gang victim's nodes as the log names them: `gpu1:0,1 gpu2:0,1`; `None` for a
    /// victim on one node.
    pub fn victim_on(&self) -> Option<String> {
        if self.victim_placements.len() < 2 {
            return None;
        }
        let places: Vec<(Option<&str>, &[u32])> = self
            .victim_placements
            .iter()
            .map(|p| (Some(p.node.as_str()), p.devices.as_slice()))
            .collect();
        Some(places_text(&places, PlaceStyle::Compact))
    }
}

/// The work a preemption lost (SPEC §14): the victim's GPUs × (the release of its GPUs −
/// its attempt's last save). How it reads ([`LostWork::text`]) is the same in the
/// console's preemption log and the CLI (`events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LostWork {
    pub gpus: u32,
    /// The attempt's last save (ms since the epoch): its latest checkpoint report, or its
    /// start when it reported none.
    pub last_save: i64,
    /// The release of its GPUs (ms since the epoch).
    pub released: i64,
    /// The attempt had reported a checkpoint: `last_save` is that report.
    pub saved: bool,
}

impl LostWork {
    /// A victim that saved less than this long (per GPU) before its release reads
    /// `saved 40s before` rather than what it lost.
    pub const SAVED_SHORTLY_MS: i64 = 60_000;

    /// The core's figure, on the live clock (ms).
    pub fn of(l: &crate::sched::Lost) -> LostWork {
        LostWork {
            gpus: l.gpus,
            last_save: l.since,
            released: l.until,
            saved: l.checkpointed,
        }
    }

    /// From its release back to its last save (ms), per GPU.
    pub fn span_ms(&self) -> i64 {
        self.released.saturating_sub(self.last_save).max(0)
    }

    /// GPUs × ms lost.
    pub fn gpu_ms(&self) -> i64 {
        i64::from(self.gpus).saturating_mul(self.span_ms())
    }

    /// GPU-seconds lost.
    pub fn gpu_seconds(&self) -> f64 {
        self.gpu_ms() as f64 / 1000.0
    }

    /// `saved 40s before` for a victim that had reported a checkpoint less than a minute
    /// before its release ([`Self::SAVED_SHORTLY_MS`]), else `lost 2 GPU × 12m` (the span
    /// since its last save, or its start, in minutes below an hour, `2h05m` above).
    pub fn text(&self) -> String {
        let span = self.span_ms();
        if self.saved && span < Self::SAVED_SHORTLY_MS {
            return format!("saved {} before", crate::duration::human(span));
        }
        let d = if span < 3_600_000 {
            crate::duration::short(span)
        } else {
            crate::duration::human(span)
        };
        format!("lost {} GPU × {d}", self.gpus)
    }
}

/// A job's total lost GPU-time as `jobs --json` writes it: GPU-seconds (ms kept as a
/// fraction), read back to ms.
pub mod gpu_seconds {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(*ms as f64 / 1000.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        Ok((f64::deserialize(d)? * 1000.0).round() as i64)
    }
}

/// (priority, effective submission, submitted, id): a queue key as a reason group sees it.
pub type BlockKey = (u32, i64, i64, JobId);

/// Why the queued jobs of one reason group wait: every RUNNABLE, not nominated job of
/// one (share, unit, quantity) waits for the same reason, except those behind the lane's
/// first nominated job (SPEC §4.4), which wait for `blocked`. A queued row names its group in
/// [`JobView::reason_group`], so a change that alters a lane's reason rewrites one entry
/// here rather than every row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupReason {
    pub reason: Arc<str>,
    /// (priority, effective submission, submitted, id) of the lane's first nominated job,
    /// as the group's jobs' order sees it (its key moved back by their fair-share penalty,
    /// SPEC §12), and the reason of the group's jobs after it in scheduling order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<(BlockKey, Arc<str>)>,
}

/// Reason groups by id.
pub type Reasons = HashMap<u32, GroupReason>;

/// Everything a reader needs, at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When it was taken (ms since the epoch).
    pub at: i64,
    /// Bumped on every change.
    pub version: u64,
    pub env_name: String,
    pub config: ConfigStatus,
    pub units: Vec<UnitView>,
    /// Per share and unit (`ShareView` on the wire).
    pub shares: Vec<ShareUnitStats>,
    pub lending: Vec<LendEdge>,
    /// RUNNABLE jobs in scheduling order (rows of a reason group carry no reason text:
    /// read it with [`Snapshot::reason`]).
    pub queue: JobList,
    /// The reason groups of the queue's rows.
    #[serde(default)]
    pub reasons: Arc<Reasons>,
    /// Jobs holding GPUs.
    pub running: Vec<JobView>,
    /// PENDING jobs and unsettled array parents (SPEC §13).
    #[serde(default)]
    pub linked: Arc<Linked>,
    /// Recently finished jobs, newest first.
    pub finished: Arc<Vec<Arc<JobView>>>,
    /// Newest first.
    pub preemptions: Arc<Vec<PreemptionRecord>>,
    pub grace_period_seconds: u32,
    /// Who may do what (SPEC §9), so that a console can refuse before it asks.
    #[serde(default)]
    pub access: Arc<Access>,
    /// The latest start estimates of the queue (SPEC §11), computed in the background.
    #[serde(default)]
    pub estimates: Arc<crate::forecast::Estimates>,
    /// What changed in the queue in the last versions (for deltas to subscribers).
    #[serde(skip)]
    pub changes: ChangeLog,
    /// An attached console's link to the scheduler is down since this instant (ms): the
    /// picture is the last one received, and the console is reconnecting.
    #[serde(skip)]
    pub link_down_since: Option<i64>,
    /// An attached console's scheduler: its pid and when it started (ms), from the
    /// socket's peer credentials (set by `server::client::remote`, never sent).
    #[serde(skip)]
    pub served_by: Option<ServedBy>,
    /// Why scheduling is paused (its decisions cannot be written, SPEC §8), while it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<String>,
    /// While the state filesystem is short of space: its free bytes and reserve, and
    /// whose job data and logs fill it (the top users by bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
    /// Jobs not contained or GPUs not isolated, and why (SPEC §7); `None` when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<String>,
    /// Every share's users' decayed usage and, with `fairShare`, the delay it adds
    /// (SPEC §12), as of `at`.
    #[serde(default)]
    pub users: Arc<Vec<crate::sched::UserStanding>>,
}

impl Linked {
    /// The rows as `viewer` may see them (others' commands hidden).
    pub fn for_viewer(&self, viewer: Viewer) -> Linked {
        let hide = |v: &[Arc<JobView>]| v.iter().cloned().map(|j| viewer.view_arc(j)).collect();
        Linked {
            pending: hide(&self.pending),
            arrays: hide(&self.arrays),
        }
    }
}

/// Who reads a picture (SPEC §9): every job's id, name, share, user, state, reason,
/// devices and times are for everyone; a job's command only for its owner and admins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Viewer {
    pub uid: u32,
    pub admin: bool,
}

impl Viewer {
    /// May this viewer see the job's command?
    pub fn sees_command(&self, j: &JobView) -> bool {
        self.admin || j.submitter.as_ref().is_some_and(|s| s.uid == self.uid)
    }

    /// The job as this viewer may see it: the command hidden (empty) when not theirs.
    pub fn view(&self, mut j: JobView) -> JobView {
        if !self.sees_command(&j) {
            j.command = String::new();
        }
        j
    }

    /// The same for a shared row: copied only when something is hidden.
    pub fn view_arc(&self, j: Arc<JobView>) -> Arc<JobView> {
        if self.sees_command(&j) || j.command.is_empty() {
            j
        } else {
            Arc::new(self.view((*j).clone()))
        }
    }
}

/// The process an attached console shows the picture of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedBy {
    pub pid: u32,
    /// When that process started (ms), when /proc says.
    pub since: Option<i64>,
}

impl Snapshot {
    /// An empty picture (before the first config is applied).
    pub fn empty() -> Snapshot {
        Snapshot {
            at: 0,
            version: 0,
            env_name: String::new(),
            config: ConfigStatus::default(),
            units: Vec::new(),
            shares: Vec::new(),
            lending: Vec::new(),
            queue: JobList::new(),
            reasons: Arc::default(),
            running: Vec::new(),
            linked: Arc::default(),
            finished: Arc::default(),
            preemptions: Arc::default(),
            grace_period_seconds: 30,
            access: Arc::default(),
            estimates: Arc::default(),
            changes: ChangeLog::default(),
            link_down_since: None,
            served_by: None,
            paused: None,
            disk: None,
            containment: None,
            users: Arc::default(),
        }
    }

    /// Job `id` wherever the picture holds it, and where: see [`Snapshot::find_jobs`].
    pub fn find_job(&self, id: JobId) -> Option<(Place, &JobView)> {
        self.find_jobs(&[id]).remove(&id)
    }

    /// Each of `ids` wherever the picture holds it, in one pass: the running jobs, the
    /// PENDING ones and array parents (SPEC §13), the finished ones kept in view, then the
    /// queue (the only long list: O(n), stopping once every id is found). Every lookup by
    /// id (the socket's admission and `job` and `log` answers, the console) goes through
    /// here, so that none of them misses a list.
    pub fn find_jobs(&self, ids: &[JobId]) -> HashMap<JobId, (Place, &JobView)> {
        let mut want: std::collections::HashSet<JobId> = ids.iter().copied().collect();
        let mut found = HashMap::with_capacity(want.len());
        let linked = self.linked.pending.iter().chain(&self.linked.arrays);
        let lists = self
            .running
            .iter()
            .map(|j| (Place::Running, j))
            .chain(linked.map(|j| (Place::Linked, &**j)))
            .chain(self.finished.iter().map(|j| (Place::Finished, &**j)))
            .chain(self.queue.iter().map(|j| (Place::Queued, j)));
        for (place, j) in lists {
            if want.is_empty() {
                break;
            }
            if want.remove(&j.id) {
                found.insert(j.id, (place, j));
            }
        }
        found
    }

    /// What the latest forecast says about a queued job.
    pub fn estimate(&self, id: JobId) -> crate::forecast::Estimate {
        self.estimates.of(id)
    }

    /// Why a job waits (queued rows) or what it does.
    pub fn reason<'a>(&'a self, j: &'a JobView) -> &'a str {
        let Some(g) = j.reason_group.and_then(|g| self.reasons.get(&g)) else {
            return &j.reason;
        };
        match &g.blocked {
            Some(((p, eff, s, id), why))
                if list::key_of(j)
                    > QKey {
                        eff: *eff,
                        ..QKey::new(*p, *s, *id)
                    } =>
            {
                why
            }
            _ => &g.reason,
        }
    }

    /// The standing of a job's submitter in its share, when the share has `fairShare`
    /// (SPEC §12); a user with no usage left stands at zero.
    pub fn fair_standing(&self, j: &JobView) -> Option<crate::sched::UserStanding> {
        let fair = self
            .shares
            .iter()
            .any(|s| s.share == j.share && s.fair_share);
        if !fair {
            return None;
        }
        let user = crate::model::charged_user(j.submitter.as_deref());
        let found = self
            .users
            .iter()
            .find(|u| u.share == j.share && u.user == user);
        Some(
            found
                .cloned()
                .unwrap_or_else(|| crate::sched::UserStanding {
                    share: j.share.clone(),
                    user: user.to_string(),
                    fair: true,
                    usage_gpu_seconds: 0.0,
                    at: self.at,
                    weight: 1.0,
                    delay_seconds: 0.0,
                    holding: 0,
                }),
        )
    }

    /// Some share orders its queue by fair share (SPEC §12): the queue's stored order
    /// (priority, submission) is then not the scheduling order, which
    /// [`Snapshot::scheduling_order`] gives.
    pub fn has_fair_share(&self) -> bool {
        self.shares.iter().any(|s| s.fair_share)
    }

    /// Sort queued rows into the scheduling order (SPEC §3, §12): priority, then effective
    /// submission time (the submission plus the user's fair-share delay, as of this
    /// snapshot), then submission, then id. O(n log n): for answers and the console's
    /// rows when some share has fair share (otherwise the stored order is it).
    pub fn scheduling_order(&self, rows: &mut [&JobView]) {
        if !self.has_fair_share() {
            return;
        }
        let fair: std::collections::HashSet<&str> = self
            .shares
            .iter()
            .filter(|s| s.fair_share)
            .map(|s| s.share.as_str())
            .collect();
        let delay: HashMap<(&str, &str), i64> = self
            .users
            .iter()
            .filter(|u| u.fair)
            .map(|u| {
                (
                    (u.share.as_str(), u.user.as_str()),
                    (u.delay_seconds * 1000.0) as i64,
                )
            })
            .collect();
        let key = |j: &JobView| {
            let user = crate::model::charged_user(j.submitter.as_deref());
            let d = if fair.contains(j.share.as_str()) {
                delay.get(&(j.share.as_str(), user)).copied().unwrap_or(0)
            } else {
                0
            };
            (
                // PENDING jobs (SPEC §13) are in no queue order: after every queued one.
                j.state == crate::model::JobState::Pending,
                std::cmp::Reverse(j.priority),
                j.submitted.saturating_add(d),
                j.submitted,
                j.id,
            )
        };
        rows.sort_by_cached_key(|j| key(j));
    }

    /// Why fair share puts a queued job where it is (SPEC §12), in words: its user's
    /// standing, and the oldest job of the share at its priority it goes ahead of, if
    /// one (`bob has used vision 3× less than alice lately`). `None` outside fair-share
    /// shares. Walks the queue: for one job's details, not for every row.
    pub fn fair_share_note(&self, j: &JobView) -> Option<String> {
        let me = self.fair_standing(j)?;
        let h = |gpu_s: f64| format!("{:.1} GPU-h", gpu_s / 3600.0);
        let mut note = format!(
            "{} has used {} {} lately (weight {}): their jobs count as submitted {} later",
            me.user,
            me.share,
            h(me.usage_gpu_seconds),
            me.weight,
            crate::duration::human((me.delay_seconds * 1000.0) as i64)
        );
        let eff = |v: &JobView, d: f64| v.submitted as f64 + d * 1000.0;
        let mine = eff(j, me.delay_seconds);
        let passed = self
            .queue
            .iter()
            .filter(|o| {
                o.share == j.share
                    && o.priority == j.priority
                    && o.submitted < j.submitted
                    && o.submitter.as_ref().map(|s| &s.name)
                        != j.submitter.as_ref().map(|s| &s.name)
            })
            .filter_map(|o| {
                let st = self.fair_standing(o)?;
                (eff(o, st.delay_seconds) > mine).then_some((o, st))
            })
            .min_by_key(|(o, _)| (o.submitted, o.id));
        if let Some((o, st)) = passed {
            let per = |u: &crate::sched::UserStanding| u.usage_gpu_seconds / u.weight.max(1e-9);
            let why = if per(&me) <= 1e-9 {
                format!(
                    "{} has not used {} lately, {} has ({})",
                    me.user,
                    me.share,
                    st.user,
                    h(st.usage_gpu_seconds)
                )
            } else {
                format!(
                    "{} has used {} {:.1}× less than {} lately",
                    me.user,
                    me.share,
                    per(&st) / per(&me),
                    st.user
                )
            };
            note.push_str(&format!(
                "; ahead of job {} ({}, submitted {} earlier): {why}",
                o.id,
                st.user,
                crate::duration::human(j.submitted - o.submitted)
            ));
        }
        Some(note)
    }

    /// A view with its reason written out (for answers that leave the process).
    pub fn resolved(&self, j: &JobView) -> JobView {
        let mut v = j.clone();
        if v.reason_group.is_some() {
            v.reason = Arc::from(self.reason(j));
            v.reason_group = None;
        }
        v
    }

    /// A queued row as answers carry it: its reason written out and the forecast's
    /// estimate of its start (`estimatedStart`, `estimateNote`).
    pub fn queued_row(&self, j: &JobView) -> JobView {
        use crate::forecast::Estimate;
        let mut v = self.resolved(j);
        let e = self.estimate(j.id);
        let note = match &e {
            Estimate::Range { .. } => "estimate".to_string(),
            Estimate::AtLeast { why, .. } => why.clone(),
            Estimate::NotWithin(end) => format!(
                "not within {}",
                crate::duration::short(end - self.estimates.computed_at)
            ),
            Estimate::NotYet => "not estimated yet".to_string(),
        };
        v.estimated_start = e.start();
        v.estimated_start_earliest = e.earliest();
        v.estimated_start_latest = e.latest();
        v.estimate_kind = e.kind(self.at);
        v.estimate_note = Some(note);
        if let Some(u) = self.fair_standing(j) {
            v.fair_share_delay_seconds = Some(u.delay_seconds.round() as i64);
            v.user_usage_gpu_seconds = Some(u.usage_gpu_seconds.round() as i64);
        }
        v
    }

    /// The queue with every reason written out (O(queue); for `jobs`, off the runtime).
    pub fn queue_views(&self) -> Vec<JobView> {
        self.queue.iter().map(|j| self.queued_row(j)).collect()
    }

    /// Is `unit` sliced by memory (SPEC §15): its jobs' quantities are GiB.
    pub fn sliced(&self, unit: &str) -> bool {
        self.units
            .iter()
            .any(|u| u.name == unit && u.memory_gib.is_some())
    }

    /// Build the whole picture from the live scheduler. `telemetry` is keyed by (unit,
    /// device index). The live runtime builds it once and then keeps it up to date with
    /// [`Picture`]; this is also what a test compares that against.
    pub fn build(
        sched: &Sched,
        at: Time,
        version: u64,
        config: ConfigStatus,
        preemptions: Vec<PreemptionRecord>,
        telemetry: &HashMap<(String, u32), Telemetry>,
    ) -> Snapshot {
        let mut picture = Picture::new();
        picture.rebuild(sched);
        let mut snap = picture.publish(sched, at, config, telemetry);
        snap.version = version;
        snap.preemptions = Arc::new(preemptions);
        let mut finished: Vec<JobView> = sched
            .jobs()
            .filter(|j| matches!(j.phase, Phase::Done))
            .map(|j| job_view(sched, j, Arc::from(sched.reason(j.id))))
            .collect();
        finished.sort_by_key(|j| std::cmp::Reverse((j.finished, j.id)));
        finished.truncate(200);
        snap.finished = Arc::new(finished.into_iter().map(Arc::new).collect());
        snap
    }

    /// The shares and units part of a picture (O(shares × units + devices)).
    fn standing(
        sched: &Sched,
        oldest: &HashMap<(String, String), i64>,
        telemetry: &HashMap<(String, u32), Telemetry>,
    ) -> (Vec<ShareUnitStats>, Vec<UnitView>) {
        let shares = sched
            .share_stats()
            .into_iter()
            .map(|s| ShareUnitStats {
                oldest_queued: oldest.get(&(s.share.clone(), s.unit.clone())).copied(),
                ..s
            })
            .collect();
        let units = sched
            .unit_totals()
            .into_iter()
            .map(|(name, usable, used, guaranteed)| {
                let memory_gib = sched
                    .unit_indexes()
                    .find(|&u| sched.unit_name(u) == name)
                    .and_then(|u| sched.slice_of(u));
                let mut devices: Vec<DeviceView> = Vec::new();
                for (node, index, job) in sched.device_map(&name) {
                    let j = job.and_then(|id| sched.job(id));
                    let slice = j.filter(|_| memory_gib.is_some()).map(|j| SliceView {
                        job: j.id,
                        job_name: j.name().to_string(),
                        share: sched.share_name(j.share).to_string(),
                        gib: j.quantity,
                    });
                    // A sliced device is listed once per job on it: one row here, its
                    // jobs in `slices`.
                    if let (Some(slice), Some(last)) = (&slice, devices.last_mut())
                        && last.node == node
                        && last.index == index
                        && !last.slices.is_empty()
                    {
                        last.slices.push(slice.clone());
                        continue;
                    }
                    let t = telemetry.get(&(name.clone(), index));
                    devices.push(DeviceView {
                        node,
                        index,
                        job,
                        job_name: j.map(|j| j.name().to_string()),
                        share: j.map(|j| sched.share_name(j.share).to_string()),
                        util: t.map(|t| t.util),
                        mem_used: t.map(|t| t.mem_used),
                        mem_total: t.map(|t| t.mem_total),
                        lost_since: None,
                        fake: false,
                        mig: None,
                        slices: slice.into_iter().collect(),
                    });
                }
                let reservation = sched.reservation_of(&name).and_then(|r| {
                    let j = sched.job(r.job)?;
                    Some(ReservationView {
                        job: r.job,
                        job_name: j.name().to_string(),
                        share: sched.share_name(j.share).to_string(),
                        since: r.since,
                        node: r.node.map(|n| sched.node_name(n).to_string()),
                    })
                });
                UnitView {
                    name,
                    usable,
                    used,
                    guaranteed,
                    devices,
                    reservation,
                    unusable: None,
                    memory_gib,
                }
            })
            .collect();
        (shares, units)
    }
}

/// Where a holding job runs as [`places_text`] writes it, from the live scheduler, every
/// node named (the implicit one too): what the runtime's log line of a started attempt
/// says (`local:[0, 1]`, a gang's `gpu1:[0, 1] gpu2:[0, 1]`).
pub fn job_places_text(sched: &Sched, j: &crate::sched::Job, style: PlaceStyle) -> String {
    let places = sched.job_places(j);
    let places: Vec<(Option<&str>, &[u32])> = places
        .iter()
        .map(|(n, d)| (Some(n.as_str()), d.as_slice()))
        .collect();
    places_text(&places, style)
}

/// A gang's nodes with its devices on each, in rank order (SPEC §16); empty for a job on
/// one node and for one that holds nothing.
pub fn gang_placements(sched: &Sched, j: &crate::sched::Job) -> Vec<Placement> {
    if !j.is_gang() {
        return Vec::new();
    }
    sched
        .job_places(j)
        .into_iter()
        .map(|(node, devices)| Placement { node, devices })
        .collect()
}

pub(crate) fn job_view(sched: &Sched, j: &crate::sched::Job, reason: Arc<str>) -> JobView {
    let lane_borrowing = sched
        .share_stats_for(j.share, j.unit)
        .is_some_and(|(usage, limit)| usage > limit);
    JobView {
        id: j.id,
        name: j.name().to_string(),
        share: sched.share_name(j.share).to_string(),
        unit: sched.unit_name(j.unit).to_string(),
        quantity: j.quantity,
        priority: j.priority,
        state: if j.is_parent() {
            sched.parent_state(j)
        } else {
            j.state
        },
        submitted: j.submitted,
        started: j.started_at(),
        finished: j.finished_at,
        devices: j.devices().to_vec(),
        uuids: Vec::new(),
        node: sched
            .job_node(j)
            .filter(|_| sched.has_nodes())
            .map(|n| sched.node_name(n).to_string()),
        num_nodes: j.is_gang().then_some(j.nodes),
        placements: gang_placements(sched, j),
        on_borrowed: j.is_holding() && lane_borrowing,
        reclaimed_first: sched.reclaimed_first(j.id),
        reason,
        signal: j
            .fail_reason
            .as_ref()
            .filter(|_| j.state == JobState::Failed)
            .and_then(|r| r.signal()),
        reason_group: None,
        stopping: j.stop_cause().map(|c| {
            let what = match c {
                StopCause::Cancel => "cancelled".to_string(),
                StopCause::Timeout => "timed out".to_string(),
                StopCause::OverMemory => "over its GPU memory".to_string(),
                StopCause::Preempt { reason, .. } => format!("preempted ({})", reason.as_str()),
            };
            (what, j.stopping_since().unwrap_or(0))
        }),
        stop: j
            .stopping_since()
            .zip(sched.stop_plan(j.id))
            .map(|(since, plan)| StopView::new(since, plan)),
        over_memory: None,
        attempts: j.attempts_started,
        preempted_count: j.preempted_count,
        lost_gpu_ms: j.lost_ticks,
        nominated: j.is_nominated(),
        submitter: j.spec.submitter.clone(),
        estimated_start: None,
        estimated_start_earliest: None,
        estimated_start_latest: None,
        estimate_kind: None,
        estimate_note: None,
        fair_share_delay_seconds: None,
        user_usage_gpu_seconds: None,
        command: j
            .spec
            .command
            .as_ref()
            .map(|c| c.line())
            .unwrap_or_default(),
        parent: j.parent(),
        array_index: j.array_index(),
        depends_on: sched
            .dependencies(j.id)
            .into_iter()
            .map(|(job, label, status)| DependencyView {
                job,
                label,
                state: status.map(|s| match s {
                    crate::sched::DepStatus::Waiting(s) => s,
                    crate::sched::DepStatus::Succeeded => JobState::Succeeded,
                    crate::sched::DepStatus::Failed => JobState::Failed,
                }),
            })
            .collect(),
        last_checkpoint: j.checkpoint.as_deref().map(CheckpointView::from),
        checkpoint_every_seconds: j.spec.checkpoint_every_seconds,
        array: j.array_size().map(|size| {
            let counts = sched.array_counts(j.id);
            ArrayView {
                size,
                counts: JobState::ALL
                    .iter()
                    .filter(|s| counts[s.ordinal()] > 0)
                    .map(|&s| (s, counts[s.ordinal()]))
                    .collect(),
            }
        }),
    }
}

impl Snapshot {
    /// Every job the scheduler remembers, finished ones included, in id order (for
    /// `shareq jobs --all`; the snapshot itself keeps only the newest finished jobs).
    pub fn all_jobs(sched: &Sched) -> Vec<JobView> {
        sched
            .jobs()
            .map(|j| job_view(sched, j, Arc::from(sched.reason(j.id))))
            .collect()
    }

    /// One job's view, if the scheduler still has it.
    pub fn job(sched: &Sched, id: JobId) -> Option<JobView> {
        sched
            .job(id)
            .map(|j| job_view(sched, j, Arc::from(sched.reason(id))))
    }
}

#[cfg(test)]
mod tests {
    use crate::model::Strategy;
    use crate::sched::ShareUnitStats;

    /// How a preemption's loss reads (SPEC §14): `saved Ns before` only for a victim that
    /// reported a checkpoint less than a minute before its release; otherwise what it lost,
    /// per GPU, since its last save or its start.
    #[test]
    fn lost_work_reads_as_saved_shortly_before_or_as_what_was_lost() {
        let at = |since: i64, saved: bool| super::LostWork {
            gpus: 2,
            last_save: 1_000_000 - since,
            released: 1_000_000,
            saved,
        };
        assert_eq!(at(40_000, true).text(), "saved 40s before");
        assert_eq!(at(59_999, true).text(), "saved 59s before");
        assert_eq!(at(60_000, true).text(), "lost 2 GPU × 1m");
        assert_eq!(at(40_000, false).text(), "lost 2 GPU × 40s");
        assert_eq!(at(12 * 60_000 + 5_000, false).text(), "lost 2 GPU × 12m");
        assert_eq!(at(7_500_000, true).text(), "lost 2 GPU × 2h05m");
        assert_eq!(at(12 * 60_000, false).gpu_ms(), 2 * 12 * 60_000);
        assert_eq!(at(1_500, false).gpu_seconds(), 3.0);
        // A release recorded before the save (clocks of two machines) loses nothing.
        let mut odd = at(0, true);
        odd.last_save += 5_000;
        assert_eq!((odd.gpu_ms(), odd.text().as_str()), (0, "saved 0s before"));
    }

    /// Where a job runs has one text (SPEC §10, §16): a node's devices, and a gang's every
    /// node in rank order, listed (`jobs`, logs) or compact (the console, `events`).
    #[test]
    fn places_read_the_same_for_one_node_and_for_a_gang() {
        use super::{PlaceStyle, devices_text, places_text};
        assert_eq!(devices_text(None, &[0, 1]), "[0, 1]");
        assert_eq!(devices_text(Some("n2"), &[3]), "n2:[3]");
        let gang: [(Option<&str>, &[u32]); 2] = [(Some("gpu1"), &[0, 1]), (Some("gpu2"), &[2, 3])];
        assert_eq!(
            places_text(&gang, PlaceStyle::Listed),
            "gpu1:[0, 1] gpu2:[2, 3]"
        );
        assert_eq!(places_text(&gang, PlaceStyle::Compact), "gpu1:0,1 gpu2:2,3");
        assert_eq!(places_text(&[(None, &[4, 5])], PlaceStyle::Compact), "4,5");
    }

    /// A gang in `jobs --json` (SPEC §16): `numNodes`, `quantity` the GPUs of all its
    /// nodes, `node`/`devices` its first node's (what readers of one node knew), and
    /// `placements` every node's; a job on one node carries neither new field. Its GPUS
    /// cell reads `2×4`.
    #[test]
    fn a_gang_row_carries_its_nodes_and_reads_as_nodes_times_gpus() {
        use super::{JobView, PlaceStyle, Placement};
        let plain = serde_json::json!({
            "id": 7, "name": "g", "share": "a", "unit": "gpu", "quantity": 8,
            "priority": 0, "state": "RUNNING", "submitted": 0, "started": 1_000,
            "finished": null, "devices": [0, 1, 2, 3], "node": "gpu1", "on_borrowed": false,
            "reason": "", "stopping": null, "attempts": 1, "preempted_count": 0,
            "nominated": false,
        });
        let one: JobView = serde_json::from_value(plain.clone()).unwrap();
        let text = serde_json::to_value(&one).unwrap();
        assert!(text.get("numNodes").is_none() && text.get("placements").is_none());
        assert_eq!(
            (one.is_gang(), one.per_node(), one.amount(None)),
            (false, 8, "8".into())
        );
        assert_eq!(one.places_text(PlaceStyle::Listed), "gpu1:[0, 1, 2, 3]");
        let mut gang = one.clone();
        gang.num_nodes = Some(2);
        gang.placements = vec![
            Placement {
                node: "gpu1".into(),
                devices: vec![0, 1, 2, 3],
            },
            Placement {
                node: "gpu2".into(),
                devices: vec![4, 5, 6, 7],
            },
        ];
        let v = serde_json::to_value(&gang).unwrap();
        assert_eq!(v["numNodes"], 2);
        assert_eq!(v["quantity"], 8);
        assert_eq!(
            (&v["node"], &v["devices"]),
            (&plain["node"], &plain["devices"])
        );
        assert_eq!(
            v["placements"],
            serde_json::json!([
                {"node": "gpu1", "devices": [0, 1, 2, 3]},
                {"node": "gpu2", "devices": [4, 5, 6, 7]},
            ])
        );
        let back: JobView = serde_json::from_value(v).unwrap();
        assert_eq!(back, gang);
        assert_eq!((gang.is_gang(), gang.per_node()), (true, 4));
        assert_eq!(gang.amount(None), "2×4");
        assert_eq!(gang.amount(Some("G")), "2×4G");
        assert_eq!(
            gang.places_text(PlaceStyle::Compact),
            "gpu1:0,1,2,3 gpu2:4,5,6,7"
        );
    }

    /// `lostGpuSeconds` is written in seconds and read back to the millisecond.
    #[test]
    fn a_jobs_lost_gpu_time_is_seconds_on_the_wire() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct W {
            #[serde(with = "super::gpu_seconds")]
            v: i64,
        }
        let text = serde_json::to_string(&W { v: 1_440_123 }).unwrap();
        assert_eq!(text, r#"{"v":1440.123}"#);
        let back: W = serde_json::from_str(&text).unwrap();
        assert_eq!(back.v, 1_440_123);
    }

    /// SPEC §14: a running job's saves as `jobs` and the console show them.
    #[test]
    fn saves_read_as_an_age_and_a_late_one_is_marked() {
        use super::{CheckpointView, JobView, saves_text};
        let mut v: JobView = serde_json::from_value(serde_json::json!({
            "id": 1, "name": "j", "share": "a", "unit": "gpu", "quantity": 1,
            "priority": 0, "state": "RUNNING", "submitted": 0, "started": 1_000,
            "finished": null, "devices": [0], "on_borrowed": false, "reason": "",
            "stopping": null, "attempts": 2, "preempted_count": 1, "nominated": false,
        }))
        .unwrap();
        let min = 60_000;
        assert_eq!(saves_text(&v, 5 * min), None, "no reports, no period");
        // A save of the attempt before is not this attempt's.
        v.last_checkpoint = Some(CheckpointView {
            at: 500,
            attempt: 1,
            note: None,
        });
        assert_eq!(saves_text(&v, 5 * min), None);
        v.last_checkpoint = Some(CheckpointView {
            at: 1_000 + min,
            attempt: 2,
            note: Some("x".into()),
        });
        let s = saves_text(&v, 1_000 + 5 * min).unwrap();
        assert_eq!((s.text.as_str(), s.overdue), ("saved 4m ago", false));
        v.checkpoint_every_seconds = Some(60);
        let s = saves_text(&v, 1_000 + 5 * min).unwrap();
        assert_eq!(
            (s.text.as_str(), s.overdue),
            ("saved 4m ago, expected every 1m", true)
        );
        v.last_checkpoint = None;
        let s = saves_text(&v, 1_000 + 3 * min).unwrap();
        assert_eq!(
            (s.text.as_str(), s.overdue),
            ("no save in 3m, expected every 1m", true)
        );
        assert_eq!(saves_text(&v, 1_000 + min), None, "not late yet");
        v.state = crate::model::JobState::Runnable;
        assert_eq!(saves_text(&v, 1_000 + 3 * min), None, "not running");
    }

    /// A share's row on the wire (`ShareView` in docs/API.md) is the core's record: its
    /// names, their order and the fields left out when unset stay as they were.
    #[test]
    fn a_share_row_keeps_its_wire_shape() {
        let mut s = ShareUnitStats {
            share: "vision".into(),
            unit: "a100".into(),
            strategy: Strategy::LendAndBorrow,
            present: true,
            enabled: true,
            in_share: false,
            limit: 4,
            cap: None,
            usage: 3,
            borrowed: 1,
            lent: 0,
            idle: 2,
            running: 2,
            queued: 1,
            oldest_queued: Some(5),
            fair_share: false,
            user_limit: None,
        };
        let head = r#"{"name":"vision","unit":"a100","strategy":"LEND_AND_BORROW","present":true,"enabled":true,"in_share":false,"limit":4,"cap":null,"usage":3,"borrowed":1,"lent":0,"idle":2,"running":2,"queued":1,"oldest_queued":5"#;
        assert_eq!(serde_json::to_string(&s).unwrap(), format!("{head}}}"));
        s.fair_share = true;
        s.user_limit = Some(2);
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(
            text,
            format!(r#"{head},"fair_share":true,"user_limit":2}}"#)
        );
        assert_eq!(serde_json::from_str::<ShareUnitStats>(&text).unwrap(), s);
    }
}
