//! The run-file protocol between the scheduler and its supervisors: the one place that
//! knows where each attempt's files are and what is in them. The supervisor claims the
//! attempt with its record file, the scheduler learns the exit status over the
//! supervisor's channel (or, when it was gone, from the record), and recovery reads the
//! record after a restart.
//!
//! Layout: one file per attempt, `<state>/runs/<job-id>.<attempt>` (attempt 1-based, =
//! `SHAREQ_ATTEMPT`), the attempt's record:
//! - its first line, `PID STARTTIME DB\n`: the supervisor's pid, its start time (field 22
//!   of `/proc/PID/stat`, clock ticks since boot) and the database identity; `PID
//!   STARTTIME DB remote\n` for a supervisor on another machine (a Slurm node), whose pid
//!   names nothing here. The file is created once, whole, by a link, never replaced: by
//!   the supervisor before it runs the command, or as the tombstone `0 0 DB` by a
//!   restarted scheduler that declared the attempt lost (then a late supervisor finds it
//!   taken and does not run the command). The pid is also the attempt's session id: the
//!   supervisor runs in its own session and the command in a process group inside it
//!   (see `exec::containment::session`).
//! - a second line, the [`ExitRecord`] (JSON: `code`, `signal`, `finished_at`, `db`, …),
//!   appended in one write once every process of the attempt is gone, only when the
//!   scheduler did not take the status over the channel: a local supervisor hands it to
//!   the scheduler that started it (`exec::start`) and ends once the scheduler says it is
//!   stored in the database; when that scheduler is gone (it was killed, or stopped and
//!   left the job running) the status is appended here, where a restarted one finds it.
//!
//! A gang's attempt (SPEC §16) has one supervisor per node, each a rank with a record of
//! its own: rank 0's is the attempt's record above, rank r's `runs/<job-id>/<attempt>.r<r>`
//! ([`rank_record_path`]); the attempt has ended when every rank's record has its exit.
//!
//! The launch spec reaches a local supervisor through its standard input; the Slurm
//! executor keeps it in `<state>/runs/<job-id>/<attempt>.json` ([`write_spec`]), where the
//! scheduler's report relay reads it back. The job's log (`<state>/logs/<job-id>/`) is
//! made only when the job writes something.
//!
//! Files of the layout before this one (`runs/<job-id>/<attempt>.pid` and `.exit`, left by
//! supervisors of an older shareq that still run) are read where no record exists.
//!
//! Every file names the database (`store::DbIdentity`) it belongs to, so files left by a
//! lost database are never taken for a new database's jobs (SPEC §8): a file of another
//! database reads as absent here, and `exec::state::aside` moves such files away at
//! start. Files without a database field were written before identities existed; they
//! count as the database's own only for job ids up to its `legacy_below`.

use crate::exec::containment::session::{self, ProcStat};
use crate::exec::state::dir::SOCKET_FILE;
use crate::model::{Command, JobId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The identity of the database run files belong to, and up to which job id files
/// without one are its own (files from before identities existed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub db: String,
    pub legacy_below: u64,
}

impl Owner {
    /// Is a file of `job` that records database `db` (`None`: none recorded) ours?
    pub fn owns(&self, job: JobId, db: Option<&str>) -> bool {
        match db {
            Some(d) => d == self.db,
            None => job.0 <= self.legacy_below,
        }
    }
}

/// `<state>/runs`.
pub fn runs_dir(state: &Path) -> PathBuf {
    state.join("runs")
}

/// `<state>/runs/<job>`: the Slurm executor's launch specs, and the run files of the
/// layout before attempt records.
pub fn job_dir(state: &Path, job: JobId) -> PathBuf {
    runs_dir(state).join(job.to_string())
}

pub fn spec_path(state: &Path, job: JobId, attempt: u32) -> PathBuf {
    job_dir(state, job).join(format!("{attempt}.json"))
}

/// `<state>/runs/<job>.<attempt>`: the attempt's record (pid line, then the exit record
/// when it was left here).
pub fn record_path(state: &Path, job: JobId, attempt: u32) -> PathBuf {
    runs_dir(state).join(format!("{job}.{attempt}"))
}

/// The job and attempt an attempt record's file name names (`12.3`).
pub fn parse_record_name(name: &str) -> Option<(JobId, u32)> {
    let (job, attempt) = name.split_once('.')?;
    let job: u64 = job.parse().ok().filter(|&j| j > 0)?;
    Some((JobId(job), attempt.parse().ok()?))
}

fn legacy_pid_path(state: &Path, job: JobId, attempt: u32) -> PathBuf {
    job_dir(state, job).join(format!("{attempt}.pid"))
}

fn legacy_exit_path(state: &Path, job: JobId, attempt: u32) -> PathBuf {
    job_dir(state, job).join(format!("{attempt}.exit"))
}

/// What one attempt's files say, read once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttemptRecord {
    pub pid: Option<PidRecord>,
    pub exit: Option<ExitRecord>,
}

impl AttemptRecord {
    /// Parse a record file: the pid line, then (when left here) the exit record. A line
    /// being appended right now may read as partial: then it is not there yet.
    pub fn parse(text: &str) -> AttemptRecord {
        let mut rec = AttemptRecord::default();
        for line in text.lines() {
            if line.starts_with('{') {
                rec.exit = serde_json::from_str(line).ok().or(rec.exit);
            } else if rec.pid.is_none() {
                rec.pid = PidRecord::parse(line);
            }
        }
        rec
    }

    /// The record at `path`; absent or unreadable reads as empty.
    pub fn read(path: &Path) -> AttemptRecord {
        fs::read_to_string(path)
            .map(|t| AttemptRecord::parse(&t))
            .unwrap_or_default()
    }

    /// The records of one attempt: its record file, else the files of the layout before.
    pub fn of(state: &Path, job: JobId, attempt: u32) -> AttemptRecord {
        let path = record_path(state, job, attempt);
        if path.exists() {
            return AttemptRecord::read(&path);
        }
        AttemptRecord {
            pid: read_pid_record(&legacy_pid_path(state, job, attempt)),
            exit: read_exit_record(&legacy_exit_path(state, job, attempt)),
        }
    }

    /// Is the attempt over, as far as this machine can tell (its status is here, or no
    /// supervisor of it runs here)?
    pub fn ended(&self) -> bool {
        self.exit.is_some() || !self.pid.as_ref().is_some_and(PidRecord::is_alive)
    }

