//! The control socket's language: one JSON request per line, one JSON answer per line.

use crate::model::{JobId, JobSpec};
use crate::sched::LendEdge;
use crate::sched::ShareUnitStats;
use crate::server::runtime::input::CancelOutcome;
use crate::server::runtime::refusal::{CheckpointRefusal, Refusal};
use crate::snapshot::{ConfigStatus, JobView, PreemptionRecord, UnitView};
use serde::{Deserialize, Serialize};

/// The longest request line accepted (1 MiB).
pub const MAX_LINE: usize = 1 << 20;

/// The version of this protocol (docs/API.md): additive changes keep it, a breaking one
/// bumps it, and the server keeps serving the previous one for a release.
pub const API_VERSION: u32 = 1;

/// The versions this server speaks (`hello` answers with them).
pub const API_VERSIONS: &[u32] = &[1];

/// A request, e.g. `{"op":"submit","job":{"jobName":"a","quotaShareName":"qs1",...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Which protocol versions the server speaks, and who the caller is (from its peer
    /// credentials). With `api`, the version the client speaks: one the server does not
    /// speak is refused with `unsupported_api`.
    Hello {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        api: Option<u32>,
    },
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
    /// Queue and running jobs; with `all`, finished ones too. `since`/`until` (ms since
    /// the epoch) keep only the jobs queued or running at some instant between them.
    Jobs {
        #[serde(default)]
        all: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<i64>,
    },
    /// The utilisation history of the last hour, day or week (`store::usage`).
    History {
        #[serde(default)]
        window: crate::snapshot::usage::Window,
    },
    Status,
    Reload,
    /// One job, queued, running or finished (from the history when the scheduler no
    /// longer has it in view); `not_found` for an id it does not know.
    Job {
        #[serde(deserialize_with = "job_or_child")]
        id: JobId,
    },
    /// Part of a job's output log, from byte `offset` of attempt `attempt` (default: the
    /// latest). For callers who cannot read the file themselves (admins who are not
    /// root); the owner and admins only.
    Log {
        #[serde(deserialize_with = "job_or_child")]
        id: JobId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        #[serde(default)]
        offset: u64,
        /// A gang's rank (SPEC §16): its node's own log (default 0, the first node's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rank: Option<u32>,
    },
    /// The newest `limit` entries of the audit trail (admins only).
    Audit {
        #[serde(default = "audit_limit")]
        limit: usize,
    },
    /// Switch the connection to streaming: from then on the scheduler writes one JSON
    /// [`crate::snapshot::Update`] per line: `{"full":{...snapshot}}` first, then after
    /// each change (at most every [`SUBSCRIBE_EVERY_MS`] ms) `{"delta":{...}}` with what
    /// changed since the version sent before (the whole picture again when the client
    /// fell too far behind), until either side closes.
    Subscribe,
    /// What this job would do if submitted now (SPEC §11), decided by the real scheduler
    /// on a copy of the live state; nothing is submitted.
    Predict {
        job: JobSpec,
    },
    /// Switch the connection to the decision stream (`shareq events`): the stored lines
    /// after sequence number `after` and at or after `since` (ms), one JSON
    /// [`crate::events::EventLine`] per line, then with `follow` the live ones until either
    /// side closes; without `follow` the scheduler closes after the past. Anyone may read
    /// it (SPEC §9: it holds nothing a `jobs` listing does not show).
    Events {
        #[serde(default)]
        after: u64,
        #[serde(default)]
        since: i64,
        #[serde(default)]
        follow: bool,
    },
    /// Usage figures over [since, until] (ms) from the history (`shareq report`). Per-user
    /// figures: `users: true` asks for them (admins only); absent, they come when the
    /// caller is an admin.
    Report {
        since: i64,
        until: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        users: Option<bool>,
    },
    /// Write one file of the config directory (admins only): `text` (YAML documents) as
    /// `file` (a plain `*.yaml` / `*.yml` name in the directory), validated with the rest
    /// of the directory as the watcher would; a valid set is written and reloaded, an
    /// invalid one changes nothing and is answered with its errors (`rejected`). With
    /// `dryRun`, only validated.
    PutConfig {
        file: String,
        text: String,
        #[serde(default, rename = "dryRun", alias = "dry_run")]
        dry_run: bool,
    },
    /// `shareq whatif` on this scheduler's database, for admins who cannot read it: the
    /// jobs submitted since `since` (ms) replayed under the configs in force (or
    /// `current`) and under `config`, each sent as its files' text.
    Whatif {
        config: Vec<crate::whatif::ConfigFile>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        current: Option<Vec<crate::whatif::ConfigFile>>,
        since: i64,
    },
    /// `shareq check --against` this scheduler's state, for admins who cannot read its
    /// database: what applying `config` now would do to the jobs it holds.
    DryRun {
        config: Vec<crate::whatif::ConfigFile>,
    },
    /// A job's attempt says it has saved its work (SPEC §14, `shareq checkpoint`), with
    /// an optional note (at most 200 bytes). Only a process of that attempt may: the
    /// scheduler knows it by the caller's cgroup, else by the attempt's `token`
    /// (`SHAREQ_ATTEMPT_TOKEN`).
    Checkpoint {
        job: JobId,
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<crate::exec::state::runfiles::AttemptToken>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

/// A job as the API names it: a number, or `"P:I"` for child I of array P (as the CLI
/// takes it); the id it names is [`crate::model::JobRef::id`]'s.
fn job_or_child<'de, D: serde::Deserializer<'de>>(d: D) -> Result<JobId, D::Error> {
    crate::model::JobRef::deserialize(d).map(crate::model::JobRef::id)
}

pub use crate::server::runtime::config_write::ConfigWritten;

impl Request {
    /// `jobs` without a time window.
    pub fn jobs(all: bool) -> Request {
        Request::Jobs {
            all,
            since: None,
            until: None,
        }
    }
}

fn audit_limit() -> usize {
    100
}

/// The most log bytes one `log` answer carries.
pub const LOG_CHUNK: usize = 256 * 1024;

/// A piece of a job's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogChunk {
    pub attempt: u32,
    /// Where `data` starts and where the next request should continue.
    pub offset: u64,
    pub next: u64,
    /// The bytes, as UTF-8 with invalid sequences replaced.
    pub data: String,
    /// The attempt has ended (the scheduler has its exit status, or none of it runs).
    pub ended: bool,
    /// The uid of the job's submitter, where known: the CLI prints the output as it is
    /// only to its owner (SPEC §9, terminal safety).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_uid: Option<u32>,
}

