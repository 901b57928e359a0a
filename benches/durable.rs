//! Durability figures for docs/PERFORMANCE.md (issue 6), with the real `shareq serve`:
//! 1. durable submits per second through the CLI (`shareq submit` processes, PARALLEL at
//!    once, each answered only after its job is committed to the database), checked
//!    against the database afterwards;
//! 2. restart time with 100,000 finished jobs in history: recovery itself (lock → store →
//!    prune → load → plan → restore → first pass stored, as `serve` logs it) and spawn →
//!    socket answering.
//!
//! Run: `cargo bench --bench durable` (`JOBS=N`, `PARALLEL=N`, `HISTORY=N` to change).
//! `cargo test --benches` runs a small version.

use shareq::config::{parse_documents, validate};
use shareq::model::UnitCapacity;
use shareq::model::{JobId, JobSpec};
use shareq::sched::{Clock, Sched};
use shareq::store::{Observed, Store};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_shareq");

fn env_num(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn config(gpus: u32) -> String {
    format!(
        "kind: ServiceEnvironment
name: bench
capacityLimits: [{{capacityUnit: gpu, maxCapacity: {gpus}, devices: {{fake: {gpus}}}}}]
preemption: {{gracePeriodSeconds: 1}}
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{{capacityUnit: gpu, maxCapacity: {gpus}}}]
resourceSharingConfiguration: {{strategy: LEND}}
"
    )
}

fn start(root: &Path, gpus: u32) -> (Child, Instant) {
    let cfg = root.join("config");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("c.yaml"), config(gpus)).unwrap();
    let state = root.join("state");
    let t0 = Instant::now();
    let child = Command::new(BIN)
        .args(["serve", "--stop-jobs-on-exit", "--config"])
        .arg(&cfg)
        .arg("--state")
        .arg(&state)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(root.join("serve.err")).unwrap())
        .spawn()
        .unwrap();
    while UnixStream::connect(state.join("shareq.sock")).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "serve did not start"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    (child, t0)
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

fn submit(state: &Path, cmd: &str) -> bool {
    Command::new(BIN)
        .args(["submit", "--share", "a", "--state"])
        .arg(state)
        .args(["--", cmd])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Durable submits per second through the CLI.
fn cli_submits(jobs: usize, parallel: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let (child, _) = start(dir.path(), 1);
    let state = dir.path().join("state");
    // Hold the only GPU, so that the measured jobs stay queued: the figure is the submit
    // path (socket, scheduler, commit), not process starts.
    assert!(submit(&state, "sleep 600"));
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..parallel)
        .map(|_| {
            let (next, state) = (next.clone(), state.clone());
            std::thread::spawn(move || {
                while next.fetch_add(1, Ordering::SeqCst) < jobs {
                    assert!(submit(&state, "true"), "submit failed");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    // Every acknowledged submit is in the database.
    let db = rusqlite::Connection::open_with_flags(
        state.join("shareq.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let n: i64 = db
        .query_row("SELECT count(*) FROM jobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n as usize, jobs + 1);
    stop(child);
    jobs as f64 / secs
}

/// Durable submits per second over the socket itself (`connections` clients, each
/// sending its next submit when the previous one is acknowledged): the submit path
/// without the cost of starting a `shareq` process per job.
fn socket_submits(jobs: usize, connections: usize) -> f64 {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let (child, _) = start(dir.path(), 1);
    let state = dir.path().join("state");
    assert!(submit(&state, "sleep 600"));
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..connections)
        .map(|_| {
            let (next, sock) = (next.clone(), state.join("shareq.sock"));
            std::thread::spawn(move || {
                let s = UnixStream::connect(sock).unwrap();
                let mut w = s.try_clone().unwrap();
                let mut r = BufReader::new(s);
                let req = br#"{"op":"submit","job":{"jobName":"t","quotaShareName":"a","command":"true","quantity":1}}"#;
                let mut line = String::new();
                while next.fetch_add(1, Ordering::SeqCst) < jobs {
                    w.write_all(req).unwrap();
                    w.write_all(b"\n").unwrap();
                    line.clear();
                    r.read_line(&mut line).unwrap();
                    assert!(line.contains("\"ok\":true"), "{line}");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    stop(child);
    jobs as f64 / secs
}

/// A state directory whose database holds `finished` finished jobs.
fn populate(state: &Path, finished: u64) {
    let c = validate(parse_documents(&config(1000), None).expect("parse")).expect("valid");
    let mut s = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall);
    let mut store = Store::open(state).unwrap();
    let mut now = shareq::exec::now_ms() - 3_600_000;
    let mut left = finished;
    while left > 0 {
        let n = left.min(1000);
        let ids: Vec<JobId> = (0..n)
            .map(|k| {
                let mut spec = JobSpec::new(&format!("train-{k}"), "a", 1, 0);
                spec.command = Some(shareq::model::Command::Shell("true".into()));
                s.submit(spec, now).unwrap()
            })
            .collect();
        s.pass(now);
        store.record_events(now, &s.take_events(), &s).unwrap();
        now += 10;
        let exits: Vec<Observed> = ids
            .iter()
            .map(|&job| Observed::Exited { job, code: 0 })
            .collect();
        for o in &exits {
            o.apply(&mut s, now);
        }
        s.pass(now);
        store.record(now, &exits, &s.take_events(), &s).unwrap();
        for id in ids {
            s.forget(id);
        }
        left -= n;
    }
}

/// (recovery ms as serve logs it, spawn → socket ms).
fn restart(history: u64) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    populate(&dir.path().join("state"), history);
    let stored = Store::open(&dir.path().join("state"))
        .unwrap()
        .history(usize::MAX >> 1, 0)
        .unwrap()
        .len();
    assert_eq!(stored as u64, history);
    let (child, t0) = start(dir.path(), 1000);
    let ready = t0.elapsed().as_secs_f64() * 1000.0;
    stop(child);
    let log = std::fs::read_to_string(dir.path().join("serve.err")).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("recovered the state"))
        .expect("recovery line");
    // Strip colour codes, then read `ms=N`.
    let plain: String = {
        let mut out = String::new();
        let mut esc = false;
        for ch in line.chars() {
            match (esc, ch) {
                (false, '\u{1b}') => esc = true,
                (true, 'm') => esc = false,
                (true, _) => {}
                (false, c) => out.push(c),
            }
        }
        out
    };
    let ms: f64 = plain
        .split_whitespace()
        .find_map(|w| w.strip_prefix("ms="))
        .and_then(|v| v.parse().ok())
        .expect("ms=");
    (ms, ready)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let jobs = env_num("JOBS", if full { 5000 } else { 100 });
    let parallel = env_num("PARALLEL", 8);
    let history = env_num("HISTORY", if full { 100_000 } else { 1000 }) as u64;
    let rate = cli_submits(jobs, parallel);
    println!("durable submits through the CLI: {jobs} jobs, {parallel} at once: {rate:.0}/s");
    let n = jobs * 4;
    let rate = socket_submits(n, parallel);
    println!("durable submits over the socket: {n} jobs, {parallel} connections: {rate:.0}/s");
    let (ms, ready) = restart(history);
    println!(
        "restart with {history} finished jobs in history: recovery {ms:.0} ms, spawn to socket {ready:.0} ms"
    );
}
