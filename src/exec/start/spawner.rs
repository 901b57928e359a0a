//! Starting supervisors without starting a program: the spawner, `shareq __supervise
//! --spawner`, a
//! small process the scheduler starts once, forks each attempt's supervisor from itself.
//!
//! Why: a supervisor started with `exec` pays the dynamic loader on a large binary (its
//! relocations, page faults, the runtime's start) at every attempt: about as much CPU as
//! the rest of its work (docs/PERFORMANCE.md). A copy of a process that has done all that
//! once, and holds a few MB, starts in a fraction of it. The scheduler itself is not that
//! process: it may hold a deep queue, and a fork copies its page tables.
//!
//! Each request (a `SOCK_SEQPACKET` message on the spawner's standard input) carries the
//! supervisor's channel (the read end of its input, the write end of its output) and,
//! where it has one, the attempt's unified-hierarchy group; the spawner answers with the
//! new supervisor's pid and a pidfd, or an error number. The supervisor is made with
//! `clone3`:
//! - `CLONE_PARENT`: it is the scheduler's child, not the spawner's, exactly as one the
//!   scheduler started itself: the scheduler reaps it and reads how it ended;
//! - `CLONE_INTO_CGROUP`: it starts inside its group (see [`crate::exec::start::clone_into`]);
//! - `CLONE_PIDFD`.
//!
//! Nothing else: no C library internals. The copy is what `fork` makes, less two things
//! `fork` does inside glibc, and it relies on neither (docs/ARCHITECTURE.md, "Starting a
//! supervisor"):
//! - the C library's cached thread id is not updated (no `CLONE_CHILD_SETTID` into its
//!   thread record): it still holds the spawner's id. glibc uses it only for the owner of
//!   error-checking, recursive, robust and priority-inheriting mutexes (consistent inside
//!   the copy, which shares no memory with the spawner; Rust's locks are futexes of its
//!   own, and nothing here uses robust or PI mutexes), while `raise`, `abort` and
//!   `pthread_kill` of oneself ask the kernel (`gettid`) since glibc 2.25/2.34;
//! - no `atfork` handlers run: the spawner registers none, holds one thread and no lock
//!   when it copies itself.
//!
//! The copy then does what `shareq __supervise --channel` does from its first step. Its
//! command line is the spawner's, `shareq __supervise --spawner` (a supervisor, copied
//! from the spawner); the spawner itself is told apart by its name, `shareq-spawner`
//! (`/proc/PID/comm`, `ps -o comm`), which each copy sets back to the program's. Nothing
//! is written over the command line in memory. The spawner is
//! single-threaded and holds nothing but its socket, so the copy is consistent. It makes
//! a session of its own at its start (no terminal's signals reach it or its copies) and
//! ends when the scheduler's end of the socket closes; the supervisors it made outlive
//! it, as any supervisor outlives the scheduler.
//!
//! Where the spawner cannot be started or answers nothing, the scheduler starts the
//! supervisor as before ([`crate::exec::start`]), and tries to start a spawner again 10 s later.

use crate::exec::start::clone_into::{CLONE_INTO_CGROUP, CLONE_PIDFD, CloneArgs};
use nix::libc;
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The hidden subcommand that runs the spawner: the supervisor's, so that its copies
/// read as supervisors in `ps`...
pub const SUBCOMMAND: &str = crate::exec::supervisor::channel::SUPERVISE_SUBCOMMAND;
/// ...with this one argument.
pub const ARGUMENT: &str = "--spawner";
/// The spawner's own name (`/proc/PID/comm`, at most 15 bytes), which tells it from its
/// copies.
pub const NAME: &str = "shareq-spawner";

/// How long the scheduler waits for the spawner's answer before it gives the spawner up.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// How long after a spawner failed the scheduler starts supervisors itself before it
/// tries another.
const RETRY_AFTER: Duration = Duration::from_secs(10);

const CLONE_PARENT: u64 = 0x8000;

// ---------------------------------------------------------------------------------------
// The scheduler's side.

/// The scheduler's spawner, if one runs.
enum Slot {
    NotYet,
    Up {
        exe: PathBuf,
        sock: OwnedFd,
        process: std::process::Child,
    },
    Down(Instant),
    /// This kernel has no `clone3` with these flags: never asked again.
    Never,
}

static SPAWNER: Mutex<Slot> = Mutex::new(Slot::NotYet);

