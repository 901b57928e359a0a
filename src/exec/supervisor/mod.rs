//! The supervisor: `shareq` in a hidden mode that runs one attempt of a job in its own
//! session, forwards stop signals to the whole process group, waits until every process
//! of the attempt is gone and records the exit status atomically. It does not depend on
//! the scheduler staying alive, so jobs outlive it.
//!
//! Signals it understands (sent by the runtime to the supervisor's pid):
//! - SIGTERM: forward SIGTERM to the job's process group (the polite stop);
//! - SIGURG (`channel::NOTICE_REQUEST`): a preemption with notice (SPEC §14): the spec's
//!   notice signal to the job's process group at once, SIGTERM `seconds` later, timed on
//!   the supervisor's own clock (so a scheduler restarted meanwhile changes nothing; a
//!   repeated request is ignored; a SIGTERM meanwhile ends the notice early). Without a
//!   notice in the spec it is SIGTERM;
//! - SIGUSR1: SIGKILL the process group and every process left under the supervisor.
//!
//! SIGKILL after the grace period is the scheduler's to send (it knows the grace a stop
//! began with), but for a timeout, which the supervisor enforces itself.
//!
//! The supervisor is a child subreaper, so background processes that a job forks (even
//! ones that start their own session) are reparented to it: it finishes only when none
//! is left, which is what "the GPUs are free again" means.
//!
//! It runs in its own session (started by the runtime, it makes one first thing), and the
//! command in a new process group of that session: if the supervisor itself is killed,
//! the scheduler finds what is left by the session id, which is the supervisor's pid (see
//! `exec::containment::session`). The job's output comes through a pipe into a [`LogSink`] (cap and
//! free-space reserve).
//!
//! Its files are those of `exec::state::runfiles`. Started by the runtime, it reads the launch
//! spec on its channel (standard input), claims the attempt's record, hands the exit
//! status back on standard output and waits until the runtime says it is stored (else it
//! appends it to the record), and makes the job's log only when there is something to
//! keep (`exec::start` describes the channel). Started by Slurm as the job's submitter
//! (who may not write the state directory), it reads the spec from standard input and
//! hands the same records and the job's output to the scheduler over the report channel
//! (`exec::supervisor::report`), which writes them.

pub mod channel;
pub mod gang;
pub mod privdrop;
pub mod report;
pub mod spawn;

use crate::exec::state::log_sink::{LogOut, LogSink};
use crate::exec::state::runfiles::{self, ExitStatus, LaunchSpec, now_ms};
use crate::exec::supervisor::privdrop::RunAs;
use crate::exec::supervisor::report::client::Reporter;
use crate::model::Command as JobCommand;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, killpg, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// What can go wrong before the job's command is running.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("cannot read launch spec {path}: {source}")]
    Spec {
        path: String,
        source: std::io::Error,
    },
    #[error("launch spec {path} is not valid: {source}")]
    SpecJson {
        path: String,
        source: serde_json::Error,
    },
    #[error("cannot open the job log {path}: {source}")]
    Log {
        path: String,
        source: std::io::Error,
    },
    #[error("signal setup failed: {0}")]
    Signals(#[from] Errno),
    #[error(
        "attempt {attempt} of job {job} was declared lost by a restarted scheduler before \
         this supervisor could record itself: not running it"
    )]
    Lost {
        job: crate::model::JobId,
        attempt: u32,
    },
    #[error("cannot write the exit status {path}: {source}")]
    Exit {
        path: String,
        source: std::io::Error,
    },
}

/// Where the supervisor keeps what it records of its attempt (SPEC §7): the run files and
/// the log in the state directory, or — run as the submitter inside a Slurm allocation,
/// where it may not write there — the report channel, whose other end (the scheduler)
/// writes them (`exec::supervisor::report`).
enum Records {
    Files {
        log: FileLog,
        /// Started by the runtime: the exit status goes to it over standard output, and
        /// is left in the attempt's record only when it does not say it stored it.
        channel: bool,
    },
    Channel(Reporter),
}

/// The attempt's log on the state filesystem, opened (its folder made) when the first
/// byte or line is to be kept: a job that writes nothing leaves no log.
struct FileLog {
    path: std::path::PathBuf,
    /// Whom an earlier log of the job may belong to (see `open_log`).
    owner: Option<u32>,
    cap: u64,
    reserve: u64,
    user: Option<crate::exec::state::log_sink::UserLog>,
    sink: Option<LogSink>,
    /// Why the log could not be opened: the attempt fails (its output would be lost).
    failed: Option<String>,
}

