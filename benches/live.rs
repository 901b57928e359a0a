//! The live server at scale (issue 12), with the real `shareq serve` on 8 fake GPUs:
//! 1. 8 GPUs held by jobs that wait on a FIFO each, so the bench frees one GPU when it
//!    chooses;
//! 2. GPU-free → the next job's first instruction, with an empty queue: the next job is
//!    `sh -c 'date +%s%N; read x < FIFO'` at high priority, the bench writes the FIFO of
//!    the oldest holder and reads the new job's log for the instant its `date` ran;
//! 3. `status` and `jobs --json` latency over the socket (JOBS_ASKS answers at the full
//!    queue, then serve's RSS);
//! 4. QUEUED (default 100,000) low-priority jobs submitted over one socket connection,
//!    pipelined, the submit rate measured per tenth of the queue; serve's RSS;
//! 5. 2 and 3 again with the full queue, then serve's CPU over IDLE_SECS with nothing
//!    changing (run once more with `SHAREQ_ESTIMATES=off` to see what estimates cost);
//! 6. the scheduler changing 200 times a second (priority changes of queued jobs) for
//!    CHURN_SECS: serve's CPU without a console, then with an attached console (the
//!    real `remote::attach` delta stream, and the console's own `set_snapshot`, `draw`
//!    and key handling on a 160×48 `TestBackend`, a key drawn at once and everything
//!    else at most one frame per 33 ms as in `tui::drive`): frame time, key → screen,
//!    and serve's CPU again.
//!
//! 7. arrays (SPEC §13): on two fresh servers with 8 GPUs held, ARRAY (default 10,000)
//!    single jobs submitted (pipelined) against one ARRAY-child array submitted in one
//!    request (one transaction): submit time, serve CPU and RSS, the GPU-free → start
//!    latency (one pass) with each queued, and `jobs` on each.
//!
//! Run: `cargo bench --bench live` (`QUEUED=N`, `SAMPLES=N`, `CHURN_SECS=N`, `ARRAY=N`,
//! `IDLE_SECS=N`; `SHAREQ_BIN=PATH` runs another build of `shareq`, to compare two side by
//! side).
//! Fair share (SPEC §12): `LIVE_USERS=50` (as root) submits the queue as 50 real users
//! made with `useradd` (removed afterwards), each through its own connection, and
//! `LIVE_FAIR=1` gives the share `fairShare`; compare the two runs' figures.
//! `cargo test --benches` runs a small version.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;
use shareq::exec::StateDir;
use shareq::tui::{draw, input};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

// The console's sample snapshots: test data, shared with the integration tests.
#[path = "../tests/it/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

const BIN: &str = env!("CARGO_BIN_EXE_shareq");

/// The `shareq` under test: `SHAREQ_BIN` when set (to compare two builds side by side in
/// one run), else the one Cargo built with this bench.
fn bin() -> String {
    std::env::var("SHAREQ_BIN").unwrap_or_else(|_| BIN.to_string())
}
const GPUS: usize = 8;

fn env_num(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128
}

struct Serve {
    child: Child,
    state: PathBuf,
}

impl Serve {
    fn start(root: &Path, policy: &str) -> Serve {
        let cfg = root.join("config");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(
            cfg.join("c.yaml"),
            format!(
                "kind: ServiceEnvironment
name: live-bench
capacityLimits: [{{capacityUnit: gpu, maxCapacity: {GPUS}, devices: {{fake: {GPUS}}}}}]
preemption: {{gracePeriodSeconds: 1}}
limits: {{maxQueuedJobsPerUser: 1000000}}
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{{capacityUnit: gpu, maxCapacity: {GPUS}}}]
resourceSharingConfiguration: {{strategy: LEND}}
{policy}
"
            ),
        )
        .unwrap();
        let state = root.join("state");
        let child = Command::new(bin())
            .args(["serve", "--stop-jobs-on-exit", "--config"])
            .arg(&cfg)
            .arg("--state")
            .arg(&state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(root.join("serve.err")).unwrap())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while UnixStream::connect(state.join("shareq.sock")).is_err() {
            assert!(t.elapsed() < Duration::from_secs(30), "serve did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Serve { child, state }
    }

    fn connect(&self) -> Conn {
        let s = UnixStream::connect(self.state.join("shareq.sock")).unwrap();
        Conn {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        }
    }

    /// CPU ticks (1/100 s) serve has used, user + system.
    fn cpu_ticks(&self) -> u64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        n(11) + n(12)
    }