    /// Was the attempt claimed (by its supervisor, or declared lost)?
    pub fn claimed(state: &Path, job: JobId, attempt: u32) -> bool {
        record_path(state, job, attempt).exists() || legacy_pid_path(state, job, attempt).exists()
    }
}

/// Is some attempt (of any database) still run by a live supervisor on this machine?
pub fn attempts_left_running(state: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(runs_dir(state)) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let Some(name) = name.to_str() else {
            return false;
        };
        let running = |r: AttemptRecord| r.exit.is_none() && r.pid.is_some_and(|p| p.is_alive());
        if let Some((job, attempt)) = parse_record_name(name) {
            return running(AttemptRecord::of(state, job, attempt));
        }
        // A job folder of the layout before.
        let Some(job) = name.parse().ok().map(JobId) else {
            return false;
        };
        std::fs::read_dir(e.path()).is_ok_and(|files| {
            files.flatten().any(|f| {
                let name = f.file_name();
                name.to_str()
                    .and_then(|n| n.strip_suffix(".pid"))
                    .and_then(|a| a.parse::<u32>().ok())
                    .is_some_and(|attempt| running(AttemptRecord::of(state, job, attempt)))
            })
        })
    })
}

/// Everything the supervisor needs to run one attempt of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    pub job: JobId,
    pub attempt: u32,
    pub name: String,
    pub share: String,
    pub preempted_count: u32,
    /// Device indices given to the job (`CUDA_VISIBLE_DEVICES`).
    pub devices: Vec<u32>,
    /// On a unit sliced by memory (SPEC §15): the GiB of its one device the job holds
    /// (`SHAREQ_GPU_MEMORY_GIB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_gib: Option<u32>,
    pub command: Command,
    pub env: BTreeMap<String, String>,
    pub working_directory: Option<String>,
    pub log: PathBuf,
    /// The state directory (the run files' root).
    pub state: PathBuf,
    /// The identity of the database that started the attempt.
    pub db: String,
    /// Seconds from SIGTERM to SIGKILL of a stop of this attempt as its share's settings
    /// were at its start (SPEC §14: `SHAREQ_GRACE_SECONDS`); also what processes left
    /// behind by a command that ended by itself get.
    pub grace_seconds: u32,
    /// Its share's notice at its start (SPEC §14: `SHAREQ_NOTICE_*`): what the supervisor
    /// sends when asked to stop with notice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<crate::model::Notice>,
    /// The most bytes the attempt's log may take (`logs.maxBytesPerAttempt`).
    #[serde(default = "default_log_cap")]
    pub log_cap: u64,
    /// Stop writing the log when the state filesystem has less free than this
    /// (`logs.minFreeBytes`).
    #[serde(default = "default_reserve")]
    pub free_reserve: u64,
    /// The most processes the attempt may hold (`limits.pidsPerJob`): its cgroup's
    /// `pids.max`, written by the scheduler before the command starts.
    #[serde(default = "default_pids_max")]
    pub pids_max: u64,
    /// The attempt's share of its user's log budget (`logs.maxMiBPerUser`); `None`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_log: Option<crate::exec::state::log_sink::UserLog>,
    /// Who the command runs as when the supervisor is root (SPEC §9): the submitter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter: Option<crate::model::Submitter>,
    /// The job's `timeoutSeconds`: the supervisor enforces it on its own clock (SPEC §7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// The capacity unit of `devices` (it names the attempt's cgroup).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unit: String,
    /// For a MIG unit (SPEC §15): the instances behind `devices`, whose UUIDs the job is
    /// told and whose device files it may open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<crate::exec::containment::mig_caps::MigAccess>,
    /// The attempt's cgroup, one directory per hierarchy: the supervisor enters each
    /// before it starts the command (SPEC §7, containment). Empty: not contained.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cgroup: Vec<PathBuf>,
    /// Set when the supervisor may not write the state directory (Slurm runs it as the
    /// job's submitter): it reports through this channel instead, and the scheduler
    /// writes its run files and log (`exec::supervisor::report`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<ReportTo>,
    /// The attempt's own secret (`SHAREQ_ATTEMPT_TOKEN`): what a `shareq checkpoint`
    /// from it shows where its cgroup does not say whose it is (SPEC §14). Kept in the
    /// state directory only ([`write_token`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<AttemptToken>,
    /// The job's latest checkpoint before this attempt (`SHAREQ_LAST_CHECKPOINT`,
    /// `SHAREQ_LAST_CHECKPOINT_NOTE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_checkpoint: Option<SavedBefore>,
    /// A multi-node job (SPEC §16): every rank's node and devices; `devices` are this
    /// supervisor's rank's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<Gang>,
}

/// The ranks of a gang's attempt (SPEC §16): one supervisor per node, each with its own
/// devices, run files and log, and the environment that tells the ranks of one another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gang {
    /// Every rank's node and its devices there, rank 0 first (the core's node order).
    pub ranks: Vec<(String, Vec<u32>)>,
    /// The rank this spec is for; 0 until a supervisor on a node takes its own
    /// ([`LaunchSpec::as_rank`]).
    #[serde(default)]
    pub rank: u32,
    /// Rank 0's host name and a free port there (`MASTER_ADDR`, `MASTER_PORT`), found on
    /// that node by the gang's batch job before the ranks start; `None` until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main: Option<(String, u16)>,
}

impl Gang {
    pub fn nodes(&self) -> usize {
        self.ranks.len()
    }

    /// The rank of the node named `node`, if it is one of the gang's.
    pub fn rank_of(&self, node: &str) -> Option<u32> {
        let r = self.ranks.iter().position(|(n, _)| n == node)?;
        u32::try_from(r).ok()
    }
}

/// How a gang's attempt ended (SPEC §16), from every rank's status: its first failure
/// (the earliest non-zero end: the ranks stopped after it end with 143), else success;
/// finished when the last rank finished, run as long as the longest rank ran.
pub fn gang_status(ranks: &[ExitStatus]) -> Option<ExitStatus> {
    let last = ranks.iter().map(|s| s.finished_at).max()?;
    let mut out = ranks
        .iter()
        .filter(|s| s.code != 0)
        .min_by_key(|s| s.finished_at)
        .copied()
        .unwrap_or(ranks[0]);
    out.finished_at = last;
    out.ran_ms = ranks.iter().filter_map(|s| s.ran_ms).max();
    Some(out)
}

