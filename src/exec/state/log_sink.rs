//! One attempt's output log, written by its supervisor from the job's stdout/stderr pipe,
//! with the limits of SPEC §7: at most `cap` bytes per attempt, at most what was left of
//! its user's log budget when it started ([`UserLog`]; cut too once the scheduler marks
//! the log, the user's logs together having reached the budget), and nothing written while
//! the state filesystem has less than `reserve` bytes free (so the database always has
//! room). A cut log ends with one line saying where and why it was cut; the job keeps
//! running and its further output is read and dropped, so it never blocks on a full pipe.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// How often (in bytes written) the free space is looked at.
const CHECK_EVERY: u64 = 64 << 10;

/// Where a supervisor puts the job's output and its own lines: a [`LogSink`] on the
/// state filesystem, or the report channel (`exec::supervisor::report::client`) when the scheduler
/// writes the log.
pub trait LogOut {
    /// Job output, as it came (never fails: what cannot be kept is dropped, and said).
    fn write(&mut self, buf: &[u8]);
    /// A line of the supervisor's own.
    fn note(&mut self, line: &str);
    /// Why nothing can be kept, when the log could not even be opened.
    fn failed(&self) -> Option<&str> {
        None
    }
}

impl LogOut for LogSink {
    fn write(&mut self, buf: &[u8]) {
        LogSink::write(self, buf)
    }

    fn note(&mut self, line: &str) {
        LogSink::note(self, line)
    }
}

/// An attempt's share of its user's log budget (`logs.maxMiBPerUser`), given at its start.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UserLog {
    /// The submitter's name, for the line that says why the log was cut.
    pub user: String,
    /// What this attempt may write: the budget less what the user's logs held.
    pub room: u64,
    /// The budget.
    pub budget: u64,
}

impl UserLog {
    /// The mark beside `log` that tells its supervisor to cut it (its text says why).
    pub fn mark_of(log: &Path) -> PathBuf {
        let mut p = log.as_os_str().to_owned();
        p.push(".cut");
        PathBuf::from(p)
    }
}

pub struct LogSink {
    file: File,
    written: u64,
    cap: u64,
    reserve: u64,
    since_check: u64,
    cut: bool,
    /// The user's budget, and the mark to look for (set by [`LogSink::for_user`]).
    user: Option<(UserLog, PathBuf)>,
}

impl LogSink {
    /// Open (append, creating folders) the log at `path`.
    pub fn open(path: &Path, cap: u64, reserve: u64) -> io::Result<LogSink> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(LogSink::from_file(file, cap, reserve))
    }

    /// A sink over a log file already opened for appending.
    pub fn from_file(file: File, cap: u64, reserve: u64) -> LogSink {
        let written = file.metadata().map_or(0, |m| m.len());
        LogSink {
            file,
            written,
            cap,
            reserve,
            since_check: CHECK_EVERY,
            cut: false,
            user: None,
        }
    }

    /// Hold the log at `path` to its user's budget too (`None`: no budget).
    pub fn for_user(mut self, user: Option<UserLog>, path: &Path) -> LogSink {
        self.user = user.map(|u| (u, UserLog::mark_of(path)));
        self
    }

    /// Has the log been cut?
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// Append job output, within the limits. Never fails: what cannot be written is
    /// dropped, and the cut is marked once.
    pub fn write(&mut self, buf: &[u8]) {
        if self.cut || buf.is_empty() {
            return;
        }
        self.since_check += buf.len() as u64;
        if self.since_check >= CHECK_EVERY {
            self.since_check = 0;
            if let Some(free) = free_bytes(&self.file)
                && free < self.reserve.saturating_add(buf.len() as u64)
            {
                let why = format!(
                    "the state filesystem has only {} free, below the reserve of {} \
                     (logs.minFreeMiB)",
                    mib(free),
                    mib(self.reserve)
                );
                return self.cut_here(&why);
            }
            if let Some((_, mark)) = &self.user
                && let Ok(why) = std::fs::read_to_string(mark)
            {
                return self.cut_here(why.trim());
            }
        }
        let user_room = self.user.as_ref().map_or(u64::MAX, |(u, _)| u.room);
        let room = self.cap.min(user_room).saturating_sub(self.written);
        let take = (buf.len() as u64).min(room) as usize;
        if take > 0 {
            if let Err(e) = self.file.write_all(&buf[..take]) {
                return self.cut_here(&format!("writing failed: {e}"));
            }
            self.written += take as u64;
        }
        if take < buf.len() {
            let why = match &self.user {
                Some((u, _)) if u.room < self.cap => format!(
                    "the logs of user {} may hold at most {} together, and this attempt \
                     started with {} of it left (logs.maxMiBPerUser)",
                    u.user,
                    mib(u.budget),
                    mib(u.room)
                ),
                _ => format!(
                    "the log of one attempt may hold at most {} (logs.maxMiBPerAttempt)",
                    mib(self.cap)
                ),
            };
            self.cut_here(&why);
        }
    }

    /// A line of the supervisor's own (why the command could not start, ...).
    pub fn note(&mut self, line: &str) {
        let _ = writeln!(self.file, "shareq: {line}");
    }

    fn cut_here(&mut self, why: &str) {
        self.cut = true;
        let _ = write!(
            self.file,
            "\n[shareq: log cut here after {} bytes: {why}; the job keeps running and its \
             further output is dropped]\n",
            self.written
        );
    }
}

