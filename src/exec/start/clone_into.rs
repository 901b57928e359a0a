//! Starting a program straight into a cgroup (v2) without copying the caller: `clone3`
//! with `CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP | CLONE_PIDFD`, the way glibc's
//! `posix_spawn` starts a child (its memory shared until the `exec`), plus the group.
//!
//! Why: a process that moves itself (or is moved) into a unified-hierarchy group by
//! writing `cgroup.procs` takes the kernel's global `cgroup_threadgroup_rwsem` for
//! writing, which waits for an RCU grace period unless the hierarchy is mounted with
//! `favordynmods`: 5–16 ms per start on this machine, most of a job's submit → first
//! instruction (docs/PERFORMANCE.md). A child created inside the group takes that lock
//! only for reading. glibc has `posix_spawnattr_setcgroup_np` from 2.39 on; this is the
//! same for the glibc of Debian 12 (2.36).
//!
//! The child runs on a stack of its own in the caller's memory, with every signal
//! blocked (blocked by the caller around the `clone3`), until its `execve`: it puts every
//! caught signal back to its default (so no handler of the caller's can run in it), sets
//! its three standard descriptors, its signal mask, and execs. It calls nothing that
//! allocates or locks. If the `execve` fails, it leaves the error number where the
//! caller reads it and exits; the caller reaps it and returns the error.
//!
//! Only x86-64 Linux has the child's entry here (a few instructions of assembly: the
//! child must not return through the caller's frames). Elsewhere, and where the kernel
//! or a sandbox refuses `clone3` or the flag, [`spawn`] says [`Refused::Unsupported`]
//! and the caller starts the program as before.

use nix::libc;
use std::ffi::{CString, c_char, c_int};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

const CLONE_VM: u64 = 0x100;
const CLONE_VFORK: u64 = 0x4000;
pub(super) const CLONE_PIDFD: u64 = 0x1000;
pub(super) const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// The kernel's `struct clone_args` (version 2, with `cgroup`: Linux 5.7).
#[repr(C)]
#[derive(Default)]
pub(super) struct CloneArgs {
    pub flags: u64,
    pub pidfd: u64,
    pub child_tid: u64,
    pub parent_tid: u64,
    pub exit_signal: u64,
    pub stack: u64,
    pub stack_size: u64,
    pub tls: u64,
    pub set_tid: u64,
    pub set_tid_size: u64,
    pub cgroup: u64,
}

/// What to start.
pub struct Plan<'a> {
    /// The program (an absolute path: it is not looked up).
    pub program: &'a std::path::Path,
    /// Its arguments after the program's name.
    pub args: &'a [&'a str],
    /// Its standard input, output and error.
    pub stdio: [BorrowedFd<'a>; 3],
    /// The signals it starts with blocked.
    pub blocked: &'a nix::sys::signal::SigSet,
    /// The unified-hierarchy group it starts in (an open directory).
    pub cgroup: BorrowedFd<'a>,
}

/// A started child.
#[derive(Debug)]
pub struct Child {
    pub pid: i32,
    /// Readable once it has ended (`poll`); it is reaped with `waitpid`.
    pub pidfd: OwnedFd,
}

/// Why [`spawn`] did not start it.
#[derive(Debug)]
pub enum Refused {
    /// This platform, kernel or sandbox has no `clone3` into a group: start it otherwise.
    Unsupported,
    /// It was tried and failed (the group, the program): the error.
    Failed(io::Error),
}

/// Set once the kernel has said it has no `clone3` with these flags: not asked again.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// Can a child be started straight into a group here: this build's architecture, a
/// kernel of 5.7 or later, and no refusal seen yet?
pub fn available() -> bool {
    cfg!(all(target_arch = "x86_64", target_os = "linux"))
        && !UNSUPPORTED.load(Ordering::Relaxed)
        && *KERNEL_HAS_IT.get_or_init(|| {
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .is_ok_and(|r| release_at_least(&r, (5, 7)))
        })
}