/// A secret that is never printed: its `Debug` hides it (the launch spec and requests
/// that carry one are logged at debug level).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AttemptToken(pub String);

impl std::fmt::Debug for AttemptToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AttemptToken(…)")
    }
}

/// A job's checkpoint as its next attempt is told of it (SPEC §14).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedBefore {
    /// When (ms since the epoch).
    pub at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `<state>/attempt.key`: the scheduler's secret that attempt tokens are made from, in its
/// private state (0600). One file for every attempt: a token is the key's HMAC of the
/// database and the attempt, so nothing is written per attempt and a restarted scheduler
/// checks the tokens of the attempts it adopts.
pub fn attempt_key_path(state: &Path) -> PathBuf {
    state.join("attempt.key")
}

/// The secret of [`attempt_key_path`] (its `Debug` hides it).
#[derive(Clone, PartialEq, Eq)]
pub struct AttemptKey([u8; 32]);

impl std::fmt::Debug for AttemptKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AttemptKey(…)")
    }
}

impl AttemptKey {
    /// The key of the state directory, made (32 bytes from the kernel's random source)
    /// the first time, or again when the file does not hold one.
    pub fn of(state: &Path) -> io::Result<AttemptKey> {
        let path = attempt_key_path(state);
        let kept = crate::exec::state::perms::open_nofollow(&path).and_then(|mut f| {
            let mut t = String::new();
            io::Read::read_to_string(&mut f, &mut t).map(|_| t)
        });
        if let Ok(text) = kept
            && let Some(key) = from_hex(text.trim())
        {
            return Ok(AttemptKey(key));
        }
        let mut key = [0u8; 32];
        io::Read::read_exact(&mut fs::File::open("/dev/urandom")?, &mut key)?;
        write_atomic(&path, hex(&key).as_bytes())?;
        Ok(AttemptKey(key))
    }

    /// The token of attempt `attempt` of `job` of database `db`: HMAC-SHA256, hex.
    pub fn token(&self, db: &str, job: JobId, attempt: u32) -> AttemptToken {
        use sha2::{Digest, Sha256};
        let pad = |b: u8| {
            self.0
                .iter()
                .map(|k| k ^ b)
                .chain([b; 32])
                .collect::<Vec<u8>>()
        };
        let mut inner = Sha256::new();
        inner.update(pad(0x36));
        inner.update(format!("{db}:{job}:{attempt}").as_bytes());
        let mut outer = Sha256::new();
        outer.update(pad(0x5c));
        outer.update(inner.finalize());
        AttemptToken(hex(&outer.finalize()))
    }