/// Append one line of the scheduler's own (`shareq: {line}`) to the attempt log at `log`
/// (`<state>/logs/<job>/<attempt>.log`), opened as its supervisor opens it (no link
/// followed, owned by the scheduler's user: `perms::open_job_log`). One appending write,
/// so it never splits a line the supervisor writes. For what the scheduler sees of a
/// running attempt that its supervisor cannot (an `OVER_MEMORY` report, SPEC §15).
pub fn append_note(log: &Path, line: &str) -> io::Result<()> {
    let bad = || io::Error::other(format!("bad log path {}", log.display()));
    let file = log.file_name().ok_or_else(bad)?;
    let job_dir = log.parent().ok_or_else(bad)?;
    let job = job_dir.file_name().ok_or_else(bad)?;
    let logs = job_dir.parent().ok_or_else(bad)?;
    let mut f =
        super::perms::open_job_log(logs, &job.to_string_lossy(), &file.to_string_lossy(), None)?;
    f.write_all(format!("shareq: {line}\n").as_bytes())
}

/// Bytes as MiB with one decimal, as the cut lines say them.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

/// Free bytes for unprivileged writers on the filesystem of `file`.
pub fn free_bytes(file: &File) -> Option<u64> {
    nix::sys::statvfs::fstatvfs(file)
        .ok()
        .map(|s| available(&s))
}

/// What a filesystem has free for unprivileged writers (the reserve is judged on this,
/// for logs and for submits alike).
// The counts are `fsblkcnt_t` / `c_ulong`: u64 here, narrower on other targets.
#[allow(clippy::unnecessary_cast)]
pub fn available(s: &nix::sys::statvfs::Statvfs) -> u64 {
    (s.blocks_available() as u64).saturating_mul(s.fragment_size() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_of_the_scheduler_is_appended_as_one_line() {
        let d = tempfile::tempdir().unwrap();
        let logs = d.path().join("logs");
        std::fs::create_dir(&logs).unwrap();
        let p = logs.join("12").join("1.log");
        append_note(&p, "first").unwrap();
        {
            let mut s = LogSink::open(&p, u64::MAX, 0).unwrap();
            s.write(b"job output\n");
        }
        append_note(&p, "OVER_MEMORY: held 22 GiB").unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "shareq: first\njob output\nshareq: OVER_MEMORY: held 22 GiB\n"
        );
        // A link where the log should be is not followed.
        let q = logs.join("13");
        std::fs::create_dir(&q).unwrap();
        std::os::unix::fs::symlink(d.path().join("elsewhere"), q.join("1.log")).unwrap();
        assert!(append_note(&q.join("1.log"), "x").is_err());
        assert!(!d.path().join("elsewhere").exists());
    }

    #[test]
    fn the_cap_cuts_once_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("1.log");
        let mut s = LogSink::open(&p, 10, 0).unwrap();
        s.write(b"12345");
        s.write(b"6789abcdef");
        s.write(b"more");
        assert!(s.is_cut());
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("123456789a\n[shareq: log cut here after 10 bytes"));
        assert!(text.contains("logs.maxMiBPerAttempt"), "{text}");
        assert_eq!(text.matches("log cut").count(), 1);
    }

    #[test]
    fn a_log_is_cut_at_its_users_budget_and_at_the_mark() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("1.log");
        let user = UserLog {
            user: "alice".into(),
            room: 8,
            budget: 3 << 20,
        };
        let mut s = LogSink::open(&p, 100, 0)
            .unwrap()
            .for_user(Some(user.clone()), &p);
        s.write(b"12345");
        s.write(b"6789abcdef");
        assert!(s.is_cut());
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("12345678\n[shareq: log cut here after 8 bytes"));
        assert!(
            text.contains("the logs of user alice may hold at most 3.0 MiB together")
                && text.contains("logs.maxMiBPerUser"),
            "{text}"
        );
        // The scheduler's mark cuts a log that still has room, at the next look.
        let q = dir.path().join("2.log");
        let mut s = LogSink::open(&q, u64::MAX, 0).unwrap().for_user(
            Some(UserLog {
                room: u64::MAX,
                ..user
            }),
            &q,
        );
        s.write(b"before ");
        std::fs::write(UserLog::mark_of(&q), "the logs of user alice hold 3.1 MiB").unwrap();
        s.write(&vec![b'y'; CHECK_EVERY as usize]);
        assert!(s.is_cut());
        let text = std::fs::read_to_string(&q).unwrap();
        assert!(text.starts_with("before \n[shareq: log cut here"), "{text}");
        assert!(
            text.contains("the logs of user alice hold 3.1 MiB"),
            "{text}"
        );
    }

    #[test]
    fn below_the_reserve_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("1.log");
        let mut s = LogSink::open(&p, u64::MAX, u64::MAX / 2).unwrap();
        s.write(b"hello");
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("below the reserve"), "{text}");
        assert!(!text.contains("hello"));
    }
}