/// Start a supervisor from the spawner of `exe` (started now if none runs): its standard
/// input and output are `stdio`, its group `cgroup` where given. `Unsupported`: no
/// spawner here now (start it another way). Blocks the calling thread for one exchange
/// with the spawner.
pub fn start(
    exe: &Path,
    stdio: [BorrowedFd; 2],
    cgroup: Option<BorrowedFd>,
) -> Result<crate::exec::start::clone_into::Child, crate::exec::start::clone_into::Refused> {
    use crate::exec::start::clone_into::Refused;
    if !cfg!(target_os = "linux") {
        return Err(Refused::Unsupported);
    }
    let mut slot = SPAWNER.lock().unwrap_or_else(|p| p.into_inner());
    let ready = match &*slot {
        Slot::Up { exe: theirs, .. } => theirs == exe,
        Slot::NotYet => true,
        Slot::Down(since) => since.elapsed() >= RETRY_AFTER,
        Slot::Never => false,
    };
    if !ready {
        return Err(Refused::Unsupported);
    }
    if !matches!(*slot, Slot::Up { .. }) {
        match launch(exe) {
            Ok(up) => *slot = up,
            Err(e) => {
                tracing::warn!(
                    "cannot start the spawner ({e}): supervisors are started one by one"
                );
                *slot = Slot::Down(Instant::now());
                return Err(Refused::Unsupported);
            }
        }
    }
    let Slot::Up { sock, .. } = &*slot else {
        return Err(Refused::Unsupported);
    };
    match ask(sock.as_raw_fd(), stdio, cgroup) {
        Ok(Ok(child)) => Ok(child),
        Ok(Err(errno)) if matches!(errno, libc::ENOSYS | libc::E2BIG) => {
            tracing::warn!(
                "the spawner cannot copy itself here ({}): supervisors are started one by one",
                io::Error::from_raw_os_error(errno)
            );
            retire(&mut slot, Slot::Never);
            Err(Refused::Unsupported)
        }
        Ok(Err(errno)) => Err(Refused::Failed(io::Error::from_raw_os_error(errno))),
        Err(e) => {
            // It is gone or confused: a copy it may have made gets no spec (its channel
            // closes with the caller's ends) and ends without running anything.
            tracing::warn!("the spawner did not answer ({e}): supervisors are started one by one");
            retire(&mut slot, Slot::Down(Instant::now()));
            Err(Refused::Unsupported)
        }
    }
}

/// Put `next` in the slot; a spawner that was in it is killed and reaped.
fn retire(slot: &mut Slot, next: Slot) {
    if let Slot::Up { mut process, .. } = std::mem::replace(slot, next) {
        let _ = process.kill();
        let _ = process.wait();
    }
}

/// Start `exe __supervise --spawner` with its end of a new socket pair as its standard
/// input.
fn launch(exe: &Path) -> io::Result<Slot> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    // A spawner that stops answering (stopped, stuck) is given up after this long, so
    // starts never wait on it for longer.
    nix::sys::socket::setsockopt(
        &ours,
        nix::sys::socket::sockopt::ReceiveTimeout,
        &nix::sys::time::TimeVal::new(ANSWER_WITHIN.as_secs() as _, 0),
    )?;
    let process = std::process::Command::new(exe)
        .args([SUBCOMMAND, ARGUMENT])
        .stdin(std::process::Stdio::from(theirs))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    Ok(Slot::Up {
        exe: exe.to_path_buf(),
        sock: ours,
        process,
    })
}

/// One request and its answer: the pid and pidfd of the new supervisor, or the error
/// number the spawner met; `Err`: the exchange itself failed.
fn ask(
    sock: RawFd,
    stdio: [BorrowedFd; 2],
    cgroup: Option<BorrowedFd>,
) -> io::Result<Result<crate::exec::start::clone_into::Child, i32>> {
    let mut fds = vec![stdio[0].as_raw_fd(), stdio[1].as_raw_fd()];
    fds.extend(cgroup.map(|g| g.as_raw_fd()));
    let flags = [u8::from(cgroup.is_some())];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    while let Err(e) = sendmsg::<()>(
        sock,
        &[IoSlice::new(&flags)],
        &cmsg,
        MsgFlags::MSG_NOSIGNAL,
        None,
    ) {
        if e != nix::errno::Errno::EINTR {
            return Err(e.into());
        }
    }
    let mut answer = [0u8; 4];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let mut iov = [IoSliceMut::new(&mut answer)];
    let msg = loop {
        match recvmsg::<()>(sock, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC) {
            Err(nix::errno::Errno::EINTR) => continue,
            // The receive timeout: the spawner does not answer.
            Err(nix::errno::Errno::EAGAIN) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no answer within {} s", ANSWER_WITHIN.as_secs()),
                ));
            }
            other => break other?,
        }
    };
    let mut pidfd = None;
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(got) = c {
            for fd in got {
                // SAFETY: the kernel installed this descriptor for us; owned from here.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                pidfd.get_or_insert(fd);
            }
        }
    }
    if msg.bytes != 4 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the spawner closed its socket",
        ));
    }
    let n = i32::from_ne_bytes(answer);
    Ok(match (n, pidfd) {
        (pid, Some(pidfd)) if pid > 0 => Ok(crate::exec::start::clone_into::Child { pid, pidfd }),
        (errno, _) if errno < 0 => Err(-errno),
        _ => Err(libc::EPROTO),
    })
}

// ---------------------------------------------------------------------------------------
// The spawner process.

/// What a copy needs from the spawner's start.
struct Spawner {
    /// The name the program had before the spawner took [`NAME`]: each copy's.
    name: std::ffi::CString,
}