    /// Is `token` the one of this attempt?
    pub fn matches(&self, db: &str, job: JobId, attempt: u32, token: &str) -> bool {
        same_secret(&self.token(db, job, attempt).0, token)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Equal secrets, compared in time that does not depend on where they differ (the
/// attempt tokens here, the report channel's tokens).
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn default_log_cap() -> u64 {
    crate::model::LogLimits::default().cap_bytes()
}

fn default_reserve() -> u64 {
    crate::model::LogLimits::default().reserve_bytes()
}

fn default_pids_max() -> u64 {
    crate::model::UserLimits::default().pids_per_job
}

impl LaunchSpec {
    /// The job's environment (SPEC §7), on top of its own `env`.
    pub fn job_env(&self) -> BTreeMap<String, String> {
        let mut env = self.env.clone();
        let devices = match &self.mig {
            Some(m) => m.uuids.join(","),
            None => self
                .devices
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        };
        let mut set = |k: &str, v: String| {
            env.insert(k.to_string(), v);
        };
        set("CUDA_VISIBLE_DEVICES", devices.clone());
        set("NVIDIA_VISIBLE_DEVICES", devices);
        set("CUDA_DEVICE_ORDER", "PCI_BUS_ID".to_string());
        if let Some(gib) = self.gpu_memory_gib {
            set("SHAREQ_GPU_MEMORY_GIB", gib.to_string());
        }
        set("SHAREQ_JOB_ID", self.job.to_string());
        set("SHAREQ_JOB_NAME", self.name.clone());
        set("SHAREQ_SHARE", self.share.clone());
        set("SHAREQ_ATTEMPT", self.attempt.to_string());
        set("SHAREQ_PREEMPTED_COUNT", self.preempted_count.to_string());
        // How a preemption stops it (SPEC §14).
        set("SHAREQ_GRACE_SECONDS", self.grace_seconds.to_string());
        if let Some(n) = self.notice {
            set("SHAREQ_NOTICE_SIGNAL", n.signal.as_str().to_string());
            set("SHAREQ_NOTICE_SECONDS", n.seconds.to_string());
        }
        // SPEC §14: what `shareq checkpoint` needs to report for this attempt, and the
        // job's save before it.
        if let Some(t) = &self.token {
            set("SHAREQ_ATTEMPT_TOKEN", t.0.clone());
        }
        if self.report.is_none() {
            set(
                "SHAREQ_SOCKET",
                self.state.join(SOCKET_FILE).display().to_string(),
            );
        }
        if let Some(saved) = &self.last_checkpoint {
            let at = chrono::DateTime::from_timestamp_millis(saved.at)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
            if let Some(at) = at {
                set("SHAREQ_LAST_CHECKPOINT", at);
                set(
                    "SHAREQ_LAST_CHECKPOINT_NOTE",
                    saved.note.clone().unwrap_or_default(),
                );
            }
        }
        if let Some(g) = &self.gang {
            gang_env(g, &mut env);
        }
        env
    }

    /// The attempt's record (`runs/<job>.<attempt>`); a gang rank's own
    /// ([`rank_record_path`]).
    pub fn pid_path(&self) -> PathBuf {
        let rank = self.gang.as_ref().map_or(0, |g| g.rank);
        rank_record_path(&self.state, self.job, self.attempt, rank)
    }

    /// The spec of one rank of a gang (SPEC §16): that rank's devices, run files and log
    /// (rank 0's log is the attempt's; rank r's is `<attempt>.r<r>.log` beside it).
    /// `None` when the spec is no gang's or has no such rank.
    pub fn as_rank(mut self, rank: u32) -> Option<LaunchSpec> {
        let g = self.gang.as_mut()?;
        let (_, devices) = g.ranks.get(rank as usize)?.clone();
        g.rank = rank;
        self.devices = devices;
        if rank > 0 {
            self.log = rank_log(&self.log, rank);
        }
        Some(self)
    }
}

/// The environment that tells a gang's ranks of one another (SPEC §16), as torchrun and
/// AWS Batch multi-node jobs read it. The main node's address and port are known only
/// on the nodes (rank 0's batch job finds them), and so only there.
fn gang_env(g: &Gang, env: &mut BTreeMap<String, String>) {
    let n = g.nodes();
    let per_node = g.ranks.first().map_or(0, |(_, d)| d.len());
    let mut set = |k: &str, v: String| {
        env.insert(k.to_string(), v);
    };
    set("SHAREQ_NODE_RANK", g.rank.to_string());
    set("SHAREQ_NUM_NODES", n.to_string());
    set("WORLD_SIZE", (n * per_node).to_string());
    set("AWS_BATCH_JOB_NODE_INDEX", g.rank.to_string());
    set("AWS_BATCH_JOB_NUM_NODES", n.to_string());
    set("AWS_BATCH_JOB_MAIN_NODE_INDEX", "0".to_string());
    if let Some((host, port)) = &g.main {
        set("SHAREQ_MAIN_NODE", host.clone());
        set("MASTER_ADDR", host.clone());
        set("MASTER_PORT", port.to_string());
    }
}

/// A gang rank's record: rank 0's is the attempt's own (`runs/<job>.<attempt>`), rank
/// r's `runs/<job>/<attempt>.r<r>`, beside the attempt's launch spec.
pub fn rank_record_path(state: &Path, job: JobId, attempt: u32, rank: u32) -> PathBuf {
    match rank {
        0 => record_path(state, job, attempt),
        r => job_dir(state, job).join(format!("{attempt}.r{r}")),
    }
}

/// A gang rank's log: rank 0's is the attempt's, rank r's `<attempt>.r<r>.log` beside it.
pub fn rank_log(log: &Path, rank: u32) -> PathBuf {
    let stem = log
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    log.with_file_name(format!("{stem}.r{rank}.log"))
}

/// The exit status of one rank of a gang's attempt, if it has one of `owner`'s.
pub fn read_rank_exit(
    state: &Path,
    job: JobId,
    attempt: u32,
    rank: u32,
    owner: &Owner,
) -> Option<ExitStatus> {
    if rank == 0 {
        return read_exit(state, job, attempt, owner);
    }
    let rec = AttemptRecord::read(&rank_record_path(state, job, attempt, rank)).exit?;
    owner.owns(job, rec.db.as_deref()).then_some(rec.status)
}

/// Whether one rank of a gang's attempt was claimed by its supervisor (its record has a
/// pid line of `owner`'s).
pub fn rank_claimed(state: &Path, job: JobId, attempt: u32, rank: u32, owner: &Owner) -> bool {
    if rank == 0 {
        return read_pid(state, job, attempt, owner).is_some();
    }
    AttemptRecord::read(&rank_record_path(state, job, attempt, rank))
        .pid
        .is_some_and(|p| owner.owns(job, p.db.as_deref()))
}

/// How a gang's attempt of `nodes` ranks ended, once every rank's status is here
/// ([`gang_status`]).
pub fn read_gang_exit(
    state: &Path,
    job: JobId,
    attempt: u32,
    nodes: u32,
    owner: &Owner,
) -> Option<ExitStatus> {
    let all: Option<Vec<ExitStatus>> = (0..nodes)
        .map(|r| read_rank_exit(state, job, attempt, r, owner))
        .collect();
    gang_status(&all?)
}

/// The launch spec of an attempt, as the runtime wrote it.
pub fn read_spec(state: &Path, job: JobId, attempt: u32) -> Option<LaunchSpec> {
    let text = crate::exec::state::perms::open_nofollow(&spec_path(state, job, attempt))
        .and_then(|mut f| {
            let mut v = Vec::new();
            io::Read::read_to_end(&mut f, &mut v).map(|_| v)
        })
        .ok()?;
    serde_json::from_slice(&text).ok()
}

/// Write the launch spec of an attempt; returns its path.
pub fn write_spec(spec: &LaunchSpec) -> io::Result<PathBuf> {
    let path = spec_path(&spec.state, spec.job, spec.attempt);
    let json = serde_json::to_vec(spec).map_err(io::Error::other)?;
    write_atomic(&path, &json)?;
    Ok(path)
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExitStatus {
    /// The exit code; `128 + signal` when a signal ended it; 127 when it could not start.
    pub code: i32,
    /// The signal that ended the command, if one did.
    pub signal: Option<i32>,
    /// When every process of the attempt was gone (ms since the epoch).
    pub finished_at: i64,
    /// How long the attempt ran, from its command's start until every process of it was
    /// gone, on the supervisor's monotonic clock (SPEC §7): a scheduler that was stopped
    /// or slow meanwhile does not stretch it. Absent when no supervisor measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_ms: Option<u64>,
    /// The supervisor stopped the attempt at its `timeoutSeconds`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
}

impl ExitStatus {
    /// An attempt that ended now with `code`, nothing measured (it did not start, or its
    /// supervisor vanished).
    pub fn ended_now(code: i32) -> ExitStatus {
        ExitStatus {
            code,
            finished_at: now_ms(),
            ..ExitStatus::default()
        }
    }
}

/// What `<attempt>.exit` holds: the status and the database it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitRecord {
    #[serde(flatten)]
    pub status: ExitStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db: Option<String>,
}

/// Leave an attempt's exit status in its record (the supervisor's last act when the
/// scheduler did not take it over the channel; the report relay's for a Slurm job):
/// appended in one write after the pid line. Not fsynced, like the claim (see
/// [`write_atomic`]).
pub fn write_exit(
    state: &Path,
    job: JobId,
    attempt: u32,
    db: &str,
    status: ExitStatus,
) -> io::Result<()> {
    let rec = ExitRecord {
        status,
        db: Some(db.to_string()),
    };
    write_exit_at(&record_path(state, job, attempt), &rec)
}

/// [`write_exit`] into the record at `path` (a gang rank's: [`rank_record_path`]).
pub fn write_exit_at(path: &Path, rec: &ExitRecord) -> io::Result<()> {
    let mut line = serde_json::to_vec(rec).map_err(io::Error::other)?;
    line.push(b'\n');
    let open = || fs::OpenOptions::new().create(true).append(true).open(path);
    let mut f = match open() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
            open()?
        }
        other => other?,
    };
    // One write: a reader sees the whole line or none of it once it is done.
    f.write_all(&line)
}

/// The exit status of an attempt, if it has one that belongs to `owner`.
pub fn read_exit(state: &Path, job: JobId, attempt: u32, owner: &Owner) -> Option<ExitStatus> {
    let rec = AttemptRecord::of(state, job, attempt).exit?;
    owner.owns(job, rec.db.as_deref()).then_some(rec.status)
}

/// An exit record file of the layout before (`runs/<job>/<attempt>.exit`).
pub fn read_exit_record(path: &Path) -> Option<ExitRecord> {
    serde_json::from_slice(&fs::read(path).ok()?).ok()
}

/// What `<attempt>.pid` holds. `pid == 0` is the tombstone of a lost attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PidRecord {
    pub pid: u32,
    pub start: u64,
    pub db: Option<String>,
    /// The supervisor runs on another machine (a Slurm node): its pid and start time
    /// name nothing here, and are never looked for, signalled or killed on this machine.
    pub remote: bool,
}

