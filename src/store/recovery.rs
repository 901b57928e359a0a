//! Restart recovery (SPEC §8): decide, for each job that held GPUs, whether its supervisor
//! still runs (adopt it), finished while nobody watched (its recorded exit status), or
//! vanished (queue it again, `LOST_ON_RESTART`) — and the run files that tell.
//!
//! Run files, under `<state>/runs/<job-id>/`, one pair per attempt (1-based, the
//! `SHAREQ_ATTEMPT` of the job):
//! - `<attempt>.pid`: `PID STARTTIME\n`, the supervisor's pid and its start time, field 22
//!   of `/proc/PID/stat` (clock ticks since boot). A pid is alive only if `/proc/PID/stat`
//!   shows the same start time and is not a zombie, so a recycled pid is never mistaken
//!   for the job. Written with [`write_pid_file`] before the supervisor runs the command.
//! - `<attempt>.exit`: the command's exit code as decimal text (`0`, `3`, `137`, ...),
//!   written atomically (temporary file + rename) by the supervisor with
//!   [`write_exit_file`] when the command has ended.

use super::record::Observed;
use super::rows::Recovered;
use super::{Store, StoreError};
use crate::model::JobId;
use crate::sched::{Event, RestoredJob, Sched, Time};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What the run files say about one attempt's supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SupervisorStatus {
    /// Still running (pid and start time match a live process).
    Alive { pid: u32 },
    /// The command ended with this exit code.
    Exited(i32),
    /// Gone without an exit status (or never started).
    Vanished,
}

/// `<state>/runs/<job>`.
pub fn run_dir(state_dir: &Path, job: JobId) -> PathBuf {
    state_dir.join("runs").join(job.to_string())
}

pub fn pid_file(state_dir: &Path, job: JobId, attempt: u32) -> PathBuf {
    run_dir(state_dir, job).join(format!("{attempt}.pid"))
}

pub fn exit_file(state_dir: &Path, job: JobId, attempt: u32) -> PathBuf {
    run_dir(state_dir, job).join(format!("{attempt}.exit"))
}

/// The start time of a process: field 22 of `/proc/PID/stat`.
pub fn process_start_time(pid: u32) -> io::Result<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(&stat)
        .map(|(_, start)| start)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable /proc stat"))
}

/// (state letter, start time) from a `/proc/PID/stat` line. The command name (field 2)
/// is in parentheses and may itself hold spaces and parentheses: split after the last `)`.
fn parse_stat(stat: &str) -> Option<(char, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    // `fields` now starts at field 4; field 22 is 18 further.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// Record the supervisor of an attempt: `PID STARTTIME`. Call it before the command runs
/// (the supervisor's first act, or the spawner's before it lets the supervisor go).
pub fn write_pid_file(state_dir: &Path, job: JobId, attempt: u32, pid: u32) -> io::Result<()> {
    let start = process_start_time(pid)?;
    write_atomically(
        &pid_file(state_dir, job, attempt),
        format!("{pid} {start}\n").as_bytes(),
    )
}

/// Record an attempt's exit code, atomically.
pub fn write_exit_file(state_dir: &Path, job: JobId, attempt: u32, code: i32) -> io::Result<()> {
    write_atomically(
        &exit_file(state_dir, job, attempt),
        format!("{code}\n").as_bytes(),
    )
}

fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no parent directory"))?;
    fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("run");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, path)?;
    // Make the rename itself durable.
    fs::File::open(dir)?.sync_all()
}

/// What the run files of one attempt say now.
pub fn probe(state_dir: &Path, job: JobId, attempt: u32) -> SupervisorStatus {
    if let Some(code) = read_exit(state_dir, job, attempt) {
        return SupervisorStatus::Exited(code);
    }
    if let Some(pid) = live_pid(state_dir, job, attempt) {
        return SupervisorStatus::Alive { pid };
    }
    // It may have written its status and exited between the two reads.
    match read_exit(state_dir, job, attempt) {
        Some(code) => SupervisorStatus::Exited(code),
        None => SupervisorStatus::Vanished,
    }
}

