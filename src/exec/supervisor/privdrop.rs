//! Running a job as its submitter (SPEC §9). When the supervisor runs as root and the job
//! was submitted by another user, the command gets that user's uid, primary gid and
//! supplementary groups, `HOME`, `USER`, `LOGNAME` and `SHELL` from the user database, a
//! clean environment, and enters its working directory as that user. Privileges are
//! dropped in the child between fork and exec, and the drop is checked: a command that
//! could get root back is never executed. A supervisor that runs as the submitter already
//! (Slurm's `--uid`) gives the command the same clean environment, without a drop.
//!
//! Whether a submitter may enter a working directory is asked at submit time with that
//! user's credentials too ([`may_enter`]), so a refusal tells nobody more than they could
//! see themselves.

use crate::model::Submitter;
use nix::unistd::{Gid, Uid, User};
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// `PATH` for a job when the scheduler's own has none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Variables of the scheduler's environment a job run as another user keeps.
const KEPT: &[&str] = &["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"];

/// The variables of the scheduler's environment that a job keeps ([`KEPT`], where set):
/// all of it a job run as another user sees of the scheduler, here or on a Slurm node.
pub(crate) fn kept_env() -> Vec<(String, String)> {
    KEPT.iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect()
}

/// Who a command runs as, looked up before the fork (the child may not allocate).
#[derive(Debug, Clone)]
pub struct RunAs {
    pub uid: Uid,
    pub gid: Gid,
    pub name: String,
    groups: Vec<Gid>,
    home: PathBuf,
    shell: PathBuf,
    /// Change uid and groups (false: this process runs as the user already, as under
    /// Slurm's `--uid`; only the environment and the working directory are set).
    switch: bool,
}

impl RunAs {
    /// Whom to run a job as: `None` when there is nothing to change (this process is not
    /// root, or the job's submitter is root, or unknown: jobs stored before shareq
    /// recorded submitters run as the scheduler's user, as they always did).
    pub fn for_submitter(submitter: Option<&Submitter>) -> Result<Option<RunAs>, String> {
        let Some(s) = submitter else { return Ok(None) };
        if !nix::unistd::geteuid().is_root() || s.uid == 0 {
            return Ok(None);
        }
        let user = User::from_uid(Uid::from_raw(s.uid))
            .map_err(|e| format!("cannot look up uid {} ({}): {e}", s.uid, s.name))?
            .ok_or_else(|| {
                format!(
                    "the job's submitter {} (uid {}) is not in the user database any more",
                    s.name, s.uid
                )
            })?;
        let cname = CString::new(user.name.clone())
            .map_err(|_| format!("user name {:?} holds a NUL byte", user.name))?;
        let groups = nix::unistd::getgrouplist(&cname, user.gid)
            .map_err(|e| format!("cannot read the groups of {}: {e}", user.name))?;
        Ok(Some(RunAs {
            uid: user.uid,
            gid: user.gid,
            name: user.name,
            groups,
            home: user.dir,
            shell: user.shell,
            switch: true,
        }))
    }

    /// This process's own user: a job run without a privilege change, but with that
    /// user's clean environment (a supervisor that Slurm started as the submitter).
    pub fn current() -> Result<RunAs, String> {
        let uid = nix::unistd::geteuid();
        let user = User::from_uid(uid)
            .map_err(|e| format!("cannot look up uid {uid}: {e}"))?
            .ok_or_else(|| format!("uid {uid} is not in the user database"))?;
        Ok(RunAs {
            uid: user.uid,
            gid: user.gid,
            name: user.name,
            groups: Vec::new(),
            home: user.dir,
            shell: user.shell,
            switch: false,
        })
    }

