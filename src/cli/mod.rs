//! The subcommands' bodies: each turns arguments into library calls and an exit code.

mod admin;
mod cancel;
pub mod check;
mod checkpoint;
mod console;
pub mod error;
mod events;
mod gpus;
mod history;
mod jobs;
mod log;
mod priority;
mod replay;
mod report;
mod serve;
mod status;
mod submit;
mod supervise;
mod whatif;
mod when;

pub use admin::{AuditArgs, ReloadArgs, audit, reload};
pub use cancel::{CancelArgs, cancel};
pub use checkpoint::{CheckpointArgs, checkpoint};
pub use console::{ConsoleArgs, DemoArgs, default_config_dir, demo, tui};
pub use error::{CliError, ExitKind, exit_code, exit_code_of};
pub use events::{EventsArgs, events};
pub use gpus::{gpus, slurm_conf};
pub use history::{HistoryArgs, history};
pub use jobs::{JobsArgs, jobs};
pub use log::{LogArgs, log};
pub use priority::{PriorityArgs, priority};
pub use replay::replay;
pub use report::{ReportArgs, csv as report_csv, report, table as report_table};
pub use serve::{SYSTEM_STATE, ServeArgs, client_state, serve};
pub use status::{StatusArgs, status};
pub use submit::{SubmitArgs, submit};
pub use supervise::supervise;
pub use whatif::{ExportTraceArgs, WhatifArgs, export_trace, whatif};

use crate::server::{Client, Request, Response};
use std::path::Path;

/// A command that prints and ends (`jobs`, `log`, `replay`, ...) ends quietly when its
/// reader goes away (`shareq jobs | head`): SIGPIPE gets its default action back, as in
/// any Unix filter, instead of a write error that `println!` turns into a panic. The
/// scheduler's own commands (`serve`, the console) keep it ignored: a client that hangs
/// up must not end them.
pub fn end_quietly_on_closed_pipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: called at start, before any thread exists; SIG_DFL installs no handler.
    unsafe {
        let _ = signal(Signal::SIGPIPE, SigHandler::SigDfl);
    }
}

/// Send one request to the scheduler of the state directory.
/// `--state`'s help in every client subcommand: where the scheduler to ask is found
/// (`serve::state_dir`).
pub const STATE_HELP: &str = "The scheduler's state directory (default: $SHAREQ_STATE, else \
    your own when a scheduler runs there, else /var/lib/shareq when the system's does)";

pub(crate) fn request(state: Option<&Path>, req: &Request) -> anyhow::Result<Response> {
    let explicit = state.is_some();
    let state = serve::state_dir(state)?;
    let mut client = Client::connect(&state).map_err(|e| {
        serve::when_system_down(e, &state, explicit, Path::new(serve::SYSTEM_STATE))
    })?;
    Ok(client.call(req)?)
}

/// Ask the scheduler of the state directory for `what` (`pick` takes it from the
/// answer); when no scheduler runs there, read it from its database with `offline`
/// (read-only) and say so on stderr.
pub(crate) fn ask_or_read<T, E: std::fmt::Display>(
    cmd: &str,
    state: Option<&Path>,
    req: &Request,
    what: &str,
    pick: impl FnOnce(Response) -> Option<T>,
    offline: impl FnOnce(&Path) -> Result<T, E>,
) -> Result<T, CliError> {
    use crate::server::ClientError;
    match request(state, req) {
        Ok(r) if r.ok => pick(r)
            .ok_or_else(|| CliError::failed(format!("shareq {cmd}: the scheduler sent no {what}"))),
        Ok(r) => Err(CliError::refused(
            &r,
            format!(
                "shareq {cmd}: {}",
                crate::visible::visible_lines(r.error.as_deref().unwrap_or_default())
            ),
        )),
        Err(e) => match e.downcast_ref::<ClientError>() {
            Some(ClientError::NotRunning { state, hint, .. }) => match offline(Path::new(state)) {
                Ok(v) => {
                    eprintln!(
                        "shareq {cmd}: no scheduler is running on {state}; showing what its \
                             database holds (read-only); {hint}"
                    );
                    Ok(v)
                }
                Err(db) => Err(CliError::failed(format!(
                    "shareq {cmd}: {e}\n(and the database cannot be read: {db})"
                ))),
            },
            _ => Err(CliError::client(&e, format!("shareq {cmd}: {e}"))),
        },
    }
}
