//! Crash test (issues 6 and 11): a stream of 200 short jobs flows through the real CLI
//! while, at random (seeded) moments, 20 times, the real `shareq serve` is killed with
//! SIGKILL and restarted, or supervisors of running jobs are, or both. After each round:
//! every acknowledged job exists exactly once, no job runs twice at the same time, no GPU
//! is held by two live processes, finished jobs keep their status, nothing is lost. The
//! jobs themselves detect double runs and shared GPUs (they hold `flock`s on marker
//! files, which die with their processes), so the check covers the processes, not only
//! what shareq says. A job whose supervisor was killed fails that attempt (it has
//! attempts to spare) and runs again.
//!
//! `SHAREQ_CRASH_SEED=N` replays another sequence of kill moments.
//!
//! Its short form runs the same with three real users submitting side by side (as root,
//! with test users made by `multi_user`'s `Users`), 90 jobs and 10 kills: the multi-user
//! load test of issue 44, in the time `cargo test` has.

use crate::common;

use common::{BIN, Cleanup, Serve, config, share};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const JOBS: usize = 200;
const KILLS: usize = 20;
const GPUS: u32 = 4;

/// One run: how many jobs, how many kill rounds, and who submits them (in turn; none:
/// this process's user, with the build's binary).
struct Load {
    jobs: usize,
    kills: usize,
    users: Vec<String>,
    /// The CLI the users run (one they may execute).
    bin: std::path::PathBuf,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Every job the scheduler lists, by id (asserts each appears once).
fn all_jobs(state: &Path) -> Option<(BTreeMap<u64, Value>, Value)> {
    let out = Command::new(BIN)
        .args(["jobs", "--all", "--json", "--state"])
        .arg(state)
        .output()
        .unwrap();
    if !out.status.success() {
        eprintln!("jobs --all: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut by_id = BTreeMap::new();
    for list in ["queue", "running", "finished"] {
        for j in v[list].as_array().unwrap() {
            let id = j["id"].as_u64().unwrap();
            assert!(
                by_id.insert(id, j.clone()).is_none(),
                "job {id} is listed twice: {v}"
            );
        }
    }
    Some((by_id, v))
}

/// (job, supervisor pid) of every attempt whose supervisor runs, from the run files.
fn live_supervisors(state: &Path) -> Vec<(u64, i32)> {
    let mut out = Vec::new();
    let Ok(jobs) = std::fs::read_dir(state.join("runs")) else {
        return out;
    };
    for j in jobs.flatten() {
        let Some(job) = j.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        for f in std::fs::read_dir(j.path()).into_iter().flatten().flatten() {
            let p = f.path();
            if p.extension().is_some_and(|x| x == "pid") && !p.with_extension("exit").exists() {
                let pid = std::fs::read_to_string(&p)
                    .ok()
                    .and_then(|t| t.split_whitespace().next()?.parse::<i32>().ok());
                let is_supervisor = |p: i32| {
                    std::fs::read(format!("/proc/{p}/cmdline"))
                        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__supervise"))
                };
                if let Some(pid) = pid.filter(|&p| p > 0 && common::alive(p) && is_supervisor(p)) {
                    out.push((job, pid));
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn kill_9_at_random_moments_loses_nothing_and_runs_nothing_twice() {
    run(&Load {
        jobs: JOBS,
        kills: KILLS,
        users: Vec::new(),
        bin: BIN.into(),
    });
}

#[test]
fn three_users_under_kill_9_lose_nothing_and_share_no_gpu_short() {
    if let Some(why) = crate::multi_user::skip_reason() {
        eprintln!("skipping: {why} (three real users need root)");
        return;
    }
    let users = crate::multi_user::Users::create(&["ann", "ben", "cat"], &[]);
    let copy = crate::multi_user::BinCopy::get();
    run(&Load {
        jobs: 90,
        kills: 10,
        users: ["ann", "ben", "cat"].map(|n| users.name(n)).to_vec(),
        bin: copy.bin.clone(),
    });
}

fn run(load: &Load) {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    let seed: u64 = std::env::var("SHAREQ_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_0006);
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let cfg = root.join("config");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("c.yaml"),
        config(GPUS, 1, &share("team", GPUS, "LEND", false)),
    )
    .unwrap();
    let state = root.join("state");
    for d in ["M", "G", "V", "D"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    if !load.users.is_empty() {
        // The users reach the socket and write their markers; the GPUs' markers exist
        // already, writable by all, in a directory none of them may change.
        mode(&root, 0o711);
        for d in ["M", "V", "D"] {
            mode(&root.join(d), 0o777);
        }
        // Made with this process's umask, which another test of the binary may have set
        // to 077 (a state directory prepared in-process): the users must pass through it.
        mode(&root.join("G"), 0o755);
        for g in 0..GPUS {
            let f = root.join(format!("G/{g}"));
            std::fs::write(&f, "").unwrap();
            mode(&f, 0o666);
        }
    }
    let r = root.display();
    // M/<job>: this job's command runs; G/<gpu>: this GPU is in use; each held with a
    // flock by the job's processes while they live. Finding one taken is a violation,
    // recorded in V/. D/<job>.<attempt>: the command ran to its end.
    let cmd = format!(
        "exec 8>{r}/M/$SHAREQ_JOB_ID; flock -n 8 || touch {r}/V/twice-$SHAREQ_JOB_ID; \
         exec 9>{r}/G/$CUDA_VISIBLE_DEVICES; flock -n 9 || touch {r}/V/gpu$CUDA_VISIBLE_DEVICES-$SHAREQ_JOB_ID; \
         sleep 0.3; touch {r}/D/$SHAREQ_JOB_ID.$SHAREQ_ATTEMPT"
    );
    let err = root.join("serve.err");
    let _cleanup = Cleanup(state.clone());
    let mut serve = Serve::start(&state, &cfg, &err);

    // The stream of submissions, through the CLI, independent of the kills.
    let acked = Arc::new(Mutex::new(BTreeSet::<u64>::new()));
    let unsure = Arc::new(Mutex::new(0usize));
    let done = Arc::new(AtomicBool::new(false));
    let submitter = {
        let (acked, unsure, done, state) =
            (acked.clone(), unsure.clone(), done.clone(), state.clone());
        let mut pace = Rng(seed.rotate_left(17) | 1);
        let (jobs, users, bin) = (load.jobs, load.users.clone(), load.bin.clone());
        std::thread::spawn(move || {
            for n in 0..jobs {
                loop {
                    let mut cli = match users.get(n % users.len().max(1)) {
                        Some(u) => {
                            let mut c = Command::new("runuser");
                            c.args(["-u", u, "--"]).arg(&bin).current_dir("/");
                            c
                        }
                        None => Command::new(&bin),
                    };
                    let out = cli
                        .args(["submit", "--share", "team", "--attempts", "10", "--name"])
                        .arg(format!("j{n}"))
                        .arg("--state")
                        .arg(&state)
                        .arg("--")
                        .arg(&cmd)
                        .output()
                        .unwrap();
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    if out.status.success() {
                        let id = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
                        assert!(acked.lock().unwrap().insert(id), "id {id} given twice");
                        break;
                    }
                    if stderr.contains("no scheduler is listening")
                        || stderr.starts_with("runuser:")
                    {
                        // Certainly not submitted (no scheduler yet, or the CLI did not
                        // start: a copy of the binary still open elsewhere, ETXTBSY):
                        // try again.
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    // Killed while asking: it may or may not have been stored.
                    eprintln!("submit j{n}: unsure: {}", stderr.trim_end());
                    *unsure.lock().unwrap() += 1;
                    break;
                }
                std::thread::sleep(Duration::from_millis(10 + pace.below(40)));
            }
            done.store(true, Ordering::SeqCst);
        })
    };

    let mut finished: BTreeMap<u64, Value> = BTreeMap::new();
    let check = |finished: &mut BTreeMap<u64, Value>, acked_before: &BTreeSet<u64>| {
        let Some((jobs, raw)) = all_jobs(&state) else {
            let log = std::fs::read_to_string(&err).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            panic!(
                "jobs --all failed after a restart; serve said:\n{}",
                tail.join("\n")
            );
        };
        for id in acked_before {
            assert!(
                jobs.contains_key(id),
                "acknowledged job {id} was lost: {raw}"
            );
        }
        let mut held = BTreeSet::new();
        for j in raw["running"].as_array().unwrap() {
            for d in j["devices"].as_array().unwrap() {
                assert!(
                    held.insert(d.as_u64().unwrap()),
                    "GPU {d} held twice: {raw}"
                );
            }
        }
        for (id, j) in &jobs {
            if let Some(before) = finished.get(id) {
                assert_eq!(
                    (&before["state"], &before["finished"], &before["attempts"]),
                    (&j["state"], &j["finished"], &j["attempts"]),
                    "finished job {id} changed"
                );
            }
            let st = j["state"].as_str().unwrap();
            if st == "SUCCEEDED" || st == "FAILED" {
                let log = |a: u64| {
                    std::fs::read_to_string(state.join(format!("logs/{id}/{a}.log")))
                        .unwrap_or_default()
                };
                let last = j["attempts"].as_u64().unwrap_or(1);
                assert_eq!(
                    st,
                    "SUCCEEDED",
                    "job {id} failed: {j}\nits last attempt's log: {}",
                    log(last)
                );
                finished.insert(*id, j.clone());
            }
        }
        let violations: Vec<_> = std::fs::read_dir(root.join("V"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(violations.is_empty(), "violations: {violations:?}");
    };

    let t0 = Instant::now();
    let mut hit = BTreeSet::new();
    for round in 0..load.kills {
        std::thread::sleep(Duration::from_millis(100 + rng.below(500)));
        let acked_before = acked.lock().unwrap().clone();
        let what = rng.below(3);
        if what != 0 {
            // Supervisors of running attempts, SIGKILLed: their jobs' processes must go
            // too before the GPU is handed out again.
            let live = live_supervisors(&state);
            for _ in 0..1 + rng.below(2) {
                if live.is_empty() {
                    break;
                }
                let (job, pid) = live[rng.below(live.len() as u64) as usize];
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
                hit.insert(job);
            }
        }
        if what != 1 {
            serve.kill9();
            std::thread::sleep(Duration::from_millis(rng.below(100)));
            serve = Serve::start(&state, &cfg, &err);
        } else {
            std::thread::sleep(Duration::from_millis(300));
        }
        check(&mut finished, &acked_before);
        eprintln!(
            "round {round} ({}): {} acknowledged, {} finished, {:.1}s",
            ["serve", "supervisors", "both"][what as usize],
            acked_before.len(),
            finished.len(),
            t0.elapsed().as_secs_f64()
        );
    }
    submitter.join().unwrap();
    assert!(done.load(Ordering::SeqCst));
    // Let everything finish, then the final account.
    let t = Instant::now();
    loop {
        let (jobs, _) = all_jobs(&state).unwrap();
        if jobs
            .values()
            .all(|j| j["state"] == "SUCCEEDED" || j["state"] == "FAILED")
        {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(40), "jobs did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
    let acked = acked.lock().unwrap().clone();
    check(&mut finished, &acked);
    let (jobs, _) = all_jobs(&state).unwrap();
    let unsure = *unsure.lock().unwrap();
    assert!(
        jobs.len() >= acked.len() && jobs.len() <= acked.len() + unsure,
        "{} jobs listed, {} acknowledged, {unsure} unsure",
        jobs.len(),
        acked.len()
    );
    // Each user's jobs are theirs.
    if !load.users.is_empty() {
        let by: BTreeSet<&str> = jobs
            .values()
            .filter_map(|j| j["submitter"]["name"].as_str())
            .collect();
        let want: BTreeSet<&str> = load.users.iter().map(String::as_str).collect();
        assert_eq!(by, want, "submitters");
    }
    // Each job's command ran to its end exactly once (a job whose supervisor was killed
    // may have been killed after its last step: at least once).
    let mut ran: BTreeMap<u64, usize> = BTreeMap::new();
    for e in std::fs::read_dir(root.join("D")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let id: u64 = name.split('.').next().unwrap().parse().unwrap();
        *ran.entry(id).or_default() += 1;
    }
    for id in jobs.keys() {
        let n = ran.get(id).copied().unwrap_or(0);
        if hit.contains(id) {
            assert!(n >= 1, "job {id} never ran to its end");
        } else {
            assert_eq!(n, 1, "job {id} ran {n} times");
        }
    }
    eprintln!(
        "{} jobs ({} acknowledged, {unsure} unsure), {} kill rounds, {:.1}s",
        jobs.len(),
        acked.len(),
        load.kills,
        t0.elapsed().as_secs_f64()
    );
}