impl FileLog {
    fn new(spec: &LaunchSpec) -> FileLog {
        FileLog {
            path: spec.log.clone(),
            owner: None,
            cap: spec.log_cap,
            reserve: spec.free_reserve,
            user: spec.user_log.clone(),
            sink: None,
            failed: None,
        }
    }

    fn sink(&mut self) -> Option<&mut LogSink> {
        if self.sink.is_none() && self.failed.is_none() {
            match open_log_at(&self.path, self.owner) {
                Ok(file) => {
                    let sink = LogSink::from_file(file, self.cap, self.reserve)
                        .for_user(self.user.clone(), &self.path);
                    self.sink = Some(sink);
                }
                Err(e) => {
                    self.failed = Some(format!(
                        "cannot open the job log {}: {e}",
                        self.path.display()
                    ))
                }
            }
        }
        self.sink.as_mut()
    }
}

impl LogOut for FileLog {
    fn write(&mut self, buf: &[u8]) {
        if let Some(s) = self.sink() {
            s.write(buf);
        }
    }

    fn note(&mut self, line: &str) {
        if let Some(s) = self.sink() {
            s.note(line);
        }
    }

    fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }
}

impl Records {
    /// Claim the attempt for this process before the command runs; false: a restarted
    /// scheduler declared it lost.
    fn claim(&mut self, spec: &LaunchSpec) -> std::io::Result<bool> {
        let pid = std::process::id();
        match self {
            Records::Files { .. } => runfiles::claim_pid(&spec.pid_path(), pid, &spec.db),
            Records::Channel(r) => {
                r.started(pid, crate::exec::containment::session::start_time(pid)?)
            }
        }
    }

    /// Where the job's output and the supervisor's lines go (`run_as`: whom an earlier
    /// log may belong to, see `open_log`).
    fn log(&mut self, run_as: Option<&RunAs>) -> &mut dyn LogOut {
        match self {
            Records::Files { log, .. } => {
                log.owner = run_as.map(|r| r.uid.as_raw());
                log
            }
            Records::Channel(r) => r,
        }
    }

    fn note(&mut self, run_as: Option<&RunAs>, line: &str) {
        self.log(run_as).note(line);
    }

    fn exit(&mut self, spec: &LaunchSpec, status: ExitStatus) -> Result<(), SupervisorError> {
        match self {
            Records::Files { channel, .. } => {
                if *channel && hand_over(spec, status) {
                    return Ok(());
                }
                runfiles::write_exit(&spec.state, spec.job, spec.attempt, &spec.db, status).map_err(
                    |source| SupervisorError::Exit {
                        path: spec.pid_path().display().to_string(),
                        source,
                    },
                )
            }
            Records::Channel(r) => r.exit(status).map_err(|source| SupervisorError::Exit {
                path: "the scheduler's report channel".to_string(),
                source,
            }),
        }
    }
}

/// Hand the exit status to the scheduler that started this supervisor (`exec::start`):
/// `exit <record>` on standard output, then wait for its `stored` on standard input
/// (it answers once the status is in its database). False when it is gone (it was
/// killed, or stopped and left the job running): then the record keeps the status.
fn hand_over(spec: &LaunchSpec, status: ExitStatus) -> bool {
    use std::io::BufRead;
    let rec = runfiles::ExitRecord {
        status,
        db: Some(spec.db.clone()),
    };
    let Ok(json) = serde_json::to_string(&rec) else {
        return false;
    };
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{}{json}", channel::EXIT_LINE)
        .and_then(|()| out.flush())
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    matches!(std::io::stdin().lock().read_line(&mut answer), Ok(n) if n > 0)
        && answer.trim_end() == channel::STORED_LINE
}

