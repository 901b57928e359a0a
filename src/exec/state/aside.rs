//! Setting aside run files and logs that are not the open database's (SPEC §8): after a
//! database was lost, moved away or replaced, the files its jobs left under `runs/` and
//! `logs/` would otherwise be taken for the new database's jobs of the same ids (a new job
//! "finished" with an old job's exit code without running). At start, before anything is
//! scheduled, every job folder that belongs to another database is moved to
//! `<state>/set-aside/<time>/{runs,logs}/<job-id>`, and the caller reserves the ids so that
//! they are never handed out again.
//!
//! A job folder is another database's when a file in it records another identity, when
//! none records one and the job id is beyond the database's `legacy_below`, or when its
//! id is higher than any the database handed out. A supervisor of another database that
//! still runs is killed with its whole session first: its result cannot be recorded, and
//! its GPUs would otherwise be handed out twice.

use crate::exec::containment::session;
use crate::exec::state::runfiles::{self, AttemptRecord, Owner};
use crate::model::JobId;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What was set aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    /// Where the files went.
    pub dir: PathBuf,
    /// The job ids whose folders were moved.
    pub jobs: Vec<JobId>,
    /// Supervisors of another database that were still running, and were killed.
    pub killed: Vec<u32>,
}

impl SetAside {
    pub fn highest(&self) -> u64 {
        self.jobs.iter().map(|j| j.0).max().unwrap_or(0)
    }
}

/// Move away the job folders that are not `owner`'s; `max_job_id` is the highest id the
/// database handed out. `Ok(None)` when there was nothing to move.
pub fn set_aside_foreign(
    state: &Path,
    owner: &Owner,
    max_job_id: u64,
    now_ms: i64,
) -> io::Result<Option<SetAside>> {
    let runs = runfiles::runs_dir(state);
    let logs = state.join("logs");
    let entries = run_entries(&runs);
    let mut foreign: Vec<JobId> = Vec::new();
    let mut killed = Vec::new();
    for (&id, paths) in &entries {
        let records: Vec<AttemptRecord> = paths.iter().flat_map(|p| records_at(p)).collect();
        let dbs = recorded_dbs(&records, paths);
        let ours = id.0 <= max_job_id && dbs.iter().all(|d| owner.owns(id, d.as_deref()));
        if !ours {
            killed.extend(kill_live_supervisors(&records, &runs));
            foreign.push(id);
        }
    }
    for id in job_ids(&logs) {
        if id.0 > max_job_id && !foreign.contains(&id) {
            foreign.push(id);
        }
    }
    if foreign.is_empty() {
        return Ok(None);
    }
    foreign.sort();
    let dest = state.join("set-aside").join(now_ms.to_string());
    for id in &foreign {
        let run_paths = entries.get(id).into_iter().flatten();
        let log_dir = logs.join(id.to_string());
        let log_paths = std::iter::once(&log_dir).filter(|p| p.exists());
        for (src, kind) in run_paths
            .map(|p| (p, "runs"))
            .chain(log_paths.map(|p| (p, "logs")))
        {
            let to = dest.join(kind);
            std::fs::create_dir_all(&to)?;
            if let Some(name) = src.file_name() {
                std::fs::rename(src, to.join(name))?;
            }
        }
    }
    Ok(Some(SetAside {
        dir: dest,
        jobs: foreign,
        killed,
    }))
}

/// What `runs/` holds per job: its attempt records (`<job>.<attempt>`) and its folder (the
/// Slurm executor's specs, the layout before records).
fn run_entries(runs: &Path) -> BTreeMap<JobId, Vec<PathBuf>> {
    let mut by_job: BTreeMap<JobId, Vec<PathBuf>> = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(runs) else {
        return by_job;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let job = match runfiles::parse_record_name(name) {
            Some((job, _)) => Some(job),
            None => name.parse::<u64>().ok().filter(|&n| n > 0).map(JobId),
        };
        if let Some(job) = job {
            by_job.entry(job).or_default().push(e.path());
        }
    }
    by_job
}

