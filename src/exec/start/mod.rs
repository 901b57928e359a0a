//! Starting a supervisor for an attempt and signalling it (the runtime's side of the
//! supervisor protocol in [`crate::exec::supervisor`]).
//!
//! The channel of a supervisor the runtime starts is its standard input and output
//! ([`crate::exec::supervisor::channel`]):
//! - in: the launch spec (one JSON line), then, once the runtime has stored the attempt's
//!   exit status in its database, `stored`;
//! - out: `started PID` when the command runs, `exit <ExitRecord>` once every process of
//!   the attempt is gone, after which the supervisor waits for `stored` (or for the end
//!   of its input: the runtime is gone, and the status is left in the attempt's record,
//!   `exec::state::runfiles`).

pub mod clone_into;
pub mod spawner;

use crate::exec::state::runfiles::{self, ExitRecord, ExitStatus, LaunchSpec, Owner};
use crate::exec::supervisor::channel::{
    EXIT_LINE, SPEC_ON_CHANNEL, STORED_LINE, SUPERVISE_SUBCOMMAND,
};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, pthread_sigmask};
use nix::unistd::Pid;
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The environment variable that picks how supervisors are started (read once, by
/// [`start_path`]; docs/DEPLOY.md, "How supervisors start").
pub const START_PATH_VAR: &str = "SHAREQ_SUPERVISOR_START";

/// How supervisors are started. Each falls back to the next where it cannot be used here,
/// and a later one never uses an earlier one's means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartPath {
    /// Copied from the spawner ([`spawner`]): inside the attempt's group, no `exec`. The
    /// default.
    Spawner,
    /// `clone3` straight into the attempt's unified group, then `exec` of `shareq
    /// __supervise` ([`clone_into`]).
    Clone,
    /// A plain start (`posix_spawn`); the supervisor enters its groups itself.
    Plain,
}

impl StartPath {
    pub const ALL: [StartPath; 3] = [StartPath::Spawner, StartPath::Clone, StartPath::Plain];

    /// Its name in [`START_PATH_VAR`].
    pub fn name(self) -> &'static str {
        match self {
            StartPath::Spawner => "spawner",
            StartPath::Clone => "clone",
            StartPath::Plain => "plain",
        }
    }

    pub fn parse(s: &str) -> Option<StartPath> {
        StartPath::ALL.into_iter().find(|p| p.name() == s.trim())
    }
}

/// The start path this process uses: [`START_PATH_VAR`] where set to a known name (an
/// unknown one is logged and the default is used), else [`StartPath::Spawner`].
pub fn start_path() -> StartPath {
    static CHOSEN: std::sync::OnceLock<StartPath> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let chosen = match std::env::var(START_PATH_VAR) {
            Err(_) => StartPath::Spawner,
            Ok(v) => StartPath::parse(&v).unwrap_or_else(|| {
                tracing::warn!(
                    "{START_PATH_VAR}={v:?} is none of spawner, clone, plain: supervisors start from the spawner"
                );
                StartPath::Spawner
            }),
        };
        tracing::info!("supervisors start by: {} ({START_PATH_VAR})", chosen.name());
        chosen
    })
}

/// Whether supervisors are started inside their attempt's unified group here (so that no
/// start waits for a move into it, and a start can be prepared while it is written).
pub fn starts_inside_groups() -> bool {
    start_path() != StartPath::Plain && clone_into::available()
}

/// A started supervisor.
#[derive(Debug)]
pub struct Supervisor {
    pub pid: i32,
    child: Child,
    /// The launch spec's line, until it is sent.
    spec: Vec<u8>,
}

/// The supervisor process and its channel: started by tokio, or straight into its
/// attempt's group ([`crate::exec::start::clone_into`]).
#[derive(Debug)]
enum Child {
    Tokio(tokio::process::Child),
    Into {
        child: crate::exec::start::clone_into::Child,
        stdin: Option<tokio::net::unix::pipe::Sender>,
        stdout: Option<tokio::net::unix::pipe::Receiver>,
        reaped: bool,
    },
}

impl Child {
    async fn write_in(&mut self, bytes: &[u8]) {
        let _ = match self {
            Child::Tokio(c) => match c.stdin.as_mut() {
                Some(i) => i.write_all(bytes).await,
                None => Ok(()),
            },
            Child::Into { stdin, .. } => match stdin.as_mut() {
                Some(i) => i.write_all(bytes).await,
                None => Ok(()),
            },
        };
    }

