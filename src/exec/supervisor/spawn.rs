//! Starting a job's command without copying the supervisor: `posix_spawn` (glibc: a
//! `clone` sharing the supervisor's memory until the `exec`), where the command runs as
//! the supervisor's own user. A fork copies the supervisor's page tables and makes every
//! page it writes afterwards fault: about 0.6 ms of CPU per start (docs/PERFORMANCE.md).
//!
//! The command starts exactly as the forked path (`supervisor::spawn`) starts it: in a
//! process group of its own, with no signal blocked (the supervisor blocks its stop
//! signals for its signalfd, and a spawned child would inherit that mask: so
//! `POSIX_SPAWN_SETSIGMASK` with an empty one, which std's spawn does not set), the stop
//! signals and SIGPIPE at their defaults, umask 022, its environment, working directory,
//! standard input from `/dev/null` and both outputs into the supervisor's pipe. The
//! program is looked up in the job's own `PATH`, as `execvp` in the forked child does.
//!
//! Where this path cannot promise the same start it says so ([`Spawned::Fork`]) and the
//! caller forks: a relative `PATH` entry (looked up after the change of directory), an
//! output descriptor among 0–2, or a program the kernel cannot execute by itself (a
//! script without `#!`, which `execvp` hands to `sh`).

use nix::libc;
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The signals the command starts with at their defaults (whatever the supervisor has).
pub const DEFAULT_SIGNALS: [Signal; 5] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGHUP,
    Signal::SIGPIPE,
];

/// What to start.
pub struct Launch<'a> {
    pub program: &'a OsStr,
    pub args: &'a [&'a OsStr],
    /// Set on top of the supervisor's own environment.
    pub env: &'a BTreeMap<String, String>,
    pub cwd: Option<&'a Path>,
    /// Standard output and error.
    pub out: BorrowedFd<'a>,
}

/// How it went.
#[derive(Debug)]
pub enum Spawned {
    /// Started: its pid.
    Started(u32),
    /// This path cannot start it as the forked one would: fork.
    Fork,
}

