//! What Slurm costs (issue 14): the same 200 short jobs (1 GPU each, `date +%s%N`) on
//! the local executor, on the Slurm executor, and submitted to Slurm directly with
//! `sbatch`; jobs/s and submit → first instruction p50/p99. Needs root and Slurm (a
//! 2-node × 4-GPU cluster on localhost from tests/slurm/cluster-up.sh); prints figures.
//! `cargo bench --bench slurm`. `SHAREQ_BEFORE=PATH` also runs another build of `shareq`
//! on the Slurm executor, in the same cluster, before this one in each round;
//! `ROUNDS=N` repeats the Slurm rows (interleaved: before, this build, `sbatch`);
//! `SLURM_ONLY=1` leaves out the local executor.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const JOBS: usize = 200;
const BIN: &str = env!("CARGO_BIN_EXE_shareq");

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn report(label: &str, submitted: &[i128], first: &[i128], wall: Duration) {
    let mut lat: Vec<f64> = submitted
        .iter()
        .zip(first)
        .map(|(s, f)| (f - s) as f64 / 1e6)
        .collect();
    println!(
        "{label}: {JOBS} jobs in {:.2} s = {:.1} jobs/s; submit → first instruction p50 {:.0} ms, p99 {:.0} ms",
        wall.as_secs_f64(),
        JOBS as f64 / wall.as_secs_f64(),
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99)
    );
}