/// The fourth word of a remote supervisor's pid record.
const REMOTE: &str = "remote";

impl PidRecord {
    fn line(&self) -> String {
        let remote = if self.remote { " remote" } else { "" };
        match &self.db {
            Some(db) => format!("{} {} {db}{remote}\n", self.pid, self.start),
            None => format!("{} {}\n", self.pid, self.start),
        }
    }

    /// The record's first line.
    pub fn parse(text: &str) -> Option<PidRecord> {
        let mut parts = text.lines().next()?.split_ascii_whitespace();
        let pid = parts.next()?.parse().ok()?;
        let start = parts.next()?.parse().ok()?;
        let db = parts.next().map(str::to_string);
        let remote = parts.next() == Some(REMOTE);
        Some(PidRecord {
            pid,
            start,
            db,
            remote,
        })
    }

    /// Does this record name a process that still runs here (same start time, not a
    /// zombie)? Never a remote one.
    pub fn is_alive(&self) -> bool {
        self.pid != 0
            && !self.remote
            && ProcStat::read(self.pid).is_some_and(|s| s.start == self.start && s.is_live())
    }

    /// The session its attempt's processes carry on this machine, if any.
    pub fn local_session(&self) -> Option<u32> {
        Some(self.pid).filter(|&p| p != 0 && !self.remote)
    }
}

pub fn read_pid_record(path: &Path) -> Option<PidRecord> {
    PidRecord::parse(&fs::read_to_string(path).ok()?)
}

/// The pid record of an attempt, if it has one that belongs to `owner`.
pub fn read_pid(state: &Path, job: JobId, attempt: u32, owner: &Owner) -> Option<PidRecord> {
    let rec = AttemptRecord::of(state, job, attempt).pid?;
    owner.owns(job, rec.db.as_deref()).then_some(rec)
}

/// Claim an attempt for the supervisor `pid`, once: `Ok(false)` when the pid file exists
/// already (a restarted scheduler declared the attempt lost, or the attempt was claimed):
/// then the supervisor must not run the command.
pub fn claim_pid(path: &Path, pid: u32, db: &str) -> io::Result<bool> {
    let rec = PidRecord {
        pid,
        start: session::start_time(pid)?,
        db: Some(db.to_string()),
        remote: false,
    };
    link_new(path, rec.line().as_bytes())
}

/// [`claim_pid`] for a supervisor on another machine, with the pid and start time it
/// sent (the report channel, `exec::supervisor::report`): recorded as remote.
pub fn claim_pid_remote(path: &Path, pid: u32, start: u64, db: &str) -> io::Result<bool> {
    let rec = PidRecord {
        pid,
        start,
        db: Some(db.to_string()),
        remote: true,
    };
    link_new(path, rec.line().as_bytes())
}

/// Mark an attempt that has no pid file as lost (the tombstone `0 0 DB`), so that a
/// supervisor that was started but has not claimed it yet never runs the command.
/// `Ok(false)` when a pid file appeared first (the supervisor is alive after all).
pub fn claim_lost(state: &Path, job: JobId, attempt: u32, db: &str) -> io::Result<bool> {
    let rec = PidRecord {
        pid: 0,
        start: 0,
        db: Some(db.to_string()),
        remote: false,
    };
    if AttemptRecord::claimed(state, job, attempt) {
        return Ok(false);
    }
    link_new(&record_path(state, job, attempt), rec.line().as_bytes())
}

/// What the run files of one attempt say now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SupervisorStatus {
    /// Still running (pid and start time match a live process).
    Alive { pid: u32 },
    /// Every process of the attempt is gone and this is how the command ended.
    Exited(ExitStatus),
    /// The supervisor is gone without an exit status, or never started. `session`: its
    /// pid, which is the session id that processes of the attempt may still carry.
    Vanished { session: Option<u32> },
}

/// What the run files of one attempt (of `owner`'s database) say now.
pub fn probe(state: &Path, job: JobId, attempt: u32, owner: &Owner) -> SupervisorStatus {
    let ours = |r: AttemptRecord| AttemptRecord {
        pid: r.pid.filter(|p| owner.owns(job, p.db.as_deref())),
        exit: r.exit.filter(|e| owner.owns(job, e.db.as_deref())),
    };
    let rec = ours(AttemptRecord::of(state, job, attempt));
    if let Some(e) = rec.exit {
        return SupervisorStatus::Exited(e.status);
    }
    if let Some(p) = rec.pid.as_ref().filter(|p| p.is_alive()) {
        return SupervisorStatus::Alive { pid: p.pid };
    }
    // It may have left its status and exited between the two reads.
    match ours(AttemptRecord::of(state, job, attempt)).exit {
        Some(e) => SupervisorStatus::Exited(e.status),
        None => SupervisorStatus::Vanished {
            session: rec.pid.and_then(|p| p.local_session()),
        },
    }
}

/// Write `bytes` to `path` atomically: a temporary file in the same folder (created if
/// needed), then rename. Readers see the old file or the whole new one, never a part. It
/// does not fsync (that costs ~8 ms per job here): after a power cut the file may be
/// missing, which recovery treats like a supervisor that vanished without a status (the
/// attempt runs again).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("run");
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
    }
    fs::rename(&tmp, path)
}