    fn close_in(&mut self) {
        match self {
            Child::Tokio(c) => drop(c.stdin.take()),
            Child::Into { stdin, .. } => drop(stdin.take()),
        }
    }

    fn take_out(&mut self) -> Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>> {
        match self {
            Child::Tokio(c) => c.stdout.take().map(|o| Box::new(o) as _),
            Child::Into { stdout, .. } => stdout.take().map(|o| Box::new(o) as _),
        }
    }

    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Child::Tokio(c) => c.wait().await,
            Child::Into { child, reaped, .. } => {
                let status = crate::exec::start::clone_into::wait(child).await;
                *reaped = status.is_ok();
                status
            }
        }
    }
}

impl Drop for Child {
    /// One started into its group and never waited for is reaped once it ends (tokio does
    /// the same for its own).
    fn drop(&mut self) {
        if let Child::Into { child, reaped, .. } = self
            && !*reaped
            && !matches!(
                crate::exec::start::clone_into::try_reap(child.pid),
                Ok(Some(_)) | Err(_)
            )
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let child = crate::exec::start::clone_into::Child {
                pid: child.pid,
                pidfd: match child.pidfd.try_clone() {
                    Ok(fd) => fd,
                    Err(_) => return,
                },
            };
            rt.spawn(async move {
                let _ = crate::exec::start::clone_into::wait(&child).await;
            });
        }
    }
}

/// How a supervisor's attempt ended, as the runtime learnt it.
#[derive(Debug)]
pub enum Ended {
    /// The supervisor handed the status over its channel and waits, alone in its
    /// attempt, for [`Supervisor::stored`] (or [`Supervisor::abandon`]).
    HandedOver(ExitStatus),
    /// The supervisor is gone: its status was left in the record, or it died without one.
    Gone(ExitStatus),
}

/// How to stop an attempt, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stop {
    /// A preemption with a notice (SPEC §14): the supervisor sends its launch spec's
    /// notice signal to the job's process group at once and SIGTERM `seconds` later, on
    /// its own clock (a repeated request changes nothing; without a notice in its spec
    /// it is [`Stop::Term`]).
    Notice,
    /// SIGTERM to the job's process group.
    Term,
    /// SIGKILL to the group and everything left under the supervisor.
    Kill,
}

/// Start `exe __supervise --channel` (its spec follows on its channel,
/// [`Supervisor::send_spec`]), which starts a session of its own first thing (`exec::containment::session::enter_own_session`): a Ctrl-C aimed at the scheduler's terminal
/// never reaches the job, and the session id (= the supervisor's pid) names every process
/// of the attempt (see `exec::containment::session`).
///
/// With `unified`, the attempt's group in the unified hierarchy, the supervisor starts
/// inside it ([`crate::exec::start::clone_into`]), and that group is taken out of the spec's list of
/// groups it enters itself: entering it from outside costs an RCU grace period per start
/// (docs/PERFORMANCE.md). Where that cannot be done, and without containment:
///
/// No `pre_exec` step, uid or group change here: so std starts it with `posix_spawn`
/// (glibc: `clone(CLONE_VM | CLONE_VFORK)`), which does not copy the scheduler's page
/// tables — a fork of a serve holding a long queue took milliseconds per start
/// (docs/PERFORMANCE.md). Until the supervisor's `setsid` it is in the scheduler's
/// process group, so the signals a terminal sends that group are blocked on this thread
/// over the spawn: the supervisor inherits them blocked and drops what came meanwhile.
pub fn launch(
    exe: &Path,
    spec: &mut LaunchSpec,
    unified: Option<&Path>,
) -> std::io::Result<Supervisor> {
    // Inside the group where it can be; else started as below, and the supervisor says
    // what is wrong with the group.
    if let Some(started) = start_early(exe, unified) {
        return started.supervisor(spec, unified);
    }
    let mut line = serde_json::to_vec(spec).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg(SUPERVISE_SUBCOMMAND)
        .arg(SPEC_ON_CHANNEL)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(false);
    let terminal = crate::exec::containment::session::terminal_signals();
    let mut before = SigSet::empty();
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&terminal), Some(&mut before))?;
    let spawned = cmd.spawn();
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&before), None)?;
    let child = spawned?;
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| std::io::Error::other("supervisor has no pid"))?;
    Ok(Supervisor {
        pid,
        child: Child::Tokio(child),
        spec: line,
    })
}