    /// (VmRSS, VmHWM) in MB.
    fn rss_mb(&self) -> (f64, f64) {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let kb = |k: &str| {
            s.lines()
                .find(|l| l.starts_with(k))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (kb("VmRSS:") / 1024.0, kb("VmHWM:") / 1024.0)
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

struct Conn {
    w: UnixStream,
    r: BufReader<UnixStream>,
}

impl Conn {
    fn ask_raw(&mut self, req: &str) -> String {
        self.w.write_all(req.as_bytes()).unwrap();
        self.w.write_all(b"\n").unwrap();
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        line
    }

    fn ask(&mut self, req: &str) -> Value {
        serde_json::from_str(&self.ask_raw(req)).unwrap()
    }

    fn submit(&mut self, name: &str, priority: u32, argv: &[&str]) -> u64 {
        let job = serde_json::json!({
            "jobName": name, "quotaShareName": "a", "quantity": 1,
            "schedulingPriority": priority, "command": argv,
        });
        let a = self.ask(&serde_json::json!({"op": "submit", "job": job}).to_string());
        a["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("submit refused: {a}"))
    }
}

fn mkfifo(p: &Path) {
    let ok = Command::new("mkfifo").arg(p).status().unwrap().success();
    assert!(ok, "mkfifo {}", p.display());
}

/// The jobs holding the GPUs, oldest first: each waits on its FIFO.
struct Holders {
    dir: PathBuf,
    fifos: VecDeque<PathBuf>,
    seq: usize,
}

impl Holders {
    fn next_fifo(&mut self) -> PathBuf {
        self.seq += 1;
        let f = self.dir.join(format!("f-{}", self.seq));
        mkfifo(&f);
        f
    }

    fn hold(&mut self, conn: &mut Conn, first: bool) -> (u64, PathBuf) {
        let f = self.next_fifo();
        let script = if first {
            format!("read x < {}", f.display())
        } else {
            format!("date +%s%N; read x < {}", f.display())
        };
        let id = conn.submit(&format!("hold-{}", self.seq), 100, &["sh", "-c", &script]);
        (id, f)
    }

    /// Free the oldest holder's GPU.
    fn release_oldest(&mut self) {
        let f = self.fifos.pop_front().expect("a holder");
        let mut w = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        w.write_all(b"\n").unwrap();
    }
}

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(secs), "timed out: {what}");
        std::thread::sleep(Duration::from_micros(300));
    }
}

/// GPU-free → the next job's first instruction, `samples` times (ms).
fn start_latency(
    serve: &Serve,
    conn: &mut Conn,
    holders: &mut Holders,
    samples: usize,
) -> Vec<f64> {
    let mut out = Vec::new();
    for _ in 0..samples {
        let (id, fifo) = holders.hold(conn, false);
        let log = serve.state.join(format!("logs/{id}/1.log"));
        // Let the submit's publish settle: the sample starts from a quiet scheduler.
        std::thread::sleep(Duration::from_millis(30));
        let t0 = now_ns();
        holders.release_oldest();
        let mut started: Option<i128> = None;
        wait_until("the next job's first instruction", 60, || {
            started = std::fs::read_to_string(&log)
                .ok()
                .and_then(|s| s.lines().next().and_then(|l| l.trim().parse().ok()));
            started.is_some()
        });
        out.push((started.unwrap() - t0) as f64 / 1e6);
        holders.fifos.push_back(fifo);
    }
    out
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() as f64 - 1.0) * p).round() as usize]
}