/// Run the attempt described by the launch spec at `spec_path` (`-`: on standard input,
/// as a Slurm batch script hands it over); returns when every process of the attempt is
/// gone and the exit status is recorded.
pub fn supervise(spec_path: &Path) -> Result<ExitStatus, SupervisorError> {
    // Started by the runtime (`exec::start`: the spec and the exit status on its
    // channel, or an older runtime's spec file): a session of its own before anything
    // else. Started by Slurm (the spec on standard input), it stays in the session and
    // process group Slurm tracks the batch job by.
    let on_channel = spec_path == Path::new(channel::SPEC_ON_CHANNEL);
    let from_slurm = spec_path == Path::new("-");
    if !from_slurm {
        crate::exec::containment::session::enter_own_session()?;
    }
    let mask = block_handled_signals()?;
    let mut spec = read_spec(spec_path, on_channel, from_slurm)?;
    if from_slurm && spec.gang.is_some() {
        spec = gang_rank(spec)?;
    }
    let mut records = open_records(&spec, on_channel)?;
    // On a node (reports through the channel): the job's checkpoints reach the scheduler
    // through this supervisor (SPEC §14). Without it the job runs on, unable to report.
    let _job_socket = match &records {
        Records::Channel(r) if spec.token.is_some() => {
            match report::job_socket::open(&mut spec, r.checkpoints()) {
                Ok(s) => Some(s),
                Err(e) => {
                    eprintln!("shareq: the job cannot report checkpoints: {e}");
                    None
                }
            }
        }
        _ => None,
    };
    if let Some(ended) = enter_and_claim(&spec, &mut records)? {
        return Ok(ended);
    }
    let sfd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
    nix::sys::prctl::set_child_subreaper(true)?;
    let status = run_command(&spec, &mut records, &sfd)?;
    records.exit(&spec, status)?;
    Ok(status)
}

/// Block the signals the supervisor handles, first of all, so that a stop sent right
/// after the start is not lost: they are read from a signalfd. The job's command gets an
/// empty mask again (see `spawn`).
fn block_handled_signals() -> nix::Result<SigSet> {
    let mut mask = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGUSR1,
        channel::NOTICE_REQUEST,
        Signal::SIGCHLD,
        Signal::SIGINT,
        Signal::SIGHUP,
    ] {
        mask.add(s);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None)?;
    Ok(mask)
}

/// A gang's spec on a node (SPEC §16): in its batch job on rank 0's node (no main host
/// yet), the start of every rank's supervisor, which does not return unless it failed;
/// in a rank's supervisor, that rank's spec.
fn gang_rank(spec: LaunchSpec) -> Result<LaunchSpec, SupervisorError> {
    let failed = |what: &str, source| SupervisorError::Spec {
        path: what.to_string(),
        source,
    };
    if spec.gang.as_ref().is_some_and(|g| g.main.is_none()) {
        return Err(failed(
            "the gang's start on its nodes (srun)",
            gang::start_ranks(spec),
        ));
    }
    let rank = gang::own_rank(&spec).ok_or_else(|| {
        failed(
            gang::GANG_SPEC_ENV,
            std::io::Error::other("this node is none of the gang's"),
        )
    })?;
    spec.as_rank(rank).ok_or_else(|| {
        failed(
            gang::GANG_SPEC_ENV,
            std::io::Error::other(format!("the gang has no rank {rank}")),
        )
    })
}

