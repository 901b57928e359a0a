//! Slurm as the engine that carries shareq's decisions out (SPEC §10): the commands shareq
//! runs (`sbatch`, `scancel`, `squeue --json`, `sinfo --json`), what it reads back, and
//! the node and GRES lines an admin needs. Slurm decides nothing: each attempt is one
//! batch job pinned to the node and exact GPUs shareq chose, running shareq's own
//! supervisor inside the allocation (so the stop path is SIGTERM → grace → SIGKILL).

use crate::model::{JobId, ValidConfig};
use serde::Deserialize;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The Slurm job name of an attempt: how it is found again after a restart.
pub fn job_name(job: JobId, attempt: u32) -> String {
    format!("shareq-{}-{attempt}", job.0)
}

/// The (job, attempt) a Slurm job name stands for, if it is one of shareq's.
pub fn parse_job_name(name: &str) -> Option<(JobId, u32)> {
    let rest = name.strip_prefix("shareq-")?;
    let (job, attempt) = rest.split_once('-')?;
    Some((JobId(job.parse().ok()?), attempt.parse().ok()?))
}

/// The GRES that pins exactly these GPU indices: one GRES type per index (`g0`, `g1`, …;
/// see [`slurm_conf`]).
pub fn gres(devices: &[u32]) -> String {
    devices
        .iter()
        .map(|d| format!("gpu:g{d}:1"))
        .collect::<Vec<_>>()
        .join(",")
}

/// What `sbatch` needs for one attempt.
#[derive(Debug, Clone)]
pub struct Submit<'a> {
    pub partition: &'a str,
    pub node: &'a str,
    pub devices: &'a [u32],
    pub job: JobId,
    pub attempt: u32,
    /// The shareq executable (the same path on every node).
    pub exe: &'a Path,
    /// The attempt's launch spec (JSON, one line), handed to the supervisor inside the
    /// batch script: the supervisor reads nothing from the state directory.
    pub spec: &'a [u8],
    /// `--uid`/`--gid`: the batch job (and so the supervisor) runs as the submitter, and
    /// Slurm's accounting shows them (SPEC §10); `None`: as the user `serve` runs as.
    pub run_as: Option<(u32, u32)>,
    /// A gang's ranks (SPEC §16): every node and its GPUs, rank 0 first (then `node` and
    /// `devices` are rank 0's); empty for a plain job.
    pub gang: &'a [(String, Vec<u32>)],
}

/// How long a Slurm command may take before shareq gives up on it (a client that cannot
/// find its controller keeps looking for about a minute).
const COMMAND_LIMIT: Duration = Duration::from_secs(15);

/// Why a Slurm command gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error("cannot run {cmd}: {source}")]
    Spawn { cmd: String, source: std::io::Error },
    #[error("{cmd} did not answer within {secs} s")]
    Timeout { cmd: String, secs: u64 },
    #[error("{cmd} failed ({status}): {stderr}")]
    Failed {
        cmd: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    /// Its output is not what shareq reads (`what`: the command).
    #[error("{what}: unreadable: {why}")]
    Unreadable { what: &'static str, why: String },
    #[error("sbatch printed `{0}`, not a job id")]
    NoJobId(String),
}

fn run(cmd: &mut Command) -> Result<String, SlurmError> {
    run_with(cmd, None)
}

/// Run a Slurm command with `input` on its standard input (none: /dev/null).
fn run_with(cmd: &mut Command, input: Option<Vec<u8>>) -> Result<String, SlurmError> {
    let what = format!("{cmd:?}");
    let spawn = |source| SlurmError::Spawn {
        cmd: what.clone(),
        source,
    };
    let stdin = if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut child = cmd
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn)?;
    if let (Some(bytes), Some(mut pipe)) = (input, child.stdin.take()) {
        // Written aside: a command that does not read it all must not block us.
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = pipe.write_all(&bytes);
        });
    }
    let pid = child.id();
    // Its output is read while it runs (a large `squeue --json` fills a pipe).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || drop(tx.send(child.wait_with_output())));
    let out = match rx.recv_timeout(COMMAND_LIMIT) {
        Ok(r) => r.map_err(spawn)?,
        Err(_) => {
            if let Ok(p) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            return Err(SlurmError::Timeout {
                cmd: what,
                secs: COMMAND_LIMIT.as_secs(),
            });
        }
    };
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(SlurmError::Failed {
            cmd: what,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The launch spec as the one line of UTF-8 it must be (it is handed over as a line).
fn one_line(spec: &[u8]) -> Result<&str, SlurmError> {
    std::str::from_utf8(spec)
        .ok()
        .filter(|t| !t.contains('\n'))
        .ok_or_else(|| SlurmError::Unreadable {
            what: "the launch spec",
            why: "not one line of UTF-8".to_string(),
        })
}

/// What `sbatch` and `srun` are told alike: the controller (`SLURM_CONF` of `serve`'s
/// environment, the rest of which is left to the caller), the partition, the node, the
/// exact GPUs and the attempt's name.
fn placed<'c>(cmd: &'c mut Command, s: &Submit) -> &'c mut Command {
    if let Some(conf) = std::env::var_os("SLURM_CONF") {
        cmd.env("SLURM_CONF", conf);
    }
    cmd.args(placement(
        s.partition,
        s.node,
        s.devices,
        &job_name(s.job, s.attempt),
    ))
}