/// Create `path` with `bytes` only if it does not exist: written aside, then hard-linked
/// into place, so it is never seen half-written. `Ok(false)` when it existed. Not
/// fsynced: the claim decides between two live processes (a supervisor and a restarted
/// scheduler), which the link's atomicity settles; after a power cut neither survives.
/// (Two fsyncs per tombstone made a recovery of 1,000 vanished attempts take ~1 s.)
fn link_new(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no parent directory"))?;
    let linked = match link_unnamed(dir, path, bytes) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dir)?;
            link_unnamed(dir, path, bytes)
        }
        other => other,
    };
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Write `bytes` into a new file with no name yet in `dir` (`O_TMPFILE`) and link it as
/// `path`: one inode and one directory entry, nothing to remove after. Filesystems
/// without `O_TMPFILE` get a named temporary file, linked and removed.
fn link_unnamed(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    use nix::fcntl::{AtFlags, OFlag};
    use nix::sys::stat::Mode;
    let flags = OFlag::O_TMPFILE | OFlag::O_WRONLY | OFlag::O_CLOEXEC;
    match nix::fcntl::open(dir, flags, Mode::from_bits_truncate(0o644)) {
        Ok(fd) => {
            let mut f = fs::File::from(fd);
            f.write_all(bytes)?;
            let proc_path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&f));
            nix::unistd::linkat(
                nix::fcntl::AT_FDCWD,
                proc_path.as_str(),
                nix::fcntl::AT_FDCWD,
                path,
                AtFlags::AT_SYMLINK_FOLLOW,
            )
            .map_err(io::Error::from)
        }
        Err(nix::errno::Errno::ENOENT) => Err(io::ErrorKind::NotFound.into()),
        Err(_) => {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("run");
            let tmp = dir.join(format!(".{name}.{}.claim", std::process::id()));
            fs::File::create(&tmp)?.write_all(bytes)?;
            let linked = fs::hard_link(&tmp, path);
            let _ = fs::remove_file(&tmp);
            linked
        }
    }
}

/// Remove the run files and logs of jobs pruned from the history (SPEC §7: they go with
/// the job's history). Errors are logged, not returned: a leftover file is harmless.
pub fn remove_jobs(state: &crate::exec::StateDir, jobs: &[JobId]) {
    let pruned: std::collections::HashSet<JobId> = jobs.iter().copied().collect();
    let warn = |path: &Path, e: io::Error| {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(path = %path.display(), "cannot remove a pruned job's files: {e}")
        }
    };
    if let Ok(entries) = fs::read_dir(runs_dir(state.root())) {
        for e in entries.flatten() {
            let name = e.file_name();
            if let Some((job, _)) = name.to_str().and_then(parse_record_name)
                && pruned.contains(&job)
            {
                let _ = fs::remove_file(e.path()).map_err(|err| warn(&e.path(), err));
            }
        }
    }
    for &job in jobs {
        for dir in [state.job_runs(job), state.job_logs(job)] {
            let _ = fs::remove_dir_all(&dir).map_err(|e| warn(&dir, e));
        }
    }
}