/// The shortest interval between two snapshots streamed to a subscriber.
pub const SUBSCRIBE_EVERY_MS: u64 = 50;

/// Jobs as `shareq jobs` shows them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobsAnswer {
    /// RUNNABLE jobs in scheduling order, each with its reason.
    pub queue: Vec<JobView>,
    /// Jobs holding GPUs.
    pub running: Vec<JobView>,
    /// PENDING jobs (SPEC §13: waiting for their dependencies), in id order.
    #[serde(default)]
    pub pending: Vec<JobView>,
    /// Array parents not yet settled, in id order, with their children's counts.
    #[serde(default)]
    pub arrays: Vec<JobView>,
    /// Finished jobs (only with `all`), newest first.
    pub finished: Vec<JobView>,
    /// The preemption log, newest first.
    pub preemptions: Vec<PreemptionRecord>,
    /// The asker is an admin (SPEC §9): may cancel or reprioritise every job listed, not
    /// only their own (what `cancel`'s filters match).
    #[serde(rename = "callerIsAdmin", default)]
    pub caller_is_admin: bool,
    /// The units sliced by memory (SPEC §15): their jobs' `quantity` is GiB.
    #[serde(rename = "slicedUnits", default, skip_serializing_if = "Vec::is_empty")]
    pub sliced_units: Vec<String>,
}

/// What `shareq status` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusAnswer {
    pub env_name: String,
    pub config: ConfigStatus,
    pub units: Vec<UnitView>,
    pub shares: Vec<ShareUnitStats>,
    pub lending: Vec<LendEdge>,
    pub grace_period_seconds: u32,
    pub queued: usize,
    pub running: usize,
    /// PENDING jobs: waiting for their dependencies (SPEC §13).
    #[serde(default)]
    pub pending: usize,
    /// Why scheduling is paused (its decisions cannot be written), while it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<String>,
    /// While the state filesystem is short of space: its figures and the users whose job
    /// data and logs fill it, most first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
}

