//! Crash test (issue 6): a stream of 200 short jobs flows through the real CLI while the
//! real `shareq serve` is killed with SIGKILL at random (seeded) moments, 20 times, and
//! restarted each time. After each restart: every acknowledged job exists exactly once,
//! no job runs twice at the same time, no GPU is held by two jobs, finished jobs keep
//! their status, nothing is lost. The jobs themselves detect double runs and shared GPUs
//! (marker directories), so the check covers the processes, not only what shareq says.
//!
//! `SHAREQ_CRASH_SEED=N` replays another sequence of kill moments.

mod common;

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

#[test]
fn kill_9_at_random_moments_loses_nothing_and_runs_nothing_twice() {
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
    let r = root.display();
    // M/<job>: this job's command runs; G/<gpu>: this GPU is in use. Finding one taken
    // is a violation, recorded in V/. D/<job>.<attempt>: the command ran to its end.
    let cmd = format!(
        "mkdir {r}/M/$SHAREQ_JOB_ID 2>/dev/null || touch {r}/V/twice-$SHAREQ_JOB_ID; \
         mkdir {r}/G/$CUDA_VISIBLE_DEVICES 2>/dev/null || touch {r}/V/gpu$CUDA_VISIBLE_DEVICES-$SHAREQ_JOB_ID; \
         sleep 0.15; rmdir {r}/G/$CUDA_VISIBLE_DEVICES {r}/M/$SHAREQ_JOB_ID; \
         touch {r}/D/$SHAREQ_JOB_ID.$SHAREQ_ATTEMPT"
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
        std::thread::spawn(move || {
            for n in 0..JOBS {
                loop {
                    let out = Command::new(BIN)
                        .args(["submit", "--share", "team", "--name"])
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
                    if stderr.contains("no scheduler is listening") {
                        // Certainly not submitted: try again once it is back.
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    // Killed while asking: it may or may not have been stored.
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
                assert_eq!(st, "SUCCEEDED", "job {id} failed: {j}");
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
    for round in 0..KILLS {
        std::thread::sleep(Duration::from_millis(100 + rng.below(500)));
        let acked_before = acked.lock().unwrap().clone();
        serve.kill9();
        std::thread::sleep(Duration::from_millis(rng.below(100)));
        serve = Serve::start(&state, &cfg, &err);
        check(&mut finished, &acked_before);
        eprintln!(
            "round {round}: {} acknowledged, {} finished, {:.1}s",
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
    // Each job's command ran to its end exactly once.
    let mut ran: BTreeMap<u64, usize> = BTreeMap::new();
    for e in std::fs::read_dir(root.join("D")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let id: u64 = name.split('.').next().unwrap().parse().unwrap();
        *ran.entry(id).or_default() += 1;
    }
    for id in jobs.keys() {
        assert_eq!(
            ran.get(id),
            Some(&1),
            "job {id} ran {:?} times",
            ran.get(id)
        );
    }
    eprintln!(
        "{} jobs ({} acknowledged, {unsure} unsure), {KILLS} kills, {:.1}s",
        jobs.len(),
        acked.len(),
        t0.elapsed().as_secs_f64()
    );
}
