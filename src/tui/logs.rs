//! Where the `l` overlay reads a job's output: `<state>/logs/<job-id>/<attempt>.log`, or a
//! reader the runtime supplies. Only the tail is read, so a huge log costs nothing.

use crate::model::JobId;
use std::fmt;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// How the console finds logs.
#[derive(Clone, Default)]
pub enum LogSource {
    /// No logs available (the overlay says so).
    #[default]
    None,
    /// The state directory: logs at `<dir>/logs/<job-id>/<attempt>.log`.
    StateDir(PathBuf),
}

/// Why a log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LogUnread {
    #[error("no state directory: logs are not available here")]
    NoStateDir,
    #[error("{}: {source}", .path.display())]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl fmt::Debug for LogSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogSource::None => f.write_str("None"),
            LogSource::StateDir(p) => write!(f, "StateDir({})", p.display()),
        }
    }
}

/// Bytes read from the end of a log file: plenty for a screenful.
const TAIL_BYTES: u64 = 64 * 1024;

impl LogSource {
    /// The last lines of a job's log for `attempt` (1-based; 0 is treated as 1).
    pub fn tail(
        &self,
        job: JobId,
        attempt: u32,
        max_lines: usize,
    ) -> Result<Vec<String>, LogUnread> {
        match self {
            LogSource::None => Err(LogUnread::NoStateDir),
            LogSource::StateDir(dir) => {
                let path = log_path(dir, job, attempt.max(1));
                tail_file(&path, max_lines).map_err(|source| LogUnread::File { path, source })
            }
        }
    }
}

pub fn log_path(state: &Path, job: JobId, attempt: u32) -> PathBuf {
    state
        .join("logs")
        .join(job.0.to_string())
        .join(format!("{attempt}.log"))
}

/// The last `max_lines` lines of a file, reading at most `TAIL_BYTES` from its end.
pub fn tail_file(path: &Path, max_lines: usize) -> std::io::Result<Vec<String>> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::with_capacity((len - start) as usize);
    f.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let mut lines: Vec<&str> = text.lines().collect();
    if start > 0 && !lines.is_empty() {
        lines.remove(0); // a cut line
    }
    let skip = lines.len().saturating_sub(max_lines);
    Ok(lines[skip..].iter().map(|l| printable(l)).collect())
}

/// Drop ANSI escape sequences and control characters (a log must not drive the terminal).
fn printable(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('\x40'..='\x7e').contains(&c) {
                            break;
                        }
                    }
                }
            }
            '\t' => out.push_str("    "),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_tail_of_the_attempt_log() {
        let dir = std::env::temp_dir().join(format!("shareq-logs-{}", std::process::id()));
        let p = log_path(&dir, JobId(7), 2);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let body: String = (0..100).map(|i| format!("line {i}\x1b[0m\n")).collect();
        std::fs::write(&p, body).unwrap();
        let src = LogSource::StateDir(dir.clone());
        let t = src.tail(JobId(7), 2, 3).unwrap();
        assert_eq!(t, vec!["line 97", "line 98", "line 99"]);
        let err = src.tail(JobId(8), 1, 3).unwrap_err();
        assert!(err.to_string().contains("logs/8/1.log"), "{err}");
        assert!(LogSource::None.tail(JobId(1), 1, 3).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
