//! End-to-end runtime figures on fake GPUs (SPEC §7, issue 4): throughput of 1,000 `true`
//! jobs submitted in a burst through the CLI, submit→process-start latency on an idle
//! scheduler, and the same 1,000 jobs through pueue when it is installed.
//!
//! Each figure is printed beside its floor, measured in the same run: what the processes
//! a job consists of (the CLI call that submits it, its supervisor and its command) cost
//! by themselves on this machine, with the same parallelism, and no scheduler between.
//!
//! Run: `cargo bench --bench runtime` (release build of `shareq`). Set `JOBS=N` to change
//! the job count, `PARALLEL=N` for how many CLI submits run at once (default 8),
//! `SAMPLES=N` for the latency samples; `SHAREQ_BIN=PATH` runs another build of `shareq`
//! (to compare two side by side on one machine). `SHAREQ_SUPERVISOR_START=spawner|clone|
//! plain` picks how serve starts supervisors (docs/DEPLOY.md).
//!
//! The short form, `SHORT=1 cargo test --bench runtime` (100 jobs, 20 samples, a debug
//! build is enough), is CI's check of each start path (`.ci/run` runs it for every one):
//! besides the figures, it fails unless every job of the burst SUCCEEDED and serve's log
//! says the start path asked for was the one used.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_shareq");

/// The `shareq` under test: `SHAREQ_BIN` when set, else the one Cargo built.
fn bin() -> String {
    std::env::var("SHAREQ_BIN").unwrap_or_else(|_| BIN.to_string())
}