/// Wait until every file exists and holds a timestamp; returns them.
fn wait_stamps(files: &[PathBuf], limit: Duration) -> Option<Vec<i128>> {
    let t = Instant::now();
    loop {
        let stamps: Vec<Option<i128>> = files
            .iter()
            .map(|f| {
                std::fs::read_to_string(f)
                    .ok()
                    .and_then(|s| s.lines().next().and_then(|l| l.trim().parse().ok()))
            })
            .collect();
        if stamps.iter().all(Option::is_some) {
            return Some(stamps.into_iter().flatten().collect());
        }
        if t.elapsed() > limit {
            let done = stamps.iter().filter(|s| s.is_some()).count();
            eprintln!("only {done} of {} jobs ran within {limit:?}", files.len());
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn serve(bin: &str, config: &Path, state: &Path) -> std::process::Child {
    let child = Command::new(bin)
        .args(["serve", "--stop-jobs-on-exit", "--config"])
        .arg(config)
        .arg("--state")
        .arg(state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve");
    let t = Instant::now();
    while !state.join("shareq.sock").exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "serve did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// 200 submits through the CLI as fast as it goes; the stamp is in each job's log.
fn through_shareq(bin: &str, label: &str, config: &Path, dir: &Path) {
    let state = dir.join("state");
    let mut child = serve(bin, config, &state);
    let t0 = Instant::now();
    let mut submitted = Vec::with_capacity(JOBS);
    let mut logs = Vec::with_capacity(JOBS);
    for _ in 0..JOBS {
        submitted.push(now_ns());
        let out = Command::new(bin)
            .args(["submit", "--share", "qs1", "--gpus", "1", "--state"])
            .arg(&state)
            .args(["--", "date", "+%s%N"])
            .output()
            .expect("submit");
        let id: u64 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        logs.push(state.join(format!("logs/{id}/1.log")));
    }
    if let Some(first) = wait_stamps(&logs, Duration::from_secs(300)) {
        report(label, &submitted, &first, t0.elapsed());
    }
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
}

fn direct_sbatch(dir: &Path) {
    let out_dir = dir.to_path_buf();
    std::fs::create_dir_all(&out_dir).unwrap();
    let t0 = Instant::now();
    let mut submitted = Vec::with_capacity(JOBS);
    let mut files = Vec::with_capacity(JOBS);
    for i in 0..JOBS {
        let f = out_dir.join(format!("{i}.out"));
        submitted.push(now_ns());
        let ok = Command::new("sbatch")
            .args(["--parsable", "--partition=shareq", "--gres=gpu:1"])
            .arg(format!("--output={}", f.display()))
            .arg("--wrap=date +%s%N")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "sbatch failed");
        files.push(f);
    }
    if let Some(first) = wait_stamps(&files, Duration::from_secs(300)) {
        report("sbatch directly", &submitted, &first, t0.elapsed());
    }
}

fn main() {
    if !nix::unistd::geteuid().is_root()
        || !Command::new("sh")
            .args(["-c", "command -v slurmctld"])
            .output()
            .is_ok_and(|o| o.status.success())
    {
        println!(
            "skipped: needs root and Slurm (apt-get install slurmctld slurmd slurm-client munge)"
        );
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().join("cluster");
    let up = Command::new("bash")
        .arg(root.join("tests/slurm/cluster-up.sh"))
        .env("BASE", &base)
        .env("NODES", "2")
        .env("GPUS", "4")
        .env("CTLD_PORT", "18917")
        .env("NODE_PORT0", "19917")
        .output()
        .expect("cluster-up");
    let _down = ClusterDown(base.clone());
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    // SAFETY: single-threaded bench; set before any child starts.
    unsafe { std::env::set_var("SLURM_CONF", base.join("etc/slurm.conf")) };

    // The same shares on 8 fake GPUs of this machine.
    let local = tmp.path().join("local-config");
    std::fs::create_dir_all(&local).unwrap();
    let shares =
        std::fs::read_to_string(root.join("sample-configs/slurm-2nodes/shares.yaml")).unwrap();
    std::fs::write(
        local.join("c.yaml"),
        format!("kind: ServiceEnvironment\nname: local\ncapacityLimits:\n  - {{capacityUnit: gpu, maxCapacity: 8, devices: {{fake: 8}}}}\npreemption: {{gracePeriodSeconds: 5}}\n---\n{shares}"),
    )
    .unwrap();
    if std::env::var("SLURM_ONLY").is_err() {
        through_shareq(
            BIN,
            "local executor (8 fake GPUs)",
            &local,
            &tmp.path().join("l"),
        );
    }
    let before = std::env::var("SHAREQ_BEFORE").ok();
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    // The sample's nodes and executor; the jobs' share may use all 8 GPUs, as `sbatch`
    // does (the sample's qs1 reaches 6: qs3 keeps its 2). `SAMPLE_SHARES=1`: the
    // sample's shares as they are (the figures before issue 27 were taken so).
    let slurm_config = if std::env::var("SAMPLE_SHARES").is_ok() {
        root.join("sample-configs/slurm-2nodes")
    } else {
        let dir = tmp.path().join("slurm-config");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(
            root.join("sample-configs/slurm-2nodes/environment.yaml"),
            dir.join("environment.yaml"),
        )
        .unwrap();
        std::fs::write(
            dir.join("shares.yaml"),
            "kind: QuotaShare\nquotaShareName: qs1\ncapacityLimits: [{capacityUnit: gpu, maxCapacity: 8}]\nresourceSharingConfiguration: {strategy: RESERVE}\n",
        )
        .unwrap();
        dir
    };
    // The same config, each attempt a job step of its own (`executor.start: srun`).
    let srun_config = tmp.path().join("srun-config");
    std::fs::create_dir_all(&srun_config).unwrap();
    for f in std::fs::read_dir(&slurm_config).unwrap().flatten() {
        let text = std::fs::read_to_string(f.path()).unwrap();
        let text = text.replace("partition: shareq}", "partition: shareq, start: srun}");
        std::fs::write(srun_config.join(f.file_name()), text).unwrap();
    }
    for round in 1..=rounds {
        // Both builds in each round, in turns first (the cluster keeps ended jobs listed
        // for 300 s, so a later row reads a longer `squeue`).
        let mut builds: Vec<(&str, &str)> = vec![(BIN, "")];
        if let Some(b) = &before {
            builds.insert(0, (b.as_str(), ", before"));
            if round % 2 == 0 {
                builds.reverse();
            }
        }
        for (bin, which) in builds {
            through_shareq(
                bin,
                &format!("round {round}: Slurm executor{which} (2 nodes × 4)"),
                &slurm_config,
                &tmp.path().join(format!("s{round}{}", which.len())),
            );
        }
        through_shareq(
            BIN,
            &format!("round {round}: Slurm executor, start: srun (2 nodes × 4)"),
            &srun_config,
            &tmp.path().join(format!("r{round}")),
        );
        print!("round {round}: ");
        direct_sbatch(&tmp.path().join(format!("sbatch{round}")));
    }
}

/// Stops the test cluster (by pid) when the bench ends, a failed one too.
struct ClusterDown(PathBuf);

impl Drop for ClusterDown {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slurm/cluster-down.sh"))
            .env("BASE", &self.0)
            .output();
    }
}