fn timed(conn: &mut Conn, req: &str, n: usize) -> (Vec<f64>, usize) {
    let mut out = Vec::new();
    let mut bytes = 0;
    for _ in 0..n {
        let t = Instant::now();
        let a = conn.ask_raw(req);
        out.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(a.starts_with("{\"ok\":true"), "{}", &a[..a.len().min(200)]);
        bytes = a.len();
    }
    (out, bytes)
}

/// Test users made with `useradd`, removed on drop.
struct BenchUsers(Vec<String>);

impl BenchUsers {
    fn create(n: usize) -> BenchUsers {
        let mut u = BenchUsers(Vec::new());
        for k in 0..n {
            let name = format!("sqb{}u{k}", std::process::id() % 100_000);
            let ok = Command::new("useradd")
                .args(["-M", "-N", "-s", "/bin/sh", "-d", "/nonexistent"])
                .arg(&name)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "useradd {name} (LIVE_USERS needs root)");
            u.0.push(name);
        }
        u
    }
}

impl Drop for BenchUsers {
    fn drop(&mut self) {
        for u in &self.0 {
            let _ = Command::new("pkill").args(["-KILL", "-u", u]).status();
            let _ = Command::new("userdel")
                .arg(u)
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Pipes its standard input to the socket and `n` answers back, as the user it runs as.
const RELAY: &str = r#"
import socket, sys, threading
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
f = s.makefile('rwb')
def w():
    for line in sys.stdin.buffer:
        f.write(line)
    f.flush()
t = threading.Thread(target=w); t.start()
out = sys.stdout.buffer
for _ in range(int(sys.argv[2])):
    out.write(f.readline())
out.flush()
"#;

/// Submit `n` queued jobs as `users` (round-robin, one connection each, pipelined
/// through a relay run as the user); the rate of each tenth (by answers) and the ids.
fn fill_as(serve: &Serve, n: usize, users: &[String]) -> (Vec<f64>, Vec<u64>) {
    let sock = serve.state.join("shareq.sock");
    let per = n / users.len();
    let (tx, rx) = std::sync::mpsc::channel::<u64>();
    let mut children = Vec::new();
    for (k, u) in users.iter().enumerate() {
        let mut child = Command::new("runuser")
            .args(["-u", u, "--", "python3", "-c", RELAY])
            .arg(&sock)
            .arg(per.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("runuser python3");
        let mut stdin = BufWriter::new(child.stdin.take().unwrap());
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for i in 0..per {
                writeln!(
                    stdin,
                    r#"{{"op":"submit","job":{{"jobName":"queued-{k}-{i}","quotaShareName":"a","quantity":1,"command":"true"}}}}"#
                )
                .unwrap();
            }
            stdin.flush().unwrap();
        });
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let line = line.unwrap();
                let a: Value = serde_json::from_str(&line).unwrap();
                let id = a["id"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("refused: {line}"));
                tx.send(id).unwrap();
            }
        });
        children.push(child);
    }
    drop(tx);
    let total = per * users.len();
    let tenth = (total / 10).max(1);
    let (mut rates, mut ids) = (Vec::new(), Vec::with_capacity(total));
    let mut t = Instant::now();
    for id in rx {
        ids.push(id);
        if ids.len() % tenth == 0 {
            rates.push(tenth as f64 / t.elapsed().as_secs_f64());
            t = Instant::now();
        }
    }
    for mut c in children {
        let _ = c.wait();
    }
    assert_eq!(ids.len(), total, "every submit answered");
    (rates, ids)
}

/// Submit `n` queued jobs over one connection, pipelined; the rate of each tenth and the ids.
fn fill(serve: &Serve, n: usize) -> (Vec<f64>, Vec<u64>) {
    let s = UnixStream::connect(serve.state.join("shareq.sock")).unwrap();
    let w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let mut w = BufWriter::with_capacity(1 << 16, w);
        for i in 0..n {
            writeln!(
                w,
                r#"{{"op":"submit","job":{{"jobName":"queued-{i}","quotaShareName":"a","quantity":1,"command":"true"}}}}"#
            )
            .unwrap();
        }
        w.flush().unwrap();
    });
    let mut r = BufReader::with_capacity(1 << 16, s);
    let tenth = (n / 10).max(1);
    let mut rates = Vec::new();
    let mut ids = Vec::with_capacity(n);
    let mut t = Instant::now();
    let mut line = String::new();
    for i in 1..=n {
        line.clear();
        r.read_line(&mut line).unwrap();
        let a: Value = serde_json::from_str(&line).unwrap();
        ids.push(
            a["id"]
                .as_u64()
                .unwrap_or_else(|| panic!("refused: {line}")),
        );
        if i % tenth == 0 {
            rates.push(tenth as f64 / t.elapsed().as_secs_f64());
            t = Instant::now();
        }
    }
    writer.join().unwrap();
    (rates, ids)
}

