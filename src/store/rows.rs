//! The records the store hands back: jobs to recover, history rows, attempts, configs —
//! and the encoding of the few scheduler types kept in text columns.

use crate::model::{JobId, JobSpec, JobState};
use crate::sched::{FailReason, PreemptReason, RestoredHolding, RestoredJob, StopCause, Time};
use crate::snapshot::{JobView, PreemptionRecord};
use std::sync::Arc;

/// A job that was queued or held GPUs when the scheduler last wrote: what a restart needs.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredJob {
    pub id: JobId,
    pub spec: JobSpec,
    pub unit: String,
    pub submitted: Time,
    pub priority: u32,
    pub state: JobState,
    pub preempted_count: u32,
    pub failed_attempts: u32,
    pub attempts_started: u32,
    /// As shown, e.g. `CANCELLED: by alice` for a job whose cancel was under way.
    pub fail_reason: Option<String>,
    /// Set when it held GPUs (SCHEDULED, STARTING or RUNNING).
    pub holding: Option<StoredHolding>,
    /// The jobs it waits for, resolved (SPEC §13).
    pub deps: Vec<JobId>,
    /// Its place in an array (a parent's counts from its children's rows).
    pub array: Option<crate::sched::ArrayLink>,
    /// GPU-ms its preemptions lost so far (SPEC §14).
    pub lost_gpu_ms: i64,
    /// Its latest checkpoint report (SPEC §14).
    pub checkpoint: Option<crate::sched::Checkpoint>,
}

/// The attempt a job was running when the scheduler last wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredHolding {
    /// 1-based attempt number: names `<state>/runs/<job>/<attempt>.{pid,exit}`.
    pub attempt: u32,
    /// The node of `devices` (SPEC §10); `None` without `nodes`.
    pub node: Option<String>,
    pub devices: Vec<u32>,
    /// A gang's other nodes and its devices there (SPEC §16), in node order; empty for a
    /// plain job.
    pub more: Vec<(String, Vec<u32>)>,
    pub started_at: Time,
    /// It was being stopped (preempted, cancelled, timed out).
    pub stopping: Option<StopCause>,
}

impl StoredJob {
    /// The job for [`crate::sched::Sched::restore_job`]: holding its GPUs (adopted) or
    /// queued again.
    pub fn restored(&self, keep_holding: bool) -> RestoredJob {
        let holding = self
            .holding
            .as_ref()
            .filter(|_| keep_holding)
            .map(|h| RestoredHolding {
                node: h.node.clone(),
                devices: h.devices.clone(),
                more: h.more.clone(),
                started_at: h.started_at,
                state: self.state,
                stopping: h.stopping,
            });
        RestoredJob {
            id: self.id,
            spec: self.spec.clone(),
            unit: self.unit.clone(),
            submitted: self.submitted,
            priority: self.priority,
            preempted_count: self.preempted_count,
            failed_attempts: self.failed_attempts,
            attempts_started: self.attempts_started,
            fail_reason: self
                .fail_reason
                .as_deref()
                .and_then(|r| r.strip_prefix("CANCELLED: by "))
                .map(|by| FailReason::Cancelled(by.to_string())),
            holding,
            deps: self.deps.clone(),
            array: self.array,
            lost_ticks: self.lost_gpu_ms,
            checkpoint: self.checkpoint.clone(),
        }
    }
}

/// One job of the history (`shareq jobs --all`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    pub id: JobId,
    pub name: String,
    pub share: String,
    pub unit: String,
    pub quantity: u32,
    pub priority: u32,
    pub state: JobState,
    pub submitted: Time,
    /// Start of the latest attempt.
    pub started_at: Option<Time>,
    pub finished_at: Option<Time>,
    /// Devices of the latest attempt.
    pub devices: Vec<u32>,
    pub attempts: u32,
    pub preempted_count: u32,
    /// GPU-ms its preemptions lost (SPEC §14).
    pub lost_gpu_ms: i64,
    pub fail_reason: Option<String>,
    pub submitter: Option<std::sync::Arc<crate::model::Submitter>>,
    /// The command as one line (`Command::line`).
    pub command: String,
    /// An array child's parent and index; a parent's children (SPEC §13).
    pub parent: Option<JobId>,
    pub array_index: Option<u32>,
    pub array: Option<crate::snapshot::ArrayView>,
    /// Its latest checkpoint report (SPEC §14).
    pub last_checkpoint: Option<crate::snapshot::CheckpointView>,
}

