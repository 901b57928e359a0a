//! Store figures for docs/PERFORMANCE.md: durable submits per second (each committed on
//! its own, and batched as a busy runtime commits them), and recovery time with 100,000
//! jobs in history. Run: `cargo bench --bench store`.

use shareq::config::{parse_documents, validate};
use shareq::model::UnitCapacity;
use shareq::model::{JobId, JobSpec};
use shareq::sched::{Clock, Sched};
use shareq::store::{Durability, Observed, Store, recovery};
use std::time::Instant;

fn config(gpus: u32) -> String {
    format!(
        "kind: ServiceEnvironment
name: bench
capacityLimits: [{{capacityUnit: gpu, maxCapacity: {gpus}, devices: {{fake: {gpus}}}}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{{capacityUnit: gpu, maxCapacity: {gpus}}}]
resourceSharingConfiguration: {{strategy: LEND}}
"
    )
}

fn sched(gpus: u32) -> Sched {
    let c = validate(parse_documents(&config(gpus), None).expect("parse")).expect("valid");
    Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall)
}

fn spec(i: u64) -> JobSpec {
    let mut s = JobSpec::new(&format!("train-{i}"), "a", 1, (i % 10) as u32);
    s.command = Some(shareq::model::Command::Argv(vec![
        "python".into(),
        "train.py".into(),
        format!("--seed={i}"),
    ]));
    s
}

/// Submits of `per_batch` jobs per transaction, each batch with its pass, as the runtime
/// records them. Returns submits per second.
fn submits(total: u64, per_batch: u64, durability: Durability) -> f64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open_with(dir.path(), durability).expect("open");
    let mut s = sched(8);
    let t0 = Instant::now();
    let mut i = 0;
    while i < total {
        for _ in 0..per_batch {
            s.submit(spec(i), i as i64).expect("submit");
            i += 1;
        }
        s.pass(i as i64);
        let events = s.take_events();
        store.record_events(i as i64, &events, &s).expect("record");
    }
    total as f64 / t0.elapsed().as_secs_f64()
}

/// A database with `finished` jobs in history and `queued` jobs waiting.
fn populate(dir: &std::path::Path, finished: u64, queued: u64) {
    let mut store = Store::open(dir).expect("open");
    let mut s = sched(1000);
    let mut now = 0;
    let mut left = finished;
    while left > 0 {
        let n = left.min(1000);
        let ids: Vec<JobId> = (0..n)
            .map(|k| s.submit(spec(k), now).expect("submit"))
            .collect();
        s.pass(now);
        store
            .record_events(now, &s.take_events(), &s)
            .expect("record");
        now += 1000;
        let exits: Vec<Observed> = ids
            .iter()
            .map(|&job| Observed::Exited { job, code: 0 })
            .collect();
        for o in &exits {
            o.apply(&mut s, now);
        }
        s.pass(now);
        store
            .record(now, &exits, &s.take_events(), &s)
            .expect("record");
        for id in ids {
            s.forget(id);
        }
        left -= n;
    }
    // Fill the GPUs, then queue the rest.
    let mut left = queued + 1000;
    while left > 0 {
        let n = left.min(1000);
        for k in 0..n {
            s.submit(spec(k), now).expect("submit");
        }
        s.pass(now);
        store
            .record_events(now, &s.take_events(), &s)
            .expect("record");
        left -= n;
    }
}

/// Open, check (SQLite's integrity check, foreign run files), load, plan and restore into
/// a fresh scheduler: a restart's work before its first pass. Returns seconds.
fn recovery_time(dir: &std::path::Path) -> (f64, usize) {
    let t0 = Instant::now();
    let mut store = Store::open(dir).expect("open");
    let t1 = Instant::now();
    store.integrity_check().expect("integrity");
    let checked = t1.elapsed().as_secs_f64();
    store
        .set_aside_foreign_files(dir, 1 << 40)
        .expect("set aside");
    println!("  integrity check: {:.0} ms", checked * 1000.0);
    let rec = store.load().expect("load");
    let plan = recovery::plan(dir, &rec);
    let mut s = sched(1000);
    plan.apply(&mut store, &mut s, 1 << 40).expect("apply");
    (t0.elapsed().as_secs_f64(), rec.jobs.len())
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this too: keep it short then.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n = if quick { 200 } else { 10_000 };
    for d in [Durability::Full, Durability::Normal] {
        println!("store: durable submits (record + pass), WAL, {d:?}");
        println!("  1 per commit:    {:>8.0} submits/s", submits(n, 1, d));
        println!(
            "  10 per commit:   {:>8.0} submits/s",
            submits(n * 3, 10, d)
        );
        println!(
            "  100 per commit:  {:>8.0} submits/s",
            submits(n * 10, 100, d)
        );
    }
    for (finished, queued) in [(100_000, 1_000), (0, 100_000)] {
        let (finished, queued) = if quick {
            (finished / 100, queued / 100)
        } else {
            (finished, queued)
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let t0 = Instant::now();
        populate(dir.path(), finished, queued);
        let built = t0.elapsed().as_secs_f64();
        let (secs, active) = recovery_time(dir.path());
        println!(
            "store: recovery with {finished} finished + {queued} queued jobs (+1000 holding): \
             {:.0} ms ({active} jobs restored; building the db took {built:.1} s)",
            secs * 1000.0
        );
    }
}