/// Change the priority of queued jobs `per_sec` times a second until `stop`.
fn churn(
    serve: &Serve,
    ids: Vec<u64>,
    per_sec: u64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    let mut conn = serve.connect();
    std::thread::spawn(move || {
        let every = Duration::from_nanos(1_000_000_000 / per_sec);
        let mut next = Instant::now();
        let mut n = 0usize;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let id = ids[(n * 7919) % ids.len()];
            let a = conn.ask(&format!(
                r#"{{"op":"priority","id":{id},"priority":{}}}"#,
                1 + n % 3
            ));
            assert_eq!(a["ok"], true, "{a}");
            n += 1;
            next += every;
            if let Some(d) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
        }
        n
    })
}

#[derive(Default)]
struct ConsoleFigures {
    frames: Vec<f64>,
    take_in: Vec<f64>,
    key_to_screen: Vec<f64>,
    updates: usize,
}

/// An attached console for `secs`: the real delta stream, the console's own take-in,
/// draw and key handling, one frame per 33 ms at most, a key every ~100 ms.
fn console(state: &Path, secs: f64) -> ConsoleFigures {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let state = StateDir::new(state);
    rt.block_on(async move {
        const FRAME: Duration = Duration::from_millis(33);
        let (mut snaps, _inputs) = shareq::server::client::remote::attach(&state)
            .await
            .unwrap();
        let first = snaps.borrow_and_update().clone();
        let mut app = fixtures::app((*first).clone());
        let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
        let mut fig = ConsoleFigures::default();
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let mut keys = tokio::time::interval(Duration::from_millis(97));
        let mut key_at: Option<Instant> = None;
        let (mut dirty, mut pending) = (true, false);
        let mut last_draw = Instant::now() - FRAME;
        let mut n = 0u64;
        while Instant::now() < end {
            // As `tui::drive`: a key is drawn at once, the rest at the frame pace.
            if dirty && (key_at.is_some() || last_draw.elapsed() >= FRAME) {
                if pending {
                    let t = Instant::now();
                    app.set_snapshot(snaps.borrow_and_update().clone());
                    fig.take_in.push(t.elapsed().as_secs_f64() * 1e3);
                    pending = false;
                }
                app.now = shareq::exec::now_ms();
                let t = Instant::now();
                term.draw(|f| draw::draw(f, &mut app)).unwrap();
                fig.frames.push(t.elapsed().as_secs_f64() * 1e3);
                if let Some(k) = key_at.take() {
                    fig.key_to_screen.push(k.elapsed().as_secs_f64() * 1e3);
                }
                dirty = false;
                last_draw = Instant::now();
            }
            let wait = FRAME.saturating_sub(last_draw.elapsed());
            tokio::select! {
                changed = snaps.changed() => {
                    if changed.is_err() { break; }
                    fig.updates += 1;
                    pending = true;
                    dirty = true;
                }
                _ = keys.tick() => {
                    n += 1;
                    let k = if n % 40 < 20 { 'j' } else { 'k' };
                    key_at.get_or_insert_with(Instant::now);
                    input::on_key(&mut app, KeyEvent::new(KeyCode::Char(k), KeyModifiers::NONE));
                    dirty = true;
                }
                _ = tokio::time::sleep(wait), if dirty => {}
            }
        }
        fig
    })
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let queued = env_num("QUEUED", if full { 100_000 } else { 1_000 });
    let samples = env_num("SAMPLES", if full { 15 } else { 3 });
    let churn_secs = env_num("CHURN_SECS", if full { 8 } else { 1 }) as f64;
    let idle_secs = env_num("IDLE_SECS", if full { 30 } else { 1 }) as f64;
    let jobs_asks = env_num("JOBS_ASKS", if full { 10 } else { 3 });
    let nusers = env_num("LIVE_USERS", 0);
    let fair = env_num("LIVE_FAIR", 0) == 1;
    let policy = if fair {
        "fairShare: {halfLifeSeconds: 3600}"
    } else {
        ""
    };
    let users = (nusers > 0).then(|| BenchUsers::create(nusers));
    let root = tempfile::tempdir().unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        // The test users reach the socket through it.
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    }
    let serve = Serve::start(root.path(), policy);
    let mut conn = serve.connect();
    let fifo_dir = root.path().join("fifos");
    std::fs::create_dir_all(&fifo_dir).unwrap();
    let mut holders = Holders {
        dir: fifo_dir,
        fifos: VecDeque::new(),
        seq: 0,
    };
    for _ in 0..GPUS {
        let (_, f) = holders.hold(&mut conn, true);
        holders.fifos.push_back(f);
    }
    wait_until("8 GPUs busy", 60, || {
        conn.ask(r#"{"op":"status"}"#)["status"]["running"].as_u64() == Some(GPUS as u64)
    });
    std::thread::sleep(Duration::from_millis(300));

    println!(
        "live server bench: {GPUS} fake GPUs busy, {queued} jobs to queue{}{}",
        if nusers > 0 {
            format!(" as {nusers} users")
        } else {
            String::new()
        },
        if fair { ", share with fairShare" } else { "" }
    );
    let empty = start_latency(&serve, &mut conn, &mut holders, samples);
    let (status_empty, _) = timed(&mut conn, r#"{"op":"status"}"#, 20);
    let (jobs_empty, _) = timed(&mut conn, r#"{"op":"jobs"}"#, 3);
    let (rss0, _) = serve.rss_mb();

    let cpu0 = serve.cpu_ticks();
    let t_fill = Instant::now();
    let (rates, ids) = match &users {
        Some(u) => fill_as(&serve, queued, &u.0),
        None => fill(&serve, queued),
    };
    let queued = ids.len();
    let fill_secs = t_fill.elapsed().as_secs_f64();
    let fill_cpu = (serve.cpu_ticks() - cpu0) as f64 / 100.0;
    std::thread::sleep(Duration::from_millis(200));
    let (rss_full, hwm_full) = serve.rss_mb();
    let st = conn.ask(r#"{"op":"status"}"#);
    assert_eq!(
        st["status"]["queued"].as_u64(),
        Some(queued as u64),
        "all queued"
    );

    let loaded = start_latency(&serve, &mut conn, &mut holders, samples);
    let (status_full, _) = timed(&mut conn, r#"{"op":"status"}"#, 20);
    let (jobs_full, jobs_bytes) = timed(&mut conn, r#"{"op":"jobs"}"#, jobs_asks);
    let (rss_jobs, _) = serve.rss_mb();
    // Idle with the full queue: nothing changes for IDLE_SECS, from 10 s after the last
    // change (time for the start estimate of the changed queue: a quiet second, the 5 s
    // timer, the forecast itself); compare a run with `SHAREQ_ESTIMATES=off`.
    std::thread::sleep(Duration::from_secs(10));
    let ci = serve.cpu_ticks();
    std::thread::sleep(Duration::from_secs_f64(idle_secs));
    let cpu_idle = (serve.cpu_ticks() - ci) as f64 / 100.0;

    // Churn: 200 changes a second, without and then with an attached console.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churner = churn(&serve, ids, 200, stop.clone());
    std::thread::sleep(Duration::from_millis(500));
    let c0 = serve.cpu_ticks();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(churn_secs));
    let cpu_alone = (serve.cpu_ticks() - c0) as f64 / 100.0 / t0.elapsed().as_secs_f64();
    let c1 = serve.cpu_ticks();
    let t1 = Instant::now();
    let fig = console(&serve.state, churn_secs);
    let cpu_console = (serve.cpu_ticks() - c1) as f64 / 100.0 / t1.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let changes = churner.join().unwrap();
    let (rss_end, hwm_end) = serve.rss_mb();

    let ms = |v: &[f64]| {
        format!(
            "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            pct(v, 0.5),
            pct(v, 0.99),
            pct(v, 1.0)
        )
    };
    println!("submit over one socket (pipelined), per tenth of {queued} queued (jobs/s):");
    println!(
        "  {}",
        rates
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join("  ")
    );
    println!(
        "  all {queued} in {fill_secs:.2} s ({:.0}/s), serve CPU {fill_cpu:.2} s",
        queued as f64 / fill_secs
    );
    println!(
        "GPU-free -> next job's first instruction, empty queue: {}",
        ms(&empty)
    );
    println!(
        "GPU-free -> next job's first instruction, {queued} queued: {}",
        ms(&loaded)
    );
    println!("status, empty queue: {}", ms(&status_empty));
    println!("status, {queued} queued: {}", ms(&status_full));
    println!("jobs --json, empty queue: {}", ms(&jobs_empty));
    println!(
        "jobs --json, {queued} queued ({:.1} MB): {}",
        jobs_bytes as f64 / 1e6,
        ms(&jobs_full)
    );
    println!(
        "serve CPU idle for {idle_secs:.0} s at {queued} queued: {cpu_idle:.2} s (estimates {})",
        if std::env::var("SHAREQ_ESTIMATES").is_ok_and(|v| v == "off") {
            "off"
        } else {
            "on"
        }
    );
    println!("serve RSS after {jobs_asks} jobs answers at {queued} queued: {rss_jobs:.1} MB");
    println!(
        "serve RSS: {rss0:.1} MB before the queue, {rss_full:.1} MB at {queued} queued (peak {hwm_full:.1} MB), {rss_end:.1} MB after the console (peak {hwm_end:.1} MB)"
    );
    println!(
        "churn: {changes} priority changes ({:.0}/s); serve CPU {:.1} % alone, {:.1} % with an attached console",
        changes as f64 / (2.0 * churn_secs + 0.5),
        cpu_alone * 100.0,
        cpu_console * 100.0
    );
    println!(
        "console while churning: {} updates taken in; frame (draw) {}; take-in (set_snapshot) {}; key -> screen {}",
        fig.updates,
        ms(&fig.frames),
        ms(&fig.take_in),
        ms(&fig.key_to_screen)
    );
    let check = |name: &str, ok: bool| println!("  [{}] {name}", if ok { "met" } else { "MISSED" });
    println!("targets:");
    let (first, last) = (rates[0], rates[rates.len() - 1]);
    check(
        &format!("last tenth {last:.0}/s >= half the first ({first:.0}/s) and >= 5,000/s"),
        last >= first / 2.0 && last >= 5_000.0,
    );
    let (e, l) = (pct(&empty, 0.5), pct(&loaded, 0.5));
    check(
        &format!("start at {queued} queued ({l:.2} ms) within 1.5x empty ({e:.2} ms)"),
        l <= 1.5 * e,
    );
    let s99 = pct(&status_full, 0.99);
    check(
        &format!("status < 50 ms at {queued} queued (p99 {s99:.2} ms)"),
        s99 < 50.0,
    );
    check(
        &format!("serve RSS < 500 MB ({hwm_end:.1} MB peak)"),
        hwm_end < 500.0,
    );
    let added = (cpu_console - cpu_alone) * 100.0;
    check(
        &format!("an attached console adds < 10 % server CPU ({added:.1} points)"),
        added < 10.0,
    );
    let f50 = pct(&fig.frames, 0.5);
    check(
        &format!("console frame < 2 ms median ({f50:.2} ms)"),
        f50 < 2.0,
    );
    let k99 = if fig.key_to_screen.is_empty() {
        f64::NAN
    } else {
        pct(&fig.key_to_screen, 0.99)
    };
    check(
        &format!("key -> screen < 50 ms p99 ({k99:.2} ms)"),
        k99 < 50.0,
    );
    let _ = std::fs::remove_dir_all(root.path().join("fifos"));
    drop(serve);
    let n = env_num("ARRAY", if full { 10_000 } else { 200 });
    arrays(root.path(), n, samples);
}

/// What one way of queueing `n` jobs cost a fresh server with its 8 GPUs held.
struct Queued {
    submit_ms: f64,
    cpu_s: f64,
    rss: (f64, f64),
    rss_after: (f64, f64),
    start: Vec<f64>,
    jobs: Vec<f64>,
    jobs_bytes: usize,
}

/// Step 7: `n` single jobs against one `n`-child array (SPEC §13), each on a fresh server.
fn arrays(root: &Path, n: usize, samples: usize) {
    let run = |dir: &str, array: bool| -> Queued {
        let root = root.join(dir);
        let serve = Serve::start(&root, "");
        let mut conn = serve.connect();
        let fifo_dir = root.join("fifos");
        std::fs::create_dir_all(&fifo_dir).unwrap();
        let mut holders = Holders {
            dir: fifo_dir,
            fifos: VecDeque::new(),
            seq: 0,
        };
        for _ in 0..GPUS {
            let (_, f) = holders.hold(&mut conn, true);
            holders.fifos.push_back(f);
        }
        wait_until("8 GPUs busy", 60, || {
            conn.ask(r#"{"op":"status"}"#)["status"]["running"].as_u64() == Some(GPUS as u64)
        });
        std::thread::sleep(Duration::from_millis(300));
        let rss = serve.rss_mb();
        let cpu0 = serve.cpu_ticks();
        let t = Instant::now();
        if array {
            let job = serde_json::json!({
                "jobName": "sweep", "quotaShareName": "a", "quantity": 1,
                "command": "true", "arrayProperties": {"size": n},
            });
            let a = conn.ask(&serde_json::json!({"op": "submit", "job": job}).to_string());
            assert!(a["id"].as_u64().is_some(), "array refused: {a}");
        } else {
            fill(&serve, n);
        }
        let submit_ms = t.elapsed().as_secs_f64() * 1e3;
        wait_until("all queued", 60, || {
            conn.ask(r#"{"op":"status"}"#)["status"]["queued"].as_u64() == Some(n as u64)
        });
        let cpu_s = (serve.cpu_ticks() - cpu0) as f64 / 100.0;
        std::thread::sleep(Duration::from_millis(200));
        let start = start_latency(&serve, &mut conn, &mut holders, samples);
        let (jobs, jobs_bytes) = timed(&mut conn, r#"{"op":"jobs"}"#, 3);
        let rss_after = serve.rss_mb();
        let _ = std::fs::remove_dir_all(root.join("fifos"));
        Queued {
            submit_ms,
            cpu_s,
            rss,
            rss_after,
            start,
            jobs,
            jobs_bytes,
        }
    };
    let singles = run("singles", false);
    let array = run("array", true);
    let p = |v: &[f64]| format!("p50 {:.2} ms, p99 {:.2} ms", pct(v, 0.5), pct(v, 0.99));
    println!("arrays: {n} single jobs (pipelined, one socket) against one {n}-child array:");
    for (what, q) in [("singles", &singles), ("array", &array)] {
        println!(
            "  {what:<7}: submit {:.1} ms, serve CPU {:.2} s; RSS {:.1} -> {:.1} MB (peak {:.1} MB); \
             GPU-free -> start {}; jobs ({:.1} MB) {}",
            q.submit_ms,
            q.cpu_s,
            q.rss.0,
            q.rss_after.0,
            q.rss_after.1,
            p(&q.start),
            q.jobs_bytes as f64 / 1e6,
            p(&q.jobs)
        );
    }
    let (s, a) = (pct(&singles.start, 0.5), pct(&array.start, 0.5));
    println!(
        "  [{}] a pass with the array queued ({a:.2} ms) costs no more than with {n} singles ({s:.2} ms, within 1.5x)",
        if a <= 1.5 * s { "met" } else { "MISSED" }
    );
}