/// The one way a stored job becomes a row of the console and the answers (`jobs`,
/// `job`), for a job the scheduler no longer holds or when none runs: what only a live
/// scheduler knows (reason groups, borrowing, nominations, estimates) is left empty, and
/// the reason is the failure's, else the state's.
impl From<&JobRecord> for JobView {
    fn from(r: &JobRecord) -> JobView {
        let reason = match &r.fail_reason {
            Some(why) if r.state == JobState::Failed => why.clone(),
            _ => r.state.as_str().to_string(),
        };
        JobView {
            id: r.id,
            name: r.name.clone(),
            share: r.share.clone(),
            unit: r.unit.clone(),
            quantity: r.quantity,
            priority: r.priority,
            state: r.state,
            submitted: r.submitted,
            started: r.started_at,
            finished: r.finished_at,
            devices: r.devices.clone(),
            uuids: Vec::new(),
            node: None,
            num_nodes: None,
            placements: Vec::new(),
            on_borrowed: false,
            reclaimed_first: false,
            signal: r
                .fail_reason
                .as_deref()
                .filter(|_| r.state == JobState::Failed)
                .and_then(crate::sched::FailReason::signal_in)
                .map(str::to_string),
            reason: Arc::from(reason),
            reason_group: None,
            stopping: None,
            stop: None,
            over_memory: None,
            attempts: r.attempts,
            preempted_count: r.preempted_count,
            lost_gpu_ms: r.lost_gpu_ms,
            nominated: false,
            submitter: r.submitter.clone(),
            estimated_start: None,
            estimated_start_earliest: None,
            estimated_start_latest: None,
            estimate_kind: None,
            estimate_note: None,
            fair_share_delay_seconds: None,
            user_usage_gpu_seconds: None,
            parent: r.parent,
            array_index: r.array_index,
            depends_on: Vec::new(),
            array: r.array.clone(),
            command: r.command.clone(),
            last_checkpoint: r.last_checkpoint.clone(),
            checkpoint_every_seconds: None,
        }
    }
}

/// One attempt of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    pub job: JobId,
    pub attempt: u32,
    pub devices: Vec<u32>,
    pub borrowed: u32,
    pub started_at: Time,
    /// Why it was stopped: a preemption reason, `CANCELLED` or `TIMEOUT`.
    pub stop: Option<String>,
    pub ended_at: Option<Time>,
    pub exit_code: Option<i32>,
    /// `SUCCEEDED`, `NON_ZERO_EXIT`, the stop, `RELEASED` or `LOST_ON_RESTART`.
    pub outcome: Option<String>,
}

/// A configuration that was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigRecord {
    pub hash: String,
    pub source: String,
    pub applied_at: Time,
}

/// Everything a restarting runtime reads back.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    /// Jobs queued or holding GPUs, in id order (the order `restore_job` needs).
    pub jobs: Vec<StoredJob>,
    /// The latest preemptions, newest first.
    pub preemptions: Vec<PreemptionRecord>,
    /// The latest finished jobs, newest first.
    pub history: Vec<JobRecord>,
    /// The highest job id ever handed out (0 when none): ids are never reused, even
    /// after pruning.
    pub max_job_id: JobId,
    /// The last configuration applied.
    pub config: Option<ConfigRecord>,
    /// The database's identity, whose run files are its own.
    pub owner: crate::exec::state::runfiles::Owner,
    /// Every job that ended SUCCEEDED, and every array (parent, size): what dependencies
    /// on ended jobs are judged by (SPEC §13).
    pub succeeded: Vec<JobId>,
    pub arrays: Vec<(JobId, u32)>,
}