/// Read once: [`available`] is asked at every start.
static KERNEL_HAS_IT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Is kernel release `release` (`6.18.0-12-amd64`) `at_least` (major, minor)?
fn release_at_least(release: &str, at_least: (u32, u32)) -> bool {
    let mut v = release
        .trim()
        .split(['.', '-'])
        .map(|x| x.parse::<u32>().ok());
    matches!((v.next(), v.next()), (Some(Some(major)), Some(Some(minor))) if (major, minor) >= at_least)
}

/// Start `plan` in its group. Blocks the calling thread until the child has exec'd (or
/// failed to).
pub fn spawn(plan: &Plan) -> Result<Child, Refused> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux"))
        || UNSUPPORTED.load(Ordering::Relaxed)
    {
        return Err(Refused::Unsupported);
    }
    let failed = |e: io::Error| Refused::Failed(e);
    // Everything the child needs, made before it exists (it must not allocate).
    let program = CString::new(plan.program.as_os_str().as_encoded_bytes())
        .map_err(|_| failed(io::Error::other("program path has a NUL byte")))?;
    let mut argv_owned = vec![program.clone()];
    for a in plan.args {
        argv_owned.push(
            CString::new(*a).map_err(|_| failed(io::Error::other("argument has a NUL byte")))?,
        );
    }
    let mut argv: Vec<*const c_char> = argv_owned.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // The descriptors, each above 2, so that no `dup2` overwrites one still to be read.
    let mut lifted = Vec::new();
    let mut fds = [0 as RawFd; 3];
    for (i, fd) in plan.stdio.iter().enumerate() {
        let raw = fd.as_raw_fd();
        fds[i] = if raw > 2 {
            raw
        } else {
            // SAFETY: F_DUPFD_CLOEXEC on a descriptor we borrow; the copy is owned here.
            let copy = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 3) };
            if copy < 0 {
                return Err(failed(io::Error::last_os_error()));
            }
            // SAFETY: `copy` is a new descriptor nobody else owns.
            lifted.push(unsafe { OwnedFd::from_raw_fd(copy) });
            copy
        };
    }
    // The child's stack: never read before the child writes it, so not zeroed (64 KiB
    // of memset per start otherwise).
    let mut stack: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut shared = ChildArgs {
        program: program.as_ptr(),
        argv: argv.as_ptr(),
        // SAFETY: reading the process's environment pointer; nothing here changes it.
        envp: unsafe { environ },
        fds,
        mask: *plan.blocked.as_ref(),
        error: 0,
    };
    let mut pidfd: c_int = -1;
    let top = (stack.as_mut_ptr() as usize + stack.capacity()) & !15;
    let base = stack.as_mut_ptr() as usize;
    let mut args = CloneArgs {
        flags: CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP,
        pidfd: &mut pidfd as *mut c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: base as u64,
        stack_size: (top - base) as u64,
        cgroup: plan.cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // No signal handler may run in the child while it shares our memory: all blocked
    // around the clone, on this thread (the child starts with this mask).
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut before: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain libc calls on local sets.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
    }
    // SAFETY: the child runs `child_main` on `stack` with `shared`, both alive until the
    // clone returns (CLONE_VFORK: after the child's exec or exit).
    let ret = unsafe { clone3(&mut args, &mut shared) };
    // SAFETY: restores the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
    }
    drop(lifted);
    if ret < 0 {
        let errno = (-ret) as i32;
        if matches!(errno, libc::ENOSYS | libc::E2BIG | libc::EINVAL) {
            UNSUPPORTED.store(true, Ordering::Relaxed);
            tracing::warn!(
                "clone3 into a cgroup refused ({}): each supervisor enters its group \
                 itself from now on (≈10 ms per start where the unified hierarchy lacks \
                 favordynmods)",
                io::Error::from_raw_os_error(errno)
            );
            return Err(Refused::Unsupported);
        }
        return Err(failed(io::Error::from_raw_os_error(errno)));
    }
    let pid = ret as i32;
    // SAFETY: the kernel filled in a new pidfd for the child.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    // SAFETY: read after the child is gone from our memory (exec'd or exited).
    let error = unsafe { std::ptr::read_volatile(&shared.error) };
    if error != 0 {
        let mut status = 0;
        // SAFETY: reaping our own child, which has exited.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(failed(io::Error::from_raw_os_error(error)));
    }
    drop(stack);
    Ok(Child { pid, pidfd })
}