/// The launch spec: one line on the runtime's channel (the rest of standard input is its
/// answer, `hand_over`), all of standard input from Slurm, or the file at `spec_path`.
fn read_spec(
    spec_path: &Path,
    on_channel: bool,
    from_slurm: bool,
) -> Result<LaunchSpec, SupervisorError> {
    let read = if on_channel {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::stdin().lock(), &mut line)
            .map(|_| line.into_bytes())
    } else if from_slurm {
        // A gang rank's supervisor has it from its batch job (`gang::start_ranks`).
        match gang::handed_spec() {
            Some(v) => Ok(v),
            None => {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut v).map(|_| v)
            }
        }
    } else {
        std::fs::read(spec_path)
    };
    let from = || {
        if on_channel {
            "the scheduler's channel".to_string()
        } else {
            spec_path.display().to_string()
        }
    };
    let text = read.map_err(|source| SupervisorError::Spec {
        path: from(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|source| SupervisorError::SpecJson {
        path: from(),
        source,
    })
}

/// Where this attempt's records go: the report channel where the spec names one, else
/// the run files and the log (and the runtime's channel for the exit status).
fn open_records(spec: &LaunchSpec, on_channel: bool) -> Result<Records, SupervisorError> {
    Ok(match spec.report.clone() {
        Some(to) => Records::Channel(
            Reporter::start(
                to,
                spec.job.0,
                spec.attempt,
                spec.gang.as_ref().map_or(0, |g| g.rank),
            )
            .map_err(|source| SupervisorError::Log {
                path: "the scheduler's report channel".to_string(),
                source,
            })?,
        ),
        None => Records::Files {
            log: FileLog::new(spec),
            channel: on_channel,
        },
    })
}

/// Enter the attempt's cgroup and claim the attempt, before the command can run; `Some`:
/// the attempt ended here (its status recorded), and nothing is to run.
fn enter_and_claim(
    spec: &LaunchSpec,
    records: &mut Records,
) -> Result<Option<ExitStatus>, SupervisorError> {
    // Into the attempt's cgroup first (SPEC §7): everything started from here on belongs
    // to it, whatever session it makes. A group that cannot be entered runs nothing.
    if let Err(e) = crate::exec::containment::cgroup::enter_self(&spec.cgroup) {
        let status = ExitStatus::ended_now(126);
        let owner = RunAs::for_submitter(spec.submitter.as_ref()).ok().flatten();
        records.note(owner.as_ref(), &format!("not started: {e}"));
        let _ = records.claim(spec);
        records.exit(spec, status)?;
        return Ok(Some(status));
    }
    // Record ourselves (pid and start time) before the command can run, so that a
    // scheduler restarted meanwhile adopts this attempt instead of running it again; and
    // give up if it already declared the attempt lost (see `store::recovery`).
    match records.claim(spec) {
        Ok(true) => Ok(None),
        Ok(false) => Err(SupervisorError::Lost {
            job: spec.job,
            attempt: spec.attempt,
        }),
        Err(e) => {
            // Not recorded, so not adoptable: do not run the command; report it failed.
            let status = ExitStatus::ended_now(126);
            let owner = RunAs::for_submitter(spec.submitter.as_ref()).ok().flatten();
            let note = format!(
                "cannot record the supervisor in {}: {e}",
                spec.pid_path().display()
            );
            records.note(owner.as_ref(), &note);
            records.exit(spec, status)?;
            Ok(Some(status))
        }
    }
}

/// Start the job's command as its submitter and wait until every process of the attempt
/// is gone (stops read from `sfd`); its exit status, or why it could not start.
fn run_command(
    spec: &LaunchSpec,
    records: &mut Records,
    sfd: &SignalFd,
) -> Result<ExitStatus, SupervisorError> {
    // Whom the command runs as (SPEC §9); a submitter who cannot be found fails the
    // attempt, with the reason in the log (kept by the scheduler's user then). Run as
    // the submitter already (Slurm's `--uid`), the command gets that user's clean
    // environment, as after a drop.
    let found = match RunAs::for_submitter(spec.submitter.as_ref()) {
        Ok(None) if matches!(records, Records::Channel(_)) => RunAs::current().map(Some),
        other => other,
    };
    let (run_as, unknown) = match found {
        Ok(r) => (r, None),
        Err(why) => (None, Some(why)),
    };
    let log = records.log(run_as.as_ref());
    let (out_r, out_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let spawned = match unknown {
        Some(why) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            why,
        )),
        None => spawn(spec, out_w, run_as.as_ref()),
    };
    // The attempt's clock (SPEC §7): run time and timeout on the monotonic clock, here,
    // whatever the scheduler is doing meanwhile.
    let began = Instant::now();
    let child = match spawned {
        Ok(child) => child,
        Err(e) => {
            // What the command's start wrote before it failed (a privilege drop says why).
            Output::new(out_r, &mut *log).drain();
            log.note(&format!("cannot start the job's command: {e}"));
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return Ok(ExitStatus::ended_now(code));
        }
    };
    // Tell the runtime the command runs (it may be gone: ignore errors).
    let mut out = std::io::stdout();
    let _ = writeln!(out, "started {child}");
    let _ = out.flush();
    let output = Output::new(out_r, &mut *log);
    let deadline = spec
        .timeout_seconds
        .map(|secs| began + Duration::from_secs(secs));
    let mut status = wait_all(
        Pid::from_raw(child as i32),
        Stops {
            grace: spec.grace_seconds,
            notice: spec.notice,
            deadline,
        },
        sfd,
        output,
    );
    status.ran_ms = Some(u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX));
    if log.failed().is_some() {
        // Stopped when its output could not be kept.
        status.code = 126;
        status.signal = None;
    }
    if status.timed_out {
        log.note(&format!(
            "timed out: stopped after its timeoutSeconds ({} s)",
            spec.timeout_seconds.unwrap_or_default()
        ));
    }
    Ok(status)
}