    /// Could this user enter `dir` (a directory they may search, reached through
    /// directories they may search)? Asked on a thread of its own that takes the user's
    /// groups and file-system ids (Linux keeps them per thread: the raw `setgroups`, and
    /// `setfsuid`/`setfsgid`, change that thread alone, and it ends with the answer), so
    /// the scheduler's privileges decide nothing.
    pub fn may_enter(&self, dir: &Path) -> bool {
        if !self.switch {
            return enterable(dir);
        }
        let (uid, gid) = (self.uid.as_raw(), self.gid.as_raw());
        let groups: Vec<nix::libc::gid_t> = self.groups.iter().map(|g| g.as_raw()).collect();
        let dir = dir.to_path_buf();
        let asked = std::thread::Builder::new()
            .name("shareq-cwd-check".into())
            .spawn(move || {
                use nix::libc;
                // SAFETY: system calls on this thread's own credentials, with a live array.
                let switched = unsafe {
                    libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) == 0 && {
                        libc::setfsgid(gid);
                        libc::setfsuid(uid);
                        // An invalid id changes nothing and returns the one in force.
                        libc::setfsgid(u32::MAX) == gid as libc::c_int
                            && libc::setfsuid(u32::MAX) == uid as libc::c_int
                    }
                };
                switched && enterable(&dir)
            });
        asked.is_ok_and(|t| t.join().unwrap_or(false))
    }

    /// Set up `cmd` to run as this user in `cwd` (default: the user's home): a clean
    /// environment plus `job_env`, and the drop itself before exec. Register it after any
    /// other `pre_exec` step that needs root.
    pub fn apply(
        &self,
        cmd: &mut std::process::Command,
        job_env: impl IntoIterator<Item = (String, String)>,
        cwd: Option<&str>,
    ) -> std::io::Result<()> {
        let kept = kept_env();
        cmd.env_clear();
        cmd.env("PATH", DEFAULT_PATH);
        cmd.envs(kept);
        cmd.env("HOME", &self.home)
            .env("USER", &self.name)
            .env("LOGNAME", &self.name)
            .env("SHELL", &self.shell);
        cmd.envs(job_env);
        let dir: PathBuf = cwd.map_or_else(|| self.home.clone(), PathBuf::from);
        let cdir = CString::new(dir.as_os_str().as_encoded_bytes())
            .map_err(|_| std::io::Error::other("the working directory holds a NUL byte"))?;
        let note = format!(
            "shareq: {} cannot enter the working directory {}\n",
            self.name,
            dir.display()
        )
        .into_bytes();
        let (uid, gid, groups, switch) = (self.uid, self.gid, self.groups.clone(), self.switch);
        // SAFETY: only async-signal-safe calls (setgroups, setgid, setuid, chdir, write) on memory prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                if switch {
                    nix::unistd::setgroups(&groups)?;
                    nix::unistd::setgid(gid)?;
                    nix::unistd::setuid(uid)?;
                    // The drop must be final: getting root back must fail.
                    if nix::unistd::setuid(Uid::from_raw(0)).is_ok()
                        || nix::unistd::geteuid().is_root()
                    {
                        return Err(std::io::Error::other("privileges could be regained"));
                    }
                }
                if let Err(e) = nix::unistd::chdir(cdir.as_c_str()) {
                    let stderr = std::os::fd::BorrowedFd::borrow_raw(2);
                    let _ = nix::unistd::write(stderr, &note);
                    return Err(e.into());
                }
                Ok(())
            });
        }
        Ok(())
    }
}

/// May the submitter enter `dir`, the working directory of a job (SPEC §9)? Checked with
/// the submitter's own credentials where the scheduler runs as root ([`RunAs::may_enter`]),
/// else as this process's user, whom the job then runs as. A relative path is never
/// resolved here (the client resolves it against its own directory): no. Nor where the
/// submitter cannot be looked up.
pub fn may_enter(submitter: Option<&Submitter>, dir: &str) -> bool {
    let dir = Path::new(dir);
    if !dir.is_absolute() {
        return false;
    }
    match RunAs::for_submitter(submitter) {
        Ok(Some(user)) => user.may_enter(dir),
        Ok(None) => enterable(dir),
        Err(_) => false,
    }
}

/// Is `dir` a directory this thread's credentials may enter (search permission)?
fn enterable(dir: &Path) -> bool {
    let Ok(c) = CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path; AT_EACCESS: the effective (file-system) ids and groups.
    dir.is_dir()
        && unsafe {
            nix::libc::faccessat(
                nix::libc::AT_FDCWD,
                c.as_ptr(),
                nix::libc::X_OK,
                nix::libc::AT_EACCESS,
            )
        } == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// As root: `nobody` may not enter a root-only directory, nor one below it, that root
    /// enters; a relative path is never resolved.
    #[test]
    fn a_directory_is_checked_with_the_submitters_credentials() {
        let nobody = User::from_name("nobody").ok().flatten();
        let (true, Some(nobody)) = (nix::unistd::geteuid().is_root(), nobody) else {
            eprintln!("skipped: needs root and a `nobody` user");
            return;
        };
        let who = Submitter {
            name: nobody.name.clone(),
            uid: nobody.uid.as_raw(),
        };
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        let closed = dir.path().join("closed");
        std::fs::create_dir_all(closed.join("inside")).unwrap();
        std::fs::create_dir_all(&open).unwrap();
        for (d, mode) in [(dir.path(), 0o755), (&open, 0o755), (&closed, 0o700)] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let s = |p: &Path| p.display().to_string();
        assert!(may_enter(Some(&who), &s(&open)));
        assert!(!may_enter(Some(&who), &s(&closed)));
        assert!(!may_enter(Some(&who), &s(&closed.join("inside"))));
        assert!(!may_enter(Some(&who), &s(&dir.path().join("missing"))));
        assert!(!may_enter(Some(&who), "tmp"));
        // The scheduler's own user (root) enters all of them; this thread kept its ids.
        assert!(may_enter(None, &s(&closed.join("inside"))));
        assert!(nix::unistd::access(&closed, nix::unistd::AccessFlags::X_OK).is_ok());
    }
}