unsafe extern "C" {
    static environ: *const *const c_char;
}

/// What the child reads (and, on a failed exec, writes) in the caller's memory.
#[repr(C)]
struct ChildArgs {
    program: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    fds: [RawFd; 3],
    mask: libc::sigset_t,
    error: c_int,
}

/// The child, on its own stack, all signals blocked: caught signals back to their
/// defaults, its descriptors, its mask, `execve`. Only system calls.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
extern "C" fn child_main(a: *mut ChildArgs) -> ! {
    // SAFETY: `a` points into the caller's frame, which waits (CLONE_VFORK).
    unsafe {
        let a = &mut *a;
        for sig in 1..65 {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut old: KernelSigaction = std::mem::zeroed();
            if libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                std::ptr::null::<KernelSigaction>(),
                &mut old,
                8,
            ) != 0
            {
                continue;
            }
            if old.handler != libc::SIG_DFL && old.handler != libc::SIG_IGN {
                let dfl = KernelSigaction {
                    handler: libc::SIG_DFL,
                    ..std::mem::zeroed()
                };
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    sig,
                    &dfl,
                    std::ptr::null_mut::<KernelSigaction>(),
                    8,
                );
            }
        }
        for (to, from) in a.fds.iter().enumerate() {
            if libc::syscall(libc::SYS_dup2, *from, to) < 0 {
                fail(a);
            }
        }
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &a.mask,
            std::ptr::null_mut::<libc::sigset_t>(),
            8,
        );
        libc::syscall(libc::SYS_execve, a.program, a.argv, a.envp);
        fail(a)
    }
}

/// The `execve` (or a `dup2`) failed: leave its error number for the caller, and exit.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe fn fail(a: &mut ChildArgs) -> ! {
    // SAFETY: errno is this thread's (the caller's, which is suspended); `error` is read
    // by the caller only after this child is gone.
    unsafe {
        std::ptr::write_volatile(&mut a.error, (*libc::__errno_location()).max(1));
        libc::_exit(127)
    }
}

/// The kernel's `struct sigaction` (x86-64), as `rt_sigaction` takes it.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[repr(C)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// `clone3`; in the child, `child_main(shared)` on the new stack (it never returns).
/// Returns the child's pid or a negative error number.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe fn clone3(args: &mut CloneArgs, shared: &mut ChildArgs) -> i64 {
    let ret: i64;
    // SAFETY: the caller keeps `args`, `shared` and the stack alive until this returns;
    // in the child (rax = 0) the kernel has set rsp to the new stack's top, and the child
    // calls `child_main`, which execs or exits.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r12",
            "call r13",
            "ud2",
            "2:",
            inout("rax") 435i64 => ret,
            in("rdi") args as *mut CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") shared as *mut ChildArgs,
            in("r13") child_main as extern "C" fn(*mut ChildArgs) -> !,
            out("rcx") _,
            out("r11") _,
        );
    }
    ret
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
unsafe fn clone3(_args: &mut CloneArgs, _shared: &mut ChildArgs) -> i64 {
    -(libc::ENOSYS as i64)
}

/// Reap `child` if it has ended (`None`: still running).
pub fn try_reap(pid: i32) -> io::Result<Option<std::process::ExitStatus>> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    // SAFETY: waiting for our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    match r {
        0 => Ok(None),
        r if r < 0 => Err(io::Error::last_os_error()),
        _ => Ok(Some(std::process::ExitStatus::from_raw(status))),
    }
}