/// One node's part of a job: its partition, node, exact GPUs and name.
fn placement(partition: &str, node: &str, devices: &[u32], name: &str) -> [String; 4] {
    [
        format!("--partition={partition}"),
        format!("--nodelist={node}"),
        format!("--gres={}", gres(devices)),
        format!("--job-name={name}"),
    ]
}

/// The arguments of `sbatch` for one attempt (its batch script comes on standard input).
/// A gang's (SPEC §16) is one heterogeneous job with one component per node, in rank
/// order, each with that node's own GPUs (a plain `-N` job asks every node for the same
/// GRES, and a gang's nodes may have different GPUs free); its batch script runs on the
/// first component's node, rank 0's, where the gang's supervisor starts the others
/// (`exec::supervisor::gang`). Slurm decides nothing: every component is pinned.
pub fn sbatch_args(s: &Submit) -> Vec<String> {
    let mut args: Vec<String> = [
        "--parsable",
        "--output=/dev/null",
        "--export=ALL",
        "--chdir=/",
        "--no-requeue",
    ]
    .map(str::to_string)
    .into();
    if let Some((uid, gid)) = s.run_as {
        args.push(format!("--uid={uid}"));
        args.push(format!("--gid={gid}"));
    }
    let name = job_name(s.job, s.attempt);
    if s.gang.is_empty() {
        args.extend(placement(s.partition, s.node, s.devices, &name));
        return args;
    }
    for (rank, (node, devices)) in s.gang.iter().enumerate() {
        if rank > 0 {
            args.push(":".to_string());
        }
        args.extend(placement(s.partition, node, devices, &name));
        args.push("--nodes=1".to_string());
    }
    args
}

/// The batch script of an attempt: the supervisor, with the launch spec on its standard
/// input (a quoted here-document: nothing in it is expanded; the spec is one line of
/// JSON, so it cannot hold the end marker's line).
pub fn batch_script(exe: &Path, spec: &[u8]) -> Result<String, SlurmError> {
    let spec = one_line(spec)?;
    Ok(format!(
        "#!/bin/sh\nexec {} {} - <<'SHAREQ_SPEC_END'\n{spec}\nSHAREQ_SPEC_END\n",
        shell_quote(&exe.to_string_lossy()),
        crate::exec::supervisor::channel::SUPERVISE_SUBCOMMAND,
    ))
}