/// The attempt's log, `<state>/logs/<job>/<attempt>.log`, opened without following links
/// and owned by the scheduler's user (the supervisor keeps its privileges, or the report
/// channel's relay writes it; the command writes only into the pipe).
pub(crate) fn open_log(
    spec: &LaunchSpec,
    run_as: Option<&RunAs>,
) -> std::io::Result<std::fs::File> {
    open_log_at(&spec.log, run_as.map(|r| r.uid.as_raw()))
}

/// [`open_log`] of the log at `log`, which `owner` may own from an earlier attempt.
fn open_log_at(log: &Path, owner: Option<u32>) -> std::io::Result<std::fs::File> {
    let bad = || std::io::Error::other(format!("bad log path {}", log.display()));
    let file = log.file_name().ok_or_else(bad)?;
    let job_dir = log.parent().ok_or_else(bad)?;
    let job = job_dir.file_name().ok_or_else(bad)?;
    let logs = job_dir.parent().ok_or_else(bad)?;
    crate::exec::state::perms::open_job_log(
        logs,
        &job.to_string_lossy(),
        &file.to_string_lossy(),
        owner.map(nix::unistd::Uid::from_raw),
    )
}

fn spawn(spec: &LaunchSpec, out: OwnedFd, run_as: Option<&RunAs>) -> std::io::Result<u32> {
    let (program, args): (&OsStr, Vec<&OsStr>) = match &spec.command {
        JobCommand::Shell(s) => match plain_words(s) {
            Some(words) => (
                OsStr::new(words[0]),
                words[1..].iter().copied().map(OsStr::new).collect(),
            ),
            None => (OsStr::new("sh"), vec![OsStr::new("-c"), OsStr::new(s)]),
        },
        JobCommand::Argv(argv) => {
            let Some((prog, args)) = argv.split_first() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "empty command",
                ));
            };
            (OsStr::new(prog), args.iter().map(OsStr::new).collect())
        }
    };
    // The command inherits no descriptor of the supervisor's above standard error (its
    // own, or what whoever started it left open), and can gain no privilege by `exec`
    // (SPEC §9): set here, for both ways of starting it below.
    crate::exec::containment::fds::cloexec_above_stderr();
    crate::exec::containment::fds::no_new_privs()?;
    if run_as.is_none() {
        // As the supervisor's own user: spawned, not forked (`exec::supervisor::spawn`), unless that
        // path cannot promise the same start.
        let env = spec.job_env();
        let launch = crate::exec::supervisor::spawn::Launch {
            program,
            args: &args,
            env: &env,
            cwd: spec.working_directory.as_deref().map(Path::new),
            out: out.as_fd(),
        };
        if let crate::exec::supervisor::spawn::Spawned::Started(pid) =
            crate::exec::supervisor::spawn::spawn(&launch)?
        {
            return Ok(pid);
        }
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(&args);
    let err = out.try_clone()?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    if run_as.is_none() {
        cmd.envs(spec.job_env());
        if let Some(dir) = &spec.working_directory {
            cmd.current_dir(dir);
        }
    }
    // SAFETY: setpgid, sigprocmask and sigaction are async-signal-safe and touch no
    // memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            // A process group of its own inside the supervisor's session (see the top).
            nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0))
                .map_err(std::io::Error::from)?;
            // The command starts with nothing blocked and the stop signals at their
            // defaults, whatever the supervisor (or whoever started the scheduler) had.
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
                .map_err(std::io::Error::from)?;
            for s in [
                Signal::SIGTERM,
                Signal::SIGINT,
                Signal::SIGQUIT,
                Signal::SIGHUP,
            ] {
                nix::sys::signal::signal(s, nix::sys::signal::SigHandler::SigDfl)
                    .map_err(std::io::Error::from)?;
            }
            // The scheduler keeps its own files private (umask 077); jobs get the usual.
            nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
            Ok(())
        });
    }
    if let Some(r) = run_as {
        // After the steps above: they need no privilege, the drop comes last.
        r.apply(&mut cmd, spec.job_env(), spec.working_directory.as_deref())?;
    }
    cmd.spawn().map(|c| c.id())
}