/// Wait for `child` to end and reap it, without blocking a thread: its pidfd becomes
/// readable when it ends.
pub async fn wait(child: &Child) -> io::Result<std::process::ExitStatus> {
    use std::os::fd::AsFd;
    use tokio::io::unix::AsyncFd;
    // SAFETY: the pidfd is borrowed from `child`, open for as long as this function runs.
    let fd = unsafe {
        AsyncFd::register_with_interest(child.pidfd.as_fd(), tokio::io::Interest::READABLE)
    }
    .map_err(io::Error::from)?;
    loop {
        if let Some(status) = try_reap(child.pid)? {
            return Ok(status);
        }
        let mut ready = fd.readable().await?;
        ready.clear_ready();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;

    /// A group of our own under the unified hierarchy's root, when this test may make one
    /// (root on a machine with cgroup v2), removed on drop.
    struct Group(std::path::PathBuf);
    impl Drop for Group {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    fn group(name: &str) -> Option<Group> {
        let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
            .into_iter()
            .map(std::path::Path::new)
            .find(|p| {
                p.join("cgroup.kill").exists() || p.join("cgroup.subtree_control").exists()
            })?;
        let dir = root.join(format!("shareq-clone-test-{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        Some(Group(dir))
    }

    fn run(plan_args: &[&str], program: &str, group: &Group) -> (Result<Child, Refused>, String) {
        let dir = std::fs::File::open(&group.0).unwrap();
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let null = std::fs::File::open("/dev/null").unwrap();
        let mut blocked = nix::sys::signal::SigSet::empty();
        blocked.add(nix::sys::signal::Signal::SIGUSR2);
        let started = spawn(&Plan {
            program: std::path::Path::new(program),
            args: plan_args,
            stdio: [null.as_fd(), w.as_fd(), w.as_fd()],
            blocked: &blocked,
            cgroup: dir.as_fd(),
        });
        drop(w);
        let mut out = String::new();
        std::fs::File::from(r).read_to_string(&mut out).unwrap();
        (started, out)
    }

    #[test]
    fn a_child_starts_in_its_group_with_its_mask_and_no_handler_and_is_reaped_through_its_pidfd() {
        let Some(g) = group("in") else {
            eprintln!("skipped: needs root and a unified cgroup hierarchy");
            return;
        };
        // In the group.
        let (started, out) = run(&["-c", "cat /proc/self/cgroup; exit 3"], "/bin/sh", &g);
        let child = match started {
            Ok(c) => c,
            Err(Refused::Unsupported) => {
                eprintln!("skipped: no clone3 into a group here");
                return;
            }
            Err(Refused::Failed(e)) => panic!("{e}"),
        };
        let name = g.0.file_name().unwrap().to_str().unwrap();
        assert!(
            out.lines()
                .any(|l| l.starts_with("0::") && l.ends_with(name)),
            "{out}"
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let status = rt.block_on(wait(&child)).unwrap();
        assert_eq!(status.code(), Some(3));
        // With the mask asked for (a program that leaves its mask alone: grep): SIGUSR2
        // (12) blocked is bit 11. What it catches is its own (exec reset the rest).
        let (started, out) = run(&["-E", "^SigBlk", "/proc/self/status"], "/bin/grep", &g);
        let child = started.map_err(|_| "grep did not start").unwrap();
        assert_eq!(out.trim(), "SigBlk:\t0000000000000800");
        assert_eq!(rt.block_on(wait(&child)).unwrap().code(), Some(0));
    }

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        assert!(release_at_least("6.18.0-12-amd64\n", (5, 7)));
        assert!(release_at_least("5.7.0-rc1", (5, 7)));
        assert!(release_at_least("5.10", (5, 7)));
        assert!(!release_at_least("5.6.19", (5, 7)));
        assert!(!release_at_least("4.19.0-26-amd64", (5, 7)));
        assert!(!release_at_least("weird", (5, 7)));
    }

    #[test]
    fn a_program_that_cannot_be_executed_is_an_error_and_leaves_no_child() {
        let Some(g) = group("missing") else {
            eprintln!("skipped: needs root and a unified cgroup hierarchy");
            return;
        };
        let (started, _) = run(&[], "/nonexistent/program", &g);
        match started {
            Err(Refused::Failed(e)) => assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}"),
            Err(Refused::Unsupported) => eprintln!("skipped: no clone3 into a group here"),
            Ok(c) => panic!("started {c:?}"),
        }
    }
}