/// Submit one attempt; returns the Slurm job id. Blocking (tens of milliseconds). The
/// batch job writes nothing through Slurm (`--output=/dev/null`: Slurm would open that
/// file as the job's user) and takes of `serve`'s environment only what a local job
/// keeps (`PATH`, the locale, `TZ`: `sbatch` runs in a cleared environment, with
/// `SLURM_CONF` to find the controller); the supervisor gives the command its user's
/// environment. Not `--export=NONE`: that makes `slurmd` run the user's login shell to
/// read their environment before every start (`SLURM_GET_USER_ENV`), 1.2 s p50 per start
/// under load (docs/SLURM.md).
pub fn sbatch(s: &Submit) -> Result<u64, SlurmError> {
    let script = batch_script(s.exe, s.spec)?;
    let mut cmd = Command::new("sbatch");
    cmd.env_clear()
        .envs(crate::exec::supervisor::privdrop::kept_env());
    if let Some(conf) = std::env::var_os("SLURM_CONF") {
        cmd.env("SLURM_CONF", conf);
    }
    cmd.args(sbatch_args(s));
    let out = run_with(&mut cmd, Some(script.into_bytes()))?;
    let id = out.trim().split(';').next().unwrap_or_default();
    id.parse()
        .map_err(|_| SlurmError::NoJobId(out.trim().to_string()))
}

/// Start one attempt as a job step with its own allocation (`executor.start: srun`):
/// Slurm allocates it in the request, without waiting for its next scheduling pass.
/// `srun` runs in a session of its own, as the submitter when `run_as` is given (then
/// the job is theirs in `squeue` and `sacct`, as `sbatch --uid` makes it), and stays for
/// the job's life; the launch spec goes to the supervisor through its standard input,
/// never its arguments (the token in it must not show in `ps`). Returns the running
/// `srun`; its standard error is kept to say why it failed (it ignores SIGPIPE, so a
/// `serve` that went away cannot kill it by closing that pipe).
pub fn srun(
    s: &Submit,
    run_as: Option<&crate::exec::supervisor::privdrop::RunAs>,
) -> Result<std::process::Child, SlurmError> {
    let spec = one_line(s.spec)?;
    let mut cmd = Command::new("srun");
    // In a session of its own first (a terminal's ^C to `serve` must not reach it), then
    // the drop to the submitter, which also sets its clean environment.
    // SAFETY: setsid and signal are async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            nix::unistd::setsid()?;
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGPIPE,
                nix::sys::signal::SigHandler::SigIgn,
            )?;
            Ok(())
        });
    }
    match run_as {
        Some(user) => user
            .apply(&mut cmd, std::iter::empty(), Some("/"))
            .map_err(|source| SlurmError::Spawn {
                cmd: "srun".to_string(),
                source,
            })?,
        None => {
            cmd.env_clear()
                .envs(crate::exec::supervisor::privdrop::kept_env());
        }
    }
    placed(&mut cmd, s)
        .arg("--quiet")
        .arg("--ntasks=1")
        .arg("--output=/dev/null")
        .arg("--error=/dev/null")
        .arg("--export=ALL")
        .arg("--chdir=/")
        .arg(s.exe)
        .arg(crate::exec::supervisor::channel::SUPERVISE_SUBCOMMAND)
        .arg("-");
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| SlurmError::Spawn { cmd: what, source })?;
    if let Some(mut pipe) = child.stdin.take() {
        let bytes = format!("{spec}\n").into_bytes();
        // Aside: `srun` reads it once the step runs; the end of it starts the supervisor.
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = pipe.write_all(&bytes);
        });
    }
    Ok(child)
}

/// The jobs of the partition that have a step running (`squeue --steps`: `ID.0`,
/// `ID.batch`, …): a job started by `srun` whose `srun` died keeps its allocation, with
/// no step.
pub fn jobs_with_steps(partition: &str) -> Result<std::collections::HashSet<u64>, SlurmError> {
    let out = run(Command::new("squeue")
        .arg("--steps")
        .arg("--noheader")
        .arg(format!("--partition={partition}"))
        .arg("--format=%i"))?;
    Ok(parse_steps(&out))
}

fn parse_steps(out: &str) -> std::collections::HashSet<u64> {
    out.lines()
        .filter_map(|l| l.trim().split('.').next()?.parse().ok())
        .collect()
}