/// Words a shell would run exactly as an argv list: no quoting, expansion, redirection,
/// assignment, keyword or builtin that has no program of its name. Such a shell string
/// runs without `sh`: one process start less per job, the same behaviour (a missing
/// program still ends with 127).
fn plain_words(s: &str) -> Option<Vec<&str>> {
    const SHELL_ONLY: &[&str] = &[
        ".", ":", "alias", "bg", "break", "cd", "command", "continue", "eval", "exec", "exit",
        "export", "fc", "fg", "getopts", "hash", "jobs", "local", "read", "readonly", "return",
        "set", "shift", "source", "times", "trap", "type", "ulimit", "umask", "unalias", "unset",
        "wait", "if", "then", "else", "elif", "fi", "case", "esac", "for", "while", "until", "do",
        "done", "function", "select", "time",
    ];
    let plain = |c: char| c.is_ascii_alphanumeric() || " \t_./:=,+-@%".contains(c);
    if !s.chars().all(plain) {
        return None;
    }
    let words: Vec<&str> = s.split_whitespace().collect();
    let first = *words.first()?;
    if first.contains('=') || SHELL_ONLY.contains(&first) {
        return None;
    }
    Some(words)
}

/// The read end of the job's output pipe, copied into the log as it comes.
struct Output<'a> {
    pipe: Option<OwnedFd>,
    log: &'a mut dyn LogOut,
}

impl<'a> Output<'a> {
    fn new(pipe: OwnedFd, log: &'a mut dyn LogOut) -> Output<'a> {
        use nix::fcntl::{F_GETFL, F_SETFL, OFlag, fcntl};
        if let Ok(flags) = fcntl(&pipe, F_GETFL) {
            let _ = fcntl(
                &pipe,
                F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
            );
        }
        Output {
            pipe: Some(pipe),
            log,
        }
    }

    /// Copy what the pipe holds now into the log; close it at end of file.
    fn drain(&mut self) {
        let mut buf = [0u8; 64 * 1024];
        while let Some(fd) = &self.pipe {
            match nix::unistd::read(fd, &mut buf) {
                Ok(0) => self.pipe = None,
                Ok(n) => self.log.write(&buf[..n]),
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => return,
                Err(_) => self.pipe = None,
            }
        }
    }
}

/// How the supervisor stops its attempt itself: the grace period of a timeout (and of
/// processes left behind), the notice it sends when asked (SPEC §14), the timeout.
struct Stops {
    grace: u32,
    notice: Option<crate::model::Notice>,
    deadline: Option<Instant>,
}

/// Reap until the command and every process it left behind are gone, copying their
/// output into the log meanwhile. At `deadline` (the job's timeout) the attempt is
/// stopped as a preemption would stop it: SIGTERM, then SIGKILL after the grace period.
/// Asked for a preemption with notice, it sends the notice, and SIGTERM when the notice
/// is over.
fn wait_all(child: Pid, stops: Stops, sfd: &SignalFd, mut out: Output) -> ExitStatus {
    let Stops {
        grace,
        notice,
        deadline,
    } = stops;
    let mut main: Option<(i32, Option<i32>)> = None;
    let mut kill_at: Option<Instant> = None;
    // A notice was sent: SIGTERM is due then (`None` again once it is sent).
    let mut term_at: Option<Instant> = None;
    // A stop's SIGTERM (or the notice) went out: a later notice request changes nothing.
    let mut stop_begun = false;
    let mut timed_out = false;
    let mut log_lost = false;
    loop {
        loop {
            match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                    main = Some((code, None));
                }
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                    main = Some((128 + sig as i32, Some(sig as i32)));
                }
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) => {}
                Err(Errno::EINTR) => {}
                Err(_) => {
                    // ECHILD: nothing left under us.
                    if let Some((code, signal)) = main {
                        out.drain();
                        return ExitStatus {
                            code,
                            signal,
                            finished_at: now_ms(),
                            ran_ms: None,
                            timed_out,
                        };
                    }
                    break;
                }
            }
        }
        if main.is_some() && kill_at.is_none() {
            // The command ended by itself but left processes behind.
            kill_at = Some(leftovers_term(child, grace));
            term_at = None;
        }
        if main.is_none() && !timed_out && deadline.is_some_and(|d| Instant::now() >= d) {
            timed_out = true;
            kill_at = Some(leftovers_term(child, grace));
            term_at = None;
        }
        if term_at.is_some_and(|t| Instant::now() >= t) {
            term_at = None;
            out.log.note("notice over: SIGTERM");
            let _ = killpg(child, Signal::SIGTERM);
        }
        let wake = [kill_at, deadline.filter(|_| !timed_out), term_at]
            .into_iter()
            .flatten()
            .min();
        let timeout = match wake {
            Some(t) => {
                let left = t.saturating_duration_since(Instant::now());
                PollTimeout::try_from(left.as_millis().min(60_000) as i32)
                    .unwrap_or(PollTimeout::ZERO)
            }
            None => PollTimeout::from(1000u16),
        };
        let sig_fd = sfd.as_fd();
        let got_output = {
            let mut fds = vec![PollFd::new(sig_fd, PollFlags::POLLIN)];
            if let Some(p) = &out.pipe {
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
            }
            let _ = poll(&mut fds, timeout);
            fds.get(1)
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty())
        };
        if got_output {
            out.drain();
            if !log_lost && out.log.failed().is_some() {
                // Its output cannot be kept: the attempt fails, stopped now.
                log_lost = true;
                kill_everything(child);
                kill_at = Some(Instant::now() + Duration::from_secs(1));
            }
        }
        while let Ok(Some(info)) = sfd.read_signal() {
            match Signal::try_from(info.ssi_signo as i32) {
                Ok(Signal::SIGTERM) => {
                    stop_begun = true;
                    term_at = None;
                    let _ = killpg(child, Signal::SIGTERM);
                }
                // A repeated request (or one after SIGTERM) changes nothing.
                Ok(s) if s == channel::NOTICE_REQUEST && !stop_begun => {
                    stop_begun = true;
                    term_at = send_notice(child, notice, &mut *out.log);
                }
                Ok(Signal::SIGUSR1) => {
                    kill_everything(child);
                    kill_at = Some(Instant::now() + Duration::from_secs(1));
                }
                _ => {}
            }
        }
        if kill_at.is_some_and(|t| Instant::now() >= t) {
            kill_everything(child);
            kill_at = Some(Instant::now() + Duration::from_secs(1));
        }
    }
}

