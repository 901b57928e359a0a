//! Issue 16's costs: a `/metrics` scrape on a deep queue (the gauges are read from the
//! published snapshot and the queued GPUs summed over its queue, on the scrape's thread,
//! never on the runtime), and building the decision lines a batch records.
//!
//! Run: `cargo bench --bench observe` (`QUEUED=N`, default 100,000; `cargo test
//! --benches` runs a 1/100 version).

use shareq::config::load_dir;
use shareq::metrics::Metrics;
use shareq::model::JobSpec;
use shareq::model::UnitCapacity;
use shareq::sched::{Clock, Sched};
use shareq::snapshot::{ConfigStatus, Picture};
use std::sync::Arc;
use std::time::Instant;

fn env_num(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let queued = env_num("QUEUED", if full { 100_000 } else { 1_000 });
    let dir = tempfile::tempdir().unwrap();
    let mut y = String::from(
        "kind: ServiceEnvironment\nname: bench\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 8, devices: {fake: 8}}\n",
    );
    let shares = ["a", "b", "c", "d"];
    for s in shares {
        y.push_str(&format!(
            "---\nkind: QuotaShare\nquotaShareName: {s}\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 2}}]\nresourceSharingConfiguration: {{strategy: LEND_AND_BORROW}}\n"
        ));
    }
    std::fs::write(dir.path().join("bench.yaml"), y).unwrap();
    let loaded = load_dir(dir.path()).unwrap();
    let cfg = &loaded.config;
    let mut sched = Sched::new(cfg, &UnitCapacity::simulated(cfg), Clock::Wall);
    let t0 = Instant::now();
    for i in 0..queued + 8 {
        let mut spec = JobSpec::new("job", shares[i % 4], 1 + (i % 2) as u32, (i % 7) as u32);
        spec.command = Some(shareq::model::Command::Shell("true".into()));
        sched.submit(spec, i as i64).unwrap();
    }
    sched.pass(queued as i64);
    let events = sched.take_events();
    let built = t0.elapsed();

    // Building the stream lines of one batch (what `Store::record` adds per decision).
    let t = Instant::now();
    let lines = shareq::events::lines(queued as i64, &events, &sched);
    let per_line = t.elapsed().as_secs_f64() / lines.len().max(1) as f64;

    let mut picture = Picture::new();
    picture.rebuild(&sched);
    let config = ConfigStatus {
        source: "bench".into(),
        applied_at: Some(0),
        hash: None,
        error: None,
        error_at: None,
        effects: None,
    };
    let snap = picture.publish(&sched, queued as i64, config, &Default::default());
    assert!(
        snap.queue.len() >= queued - 8,
        "{} queued",
        snap.queue.len()
    );
    let (_tx, rx) = tokio::sync::watch::channel(Arc::new(snap));
    let metrics = Metrics::new();
    metrics.watch(rx);
    metrics.observe(queued as i64, &events, &sched);
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..if full { 50 } else { 5 } {
        let t = Instant::now();
        let text = metrics.encode();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        size = text.len();
    }
    println!(
        "observe: {queued} queued (built in {:.1} s): /metrics encode p50 {:.2} ms, p99 {:.2} ms, {size} bytes",
        built.as_secs_f64(),
        pct(&mut times.clone(), 0.5),
        pct(&mut times, 0.99),
    );
    println!(
        "observe: decision lines: {} built, {:.2} µs each",
        lines.len(),
        per_line * 1e6
    );
}
