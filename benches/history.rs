//! Utilisation history figures for docs/PERFORMANCE.md: the sampler's cost per interval
//! (building the samples from a snapshot with a 100,000-job queue, and committing them),
//! the database after 8 days of samples, and reading an hour, a day and a week back.
//! Run: `cargo bench --bench history` (`cargo test --benches` runs a 1/100 version).

use rusqlite::Connection;
use shareq::snapshot::usage::{KEEP_DAYS, Window};
use shareq::store::usage::{self, Sample};
use std::time::Instant;

// The console's sample snapshots: test data, shared with the integration tests.
#[path = "../tests/it/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

const EVERY_MS: i64 = 30_000;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let scale = if full { 1 } else { 100 };

    // Building one interval's samples: one pass over the queue for the queued GPUs.
    let snap = fixtures::with_queue_len(&fixtures::lab(), 100_000 / scale);
    let t = Instant::now();
    let n = 20;
    for _ in 0..n {
        std::hint::black_box(shareq::server::runtime::usage::samples(
            &snap,
            snap.at - EVERY_MS,
            snap.at,
        ));
    }
    println!(
        "samples from a snapshot with {} queued jobs: {:.2} ms",
        snap.queue.len(),
        t.elapsed().as_secs_f64() * 1000.0 / f64::from(n)
    );

    // Eight days at 30 s of 5 shares on 4 units, every share busy: 20 rows per tick.
    let dir = tempfile::tempdir().expect("tempdir");
    drop(shareq::store::Store::open(dir.path()).expect("open"));
    let db = dir.path().join(shareq::store::DB_FILE);
    let mut conn = Connection::open(&db).expect("open");
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    let ticks = KEEP_DAYS * 24 * 3600 * 1000 / EVERY_MS / scale as i64;
    let now = fixtures::NOW;
    let start = now - ticks * EVERY_MS;
    let t = Instant::now();
    for i in 0..ticks {
        let at = start + i * EVERY_MS;
        let rows: Vec<Sample> = (0..20)
            .map(|k| Sample {
                share: format!("team-{}", k % 5),
                unit: format!("unit-{}", k / 5),
                limit: 2,
                own: 1 + (i as u32 + k) % 2,
                borrowed: (i as u32 / 7 + k) % 3,
                lent: (k + 1) % 2,
                queued_jobs: 3,
                queued_gpus: 4,
                wait_max_ms: (i % 40) * 60_000,
                started: u32::from(i % 5 == 0),
                started_wait_ms: 30_000,
                slice_gib: None,
            })
            .collect();
        usage::write(&mut conn, at, EVERY_MS, &rows).expect("write");
    }
    let per = t.elapsed().as_secs_f64() * 1000.0 / ticks as f64;
    let size = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0)
        + std::fs::metadata(db.with_extension("db-wal")).map_or(0, |m| m.len());
    println!(
        "write one interval (20 rows, one commit): {per:.3} ms; {ticks} intervals = {:.1} MB",
        size as f64 / 1e6
    );
    for w in Window::ALL {
        let t = Instant::now();
        let h = usage::read_file(&db, w, now).expect("read");
        println!(
            "read the last {}: {:.1} ms ({} series, {} samples)",
            w.label(),
            t.elapsed().as_secs_f64() * 1000.0,
            h.series.len(),
            h.samples.iter().sum::<u32>()
        );
    }
    let t = Instant::now();
    let pruned = usage::prune(&conn, now + 24 * 3_600_000).expect("prune");
    println!(
        "prune one day ({pruned} rows): {:.1} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
}