/// A preemption with notice begins (SPEC §14): the notice signal to the job's process
/// group now; returns when SIGTERM is due. Without a notice, SIGTERM now.
fn send_notice(
    group: Pid,
    notice: Option<crate::model::Notice>,
    log: &mut dyn LogOut,
) -> Option<Instant> {
    let Some((n, sig)) =
        notice.and_then(|n| Some((n, Signal::try_from(n.signal.linux_number()).ok()?)))
    else {
        let _ = killpg(group, Signal::SIGTERM);
        return None;
    };
    log.note(&format!(
        "preempted: {} now (notice), SIGTERM in {} s",
        n.signal.as_str(),
        n.seconds
    ));
    let _ = killpg(group, sig);
    Some(Instant::now() + Duration::from_secs(u64::from(n.seconds)))
}

/// The command ended by itself: ask what it left running to stop too. Returns when to
/// stop asking.
fn leftovers_term(group: Pid, grace: u32) -> Instant {
    let _ = killpg(group, Signal::SIGTERM);
    for pid in our_children() {
        let _ = kill(pid, Signal::SIGTERM);
    }
    Instant::now() + Duration::from_secs(u64::from(grace))
}

fn kill_everything(group: Pid) {
    let _ = killpg(group, Signal::SIGKILL);
    for pid in our_children() {
        let _ = kill(pid, Signal::SIGKILL);
    }
}

/// Processes whose parent is this supervisor (the command, and orphans reparented to us).
fn our_children() -> Vec<Pid> {
    crate::exec::containment::session::children(std::process::id())
        .into_iter()
        .filter_map(|p| i32::try_from(p).ok())
        .map(Pid::from_raw)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::plain_words;

    #[test]
    fn only_plain_words_skip_the_shell() {
        assert_eq!(plain_words("true"), Some(vec!["true"]));
        assert_eq!(
            plain_words("python train.py --lr=0.1 --out /tmp/x"),
            Some(vec!["python", "train.py", "--lr=0.1", "--out", "/tmp/x"])
        );
        for shell in [
            "exit 3",
            "cd /tmp",
            "echo $HOME",
            "sleep 1; echo hi",
            "ls *.py",
            "echo 'a b'",
            "A=1 env",
            "echo hi > f",
            "ls ~",
            "",
        ] {
            assert_eq!(plain_words(shell), None, "{shell}");
        }
    }
}