/// Ask Slurm to deliver a signal to the job's processes: `(signal, batch)`, where `batch`
/// says the job is a batch job (`--full` is needed to reach a batch script at all; for a
/// job started by `srun`, which has only its step, `--full` reaches nothing: seen with
/// 22.05, the plain `--signal` reaches the step at once). `None`: cancel the job outright
/// (the backstop after the grace period).
pub fn scancel(to: Cancel, signal: Option<(&str, bool)>) -> Result<(), SlurmError> {
    let mut cmd = Command::new("scancel");
    if let Some((sig, batch)) = signal {
        if batch {
            cmd.arg("--full");
        }
        cmd.arg(format!("--signal={sig}"));
    }
    match to {
        Cancel::Id(id) => cmd.arg(id.to_string()),
        Cancel::Named { name, partition } => cmd
            .arg(format!("--name={name}"))
            .arg(format!("--partition={partition}")),
    };
    run(&mut cmd).map(drop)
}

/// Which job [`scancel`] is about: by id, or by its name in the partition (every job of
/// that name: an attempt whose id is not known yet, or one left by an earlier `serve`).
#[derive(Debug, Clone, Copy)]
pub enum Cancel<'a> {
    Id(u64),
    Named { name: &'a str, partition: &'a str },
}

/// One job as `squeue --json` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmJob {
    pub id: u64,
    pub name: String,
    /// PENDING, CONFIGURING, RUNNING, COMPLETING, …
    pub state: String,
    pub nodes: String,
    /// `gpu:g1:1(IDX:1),…` as Slurm allocated them.
    pub gres: Vec<String>,
    /// The job a component of a heterogeneous job (a gang's, SPEC §16) belongs to: the
    /// id that signals and cancels every component; its own id for any other job.
    pub leader: u64,
}

/// One node as `sinfo --json` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmNode {
    pub name: String,
    /// `idle`, `allocated`, `mixed`, `down`, …
    pub state: String,
    /// `DRAIN`, `NOT_RESPONDING`, …
    pub flags: Vec<String>,
}

impl SlurmJob {
    /// Still queued, starting, running or ending in Slurm. `squeue --json` also lists
    /// jobs that ended a while ago (`MinJobAge`), in COMPLETED, FAILED, CANCELLED, ….
    pub fn is_live(&self) -> bool {
        matches!(
            self.state.as_str(),
            "PENDING"
                | "CONFIGURING"
                | "RUNNING"
                | "COMPLETING"
                | "SUSPENDED"
                | "REQUEUED"
                | "REQUEUE_HOLD"
                | "RESIZING"
                | "SIGNALING"
                | "STAGE_OUT"
        )
    }
}

impl SlurmNode {
    /// Down, or its slurmd lost: its devices are unhealthy (SPEC §10).
    pub fn is_down(&self) -> bool {
        self.state.eq_ignore_ascii_case("down") || self.flags.iter().any(|f| f == "NOT_RESPONDING")
    }

    /// Being emptied by an admin: it takes no new jobs.
    pub fn is_drained(&self) -> bool {
        self.flags.iter().any(|f| f == "DRAIN") || self.state.eq_ignore_ascii_case("drained")
    }
}

#[derive(Deserialize)]
struct SqueueJson {
    #[serde(default)]
    jobs: Vec<SqueueJob>,
}

#[derive(Deserialize)]
struct SqueueJob {
    job_id: u64,
    #[serde(default)]
    name: String,
    #[serde(default)]
    job_state: serde_json::Value,
    #[serde(default)]
    nodes: String,
    #[serde(default)]
    partition: String,
    #[serde(default)]
    gres_detail: Vec<String>,
    #[serde(default)]
    het_job_id: Option<u64>,
}

/// A state that is a string in Slurm 22.05 and a list in later versions.
fn state_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(a) => a
            .first()
            .and_then(|x| x.as_str())
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

/// shareq's jobs in `partition` (`squeue --json`).
pub fn squeue(partition: &str) -> Result<Vec<SlurmJob>, SlurmError> {
    let out = run(Command::new("squeue").arg("--json"))?;
    parse_squeue(&out, partition)
}