/// Run the spawner on its standard input until the scheduler's end closes; returns its
/// exit code. Each copy runs `supervise` (what `shareq __supervise --channel` runs, with
/// its exit code) instead, and ends with it.
pub fn run(supervise: fn() -> u8) -> u8 {
    // No terminal's signals: a session of its own (it was started as a child of the
    // scheduler, never a group leader).
    let _ = nix::unistd::setsid();
    let me = Spawner {
        name: own_name().unwrap_or_else(|| c"shareq".to_owned()),
    };
    set_name(&std::ffi::CString::new(NAME).unwrap_or_default());
    loop {
        let mut flags = [0u8; 1];
        let mut space = nix::cmsg_space!([RawFd; 3]);
        let mut iov = [IoSliceMut::new(&mut flags)];
        let received = recvmsg::<()>(0, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC);
        let msg = match received {
            Ok(m) => m,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return 0,
        };
        if msg.bytes == 0 {
            return 0;
        }
        let mut fds = Vec::new();
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmRights(got) = c {
                    // SAFETY: installed for us by the kernel; owned from here.
                    fds.extend(
                        got.into_iter()
                            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                    );
                }
            }
        }
        let with_group = flags[0] & 1 == 1;
        let answer = if fds.len() != 2 + usize::from(with_group) {
            Err(libc::EPROTO)
        } else {
            match me.copy(&fds, with_group) {
                Copied::InCopy => {
                    // The originals of its channel and the group's descriptor.
                    drop(fds);
                    // The spawner's frames are never returned through.
                    std::process::exit(i32::from(supervise()));
                }
                Copied::Made(pid, pidfd) => Ok((pid, pidfd)),
                Copied::Failed(errno) => Err(errno),
            }
        };
        drop(fds);
        let sent = match answer {
            Ok((pid, pidfd)) => {
                let fd = [pidfd.as_raw_fd()];
                let cmsg = [ControlMessage::ScmRights(&fd)];
                sendmsg::<()>(
                    0,
                    &[IoSlice::new(&pid.to_ne_bytes())],
                    &cmsg,
                    MsgFlags::MSG_NOSIGNAL,
                    None,
                )
            }
            Err(errno) => sendmsg::<()>(
                0,
                &[IoSlice::new(&(-errno).to_ne_bytes())],
                &[],
                MsgFlags::MSG_NOSIGNAL,
                None,
            ),
        };
        if sent.is_err() {
            return 0;
        }
    }
}

/// What [`Spawner::copy`] returns, in the copy and in the spawner.
enum Copied {
    /// This is the copy: run the supervisor.
    InCopy,
    /// The spawner, with the copy's pid and pidfd.
    Made(i32, OwnedFd),
    Failed(i32),
}

impl Spawner {
    /// Make a copy of this process whose standard input and output are `fds[0]` and
    /// `fds[1]`, inside the group `fds[2]` when `with_group`.
    fn copy(&self, fds: &[OwnedFd], with_group: bool) -> Copied {
        let mut pidfd: libc::c_int = -1;
        let mut args = CloneArgs {
            flags: CLONE_PARENT | CLONE_PIDFD,
            pidfd: &mut pidfd as *mut libc::c_int as u64,
            // CLONE_PARENT: the copy ends with the spawner's own exit signal (SIGCHLD).
            exit_signal: 0,
            ..CloneArgs::default()
        };
        if with_group {
            args.flags |= CLONE_INTO_CGROUP;
            args.cgroup = fds[2].as_raw_fd() as u64;
        }
        // SAFETY: a fork-like clone (no CLONE_VM): the copy goes on in its own memory from
        // here, in a process of one thread.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &mut args as *mut CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        };
        match ret {
            0 => {
                // The copy: its channel on 0 and 1 (the spawner's socket on 0 is closed
                // by the first `dup2`); the rest of the request's descriptors closed.
                if nix::unistd::dup2_stdin(&fds[0]).is_err()
                    || nix::unistd::dup2_stdout(&fds[1]).is_err()
                {
                    // SAFETY: ending the copy without running anything.
                    unsafe { libc::_exit(126) };
                }
                set_name(&self.name);
                Copied::InCopy
            }
            r if r < 0 => Copied::Failed(
                io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO),
            ),
            pid => {
                // SAFETY: the kernel filled in a new pidfd for the copy.
                Copied::Made(pid as i32, unsafe { OwnedFd::from_raw_fd(pidfd) })
            }
        }
    }
}

/// This process's name (`/proc/self/comm`).
fn own_name() -> Option<std::ffi::CString> {
    let name = std::fs::read_to_string("/proc/self/comm").ok()?;
    std::ffi::CString::new(name.trim_end_matches('\n')).ok()
}

/// Name the calling thread (the process's name, for its one thread): `PR_SET_NAME`, cut
/// at 15 bytes by the kernel.
fn set_name(name: &std::ffi::CStr) {
    // SAFETY: a plain system call with a NUL-terminated string that outlives it.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spawners_name_fits_the_kernels_and_its_line_is_a_supervisors() {
        assert!(NAME.len() <= 15);
        assert_eq!(SUBCOMMAND, "__supervise");
    }
}