fn read_exit(state_dir: &Path, job: JobId, attempt: u32) -> Option<i32> {
    let text = fs::read_to_string(exit_file(state_dir, job, attempt)).ok()?;
    parse_exit(&text)
}

/// An exit file's code: decimal text, or the supervisor's JSON (`{"code":3,...}`).
pub fn parse_exit(text: &str) -> Option<i32> {
    let t = text.trim();
    if let Ok(code) = t.parse() {
        return Some(code);
    }
    let v: serde_json::Value = serde_json::from_str(t).ok()?;
    i32::try_from(v.get("code")?.as_i64()?).ok()
}

/// Claim an attempt's pid file for its supervisor, once: the file is created only if no
/// pid file exists yet (written aside, then hard-linked into place, so it is never seen
/// half-written). `Ok(false)` when one exists already — then the attempt was declared
/// lost by a restarted scheduler (a tombstone `0 0`), and the supervisor must not run
/// the command.
pub fn claim_pid_file(path: &Path, pid: u32) -> io::Result<bool> {
    let start = process_start_time(pid)?;
    link_new(path, format!("{pid} {start}\n").as_bytes())
}

/// Mark an attempt with no pid file as lost (a tombstone `0 0` pid file), so that a
/// supervisor that was started but had not written its pid file yet will never run the
/// command. `Ok(false)` when a pid file appeared first (the supervisor is alive after all).
pub fn claim_lost(state_dir: &Path, job: JobId, attempt: u32) -> io::Result<bool> {
    link_new(&pid_file(state_dir, job, attempt), b"0 0\n")
}

fn link_new(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no parent directory"))?;
    fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("run");
    let tmp = dir.join(format!(".{name}.{}.claim", std::process::id()));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            fs::File::open(dir)?.sync_all()?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

fn live_pid(state_dir: &Path, job: JobId, attempt: u32) -> Option<u32> {
    let text = fs::read_to_string(pid_file(state_dir, job, attempt)).ok()?;
    let mut parts = text.split_ascii_whitespace();
    let pid: u32 = parts.next()?.parse().ok()?;
    let start: u64 = parts.next()?.parse().ok()?;
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (state, now_start) = parse_stat(&stat)?;
    // A zombie has exited; only its parent has not reaped it yet.
    (now_start == start && !matches!(state, 'Z' | 'X' | 'x')).then_some(pid)
}

/// A supervisor found alive: the runtime watches it again (exit file, timers, and the
/// stop still under way when the job was being stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adopted {
    pub job: JobId,
    pub attempt: u32,
    pub pid: u32,
}

/// What a restart does, decided from the store and the run files.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryPlan {
    /// Every queued or holding job, in id order, for `Sched::restore_job`.
    pub restore: Vec<RestoredJob>,
    /// Jobs whose supervisor still runs: they keep their GPUs.
    pub adopted: Vec<Adopted>,
    /// Exits and releases that happened while nobody watched, to feed after restoring.
    pub observed: Vec<Observed>,
    /// Jobs requeued with reason `LOST_ON_RESTART` (restored as queued).
    pub lost: Vec<JobId>,
    /// The first id a new submission may take.
    pub next_job_id: JobId,
}