/// Milliseconds since the epoch, from the real clock.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Where a supervisor reports (the report channel, `exec::supervisor::report`), and the
/// secret that proves it speaks for its attempt: part of its [`LaunchSpec`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportTo {
    /// The scheduler's host, as the nodes reach it.
    pub host: String,
    pub port: u16,
    /// 32 random bytes, hex.
    pub token: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner {
            db: "00ff".into(),
            legacy_below: 3,
        }
    }

    #[test]
    fn job_env_overrides_what_the_job_sets_for_reserved_names() {
        let mut env = BTreeMap::new();
        env.insert("CUDA_VISIBLE_DEVICES".to_string(), "7".to_string());
        env.insert("MINE".to_string(), "x".to_string());
        let spec = LaunchSpec {
            job: JobId(12),
            attempt: 2,
            name: "train".into(),
            share: "qs1".into(),
            preempted_count: 1,
            devices: vec![0, 2],
            gpu_memory_gib: None,
            command: Command::Shell("true".into()),
            env,
            working_directory: None,
            log: "l".into(),
            state: "s".into(),
            db: "d".into(),
            grace_seconds: 1,
            notice: Some(crate::model::Notice {
                signal: crate::model::NoticeSignal::Usr1,
                seconds: 90,
            }),
            log_cap: 1,
            free_reserve: 1,
            pids_max: 64,
            user_log: None,
            submitter: None,
            timeout_seconds: None,
            unit: String::new(),
            mig: None,
            cgroup: Vec::new(),
            report: None,
            token: None,
            last_checkpoint: None,
            gang: None,
        };
        let e = spec.job_env();
        assert_eq!(e["CUDA_VISIBLE_DEVICES"], "0,2");
        assert_eq!(e["NVIDIA_VISIBLE_DEVICES"], "0,2");
        assert_eq!(e["SHAREQ_JOB_ID"], "12");
        assert_eq!(e["SHAREQ_ATTEMPT"], "2");
        assert_eq!(e["SHAREQ_PREEMPTED_COUNT"], "1");
        assert_eq!(e["MINE"], "x");
        assert_eq!(e["SHAREQ_GRACE_SECONDS"], "1");
        assert_eq!(e["SHAREQ_NOTICE_SIGNAL"], "SIGUSR1");
        assert_eq!(e["SHAREQ_NOTICE_SECONDS"], "90");
        assert!(!e.contains_key("WORLD_SIZE") && !e.contains_key("SHAREQ_NODE_RANK"));
        // A gang's rank (SPEC §16) is told its own devices and its place among the others.
        let gang = LaunchSpec {
            gang: Some(Gang {
                ranks: vec![("n2".into(), vec![0, 3]), ("n1".into(), vec![1, 2])],
                rank: 0,
                main: Some(("host-a".into(), 29500)),
            }),
            log: "/s/logs/12/2.log".into(),
            ..spec.clone()
        };
        let one = gang.clone().as_rank(1).unwrap();
        assert_eq!(one.log, Path::new("/s/logs/12/2.r1.log"));
        assert_eq!(
            one.pid_path(),
            Path::new("s/runs/12/2.r1"),
            "rank 1's own record"
        );
        assert_eq!(gang.clone().as_rank(0).unwrap().pid_path(), gang.pid_path());
        assert!(gang.clone().as_rank(2).is_none() && spec.clone().as_rank(0).is_none());
        let e = one.job_env();
        for (k, v) in [
            ("CUDA_VISIBLE_DEVICES", "1,2"),
            ("SHAREQ_NODE_RANK", "1"),
            ("SHAREQ_NUM_NODES", "2"),
            ("SHAREQ_MAIN_NODE", "host-a"),
            ("MASTER_ADDR", "host-a"),
            ("MASTER_PORT", "29500"),
            ("WORLD_SIZE", "4"),
            ("AWS_BATCH_JOB_NODE_INDEX", "1"),
            ("AWS_BATCH_JOB_NUM_NODES", "2"),
            ("AWS_BATCH_JOB_MAIN_NODE_INDEX", "0"),
            ("MINE", "x"),
        ] {
            assert_eq!(e[k], v, "{k}");
        }
        let mut own = gang.clone();
        own.env.insert("WORLD_SIZE".into(), "99".into());
        assert_eq!(own.as_rank(0).unwrap().job_env()["WORLD_SIZE"], "4");
        // A MIG job is told its instances' UUIDs (SPEC §15).
        let mig = LaunchSpec {
            mig: Some(crate::exec::containment::mig_caps::MigAccess {
                uuids: vec!["MIG-aa".into(), "MIG-bb".into()],
                gpus: vec![0],
                caps: vec![12, 13],
            }),
            ..spec.clone()
        }
        .job_env();
        assert_eq!(mig["CUDA_VISIBLE_DEVICES"], "MIG-aa,MIG-bb");
        assert_eq!(mig["NVIDIA_VISIBLE_DEVICES"], "MIG-aa,MIG-bb");
        let plain = LaunchSpec {
            notice: None,
            ..spec.clone()
        }
        .job_env();
        assert!(!plain.contains_key("SHAREQ_NOTICE_SIGNAL"));
        assert!(!plain.contains_key("SHAREQ_NOTICE_SECONDS"));
        assert_eq!(plain["SHAREQ_GRACE_SECONDS"], "1");
        assert!(!plain.contains_key("SHAREQ_GPU_MEMORY_GIB"));
        // A slice (SPEC §15): its one device, and its GiB.
        let slice = LaunchSpec {
            devices: vec![1],
            gpu_memory_gib: Some(20),
            ..spec.clone()
        }
        .job_env();
        assert_eq!(slice["CUDA_VISIBLE_DEVICES"], "1");
        assert_eq!(slice["SHAREQ_GPU_MEMORY_GIB"], "20");
    }

    /// SPEC §14: what `shareq checkpoint` needs, and the job's save before this attempt.
    #[test]
    fn an_attempt_is_told_its_token_its_socket_and_the_last_save() {
        let mut spec: LaunchSpec = serde_json::from_value(serde_json::json!({
            "job": 12, "attempt": 2, "name": "t", "share": "q", "preempted_count": 1,
            "devices": [0], "command": "true", "env": {"SHAREQ_SOCKET": "mine"},
            "working_directory": null, "log": "l", "state": "/var/lib/shareq", "db": "d",
            "grace_seconds": 1,
        }))
        .unwrap();
        let e = spec.job_env();
        assert_eq!(e["SHAREQ_SOCKET"], "/var/lib/shareq/shareq.sock");
        assert!(!e.contains_key("SHAREQ_ATTEMPT_TOKEN"));
        assert!(!e.contains_key("SHAREQ_LAST_CHECKPOINT"));
        spec.token = Some(AttemptToken("ab12".into()));
        spec.last_checkpoint = Some(SavedBefore {
            at: 1_796_083_200_500,
            note: Some("step7".into()),
        });
        let e = spec.job_env();
        assert_eq!(e["SHAREQ_ATTEMPT_TOKEN"], "ab12");
        assert_eq!(e["SHAREQ_LAST_CHECKPOINT"], "2026-12-01T00:00:00.500Z");
        assert_eq!(e["SHAREQ_LAST_CHECKPOINT_NOTE"], "step7");
        assert_eq!(format!("{:?}", spec.token), "Some(AttemptToken(…))");
        // On a node the supervisor names its own socket: the scheduler's is not there.
        spec.report = Some(ReportTo {
            host: "h".into(),
            port: 1,
            token: "t".into(),
        });
        assert_eq!(spec.job_env()["SHAREQ_SOCKET"], "mine");
    }

    #[test]
    fn tokens_are_made_per_attempt_and_database_from_the_kept_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = AttemptKey::of(dir.path()).unwrap();
        assert_eq!(AttemptKey::of(dir.path()).unwrap(), key, "kept");
        let t = key.token("db1", JobId(4), 1);
        assert_eq!(t.0.len(), 64);
        assert!(key.matches("db1", JobId(4), 1, &t.0));
        assert!(!key.matches("db1", JobId(4), 1, &t.0[..63]));
        assert!(!key.matches("db1", JobId(4), 1, ""));
        assert!(!key.matches("db2", JobId(4), 1, &t.0), "another database's");
        assert!(!key.matches("db1", JobId(4), 2, &t.0), "another attempt's");
        assert!(!key.matches("db1", JobId(41), 1, &t.0), "another job's");
        // HMAC-SHA256 as RFC 4231 computes it (its test case 2, key padded to 32 bytes
        // with zeros: the same HMAC, as keys are zero-padded to the block).
        let mut k = [0u8; 32];
        k[..4].copy_from_slice(b"Jefe");
        let rfc = AttemptKey(k);
        use sha2::{Digest, Sha256};
        let pad = |b: u8| {
            rfc.0
                .iter()
                .map(|x| x ^ b)
                .chain([b; 32])
                .collect::<Vec<u8>>()
        };
        let msg = b"what do ya want for nothing?";
        let inner = Sha256::new()
            .chain_update(pad(0x36))
            .chain_update(msg)
            .finalize();
        let mac = Sha256::new()
            .chain_update(pad(0x5c))
            .chain_update(inner)
            .finalize();
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // A file that holds no key is replaced.
        std::fs::write(attempt_key_path(dir.path()), "junk").unwrap();
        assert_ne!(AttemptKey::of(dir.path()).unwrap(), key);
    }

    #[test]
    fn exit_files_of_another_database_read_as_absent() {
        let dir = tempfile::tempdir().unwrap();
        let st = ExitStatus {
            code: 3,
            finished_at: 9,
            ..ExitStatus::default()
        };
        write_exit(dir.path(), JobId(5), 1, "00ff", st).unwrap();
        assert_eq!(read_exit(dir.path(), JobId(5), 1, &owner()), Some(st));
        write_exit(dir.path(), JobId(6), 1, "beef", st).unwrap();
        assert_eq!(read_exit(dir.path(), JobId(6), 1, &owner()), None);
        // Before identities (and in the layout before): the database's own only up to
        // `legacy_below`.
        let legacy = br#"{"code":3,"signal":null,"finished_at":9}"#;
        write_atomic(&legacy_exit_path(dir.path(), JobId(2), 1), legacy).unwrap();
        write_atomic(&legacy_exit_path(dir.path(), JobId(7), 1), legacy).unwrap();
        assert_eq!(read_exit(dir.path(), JobId(2), 1, &owner()), Some(st));
        assert_eq!(read_exit(dir.path(), JobId(7), 1, &owner()), None);
    }

    #[test]
    fn a_lost_attempt_cannot_be_claimed_by_a_late_supervisor_and_vice_versa() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let o = owner();
        let record = |job| record_path(dir.path(), JobId(job), 1);
        // Recovery first: the late supervisor finds the tombstone and must not run.
        assert!(claim_lost(dir.path(), JobId(1), 1, &o.db).unwrap());
        assert!(!claim_pid(&record(1), me, &o.db).unwrap());
        assert_eq!(
            probe(dir.path(), JobId(1), 1, &o),
            SupervisorStatus::Vanished { session: None }
        );
        // Supervisor first: recovery sees it alive and adopts it.
        assert!(claim_pid(&record(2), me, &o.db).unwrap());
        assert!(!claim_lost(dir.path(), JobId(2), 1, &o.db).unwrap());
        assert_eq!(
            probe(dir.path(), JobId(2), 1, &o),
            SupervisorStatus::Alive { pid: me }
        );
        // A claim in the layout before counts too.
        write_atomic(&legacy_pid_path(dir.path(), JobId(3), 1), b"0 0 00ff\n").unwrap();
        assert!(!claim_lost(dir.path(), JobId(3), 1, &o.db).unwrap());
        // One file per attempt, no temporary files left behind.
        let mut left: Vec<_> = fs::read_dir(runs_dir(dir.path()))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["1.1", "2.1", "3"]);
    }

    #[test]
    fn an_exit_left_in_the_record_ends_the_attempt_and_a_partial_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let (me, o) = (std::process::id(), owner());
        let path = record_path(dir.path(), JobId(4), 2);
        assert!(claim_pid(&path, me, &o.db).unwrap());
        // A line being appended reads as not there yet.
        let whole = fs::read_to_string(&path).unwrap();
        fs::write(&path, format!("{whole}{{\"code\":1,\"sig")).unwrap();
        assert_eq!(
            probe(dir.path(), JobId(4), 2, &o),
            SupervisorStatus::Alive { pid: me }
        );
        fs::write(&path, &whole).unwrap();
        let st = ExitStatus {
            code: 7,
            finished_at: 5,
            ran_ms: Some(12),
            ..ExitStatus::default()
        };
        write_exit(dir.path(), JobId(4), 2, &o.db, st).unwrap();
        assert_eq!(
            probe(dir.path(), JobId(4), 2, &o),
            SupervisorStatus::Exited(st)
        );
        assert_eq!(read_pid(dir.path(), JobId(4), 2, &o).unwrap().pid, me);
        assert!(!attempts_left_running(dir.path()));
        // Without the exit, a live supervisor's attempt is left running.
        claim_pid(&record_path(dir.path(), JobId(4), 3), me, &o.db).unwrap();
        assert!(attempts_left_running(dir.path()));
        assert_eq!(parse_record_name("4.3"), Some((JobId(4), 3)));
        assert_eq!(parse_record_name("4"), None);
        assert_eq!(parse_record_name(".4.3.1.claim"), None);
    }

    #[test]
    fn pid_records_old_and_new() {
        assert_eq!(
            PidRecord::parse("12 34 ab\n"),
            Some(PidRecord {
                pid: 12,
                start: 34,
                db: Some("ab".into()),
                remote: false,
            })
        );
        assert_eq!(PidRecord::parse("12 34\n").unwrap().db, None);
        assert_eq!(PidRecord::parse("not a pid"), None);
        // A remote supervisor's record never names a process here, even one that
        // matches it (this one).
        let me = std::process::id();
        let start = session::start_time(me).unwrap();
        let here = PidRecord::parse(&format!("{me} {start} ab\n")).unwrap();
        assert!(here.is_alive());
        assert_eq!(here.local_session(), Some(me));
        let remote = PidRecord::parse(&format!("{me} {start} ab remote\n")).unwrap();
        assert!(remote.remote && !remote.is_alive());
        assert_eq!(remote.local_session(), None);
        assert_eq!(PidRecord::parse(&remote.line()), Some(remote));
    }

    #[test]
    fn a_gang_ended_when_every_rank_has_its_status_as_its_first_failure() {
        let dir = tempfile::tempdir().unwrap();
        let (state, job) = (dir.path(), JobId(2));
        let o = Owner {
            db: "00ff".into(),
            legacy_below: 0,
        };
        let at = |code, finished_at, ran| ExitStatus {
            code,
            finished_at,
            ran_ms: Some(ran),
            ..ExitStatus::default()
        };
        let write = |rank, st| {
            let rec = ExitRecord {
                status: st,
                db: Some("00ff".into()),
            };
            write_exit_at(&rank_record_path(state, job, 1, rank), &rec).unwrap();
        };
        write(1, at(0, 20, 7));
        assert_eq!(read_gang_exit(state, job, 1, 2, &o), None, "rank 0 runs");
        assert_eq!(
            read_rank_exit(state, job, 1, 1, &o).map(|s| s.code),
            Some(0)
        );
        write(0, at(0, 30, 9));
        let all = read_gang_exit(state, job, 1, 2, &o).unwrap();
        assert_eq!((all.code, all.finished_at, all.ran_ms), (0, 30, Some(9)));
        // The earliest failure is the gang's; the ranks it stopped end later with 143.
        let failed = gang_status(&[at(143, 50, 1), at(3, 40, 2), at(143, 45, 1)]).unwrap();
        assert_eq!((failed.code, failed.finished_at), (3, 50));
        assert_eq!(gang_status(&[]), None);
        // Another database's status is not ours.
        let other = Owner {
            db: "beef".into(),
            legacy_below: 0,
        };
        assert_eq!(read_gang_exit(state, job, 1, 2, &other), None);
    }
}
