//! Where a scheduler keeps its files: the socket, its log, the database, each attempt's
//! output log, and the run files (whose layout `exec::state::runfiles` owns).

use crate::model::JobId;
use std::path::{Path, PathBuf};

/// The state directory of one scheduler.
/// The control socket's name in the state directory.
pub const SOCKET_FILE: &str = "shareq.sock";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    root: PathBuf,
}

/// Neither `--state`, `$SHAREQ_STATE`, `$XDG_STATE_HOME` nor `$HOME` says where the state is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no state directory: pass --state DIR or set SHAREQ_STATE")]
pub struct NoStateDir;

impl StateDir {
    pub fn new(root: impl Into<PathBuf>) -> StateDir {
        StateDir { root: root.into() }
    }

    /// `--state`, else `$SHAREQ_STATE`, else `$XDG_STATE_HOME/shareq`, else
    /// `~/.local/state/shareq`.
    pub fn resolve(flag: Option<&Path>) -> Result<StateDir, NoStateDir> {
        StateDir::resolve_with(flag, |k| std::env::var_os(k))
    }

    /// `resolve`, reading the environment through `env`.
    pub fn resolve_with(
        flag: Option<&Path>,
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<StateDir, NoStateDir> {
        if let Some(p) = flag {
            return Ok(StateDir::new(p));
        }
        let var = |k: &str| env(k).filter(|v| !v.is_empty());
        if let Some(p) = var("SHAREQ_STATE") {
            return Ok(StateDir::new(PathBuf::from(p)));
        }
        if let Some(p) = var("XDG_STATE_HOME") {
            return Ok(StateDir::new(PathBuf::from(p).join("shareq")));
        }
        if let Some(home) = var("HOME") {
            return Ok(StateDir::new(
                PathBuf::from(home).join(".local/state/shareq"),
            ));
        }
        Err(NoStateDir)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Create (or check) the directory and its `logs/` and `runs/` folders, private to
    /// this user, as `state_perms::prepare` says (0711 under root, for the socket).
    pub fn create(&self) -> std::io::Result<()> {
        crate::exec::state::perms::prepare(&self.root, nix::unistd::geteuid().is_root())
    }

    /// Free bytes for unprivileged writers on the state filesystem.
    pub fn free_bytes(&self) -> Option<u64> {
        nix::sys::statvfs::statvfs(&self.root)
            .ok()
            .map(|s| crate::exec::state::log_sink::available(&s))
    }

    pub fn socket(&self) -> PathBuf {
        self.root.join(SOCKET_FILE)
    }

    /// The scheduler's own tracing log.
    pub fn server_log(&self) -> PathBuf {
        self.root.join("shareq.log")
    }

    pub fn job_logs(&self, job: JobId) -> PathBuf {
        self.root.join("logs").join(job.to_string())
    }

    pub fn attempt_log(&self, job: JobId, attempt: u32) -> PathBuf {
        self.job_logs(job).join(format!("{attempt}.log"))
    }

    /// A gang rank's log of an attempt (SPEC §16): rank 0's is the attempt's own.
    pub fn rank_log(&self, job: JobId, attempt: u32, rank: u32) -> PathBuf {
        let log = self.attempt_log(job, attempt);
        match rank {
            0 => log,
            r => crate::exec::state::runfiles::rank_log(&log, r),
        }
    }

    /// `<state>/runs/<job>` (the run files: see `exec::state::runfiles`).
    pub fn job_runs(&self, job: JobId) -> PathBuf {
        crate::exec::state::runfiles::job_dir(&self.root, job)
    }

    /// The newest attempt that has a log, if any.
    pub fn latest_attempt(&self, job: JobId) -> Option<u32> {
        std::fs::read_dir(self.job_logs(job))
            .ok()?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                name.to_str()?.strip_suffix(".log")?.parse::<u32>().ok()
            })
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_dir_precedence_is_flag_then_shareq_state_then_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        let all = env(&[
            ("SHAREQ_STATE", "/s"),
            ("XDG_STATE_HOME", "/x"),
            ("HOME", "/h"),
        ]);
        let r = |flag: Option<&str>, e| StateDir::resolve_with(flag.map(Path::new), e);
        assert_eq!(r(Some("/f"), all).unwrap().root(), Path::new("/f"));
        assert_eq!(r(None, all).unwrap().root(), Path::new("/s"));
        let xdg = env(&[
            ("SHAREQ_STATE", ""),
            ("XDG_STATE_HOME", "/x"),
            ("HOME", "/h"),
        ]);
        assert_eq!(r(None, xdg).unwrap().root(), Path::new("/x/shareq"));
        let home = env(&[("HOME", "/h")]);
        assert_eq!(
            r(None, home).unwrap().root(),
            Path::new("/h/.local/state/shareq")
        );
        assert!(r(None, env(&[])).is_err());
    }

    #[test]
    fn latest_attempt_is_the_highest_log_number() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateDir::new(dir.path());
        assert_eq!(s.latest_attempt(JobId(4)), None);
        std::fs::create_dir_all(s.job_logs(JobId(4))).unwrap();
        for a in [1, 2, 10] {
            std::fs::write(s.attempt_log(JobId(4), a), "").unwrap();
        }
        assert_eq!(s.latest_attempt(JobId(4)), Some(10));
    }

    /// A gang's ranks each have a log beside the attempt's (SPEC §16); rank 0's is the
    /// attempt's own, and the others do not count as attempts.
    #[test]
    fn a_gang_rank_s_log_sits_beside_the_attempt_s() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateDir::new(dir.path());
        assert_eq!(s.rank_log(JobId(4), 2, 0), s.attempt_log(JobId(4), 2));
        assert_eq!(
            s.rank_log(JobId(4), 2, 3),
            s.job_logs(JobId(4)).join("2.r3.log")
        );
        std::fs::create_dir_all(s.job_logs(JobId(4))).unwrap();
        std::fs::write(s.attempt_log(JobId(4), 2), "").unwrap();
        std::fs::write(s.rank_log(JobId(4), 2, 3), "").unwrap();
        assert_eq!(s.latest_attempt(JobId(4)), Some(2));
    }
}