/// What kind of error an answer carries: the machine-readable half of an error, stable
/// across releases of one API version (docs/API.md), beside the human `error` message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The rules of SPEC §9 refuse this caller this action (the message names the rule).
    NotAllowed,
    /// The scheduler refused the submission (SPEC §2; its own fields included) or the
    /// config (`reload`).
    Rejected,
    /// A limit of SPEC §8/§9: request size, connections, a job's size, one user's queued
    /// jobs, the state filesystem's reserve.
    Limit,
    /// No such job (or it has no log yet).
    NotFound,
    /// The scheduler is stopping and did not carry the request out.
    ShuttingDown,
    /// The request cannot be read or an argument is out of range.
    BadRequest,
    /// The scheduler cannot answer this now (scheduling paused, a history it cannot read,
    /// no database).
    Unavailable,
    /// `hello` named an API version this server does not speak.
    UnsupportedApi,
}

impl ErrorCode {
    /// The code of a refusal: from its kind alone, never from its words.
    pub fn of(refusal: &Refusal) -> ErrorCode {
        use crate::model::SpecError;
        use crate::sched::PriorityError;
        match refusal {
            Refusal::NotAllowed(_) => ErrorCode::NotAllowed,
            // A relayed refusal is made by an attached console from an answer it got (no
            // socket serves it on); were one served, it is the far scheduler's refusal.
            Refusal::Rejected(_)
            | Refusal::Config(_)
            | Refusal::Relayed(_)
            | Refusal::GangOnLocal(_) => ErrorCode::Rejected,
            Refusal::Spec(SpecError::TooLarge { .. }) => ErrorCode::Limit,
            Refusal::Spec(
                SpecError::NoCommand
                | SpecError::EmptyCommand
                | SpecError::NotADirectory(_)
                | SpecError::ClientToken,
            ) => ErrorCode::Rejected,
            Refusal::UserLimit { .. } | Refusal::UserData { .. } | Refusal::StateFull { .. } => {
                ErrorCode::Limit
            }
            Refusal::Paused(_)
            | Refusal::NoHistory
            | Refusal::HistoryUnreadable(_)
            | Refusal::Unreachable(_) => ErrorCode::Unavailable,
            Refusal::Stopped(_) => ErrorCode::ShuttingDown,
            Refusal::Priority(PriorityError::OutOfRange { .. }) => ErrorCode::BadRequest,
            Refusal::Priority(PriorityError::NoJob(_)) => ErrorCode::NotFound,
            Refusal::Checkpoint(c) => match c {
                CheckpointRefusal::OtherUser { .. } | CheckpointRefusal::NotOfAttempt { .. } => {
                    ErrorCode::NotAllowed
                }
                CheckpointRefusal::NoJob(_) => ErrorCode::NotFound,
                CheckpointRefusal::NotRunning { .. } => ErrorCode::Rejected,
                CheckpointRefusal::NoteTooLong { .. } => ErrorCode::BadRequest,
                CheckpointRefusal::NotStored(_) => ErrorCode::Unavailable,
            },
        }
    }
}

/// The answer to `hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The version this connection speaks (the server's newest unless `hello` named one).
    pub api: u32,
    /// Every version the server speaks.
    pub apis: Vec<u32>,
    /// The shareq release.
    pub version: String,
    /// The caller, as the kernel's peer credentials and the user database say.
    pub user: String,
    pub uid: u32,
    /// Is the caller an admin (SPEC §9)?
    pub admin: bool,
}

/// An answer: `{"ok":true,...}` or `{"ok":false,"error":"...","code":"..."}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Set with every error: what kind it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hello: Option<Hello>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<JobId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<Vec<CancelOutcome>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<JobsAnswer>,
    /// The answer to `job`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusAnswer>,
    /// Set when the request was refused as not allowed (SPEC §9): the CLI exits with
    /// [`crate::access::EXIT_NOT_ALLOWED`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_allowed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogChunk>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<Vec<crate::server::runtime::audit::AuditEntry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<crate::forecast::Prediction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<crate::report::Report>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<crate::snapshot::usage::UsageHistory>,
    /// The answer to `put_config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigWritten>,
    /// The answer to `whatif`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whatif: Option<crate::whatif::WhatIfAnswer>,
    /// The answer to `dry_run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<crate::whatif::DryRunAnswer>,
    /// The answer to `checkpoint`: the report as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<crate::snapshot::CheckpointView>,
    /// On the server only: the whole answer already written out as its JSON line (a long
    /// `jobs` answer, written from the snapshot itself), sent as is.
    #[serde(skip)]
    pub line: Option<Vec<u8>>,
}

