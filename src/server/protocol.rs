//! The control socket's language: one JSON request per line, one JSON answer per line.

use super::input::CancelOutcome;
use crate::model::{JobId, JobSpec};
use crate::sched::LendEdge;
use crate::snapshot::{ConfigStatus, JobView, PreemptionRecord, ShareView, UnitView};
use serde::{Deserialize, Serialize};

/// The longest request line accepted (1 MiB).
pub const MAX_LINE: usize = 1 << 20;

/// A request, e.g. `{"op":"submit","job":{"jobName":"a","quotaShareName":"qs1",...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Submit {
        job: JobSpec,
    },
    Cancel {
        ids: Vec<JobId>,
    },
    Priority {
        id: JobId,
        priority: u32,
    },
    /// Queue and running jobs; with `all`, finished ones too.
    Jobs {
        #[serde(default)]
        all: bool,
    },
    Status,
    Reload,
    /// Switch the connection to streaming: from then on the scheduler writes one JSON
    /// [`crate::snapshot::Update`] per line: `{"full":{...snapshot}}` first, then after
    /// each change (at most every [`SUBSCRIBE_EVERY_MS`] ms) `{"delta":{...}}` with what
    /// changed since the version sent before (the whole picture again when the client
    /// fell too far behind), until either side closes.
    Subscribe,
}

/// The shortest interval between two snapshots streamed to a subscriber.
pub const SUBSCRIBE_EVERY_MS: u64 = 50;

/// Jobs as `shareq jobs` shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsAnswer {
    /// RUNNABLE jobs in scheduling order, each with its reason.
    pub queue: Vec<JobView>,
    /// Jobs holding GPUs.
    pub running: Vec<JobView>,
    /// Finished jobs (only with `all`), newest first.
    pub finished: Vec<JobView>,
    /// The preemption log, newest first.
    pub preemptions: Vec<PreemptionRecord>,
}

/// What `shareq status` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusAnswer {
    pub env_name: String,
    pub config: ConfigStatus,
    pub units: Vec<UnitView>,
    pub shares: Vec<ShareView>,
    pub lending: Vec<LendEdge>,
    pub grace_period_seconds: u32,
    pub queued: usize,
    pub running: usize,
}

/// An answer: `{"ok":true,...}` or `{"ok":false,"error":"..."}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<JobId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<Vec<CancelOutcome>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<JobsAnswer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusAnswer>,
}

impl Response {
    pub fn ok() -> Response {
        Response {
            ok: true,
            ..Response::default()
        }
    }

    pub fn error(msg: impl Into<String>) -> Response {
        Response {
            ok: false,
            error: Some(msg.into()),
            ..Response::default()
        }
    }
}