pub fn parse_squeue(json: &str, partition: &str) -> Result<Vec<SlurmJob>, SlurmError> {
    let q: SqueueJson = serde_json::from_str(json).map_err(|e| SlurmError::Unreadable {
        what: "squeue --json",
        why: e.to_string(),
    })?;
    Ok(q.jobs
        .into_iter()
        .filter(|j| j.partition == partition && parse_job_name(&j.name).is_some())
        .map(|j| SlurmJob {
            id: j.job_id,
            leader: j.het_job_id.filter(|&h| h != 0).unwrap_or(j.job_id),
            state: state_text(&j.job_state),
            name: j.name,
            nodes: j.nodes,
            gres: j.gres_detail,
        })
        .collect())
}

#[derive(Deserialize)]
struct SinfoJson {
    #[serde(default)]
    nodes: Vec<SinfoNode>,
}

#[derive(Deserialize)]
struct SinfoNode {
    name: String,
    #[serde(default)]
    state: serde_json::Value,
    #[serde(default)]
    state_flags: Vec<String>,
    #[serde(default)]
    partitions: Vec<String>,
}

/// The nodes of `partition` (`sinfo --json`).
pub fn sinfo(partition: &str) -> Result<Vec<SlurmNode>, SlurmError> {
    let out = run(Command::new("sinfo").arg("--json"))?;
    parse_sinfo(&out, partition)
}

pub fn parse_sinfo(json: &str, partition: &str) -> Result<Vec<SlurmNode>, SlurmError> {
    let q: SinfoJson = serde_json::from_str(json).map_err(|e| SlurmError::Unreadable {
        what: "sinfo --json",
        why: e.to_string(),
    })?;
    Ok(q.nodes
        .into_iter()
        .filter(|n| n.partitions.is_empty() || n.partitions.iter().any(|p| p == partition))
        .map(|n| SlurmNode {
            name: n.name,
            state: state_text(&n.state),
            flags: n.state_flags,
        })
        .collect())
}

