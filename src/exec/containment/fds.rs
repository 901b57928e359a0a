//! What a job inherits of the processes that start it (SPEC §9): no descriptor above
//! standard error and no way to gain privileges. `serve` closes every descriptor it
//! inherited above 2 before it opens anything ([`close_inherited`]: a root-only file
//! opened by whoever started it, a wrapper's pipes); the supervisor marks all of its own
//! close-on-exec right before the command starts ([`cloexec_above_stderr`]), so neither
//! the forked nor the `posix_spawn` path hands one on, and sets `no_new_privs`
//! ([`no_new_privs`]): a setuid or file-capability program run by a job gets nothing.

use nix::libc;
use std::io;

/// `close_range(2)`'s flag: mark close-on-exec instead of closing (Linux 5.11).
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Close every descriptor above 2 of this process. For the start of `serve`, before it
/// opens any file of its own: whatever is open then was inherited.
pub fn close_inherited() {
    // SAFETY: a plain system call on descriptor numbers; nothing of this process is
    // open above 2 yet that anything would use afterwards.
    let done = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) } == 0;
    if !done {
        for fd in open_above_stderr() {
            // SAFETY: as above.
            unsafe { libc::close(fd) };
        }
    }
}

/// Mark every descriptor above 2 of this process close-on-exec, so that a program it
/// starts gets none of them (descriptors it sets up for the program on purpose, 0 to 2,
/// are dup'ed there in the child and stay).
pub fn cloexec_above_stderr() {
    // SAFETY: a plain system call on descriptor numbers; it only sets a flag.
    let done =
        unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) } == 0;
    if done {
        return;
    }
    for fd in open_above_stderr() {
        // SAFETY: `fd` was open a moment ago; a closed one answers EBADF, ignored.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags >= 0 {
            // SAFETY: as above.
            unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
        }
    }
}

/// The descriptors above 2 this process has open (`/proc/self/fd`, read before any is
/// changed: the directory's own descriptor is closed by then and fails harmlessly).
fn open_above_stderr() -> Vec<libc::c_int> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::c_int>().ok())
        .filter(|&fd| fd > 2)
        .collect()
}

/// Set `no_new_privs` on this process (inherited by everything it starts, and kept
/// across `exec`): an `exec` of a setuid, setgid or file-capability program grants
/// nothing. Async-signal-safe: for a forked child before its `exec` too.
pub fn no_new_privs() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    match unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn descriptors_above_stderr_are_not_inherited_by_a_program() {
        // In a child process of its own: this test must not change the test runner's.
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let fd = file.as_raw_fd();
        // SAFETY: the child only calls async-signal-safe functions before its exec.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // Undo std's close-on-exec, as a descriptor inherited from a wrapper has none.
            unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
            cloexec_above_stderr();
            let code = if no_new_privs().is_ok() {
                let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
                if flags & libc::FD_CLOEXEC != 0 { 0 } else { 1 }
            } else {
                2
            };
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status));
        assert_eq!(libc::WEXITSTATUS(status), 0);
    }
}
