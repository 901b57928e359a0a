//! What the runtime task receives on its channel: actions from the socket, the console
//! and the config source, and reports from the processes it runs.

use super::refusal::Refusal;
use crate::config::ConfigUpdate;
use crate::exec::gpu::telemetry::Samples;
use crate::model::{JobId, JobSpec, SpecError};
use crate::snapshot::JobView;
use tokio::sync::oneshot;

/// What became of one id in a cancel request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CancelOutcome {
    pub id: JobId,
    /// Was it cancelled now (false: finished or already cancelled: nothing to do)?
    pub cancelled: bool,
    /// Set when the id is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A time window of `jobs --all --since/--until` (ms since the epoch, both ends
/// included): a job is in it when it was queued or running at some instant of it, i.e.
/// it was submitted by `until` and had not finished before `since`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    pub since: Option<i64>,
    pub until: Option<i64>,
}

impl Span {
    pub fn contains(&self, j: &JobView) -> bool {
        self.until.is_none_or(|u| j.submitted <= u)
            && self.since.is_none_or(|s| j.finished.is_none_or(|f| f >= s))
    }
}

/// What the sender of an [`Input::Submit`] asks first, off the runtime task: whether
/// `workingDirectory` is a directory its submitter may enter, asked with the submitter's
/// credentials (`exec::supervisor::privdrop::may_enter`: a directory they may not see
/// is refused as a missing one, so the answer tells them nothing more) and never
/// resolved against the scheduler's own directory (a relative one is refused). That
/// takes the file system (on a blocking thread). With one, the command is checked before
/// it, as the runtime would: a spec wrong in both is refused for its command. The
/// runtime checks the rest.
pub async fn check_before_submit(spec: &JobSpec) -> Result<(), Refusal> {
    let Some(dir) = spec.working_directory.clone() else {
        return Ok(());
    };
    spec.check_command()?;
    let asked = dir.clone();
    let submitter = spec.submitter.clone();
    let may_enter = tokio::task::spawn_blocking(move || {
        crate::exec::supervisor::privdrop::may_enter(submitter.as_deref(), &asked)
    })
    .await
    .unwrap_or(false);
    if may_enter {
        Ok(())
    } else {
        Err(SpecError::NotADirectory(dir).into())
    }
}

/// A checkpoint report as the socket took it: what it claims, and who sent it (from the
/// kernel: the caller's uid and name, and its pid where the socket says).
#[derive(Debug, Clone)]
pub struct CheckpointReport {
    pub job: JobId,
    pub attempt: u32,
    pub token: Option<crate::exec::state::runfiles::AttemptToken>,
    pub note: Option<String>,
    pub uid: u32,
    pub user: String,
    pub pid: Option<i32>,
}

/// Where an answer goes. `None` when the sender does not wait for one.
pub type Reply<T> = Option<oneshot::Sender<T>>;

/// One input of the runtime.
#[derive(Debug)]
pub enum Input {
    /// Submit a job; answers with its id or why it was refused. Whether its
    /// `workingDirectory` is a directory is for the sender to ask first, off this task
    /// ([`check_before_submit`]); the runtime checks the rest.
    Submit {
        spec: JobSpec,
        reply: Reply<Result<JobId, Refusal>>,
    },
    /// Cancel jobs on behalf of user `by`.
    Cancel {
        ids: Vec<JobId>,
        by: String,
        reply: Reply<Vec<CancelOutcome>>,
    },
    /// Change a job's priority on behalf of user `by`; `Ok(false)` when it had already
    /// finished.
    SetPriority {
        id: JobId,
        priority: u32,
        by: String,
        reply: Reply<Result<bool, Refusal>>,
    },
    /// A new config from the watcher.
    Config(ConfigUpdate),
    /// Re-read the config directory now; answers with the errors when refused.
    Reload { reply: Reply<Result<(), Refusal>> },
    /// Write one file of the config directory and reload (`put_config`, admins):
    /// validated with the rest of the directory first, written only when valid (see
    /// `config_write`); with `dry_run`, validated only.
    PutConfig {
        file: String,
        text: String,
        dry_run: bool,
        reply: oneshot::Sender<Result<super::config_write::ConfigWritten, Refusal>>,
    },
    /// The config watcher runs: a directory an explicit reload refuses is told to it, so
    /// that undoing the change (removing the file) is delivered and clears the error.
    Watching(crate::config::Refusals),
    /// Publish a snapshot now if anything changed, then answer: afterwards the
    /// snapshot receiver shows every input sent before this one. (Without it, snapshots
    /// follow changes within ~20 ms.)
    Sync { reply: oneshot::Sender<()> },
    /// What this submission would do now, decided by the real scheduler on a copy of the
    /// live state (the console's submit form).
    Predict {
        spec: JobSpec,
        reply: oneshot::Sender<crate::forecast::Prediction>,
    },
    /// Every job the runtime remembers, finished ones included (those in `span` only).
    AllJobs {
        span: Span,
        reply: oneshot::Sender<Vec<JobView>>,
    },
    /// The utilisation history of a window (`store::usage`), read off the runtime task;
    /// an error when the scheduler keeps no database or it cannot be read.
    History {
        window: crate::snapshot::usage::Window,
        reply: oneshot::Sender<Result<crate::snapshot::usage::UsageHistory, Refusal>>,
    },
    /// A checkpoint report from the socket (SPEC §14, `shareq checkpoint`): answered with
    /// the report as stored, or why it was refused.
    Checkpoint {
        report: CheckpointReport,
        reply: oneshot::Sender<Result<crate::snapshot::CheckpointView, Refusal>>,
    },
    /// Stop scheduling and end the runtime; with `stop_jobs`, stop every running job
    /// first (SIGTERM, grace, SIGKILL) and wait until they are gone.
    Shutdown { stop_jobs: bool, reply: Reply<()> },
    /// Reports from the processes and timers of the runtime itself.
    Exec(ExecReport),
}

/// A report from a supervisor or the telemetry (only the runtime creates these).
#[derive(Debug)]
pub struct ExecReport(pub(crate) ExecKind);

#[derive(Debug)]
pub(crate) enum ExecKind {
    /// What the executor saw of an attempt or a node (`exec::backend`).
    Attempt(crate::exec::backend::Report),
    Telemetry(Samples),
    /// Each real device's compute processes and the MiB they hold (SPEC §15's overuse).
    GpuProcesses(crate::exec::gpu::telemetry::Processes),
    /// The config directory, read and validated off the runtime task (`Input::Reload`).
    Reloaded {
        loaded: Result<Box<crate::config::LoadedConfig>, Vec<crate::config::ConfigError>>,
        /// The content hash of the directory read, when it could be read.
        hash: Option<String>,
        reply: Reply<Result<(), Refusal>>,
    },
    /// The state directory was deleted or replaced (`server::state_watch`): stop.
    StateLost(String),
    /// A forecast of the queue's starts, made off the runtime task (`server::forecasts`),
    /// with the typical runtimes it read from the history, if it read them.
    Estimated {
        estimates: std::sync::Arc<crate::forecast::Estimates>,
        runtimes: Option<std::sync::Arc<crate::forecast::Runtimes>>,
    },
    /// What applying the config with this hash did to the jobs (`forecast::dry_run` on
    /// the state before it), worked out off the runtime task.
    ConfigEffects {
        hash: String,
        dry_run: Box<crate::forecast::DryRun>,
    },
    /// Telemetry saw a GPU vanish or fail (unit, device index, what it saw).
    DeviceLost {
        unit: String,
        device: u32,
        why: String,
    },
}