fn env_num(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn write_config(dir: &Path) {
    let mut y = String::from(
        "kind: ServiceEnvironment\nname: bench\ncapacityLimits:\n  - capacityUnit: gpu\n    maxCapacity: 8\n    devices: {fake: 8}\npreemption: {gracePeriodSeconds: 1}\n",
    );
    for s in ["a", "b", "c", "d"] {
        y.push_str(&format!(
            "---\nkind: QuotaShare\nquotaShareName: {s}\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 2}}]\nresourceSharingConfiguration: {{strategy: LEND_AND_BORROW}}\n"
        ));
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("bench.yaml"), y).unwrap();
}

struct Serve {
    child: Child,
    state: PathBuf,
}

impl Serve {
    fn start(root: &Path) -> Serve {
        let cfg = root.join("config");
        write_config(&cfg);
        let state = root.join("state");
        let child = Command::new(bin())
            .args(["serve", "--stop-jobs-on-exit", "--config"])
            .arg(&cfg)
            .arg("--state")
            .arg(&state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while UnixStream::connect(state.join("shareq.sock")).is_err() {
            assert!(t.elapsed() < Duration::from_secs(20), "serve did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Serve { child, state }
    }

    fn ask(&self, req: &str) -> Value {
        let s = UnixStream::connect(self.state.join("shareq.sock")).unwrap();
        let mut w = s.try_clone().unwrap();
        w.write_all(req.as_bytes()).unwrap();
        w.write_all(b"\n").unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// CPU seconds the scheduler process has used (user + system).
    fn cpu_seconds(&self) -> f64 {
        self.stat_seconds(11)
    }

    /// CPU seconds of the children it waited for (user + system): the supervisors, with
    /// the jobs they waited for.
    fn children_cpu_seconds(&self) -> f64 {
        self.stat_seconds(13)
    }

    /// Fields `at` and `at + 1` of `/proc/PID/stat` after the command name, in seconds.
    fn stat_seconds(&self, at: usize) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = f.get(at).and_then(|v| v.parse().ok()).unwrap_or(0.0)
            + f.get(at + 1).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        ticks / 100.0
    }

    /// Every one of the `n` jobs SUCCEEDED, and serve started their supervisors the way
    /// `SHAREQ_SUPERVISOR_START` asked, where set (serve's log says which at its first start).
    fn check_outcome(&self, n: usize) {
        let j = self.ask(r#"{"op":"jobs","all":true}"#);
        let finished = j["jobs"]["finished"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let bad: Vec<&Value> = finished
            .iter()
            .filter(|j| j["state"] != "SUCCEEDED")
            .collect();
        assert!(
            finished.len() >= n && bad.is_empty(),
            "{} of {n} jobs finished, not SUCCEEDED: {:?}",
            finished.len(),
            bad.first()
        );
        // The path is checked where one was asked for (a build before the switch, run as
        // `SHAREQ_BIN` for a comparison, says nothing of it).
        if let Ok(path) = std::env::var("SHAREQ_SUPERVISOR_START") {
            let log = std::fs::read_to_string(self.state.join("shareq.log")).unwrap_or_default();
            assert!(
                log.contains(&format!("supervisors start by: {path}")),
                "serve's log does not say that supervisors start by: {path}"
            );
        }
        println!("all {n} jobs SUCCEEDED");
    }

    fn finished(&self) -> usize {
        let j = self.ask(r#"{"op":"jobs","all":true}"#);
        j["jobs"]["finished"].as_array().map_or(0, Vec::len)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// CPU seconds the whole machine has been busy (all cores; user, nice, system, irq,
/// softirq, steal), from `/proc/stat`: what a burst costs in all, its processes included.
fn machine_busy_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: f64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum();
    busy / 100.0
}

/// Run `n` commands built by `cmd(i)`, `parallel` at a time; returns the wall time.
fn burst(n: usize, parallel: usize, cmd: impl Fn(usize) -> Command + Sync) -> Duration {
    let next = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    std::thread::scope(|sc| {
        for _ in 0..parallel {
            let next = next.clone();
            let cmd = &cmd;
            sc.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    let st = cmd(i)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .unwrap();
                    assert!(st.success(), "command {i} failed");
                }
            });
        }
    });
    t.elapsed()
}

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(secs), "timed out: {what}");
        // Coarse enough not to load either daemon with status queries.
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn throughput(n: usize, parallel: usize) -> f64 {
    let root = tempfile::tempdir().unwrap();
    let s = Serve::start(root.path());
    let shares = ["a", "b", "c", "d"];
    let (cpu0, kids0, busy0) = (
        s.cpu_seconds(),
        s.children_cpu_seconds(),
        machine_busy_seconds(),
    );
    let t = Instant::now();
    let submit = burst(n, parallel, |i| {
        let mut c = Command::new(bin());
        c.args(["submit", "--share", shares[i % 4], "--state"])
            .arg(&s.state)
            .args(["--", "true"]);
        c
    });
    wait_until("all shareq jobs done", 600, || s.finished() >= n);
    let total = t.elapsed();
    s.check_outcome(n);
    let busy = machine_busy_seconds() - busy0;
    let rate = n as f64 / total.as_secs_f64();
    let serve = s.cpu_seconds() - cpu0;
    let kids = s.children_cpu_seconds() - kids0;
    println!("shareq scheduler process CPU during the burst: {serve:.2} s");
    let per_job = |x: f64| x * 1000.0 / n as f64;
    println!(
        "machine CPU during the burst: {busy:.2} s = {:.2} ms per job: serve {:.2}, supervisors with their jobs {:.2}, \
         the rest (CLI calls, the bench's polls, kernel threads) {:.2}",
        per_job(busy),
        per_job(serve),
        per_job(kids),
        per_job(busy - serve - kids)
    );
    println!(
        "shareq throughput: {n} jobs `true`, 8 fake GPUs, 4 shares, CLI submits {parallel} at a time: \
         submitted in {:.2} s, all done in {:.2} s => {rate:.0} jobs/s",
        submit.as_secs_f64(),
        total.as_secs_f64()
    );
    rate
}

/// The same jobs sent straight to the socket (one connection, no CLI process per job):
/// what the scheduler and supervisors sustain by themselves.
fn socket_throughput(n: usize) -> f64 {
    let root = tempfile::tempdir().unwrap();
    let s = Serve::start(root.path());
    let shares = ["a", "b", "c", "d"];
    let t = Instant::now();
    let stream = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    for i in 0..n {
        writeln!(
            w,
            r#"{{"op":"submit","job":{{"jobName":"t{i}","quotaShareName":"{}","command":"true"}}}}"#,
            shares[i % 4]
        )
        .unwrap();
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.contains("\"ok\":true"), "{line}");
    }
    let submit = t.elapsed();
    wait_until("all shareq jobs done", 600, || s.finished() >= n);
    let total = t.elapsed();
    s.check_outcome(n);
    let rate = n as f64 / total.as_secs_f64();
    println!(
        "shareq throughput, submits over one socket connection (no CLI processes): \
         submitted in {:.2} s, all done in {:.2} s => {rate:.0} jobs/s",
        submit.as_secs_f64(),
        total.as_secs_f64()
    );
    rate
}

fn latency(samples: usize) -> f64 {
    let root = tempfile::tempdir().unwrap();
    let s = Serve::start(root.path());
    let mut lat = Vec::new();
    for i in 0..samples {
        let t0 = epoch_ns();
        let a = s.ask(&format!(
            r#"{{"op":"submit","job":{{"jobName":"lat{i}","quotaShareName":"a","command":["date","+%s%N"]}}}}"#
        ));
        let id = a["id"].as_u64().expect("submitted");
        // Done once the scheduler has seen the exit: the next submit finds it idle.
        wait_until("latency job done", 30, || s.finished() > i);
        let log = std::fs::read_to_string(s.state.join(format!("logs/{id}/1.log"))).unwrap();
        let started: i128 = log.trim().parse().unwrap();
        lat.push((started - t0) as f64 / 1e6);
    }
    let (p50, p99, max) = percentiles(&mut lat);
    println!(
        "shareq latency: submit (socket) -> job's first instruction, idle scheduler, {samples} samples: \
         p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms"
    );
    p99
}

/// Now, in ns since the epoch: the clock `date +%s%N` in a job reports its start on.
fn epoch_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128
}

/// p50, p99 and max of `v` (sorted in place).
fn percentiles(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let pct = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    (pct(0.5), pct(0.99), v[v.len() - 1])
}

/// The floor under the latency: a `shareq` process started and gone (what a supervisor's
/// start costs), then the job's command started, timed to the command's first
/// instruction as the job above reports it; no scheduler, socket or database between.
fn latency_floor(samples: usize) -> f64 {
    let mut lat = Vec::new();
    for _ in 0..samples {
        let t0 = epoch_ns();
        let st = Command::new(bin())
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        let out = Command::new("date").arg("+%s%N").output().unwrap();
        let started: i128 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        lat.push((started - t0) as f64 / 1e6);
    }
    let (p50, p99, max) = percentiles(&mut lat);
    println!(
        "floor latency: a `shareq` process start, then the command's first instruction, {samples} samples: \
         p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms"
    );
    p99
}

/// The floor under the throughput: for each of `n` jobs, `parallel` at a time as the CLI
/// submits run, the processes a job consists of started one after the other and waited
/// for: a `shareq` CLI call, a `shareq` process standing for its supervisor (unless not
/// `with_supervisor`), and `true`. (Supervisors are copies of the spawner, not programs
/// started anew (docs/PERFORMANCE.md, Runtime): the floor without that process is
/// printed beside the one the target is set against.)
fn throughput_floor(n: usize, parallel: usize, with_supervisor: bool) -> f64 {
    let programs: &[String] = if with_supervisor {
        &[bin(), bin(), "true".to_string()]
    } else {
        &[bin(), "true".to_string()]
    };
    let next = Arc::new(AtomicUsize::new(0));
    let busy0 = machine_busy_seconds();
    let t = Instant::now();
    std::thread::scope(|sc| {
        for _ in 0..parallel {
            let next = next.clone();
            sc.spawn(move || {
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    for prog in programs {
                        let mut c = Command::new(prog);
                        if prog != "true" {
                            c.arg("--version");
                        }
                        let st = c.stdout(Stdio::null()).status().unwrap();
                        assert!(st.success(), "{prog}");
                    }
                }
            });
        }
    });
    let rate = n as f64 / t.elapsed().as_secs_f64();
    let busy = machine_busy_seconds() - busy0;
    let supervisor = if with_supervisor {
        " a `shareq` supervisor start and"
    } else {
        " (no supervisor process)"
    };
    println!(
        "floor throughput: {n} jobs, {parallel} at a time, each a `shareq` CLI start,{supervisor} \
         `true`, no scheduler: {:.2} s => {rate:.0} jobs/s; machine CPU {busy:.2} s = {:.2} ms per job",
        t.elapsed().as_secs_f64(),
        busy * 1000.0 / n as f64
    );
    rate
}

/// The same burst through pueue (one group, 8 parallel), when `pueue`/`pueued` exist.
fn pueue(n: usize, parallel: usize) -> Option<f64> {
    let which = |b: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {b}")])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let (Some(pueue), Some(pueued)) = (which("pueue"), which("pueued")) else {
        println!("pueue: not installed (cargo install pueue), no comparison");
        return None;
    };
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let cfg = dir.join("pueue.yml");
    std::fs::write(
        &cfg,
        format!(
            "shared:\n  pueue_directory: {d}\n  runtime_directory: {d}\n  use_unix_socket: true\n  unix_socket_path: {d}/pueue.socket\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let mut daemon = Command::new(&pueued)
        .arg("-c")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let p = |args: &[&str]| {
        let mut c = Command::new(&pueue);
        c.arg("-c").arg(&cfg).args(args);
        c
    };
    wait_until("pueued up", 20, || {
        p(&["status"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(p(&["parallel", "8"]).status().unwrap().success());
    let t = Instant::now();
    let submit = burst(n, parallel, |_| p(&["add", "--", "true"]));
    wait_until("all pueue tasks done", 600, || {
        let out = p(&["status", "--json"]).output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let tasks = v["tasks"]
            .as_object()
            .map(|m| m.values().cloned().collect::<Vec<_>>());
        tasks.is_some_and(|t| {
            t.len() >= n
                && t.iter().all(|x| {
                    x["status"].get("Done").is_some()
                        || x["status"]
                            .as_object()
                            .is_some_and(|o| o.contains_key("Done"))
                })
        })
    });
    let total = t.elapsed();
    let _ = daemon.kill();
    let _ = daemon.wait();
    let rate = n as f64 / total.as_secs_f64();
    println!(
        "pueue throughput: {n} tasks `true`, group default --parallel 8, CLI adds {parallel} at a time: \
         submitted in {:.2} s, all done in {:.2} s => {rate:.0} jobs/s",
        submit.as_secs_f64(),
        total.as_secs_f64()
    );
    Some(rate)
}

/// What starting one process costs on this machine right now (the floor under every
/// figure here: each job is a CLI submit, a supervisor and the command).
fn exec_baseline() {
    let t = Instant::now();
    for _ in 0..200 {
        Command::new("true").status().unwrap();
    }
    let true_ms = t.elapsed().as_secs_f64() * 1000.0 / 200.0;
    let t = Instant::now();
    for _ in 0..200 {
        Command::new(bin())
            .args(["jobs", "--state", "/nonexistent"])
            .stderr(Stdio::null())
            .status()
            .unwrap();
    }
    let cli_ms = t.elapsed().as_secs_f64() * 1000.0 / 200.0;
    println!(
        "baseline: start+wait `true` {true_ms:.2} ms, a `shareq` CLI call that fails at once {cli_ms:.2} ms"
    );
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let short = std::env::var_os("SHORT").is_some();
    exec_baseline();
    let n = env_num("JOBS", if short { 100 } else { 1000 });
    let parallel = env_num("PARALLEL", 8);
    let floor = throughput_floor(n, parallel, true);
    let bare = throughput_floor(n, parallel, false);
    let ours = throughput(n, parallel);
    println!("ratio shareq/floor throughput: {:.2}x", ours / floor);
    println!(
        "ratio shareq/floor without a supervisor process: {:.2}x",
        ours / bare
    );
    socket_throughput(n);
    let samples = env_num("SAMPLES", if short { 20 } else { 200 });
    let floor_p99 = latency_floor(samples);
    let p99 = latency(samples);
    println!("ratio shareq/floor latency p99: {:.2}x", p99 / floor_p99);
    if short {
        return;
    }
    if let Some(theirs) = pueue(n, parallel) {
        println!("ratio shareq/pueue: {:.2}x", ours / theirs);
    }
}
