//! Starting a supervisor for an attempt and signalling it (the runtime's side of the
//! supervisor protocol in [`super::supervisor`]).

use super::launch::{ExitStatus, LaunchSpec};
use super::state_dir::StateDir;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The hidden subcommand that runs a supervisor.
pub const SUPERVISE_SUBCOMMAND: &str = "__supervise";

/// A started supervisor.
#[derive(Debug)]
pub struct Supervisor {
    pub pid: i32,
    child: tokio::process::Child,
}

/// How to stop an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM to the job's process group.
    Term,
    /// SIGKILL to the group and everything left under the supervisor.
    Kill,
}

/// Write the launch spec and start `exe __supervise SPEC` in its own process group, so
/// that a Ctrl-C aimed at the scheduler's terminal never reaches the job.
pub fn launch(exe: &Path, state: &StateDir, spec: &LaunchSpec) -> std::io::Result<Supervisor> {
    std::fs::create_dir_all(state.job_runs(spec.job))?;
    let path = state.launch_file(spec.job, spec.attempt);
    let json = serde_json::to_vec(spec).map_err(std::io::Error::other)?;
    std::fs::write(&path, json)?;
    let child = tokio::process::Command::new(exe)
        .arg(SUPERVISE_SUBCOMMAND)
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(false)
        .spawn()?;
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| std::io::Error::other("supervisor has no pid"))?;
    Ok(Supervisor { pid, child })
}

impl Supervisor {
    /// Wait until the command runs (`on_running` is called then), then until the
    /// supervisor ends; returns the recorded exit status. A supervisor that died without
    /// recording one (killed from outside) reads as exit 128 + its signal.
    pub async fn wait(mut self, exit_file: &Path, on_running: impl FnOnce()) -> ExitStatus {
        if let Some(out) = self.child.stdout.take() {
            let mut line = String::new();
            let mut r = BufReader::new(out);
            if matches!(r.read_line(&mut line).await, Ok(n) if n > 0) && line.starts_with("started")
            {
                on_running();
            }
        }
        let status = self.child.wait().await;
        if let Some(s) = ExitStatus::read(exit_file) {
            return s;
        }
        use std::os::unix::process::ExitStatusExt;
        let code = match status {
            Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
            Err(_) => 255,
        };
        ExitStatus {
            code: if code == 0 { 255 } else { code },
            signal: None,
            finished_at: super::now_ms(),
        }
    }
}

/// Signal a supervisor by pid. Errors (it is already gone) are ignored: its exit is
/// reported by whoever waits for it.
pub fn signal(pid: i32, how: Stop) {
    let sig = match how {
        Stop::Term => Signal::SIGTERM,
        Stop::Kill => Signal::SIGUSR1,
    };
    let _ = kill(Pid::from_raw(pid), sig);
}