pub fn spawn(l: &Launch) -> io::Result<Spawned> {
    if l.out.as_raw_fd() <= 2 {
        return Ok(Spawned::Fork);
    }
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    for (k, v) in l.env {
        env.insert(k.into(), v.into());
    }
    let path = match program_path(l.program, env.get(OsStr::new("PATH")).map(|p| &**p)) {
        Lookup::Found(p) => p,
        Lookup::Relative => return Ok(Spawned::Fork),
        Lookup::Missing(e) => return Err(e),
    };
    let c = |b: &[u8]| CString::new(b).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
    let path = c(path.as_os_str().as_bytes())?;
    let mut argv = vec![c(l.program.as_bytes())?];
    for a in l.args {
        argv.push(c(a.as_bytes())?);
    }
    let envp = env
        .into_iter()
        .map(|(mut k, v)| {
            k.push("=");
            k.push(v);
            c(&k.into_vec())
        })
        .collect::<io::Result<Vec<_>>>()?;
    let cwd = l.cwd.map(|d| c(d.as_os_str().as_bytes())).transpose()?;
    let null = c(b"/dev/null")?;
    let actions = Actions::new()?;
    // SAFETY (the file actions): initialised, and the paths outlive the spawn.
    ok(unsafe {
        libc::posix_spawn_file_actions_addopen(actions.ptr(), 0, null.as_ptr(), libc::O_RDONLY, 0)
    })?;
    for to in [1, 2] {
        // SAFETY: as above; `out` is open until the spawn is over.
        ok(unsafe {
            libc::posix_spawn_file_actions_adddup2(actions.ptr(), l.out.as_raw_fd(), to)
        })?;
    }
    if let Some(dir) = &cwd {
        // SAFETY: as above.
        ok(unsafe { libc::posix_spawn_file_actions_addchdir_np(actions.ptr(), dir.as_ptr()) })?;
    }
    let attr = Attr::new()?;
    // SAFETY (all the calls on `attr`, `actions` and the sets below): they are
    // initialised, outlive the calls, and the pointers are to live values.
    unsafe {
        let mut none = std::mem::zeroed::<libc::sigset_t>();
        let mut defaults = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut none);
        libc::sigemptyset(&mut defaults);
        for s in DEFAULT_SIGNALS {
            libc::sigaddset(&mut defaults, s as libc::c_int);
        }
        let flags = libc::POSIX_SPAWN_SETPGROUP
            | libc::POSIX_SPAWN_SETSIGMASK
            | libc::POSIX_SPAWN_SETSIGDEF;
        ok(libc::posix_spawnattr_setflags(
            attr.ptr(),
            flags as libc::c_short,
        ))?;
        ok(libc::posix_spawnattr_setpgroup(attr.ptr(), 0))?;
        ok(libc::posix_spawnattr_setsigmask(attr.ptr(), &none))?;
        ok(libc::posix_spawnattr_setsigdefault(attr.ptr(), &defaults))?;
    }
    let mut argv_p: Vec<*mut libc::c_char> = argv.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv_p.push(std::ptr::null_mut());
    let mut envp_p: Vec<*mut libc::c_char> = envp.iter().map(|e| e.as_ptr().cast_mut()).collect();
    envp_p.push(std::ptr::null_mut());
    // The umask is lent for the spawn alone: no thread of the supervisor makes a file
    // meanwhile (its other thread, the report channel's, only sends).
    let ours = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer is to a live, NUL-terminated value or array; glibc reads them
    // before it returns.
    let err = unsafe {
        libc::posix_spawn(
            &mut pid,
            path.as_ptr(),
            actions.ptr(),
            attr.ptr(),
            argv_p.as_ptr(),
            envp_p.as_ptr(),
        )
    };
    nix::sys::stat::umask(ours);
    match err {
        0 => Ok(Spawned::Started(pid as u32)),
        // Not a binary nor a `#!` script: `execvp` runs it with `sh`, so the fork does.
        libc::ENOEXEC => Ok(Spawned::Fork),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Where the program is, as `execvp` finds it: a name with a slash as it is (relative to
/// the new working directory), else the first executable file of that name in `PATH`
/// (`/bin:/usr/bin` without one).
enum Lookup {
    Found(PathBuf),
    /// `PATH` has a relative entry, which only the child could look in.
    Relative,
    Missing(io::Error),
}

fn program_path(program: &OsStr, path: Option<&OsStr>) -> Lookup {
    if program.as_bytes().contains(&b'/') {
        return Lookup::Found(PathBuf::from(program));
    }
    if program.is_empty() {
        return Lookup::Missing(io::ErrorKind::NotFound.into());
    }
    let path = path.unwrap_or(OsStr::new("/bin:/usr/bin"));
    let mut denied = false;
    for dir in path.as_bytes().split(|&b| b == b':') {
        let dir = Path::new(OsStr::from_bytes(dir));
        if !dir.is_absolute() {
            return Lookup::Relative;
        }
        let candidate = dir.join(program);
        if !candidate.is_file() {
            continue;
        }
        if nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK).is_ok() {
            return Lookup::Found(candidate);
        }
        denied = true;
    }
    Lookup::Missing(if denied {
        io::ErrorKind::PermissionDenied.into()
    } else {
        io::ErrorKind::NotFound.into()
    })
}

/// A `posix_spawn*` call's result (an error number, 0 for none).
fn ok(err: libc::c_int) -> io::Result<()> {
    match err {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// `posix_spawn_file_actions_t`, destroyed on drop.
struct Actions(Box<libc::posix_spawn_file_actions_t>);

impl Actions {
    fn new() -> io::Result<Actions> {
        // SAFETY: zeroed storage, initialised by the call before any other use.
        let mut a = Box::new(unsafe { std::mem::zeroed::<libc::posix_spawn_file_actions_t>() });
        // SAFETY: a valid, exclusively borrowed object to initialise.
        ok(unsafe { libc::posix_spawn_file_actions_init(&mut *a) })?;
        Ok(Actions(a))
    }

    fn ptr(&self) -> *mut libc::posix_spawn_file_actions_t {
        (&*self.0 as *const libc::posix_spawn_file_actions_t).cast_mut()
    }
}

impl Drop for Actions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut *self.0) };
    }
}

/// `posix_spawnattr_t`, destroyed on drop.
struct Attr(Box<libc::posix_spawnattr_t>);

impl Attr {
    fn new() -> io::Result<Attr> {
        // SAFETY: zeroed storage, initialised by the call before any other use.
        let mut a = Box::new(unsafe { std::mem::zeroed::<libc::posix_spawnattr_t>() });
        // SAFETY: a valid, exclusively borrowed object to initialise.
        ok(unsafe { libc::posix_spawnattr_init(&mut *a) })?;
        Ok(Attr(a))
    }

    fn ptr(&self) -> *mut libc::posix_spawnattr_t {
        (&*self.0 as *const libc::posix_spawnattr_t).cast_mut()
    }
}

impl Drop for Attr {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`.
        unsafe { libc::posix_spawnattr_destroy(&mut *self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_as_execvp_finds_them() {
        let found =
            |p: &str, path: Option<&str>| match program_path(OsStr::new(p), path.map(OsStr::new)) {
                Lookup::Found(f) => Some(f),
                Lookup::Relative => None,
                Lookup::Missing(e) => panic!("{p}: {e}"),
            };
        assert_eq!(
            found("./run.sh", Some("/nowhere")),
            Some(PathBuf::from("./run.sh"))
        );
        assert_eq!(
            found("sh", Some("/nonexistent:/bin")),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(found("sh", None), Some(PathBuf::from("/bin/sh")));
        // A relative entry is left to the forked child.
        assert_eq!(found("sh", Some("bin:/bin")), None);
        assert!(matches!(
            program_path(OsStr::new("no-such-program-here"), Some(OsStr::new("/bin"))),
            Lookup::Missing(e) if e.kind() == io::ErrorKind::NotFound
        ));
    }
}