/// A supervisor started inside its attempt's unified group, waiting for its spec (sent
/// once the attempt's start is written: started early by `Backend::prepare`, or by
/// [`launch`]); it ends without running anything when its channel closes first (dropped:
/// the start was not written).
#[derive(Debug)]
pub struct Prestarted {
    pid: i32,
    child: Child,
}

/// Start a supervisor inside the unified group `dir` with nothing to run yet; `None`
/// where that cannot be done here (then [`launch`] starts it the usual way).
pub fn prestart(exe: &Path, dir: &Path) -> Option<Prestarted> {
    start_early(exe, Some(dir))
}

/// [`prestart`], or where there is no group (`dir` none) from the spawner only.
fn start_early(exe: &Path, dir: Option<&Path>) -> Option<Prestarted> {
    match launch_into(exe, dir) {
        Ok((pid, child)) => Some(Prestarted { pid, child }),
        Err(crate::exec::start::clone_into::Refused::Unsupported) => None,
        Err(crate::exec::start::clone_into::Refused::Failed(e)) => {
            let inside = dir.map(|d| format!(" inside {}", d.display()));
            tracing::debug!(
                "cannot start a supervisor{}: {e}",
                inside.unwrap_or_default()
            );
            None
        }
    }
}

impl Prestarted {
    /// The attempt's start is written: its spec, less the group it was started in (which
    /// it does not enter again), is what [`Supervisor::send_spec`] sends.
    pub fn supervisor(
        self,
        spec: &mut LaunchSpec,
        dir: Option<&Path>,
    ) -> std::io::Result<Supervisor> {
        if let Some(dir) = dir {
            spec.cgroup.retain(|d| d != dir);
        }
        let mut line = serde_json::to_vec(spec).map_err(std::io::Error::other)?;
        line.push(b'\n');
        Ok(Supervisor {
            pid: self.pid,
            child: self.child,
            spec: line,
        })
    }

    /// The start was not written: close its channel (it ends without running anything)
    /// and wait for its end.
    pub async fn abandon(mut self) {
        self.child.close_in();
        let _ = self.child.wait().await;
    }
}

/// [`launch`] inside the unified group `dir` (where given): the same supervisor and
/// channel, copied by the spawner ([`crate::exec::start::spawner`]) where one runs, else started with
/// the terminal's signals blocked (inside a group only).
fn launch_into(
    exe: &Path,
    dir: Option<&Path>,
) -> Result<(i32, Child), crate::exec::start::clone_into::Refused> {
    use crate::exec::start::clone_into::{Plan, Refused, spawn};
    use std::os::fd::AsFd;
    use std::os::unix::fs::OpenOptionsExt;
    if start_path() == StartPath::Plain {
        return Err(Refused::Unsupported);
    }
    let failed = Refused::Failed;
    // Only a handle on the group's directory (`O_PATH`: no open of the directory itself).
    let group = dir
        .map(|dir| {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_PATH | nix::libc::O_DIRECTORY)
                .open(dir)
        })
        .transpose()
        .map_err(failed)?;
    let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
    let (in_r, in_w) = nix::unistd::pipe2(cloexec).map_err(|e| failed(e.into()))?;
    let (out_r, out_w) = nix::unistd::pipe2(cloexec).map_err(|e| failed(e.into()))?;
    let copied = match start_path() {
        StartPath::Spawner => crate::exec::start::spawner::start(
            exe,
            [in_r.as_fd(), out_w.as_fd()],
            group.as_ref().map(|g| g.as_fd()),
        ),
        StartPath::Clone | StartPath::Plain => Err(Refused::Unsupported),
    };
    let child = match (copied, &group) {
        (Err(Refused::Unsupported), Some(group)) => {
            let null = dev_null().map_err(failed)?;
            let mut blocked = SigSet::empty();
            pthread_sigmask(SigmaskHow::SIG_BLOCK, None, Some(&mut blocked))
                .map_err(|e| failed(e.into()))?;
            for s in crate::exec::containment::session::terminal_signals().iter() {
                blocked.add(s);
            }
            spawn(&Plan {
                program: exe,
                args: &[SUPERVISE_SUBCOMMAND, SPEC_ON_CHANNEL],
                stdio: [in_r.as_fd(), out_w.as_fd(), null],
                blocked: &blocked,
                cgroup: group.as_fd(),
            })?
        }
        (copied, _) => copied?,
    };
    drop((in_r, out_w));
    let pid = child.pid;
    let stdin = tokio::net::unix::pipe::Sender::from_owned_fd(in_w).ok();
    let stdout = tokio::net::unix::pipe::Receiver::from_owned_fd(out_r).ok();
    Ok((
        pid,
        Child::Into {
            child,
            stdin,
            stdout,
            reaped: false,
        },
    ))
}