/// Classify every recovered job. Jobs being stopped whose processes are gone count as
/// released (their stop is complete), not lost.
pub fn plan(state_dir: &Path, recovered: &Recovered) -> RecoveryPlan {
    let mut p = RecoveryPlan {
        restore: Vec::with_capacity(recovered.jobs.len()),
        adopted: Vec::new(),
        observed: Vec::new(),
        lost: Vec::new(),
        next_job_id: JobId(recovered.max_job_id.0 + 1),
    };
    for job in &recovered.jobs {
        let Some(h) = &job.holding else {
            p.restore.push(job.restored(false));
            continue;
        };
        let stopping = h.stopping.is_some();
        let mut status = probe(state_dir, job.id, h.attempt);
        if status == SupervisorStatus::Vanished
            && !pid_file(state_dir, job.id, h.attempt).exists()
            && !matches!(claim_lost(state_dir, job.id, h.attempt), Ok(true))
        {
            // A supervisor was starting while the scheduler died: it has written its pid
            // file just now. Look again (a failed claim also ends here, and then the
            // supervisor, which checks the same file, decides).
            status = probe(state_dir, job.id, h.attempt);
        }
        match status {
            SupervisorStatus::Alive { pid } => p.adopted.push(Adopted {
                job: job.id,
                attempt: h.attempt,
                pid,
            }),
            SupervisorStatus::Exited(code) if stopping => p.observed.push(Observed::Released {
                job: job.id,
                code: Some(code),
            }),
            SupervisorStatus::Exited(code) => {
                p.observed.push(Observed::Exited { job: job.id, code })
            }
            SupervisorStatus::Vanished if stopping => p.observed.push(Observed::Released {
                job: job.id,
                code: None,
            }),
            SupervisorStatus::Vanished => {
                p.lost.push(job.id);
                p.restore.push(job.restored(false));
                continue;
            }
        }
        p.restore.push(job.restored(true));
    }
    p
}

impl RecoveryPlan {
    /// Carry the plan out on a fresh scheduler (config applied, nothing submitted yet):
    /// record the `LOST_ON_RESTART` requeues, restore every job, feed the exits that came
    /// while nobody watched, run one pass and record it. Returns that pass's decisions,
    /// already stored, for the runtime to carry out.
    pub fn apply(
        &self,
        store: &mut Store,
        sched: &mut Sched,
        now: Time,
    ) -> Result<Vec<Event>, StoreError> {
        store.record_lost(now, &self.lost)?;
        sched.reserve_ids_below(self.next_job_id);
        for r in &self.restore {
            sched
                .restore_job(r.clone(), now)
                .map_err(|e| StoreError::bad_record(store.path(), e))?;
        }
        for o in &self.observed {
            o.apply(sched, now);
        }
        sched.pass(now);
        let events = sched.take_events();
        store.record(now, &self.observed, &events, sched)?;
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_files_in_both_formats() {
        assert_eq!(parse_exit("3\n"), Some(3));
        assert_eq!(
            parse_exit(r#"{"code":137,"signal":9,"finished_at":1}"#),
            Some(137)
        );
        assert_eq!(parse_exit("{\"code\":"), None);
        assert_eq!(parse_exit(""), None);
    }

    #[test]
    fn a_lost_attempt_cannot_be_claimed_by_a_late_supervisor_and_vice_versa() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        // Recovery first: the late supervisor finds the tombstone and must not run.
        assert!(claim_lost(dir.path(), JobId(1), 1).unwrap());
        assert!(!claim_pid_file(&pid_file(dir.path(), JobId(1), 1), me).unwrap());
        assert_eq!(probe(dir.path(), JobId(1), 1), SupervisorStatus::Vanished);
        // Supervisor first: recovery sees it alive and adopts it.
        assert!(claim_pid_file(&pid_file(dir.path(), JobId(2), 1), me).unwrap());
        assert!(!claim_lost(dir.path(), JobId(2), 1).unwrap());
        assert_eq!(
            probe(dir.path(), JobId(2), 1),
            SupervisorStatus::Alive { pid: me }
        );
        // No temporary files are left behind.
        let left: Vec<_> = fs::read_dir(run_dir(dir.path(), JobId(1)))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn stat_with_parentheses_in_the_name() {
        let line = "42 (a) b) c) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 \
                    1000 10 18446744073709551615";
        assert_eq!(parse_stat(line), Some(('S', 123456)));
        assert_eq!(parse_stat("42 (x"), None);
        assert_eq!(parse_stat("42 (x) Z 1 2"), None);
    }
}
