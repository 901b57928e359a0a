//! What the console asks the runtime to do: the only way the view changes the world.

use crate::model::{JobId, JobSpec};

/// A request from the console to the runtime, sent on the console's `mpsc` channel.
///
/// The console never mutates scheduler state itself; it sends one of these and waits for
/// the next snapshot to show the effect.
// One action per key press: boxing the submit's spec would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Submit a job (from the `s` form, or the demo load generator).
    Submit(Box<JobSpec>),
    /// Cancel a queued or running job (after the y/n confirmation).
    Cancel(JobId),
    /// Set a job's `schedulingPriority` (`p` prompt, `+`/`-` bumps).
    SetPriority(JobId, u32),
    /// What would this submission do now? Asked by the submit form as it changes; the
    /// answer (the real scheduler on a copy of the live state) comes back tagged `key`.
    Predict { key: String, spec: Box<JobSpec> },
    /// Re-read the config directory now (`r`).
    Reload,
    /// Fetch the utilisation history of a window (`h`, then 1/2/3 or tab).
    History(crate::snapshot::usage::Window),
    /// Leave the console and end the session. `stop_jobs`: stop every running job first
    /// (the "stop all" answer of the quit dialog); `false` when nothing was running.
    Quit { stop_jobs: bool },
    /// Leave the console but keep running jobs running and the queue kept (the "detach"
    /// answer of the quit dialog).
    Detach,
}

impl Action {
    /// True for the actions after which the console exits.
    pub fn ends_console(&self) -> bool {
        matches!(self, Action::Quit { .. } | Action::Detach)
    }
}