fn job_ids(dir: &Path) -> Vec<JobId> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
        .filter(|&n| n > 0)
        .map(JobId)
        .collect()
}

/// The records at one entry of `runs/`: an attempt record, or the `.pid` and `.exit`
/// files of a job folder of the layout before.
fn records_at(path: &Path) -> Vec<AttemptRecord> {
    if !path.is_dir() {
        return vec![AttemptRecord::read(path)];
    }
    let Ok(rd) = std::fs::read_dir(path) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| {
            let p = e.path();
            match p.extension().and_then(|x| x.to_str()) {
                Some("pid") => Some(AttemptRecord {
                    pid: runfiles::read_pid_record(&p),
                    exit: None,
                }),
                Some("exit") => Some(AttemptRecord {
                    pid: None,
                    exit: runfiles::read_exit_record(&p),
                }),
                _ => None,
            }
        })
        .collect()
}

/// The database identities a job's run files record (`None`: a file records none): its
/// records, and the launch specs in its folder.
fn recorded_dbs(records: &[AttemptRecord], paths: &[PathBuf]) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for r in records {
        out.extend(r.pid.as_ref().map(|p| p.db.clone()));
        out.extend(r.exit.as_ref().map(|e| e.db.clone()));
    }
    for dir in paths.iter().filter(|p| p.is_dir()) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in rd.flatten() {
            let path = e.path();
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            // An unreadable file records nothing either way.
            if let Some(v) = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            {
                out.push(v.get("db").and_then(|d| d.as_str()).map(str::to_string));
            }
        }
    }
    out
}

/// Kill every live supervisor among a job's records, with its session.
fn kill_live_supervisors(records: &[AttemptRecord], runs: &Path) -> Vec<u32> {
    let mut killed = Vec::new();
    for rec in records.iter().filter_map(|r| r.pid.as_ref()) {
        if !rec.is_alive() {
            continue;
        }
        tracing::warn!(pid = rec.pid, dir = %runs.display(), "a supervisor of another database still runs: killing its attempt, whose result cannot be recorded");
        if let Ok(p) = i32::try_from(rec.pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(Duration::from_millis(50));
        session::kill_and_wait(rec.pid, Duration::from_secs(10));
        killed.push(rec.pid);
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::ExitStatus;

    #[test]
    fn only_other_databases_files_are_moved() {
        let dir = tempfile::tempdir().unwrap();
        let st = dir.path();
        let me = Owner {
            db: "aaaa".into(),
            legacy_below: 1,
        };
        let s = ExitStatus {
            finished_at: 1,
            ..ExitStatus::default()
        };
        runfiles::write_exit(st, JobId(2), 1, "aaaa", s).unwrap(); // ours
        runfiles::write_exit(st, JobId(3), 1, "bbbb", s).unwrap(); // another db's
        runfiles::write_atomic(
            &st.join("runs/1/1.exit"),
            br#"{"code":0,"signal":null,"finished_at":1}"#,
        )
        .unwrap(); // legacy, in the layout before, ours
        runfiles::write_exit(st, JobId(9), 1, "aaaa", s).unwrap(); // beyond max id
        runfiles::write_atomic(&st.join("runs/4/1.pid"), b"0 0 bbbb\n").unwrap(); // before, another db's
        std::fs::create_dir_all(st.join("logs/3")).unwrap();
        std::fs::create_dir_all(st.join("logs/2")).unwrap();
        let got = set_aside_foreign(st, &me, 5, 77).unwrap().unwrap();
        assert_eq!(got.jobs, [JobId(3), JobId(4), JobId(9)]);
        assert!(st.join("set-aside/77/runs/4/1.pid").exists());
        assert_eq!(got.highest(), 9);
        assert!(st.join("set-aside/77/runs/3.1").exists());
        assert!(st.join("set-aside/77/runs/9.1").exists());
        assert!(st.join("set-aside/77/logs/3").exists());
        assert!(st.join("runs/1").exists() && st.join("runs/2.1").exists());
        assert!(st.join("logs/2").exists());
        assert_eq!(set_aside_foreign(st, &me, 5, 78).unwrap(), None);
    }
}