// ---- text encodings ----

pub(crate) fn state_from_str(s: &str) -> Option<JobState> {
    Some(match s {
        "SUBMITTED" => JobState::Submitted,
        "PENDING" => JobState::Pending,
        "RUNNABLE" => JobState::Runnable,
        "SCHEDULED" => JobState::Scheduled,
        "STARTING" => JobState::Starting,
        "RUNNING" => JobState::Running,
        "SUCCEEDED" => JobState::Succeeded,
        "FAILED" => JobState::Failed,
        _ => return None,
    })
}

pub(crate) fn preempt_reason_from_str(s: &str) -> Option<PreemptReason> {
    Some(match s {
        "CROSS_SHARE_RECLAIM" => PreemptReason::CrossShareReclaim,
        "IN_SHARE_PRIORITY" => PreemptReason::InSharePriority,
        "DEVICE_LOST" => PreemptReason::DeviceLost,
        _ => return None,
    })
}

/// (stop_kind, stop_by, stop_reason) columns for a stop cause.
pub(crate) fn encode_stop(
    c: Option<StopCause>,
) -> (Option<&'static str>, Option<i64>, Option<&'static str>) {
    match c {
        None => (None, None, None),
        Some(StopCause::Cancel) => (Some("CANCEL"), None, None),
        Some(StopCause::Timeout) => (Some("TIMEOUT"), None, None),
        Some(StopCause::OverMemory) => (Some("OVER_MEMORY"), None, None),
        Some(StopCause::Preempt { by, reason }) => (
            Some("PREEMPT"),
            by.map(|b| b.0 as i64),
            Some(reason.as_str()),
        ),
    }
}

/// A stored value this build cannot read back: what it is, as the record's error says.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadValue {
    #[error("unknown preemption reason `{0}`")]
    PreemptReason(String),
    #[error("unknown stop kind `{0}`")]
    StopKind(String),
    #[error("devices `{text}`: {source}")]
    Devices {
        text: String,
        source: serde_json::Error,
    },
}

pub(crate) fn decode_stop(
    kind: Option<&str>,
    by: Option<i64>,
    reason: Option<&str>,
) -> Result<Option<StopCause>, BadValue> {
    Ok(match kind {
        None => None,
        Some("CANCEL") => Some(StopCause::Cancel),
        Some("TIMEOUT") => Some(StopCause::Timeout),
        Some("OVER_MEMORY") => Some(StopCause::OverMemory),
        Some("PREEMPT") => {
            let r = reason.unwrap_or_default();
            let reason =
                preempt_reason_from_str(r).ok_or_else(|| BadValue::PreemptReason(r.to_string()))?;
            Some(StopCause::Preempt {
                by: by.map(|b| JobId(b as u64)),
                reason,
            })
        }
        Some(other) => return Err(BadValue::StopKind(other.to_string())),
    })
}

pub(crate) fn devices_json(d: &[u32]) -> String {
    serde_json::to_string(d).unwrap_or_else(|_| "[]".to_string())
}

/// A gang's other nodes and their devices (SPEC §16) as stored; `None` for a plain job.
pub(crate) fn more_json(more: &[(String, Vec<u32>)]) -> Option<String> {
    (!more.is_empty()).then(|| serde_json::to_string(more).unwrap_or_else(|_| "[]".to_string()))
}

pub(crate) fn more_from_json(s: Option<&str>) -> Result<Vec<(String, Vec<u32>)>, BadValue> {
    match s {
        None => Ok(Vec::new()),
        Some(t) => serde_json::from_str(t).map_err(|source| BadValue::Devices {
            text: t.to_string(),
            source,
        }),
    }
}

pub(crate) fn devices_from_json(s: &str) -> Result<Vec<u32>, BadValue> {
    serde_json::from_str(s).map_err(|source| BadValue::Devices {
        text: s.to_string(),
        source,
    })
}