/// The `slurm.conf` node and partition lines and the `gres.conf` lines that let shareq
/// pin exact GPUs: each GPU index is its own GRES type `g<index>` (SPEC §10). Printed by
/// `shareq slurm-conf`.
pub fn slurm_conf(config: &ValidConfig) -> String {
    let mut nodes = String::new();
    let mut gres = String::new();
    let mut names = Vec::new();
    for (node, devs) in config.nodes() {
        let mut indices: Vec<u32> = Vec::new();
        for (_, d) in &devs.0 {
            match d {
                crate::model::Devices::Indices(v) => indices.extend(v),
                crate::model::Devices::Fake(n) => indices.extend(0..*n),
                // Refused by validation: MIG instances are found on this machine only.
                crate::model::Devices::Auto | crate::model::Devices::Mig { .. } => {}
            }
        }
        indices.sort_unstable();
        indices.dedup();
        let list: Vec<String> = indices.iter().map(|i| format!("gpu:g{i}:1")).collect();
        nodes.push_str(&format!(
            "NodeName={node} Gres={} State=UNKNOWN   # plus your CPUs=, RealMemory=\n",
            list.join(",")
        ));
        for i in indices {
            gres.push_str(&format!(
                "NodeName={node} Name=gpu Type=g{i} File=/dev/nvidia{i}\n"
            ));
        }
        names.push(node);
    }
    let partition = match config.executor() {
        crate::model::Executor::Slurm(s) => s.partition,
        crate::model::Executor::Local => "shareq".to_string(),
    };
    format!(
        "# slurm.conf: GPUs as GRES, no Slurm preemption, no oversubscription;\n# the partition is for shareq alone.\nGresTypes=gpu\nPreemptType=preempt/none\n{nodes}PartitionName={partition} Nodes={} Default=NO MaxTime=INFINITE State=UP OverSubscribe=NO\n\n# gres.conf: one GRES type per GPU index, so that shareq can ask for exact GPUs.\n{gres}",
        names.join(",")
    )
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_not_ours() {
        assert_eq!(
            parse_job_name(&job_name(JobId(12), 3)),
            Some((JobId(12), 3))
        );
        assert_eq!(parse_job_name("train"), None);
        assert_eq!(parse_job_name("shareq-x-1"), None);
        assert_eq!(gres(&[1, 3]), "gpu:g1:1,gpu:g3:1");
    }

    #[test]
    fn the_batch_script_hands_the_spec_over_untouched() {
        let spec = br#"{"cmd":"echo '$HOME' `id` \"x\" SHAREQ_SPEC_END"}"#;
        let script = batch_script(Path::new("/bin/cat"), spec).unwrap();
        // `cat __supervise -`: complains about the first, copies its input for the second.
        let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{}\n", String::from_utf8_lossy(spec))
        );
        assert!(batch_script(Path::new("/bin/cat"), b"two\nlines").is_err());
    }

    #[test]
    fn squeue_and_sinfo_json_of_slurm_22_05_are_read() {
        let q = r#"{"jobs":[{"job_id":7,"name":"shareq-1-1","job_state":"RUNNING","nodes":"n2","partition":"shareq","gres_detail":["gpu:g1:1(IDX:1)"]},{"job_id":8,"name":"other","job_state":"RUNNING","nodes":"n1","partition":"shareq"}]}"#;
        let jobs = parse_squeue(q, "shareq").unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].id, jobs[0].state.as_str()), (7, "RUNNING"));
        let n = r#"{"nodes":[{"name":"n1","state":"idle","state_flags":[],"partitions":["shareq"]},{"name":"n2","state":"idle","state_flags":["DRAIN"],"partitions":["shareq"]},{"name":"n3","state":"down","state_flags":["NOT_RESPONDING"],"partitions":["shareq"]}]}"#;
        let nodes = parse_sinfo(n, "shareq").unwrap();
        assert!(!nodes[0].is_down() && !nodes[0].is_drained());
        assert!(nodes[1].is_drained());
        assert!(nodes[2].is_down());
        assert!(parse_squeue("not json", "p").is_err());
    }

    #[test]
    fn a_plain_job_is_pinned_to_its_node_and_a_gang_is_one_component_per_node() {
        let ranks = vec![("n2".to_string(), vec![0, 3]), ("n1".to_string(), vec![1])];
        let plain = Submit {
            partition: "shareq",
            node: "n2",
            devices: &[0, 3],
            job: JobId(7),
            attempt: 2,
            exe: Path::new("/usr/bin/shareq"),
            spec: b"{}",
            run_as: Some((1000, 100)),
            gang: &[],
        };
        let common = [
            "--parsable",
            "--output=/dev/null",
            "--export=ALL",
            "--chdir=/",
            "--no-requeue",
            "--uid=1000",
            "--gid=100",
        ];
        let mut want: Vec<&str> = common.to_vec();
        want.extend([
            "--partition=shareq",
            "--nodelist=n2",
            "--gres=gpu:g0:1,gpu:g3:1",
            "--job-name=shareq-7-2",
        ]);
        assert_eq!(sbatch_args(&plain), want);
        let gang = Submit {
            gang: &ranks,
            ..plain
        };
        let mut want: Vec<&str> = common.to_vec();
        want.extend([
            "--partition=shareq",
            "--nodelist=n2",
            "--gres=gpu:g0:1,gpu:g3:1",
            "--job-name=shareq-7-2",
            "--nodes=1",
            ":",
            "--partition=shareq",
            "--nodelist=n1",
            "--gres=gpu:g1:1",
            "--job-name=shareq-7-2",
            "--nodes=1",
        ]);
        assert_eq!(sbatch_args(&gang), want);
    }

    #[test]
    fn a_heterogeneous_jobs_components_name_their_leader() {
        let q = r#"{"jobs":[{"job_id":8,"name":"shareq-3-1","job_state":"RUNNING","nodes":"n2","partition":"shareq","het_job_id":8,"het_job_offset":0},{"job_id":9,"name":"shareq-3-1","job_state":"RUNNING","nodes":"n1","partition":"shareq","het_job_id":8,"het_job_offset":1},{"job_id":10,"name":"shareq-4-1","job_state":"RUNNING","nodes":"n1","partition":"shareq","het_job_id":0}]}"#;
        let jobs = parse_squeue(q, "shareq").unwrap();
        let leaders: Vec<(u64, u64)> = jobs.iter().map(|j| (j.id, j.leader)).collect();
        assert_eq!(leaders, vec![(8, 8), (9, 8), (10, 10)]);
    }
}
