//! Running a job as its submitter (SPEC §9). When the supervisor runs as root and the job
//! was submitted by another user, the command gets that user's uid, primary gid and
//! supplementary groups, `HOME`, `USER`, `LOGNAME` and `SHELL` from the user database, a
//! clean environment, and enters its working directory as that user. Privileges are
//! dropped in the child between fork and exec, and the drop is checked: a command that
//! could get root back is never executed. A supervisor that runs as the submitter already
//! (Slurm's `--uid`) gives the command the same clean environment, without a drop.

use crate::model::Submitter;
use nix::unistd::{Gid, Uid, User};
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

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