/// `/dev/null`, opened once (close-on-exec; each start `dup2`s it to the child's stderr).
fn dev_null() -> std::io::Result<std::os::fd::BorrowedFd<'static>> {
    use std::os::fd::AsFd;
    static NULL: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();
    if let Some(f) = NULL.get() {
        return Ok(f.as_fd());
    }
    let opened = std::fs::File::open("/dev/null")?;
    Ok(NULL.get_or_init(|| opened).as_fd())
}

impl Supervisor {
    /// Send the launch spec (a supervisor that does not get it ends without running
    /// anything, and [`Supervisor::wait`] says so).
    pub async fn send_spec(&mut self) {
        let spec = std::mem::take(&mut self.spec);
        self.child.write_in(&spec).await;
    }

    /// Wait until the command runs (`on_running` is called then), then until the
    /// attempt ends. A supervisor that died without a status (killed from outside) reads
    /// as exit 128 + its signal, once nothing of its attempt runs any more
    /// ([`clear_session`]).
    pub async fn wait(
        &mut self,
        state: &Path,
        job: crate::model::JobId,
        attempt: u32,
        owner: &Owner,
        on_running: impl FnOnce(),
    ) -> Ended {
        let mut on_running = Some(on_running);
        if let Some(out) = self.child.take_out() {
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.starts_with("started") {
                    if let Some(f) = on_running.take() {
                        f();
                    }
                } else if let Some(json) = line.strip_prefix(EXIT_LINE)
                    && let Ok(rec) = serde_json::from_str::<ExitRecord>(json)
                {
                    return Ended::HandedOver(rec.status);
                }
            }
        }
        let status = self.child.wait().await;
        if let Some(s) = runfiles::read_exit(state, job, attempt, owner) {
            return Ended::Gone(s);
        }
        tracing::warn!(job = %job, attempt, pid = self.pid, "supervisor died without an exit status: killing what is left of its attempt");
        clear_session(self.pid as u32).await;
        use std::os::unix::process::ExitStatusExt;
        let code = match status {
            Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
            Err(_) => 255,
        };
        Ended::Gone(ExitStatus::ended_now(if code == 0 { 255 } else { code }))
    }

    /// The status it handed over is stored: tell it, and wait for its end.
    pub async fn stored(mut self) {
        self.child
            .write_in(format!("{STORED_LINE}\n").as_bytes())
            .await;
        self.child.close_in();
        let _ = self.child.wait().await;
    }

    /// The status it handed over will not be stored by this runtime (it is ending): the
    /// supervisor leaves it in the attempt's record.
    pub async fn abandon(mut self) {
        self.child.close_in();
        let _ = self.child.wait().await;
    }
}

/// Signal a supervisor by pid. Errors (it is already gone) are ignored: its exit is
/// reported by whoever waits for it.
pub fn signal(pid: i32, how: Stop) {
    let sig = match how {
        Stop::Notice => crate::exec::supervisor::channel::NOTICE_REQUEST,
        Stop::Term => Signal::SIGTERM,
        Stop::Kill => Signal::SIGUSR1,
    };
    let _ = kill(Pid::from_raw(pid), sig);
}

/// Kill what is left of a dead supervisor's session and return once none of it runs: only
/// then are the attempt's GPUs free (SPEC §7). Polls `/proc` every 50 ms, off the runtime
/// task.
pub async fn clear_session(sid: u32) {
    let mut waited = 0u32;
    loop {
        let left = tokio::task::spawn_blocking(move || {
            crate::exec::containment::session::kill_members(sid)
        })
        .await
        .unwrap_or(0);
        if left == 0 {
            return;
        }
        waited += 1;
        if waited.is_multiple_of(200) {
            tracing::warn!(
                session = sid,
                left,
                "processes of a dead supervisor's attempt still run after SIGKILL; its GPUs stay allocated"
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
