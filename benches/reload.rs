//! Config hot-reload latency: from a file being written to the watcher delivering the
//! applied config, debounce included. Prints p50/p90/p99/max over many edits, for plain
//! writes and for editor-style temp-file + rename saves.
//!
//! `cargo bench --bench reload` (optionally `-- EDITS`, default 200 per kind; 10 under
//! `cargo test --benches`).

use shareq::config::{ConfigUpdate, DEBOUNCE, Watcher};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ENV: &str = "kind: ServiceEnvironment
name: bench
capacityLimits:
  - {capacityUnit: gpu, maxCapacity: 8, devices: {fake: 8}}
";

fn shares(version: usize) -> String {
    // Four shares, like the lab sample; the version changes one limit and a comment,
    // so every edit is a real change.
    let mut out = format!("# edit {version}\n");
    for (i, (name, strategy)) in [
        ("vision", "LEND_AND_BORROW"),
        ("nlp", "LEND_AND_BORROW"),
        ("interactive", "RESERVE"),
        ("students", "LEND"),
    ]
    .iter()
    .enumerate()
    {
        let cap = if i == 0 { 1 + version % 3 } else { 1 };
        out.push_str(&format!(
            "---\nkind: QuotaShare\nquotaShareName: {name}\ncapacityLimits:\n  - capacityUnit: gpu\n    maxCapacity: {cap}\nresourceSharingConfiguration:\n  strategy: {strategy}\n"
        ));
    }
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn measure(dir: &Path, edits: usize, rename: bool, first: usize) -> Vec<Duration> {
    let (tx, rx) = mpsc::channel::<(Instant, String)>();
    let _w = Watcher::start(
        dir.to_path_buf(),
        Box::new(move |u| {
            if let ConfigUpdate::Applied(c) = u {
                let _ = tx.send((Instant::now(), c.hash));
            }
        }),
    )
    .expect("watcher");
    let _ = rx.recv_timeout(Duration::from_secs(5)); // the initial state
    let target = dir.join("shares.yaml");
    let mut out = Vec::with_capacity(edits);
    for v in first..first + edits {
        let text = shares(v);
        let t0 = Instant::now();
        if rename {
            let tmp = dir.join(".shares.yaml.swp");
            std::fs::write(&tmp, &text).expect("write tmp");
            std::fs::rename(&tmp, &target).expect("rename");
        } else {
            std::fs::write(&target, &text).expect("write");
        }
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok((t1, _)) => out.push(t1 - t0),
            Err(_) => panic!("edit {v} was not applied within 10 s"),
        }
        // An operator does not save faster than this; leaves no events in flight.
        std::thread::sleep(Duration::from_millis(30));
    }
    out
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this too: keep it short
    // then (the figures are only a smoke test).
    let full = std::env::args().any(|a| a == "--bench");
    let edits: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(if full { 200 } else { 10 });
    let root = std::env::temp_dir().join(format!("shareq-reload-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::write(root.join("env.yaml"), ENV).expect("write env");
    std::fs::write(root.join("shares.yaml"), shares(0)).expect("write shares");
    println!(
        "config hot reload: file written -> config applied ({edits} edits each, debounce {} ms)",
        DEBOUNCE.as_millis()
    );
    for (name, rename, first) in [
        ("plain write", false, 1),
        ("temp file + rename", true, 1_000_000),
    ] {
        let mut lat = measure(&root, edits, rename, first);
        lat.sort();
        println!(
            "  {name:<20} p50 {:>9}  p90 {:>9}  p99 {:>9}  max {:>9}",
            ms(percentile(&lat, 0.50)),
            ms(percentile(&lat, 0.90)),
            ms(percentile(&lat, 0.99)),
            ms(lat[lat.len() - 1]),
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}