impl Response {
    pub fn ok() -> Response {
        Response {
            ok: true,
            ..Response::default()
        }
    }

    /// A refusal (see [`crate::access::Denied`]).
    pub fn denied(d: crate::access::Denied) -> Response {
        Response::refused(&Refusal::NotAllowed(d))
    }

    /// A refusal's answer: its code ([`ErrorCode::of`]) and its message; one of the rules
    /// (`not_allowed`) also says `not_allowed` (for older clients).
    pub fn refused(r: &Refusal) -> Response {
        let code = ErrorCode::of(r);
        Response {
            not_allowed: code == ErrorCode::NotAllowed,
            ..Response::error(code, r.to_string())
        }
    }

    /// An error of kind `code`, with its message for people.
    pub fn error(code: ErrorCode, msg: impl Into<String>) -> Response {
        Response {
            ok: false,
            error: Some(msg.into()),
            code: Some(code),
            ..Response::default()
        }
    }

    /// The scheduler is stopping: the request was not carried out.
    pub fn shutting_down() -> Response {
        Response::error(ErrorCode::ShuttingDown, "the scheduler is shutting down")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{JobId, SpecError};
    use crate::sched::{PriorityError, Rejection};

    /// Every kind of refusal has its code from its kind: the same words under another
    /// kind get that kind's code (tests/it/refusal_codes pins them through the socket).
    #[test]
    fn each_refusal_kind_has_its_code() {
        let words = || "scheduling is paused (limits.x) below the reserve of".to_string();
        let cases = [
            (
                Refusal::NotAllowed(crate::access::Denied(words())),
                ErrorCode::NotAllowed,
            ),
            (Refusal::Rejected(Rejection::Quantity), ErrorCode::Rejected),
            (Refusal::Spec(SpecError::NoCommand), ErrorCode::Rejected),
            (Refusal::Spec(SpecError::EmptyCommand), ErrorCode::Rejected),
            (
                Refusal::Spec(SpecError::NotADirectory(words())),
                ErrorCode::Rejected,
            ),
            (Refusal::Spec(SpecError::ClientToken), ErrorCode::Rejected),
            (
                Refusal::Spec(SpecError::TooLarge { bytes: 1 << 20 }),
                ErrorCode::Limit,
            ),
            (
                Refusal::UserLimit {
                    user: "bob".into(),
                    has: 1,
                    asks: 1,
                    most: 1,
                },
                ErrorCode::Limit,
            ),
            (
                Refusal::StateFull {
                    free_mib: 1,
                    reserve_mib: 2,
                },
                ErrorCode::Limit,
            ),
            (
                Refusal::UserData {
                    user: "bob".into(),
                    held: 2,
                    budget: 1,
                },
                ErrorCode::Limit,
            ),
            (Refusal::Paused(words()), ErrorCode::Unavailable),
            (Refusal::Stopped(words()), ErrorCode::ShuttingDown),
            (
                Refusal::Priority(PriorityError::OutOfRange {
                    priority: 10_000,
                    max: 9999,
                }),
                ErrorCode::BadRequest,
            ),
            (
                Refusal::Priority(PriorityError::NoJob(JobId(9))),
                ErrorCode::NotFound,
            ),
            (Refusal::Config(words()), ErrorCode::Rejected),
            (Refusal::NoHistory, ErrorCode::Unavailable),
            (Refusal::HistoryUnreadable(words()), ErrorCode::Unavailable),
            (Refusal::Unreachable(words()), ErrorCode::Unavailable),
            (Refusal::Relayed(words()), ErrorCode::Rejected),
        ];
        for (refusal, code) in cases {
            assert_eq!(ErrorCode::of(&refusal), code, "{refusal:?}");
            let answer = Response::refused(&refusal);
            assert_eq!(answer.code, Some(code));
            assert_eq!(answer.error.as_deref(), Some(refusal.to_string().as_str()));
            assert_eq!(answer.not_allowed, code == ErrorCode::NotAllowed);
        }
    }
}
