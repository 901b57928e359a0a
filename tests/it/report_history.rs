//! `shareq report`'s figures from a recorded history: scenarios run by the replay while
//! every batch of decisions is recorded into a real database through the runtime's own
//! write path (`Store::record`, at the scenario's instants, in its seconds); the report
//! computed from that database must give the replay summary's figures, and the AWS
//! example's known figures worked out by hand.

use shareq::replay::{Options, Scenario, Summary, run_observed};
use shareq::store::Store;
use std::path::Path;

/// Replay `scenario`, recording into a fresh database; returns the replay's summary line
/// and the report over the run's instants from the database.
fn replay_and_report(path: &Path) -> (serde_json::Value, Summary) {
    let sc = Scenario::load(path).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut out = Vec::new();
    let mut recorded = 0usize;
    run_observed(
        &sc,
        &mut out,
        Options {
            summary: true,
            keep_lines: false,
        },
        &mut |obs| {
            // Live, every instant has an observed fact or a decision to record (a release
            // without an event is an observed fact).
            if !obs.before_pass {
                store.record_events(obs.t, obs.events, obs.sched).unwrap();
                // A PENDING job's release is a live line only (SPEC §13: the replay
                // prints nothing for it).
                recorded += store
                    .take_recorded()
                    .iter()
                    .filter(|l| l.event != "released")
                    .count();
            }
        },
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["event"], "summary");
    // Every decision line of the replay was recorded as one stream line.
    assert_eq!(recorded, text.lines().count() - 1, "{}", path.display());
    let first = sc
        .events
        .first()
        .map(|e| e.at)
        .into_iter()
        .chain(sc.trace.first().map(|e| e.at))
        .min()
        .unwrap_or(0);
    let last = summary["t"].as_i64().unwrap();
    let window = store.history_window(first, last).unwrap();
    let report = shareq::report::figures(&window, first, last, 1);
    (summary, report)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6 * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn the_aws_example_gives_its_known_figures() {
    let (_, r) = replay_and_report(Path::new("tests/scenarios/aws-01-blog-example.yaml"));
    // j3 runs within qs1's limit from 0; j2 borrows qs2's idle GPU from 1 until k
    // reclaims it at 10; r starts on qs3's reserved GPU at 20; j1 preempts j3 at 30.
    let qs1 = &r.shares["qs1"];
    assert!(close(qs1.gpu_seconds_within_limit, 30.0), "{qs1:?}");
    assert!(close(qs1.gpu_seconds_borrowed, 9.0), "{qs1:?}");
    assert!(close(qs1.gpu_seconds_idle, 0.0), "{qs1:?}");
    assert_eq!(qs1.preemptions, 2);
    // j2 ran 1..10 and j3 0..30 before they were preempted: that work restarts.
    assert!(close(qs1.gpu_seconds_lost_to_preemption, 39.0), "{qs1:?}");
    assert!(
        close(qs1.p50_wait, 0.0) && close(qs1.p95_wait, 28.0),
        "{qs1:?}"
    );
    let qs2 = &r.shares["qs2"];
    assert!(close(qs2.gpu_seconds_lent, 9.0), "{qs2:?}");
    assert!(close(qs2.gpu_seconds_idle, 10.0), "{qs2:?}");
    assert!(close(qs2.gpu_seconds_within_limit, 20.0), "{qs2:?}");
    let qs3 = &r.shares["qs3"];
    assert!(close(qs3.gpu_seconds_idle, 20.0), "{qs3:?}");
    assert!(close(qs3.gpu_seconds_within_limit, 10.0), "{qs3:?}");
    assert!(
        close(qs3.gpu_seconds_lent, 0.0),
        "RESERVE never lends: {qs3:?}"
    );
    assert!(close(r.gpu_seconds_used, 69.0), "{r:?}");
    assert!(close(r.utilisation, 69.0 / 90.0), "{r:?}");
    assert!(close(r.span, 30.0));
}

#[test]
fn the_report_from_a_recorded_history_equals_the_replay_summary() {
    let (mut checked, mut with_nodes) = (0, 0);
    for entry in std::fs::read_dir("tests/scenarios").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let (summary, report) = replay_and_report(&path);
        let name = path.display();
        let shares = summary["shares"].as_object().unwrap();
        assert_eq!(
            shares.keys().collect::<Vec<_>>(),
            report.shares.keys().collect::<Vec<_>>(),
            "{name}"
        );
        for (share, want) in shares {
            let got = serde_json::to_value(&report.shares[share]).unwrap();
            for (k, w) in want.as_object().unwrap() {
                let g = &got[k];
                let same = match (w.as_f64(), g.as_f64()) {
                    // The replay prints whole-second percentiles.
                    (Some(a), Some(b)) if k.ends_with("_wait") && !k.starts_with("mean") => {
                        close(a, b.floor())
                    }
                    (Some(a), Some(b)) => close(a, b),
                    _ => w == g,
                };
                assert!(same, "{name}: {share}.{k}: replay {w}, report {g}");
            }
        }
        let node_figures = [
            "gpu_seconds_idle_while_fragmented",
            "jobs_rejected_larger_than_any_node",
        ];
        for k in [
            "gpu_seconds_used",
            "utilisation",
            "gpu_seconds_lost_to_preemption",
            "span",
        ]
        .into_iter()
        .chain(
            node_figures
                .into_iter()
                .filter(|k| summary.get(k).is_some()),
        ) {
            let got = serde_json::to_value(&report).unwrap()[k]
                .as_f64()
                .unwrap_or_else(|| panic!("{name}: the report has no {k}"));
            let want = summary[k].as_f64().unwrap();
            assert!(close(got, want), "{name}: {k}: replay {want}, report {got}");
        }
        checked += 1;
        with_nodes += usize::from(summary.get(node_figures[0]).is_some());
    }
    assert!(checked >= 20, "only {checked} scenarios");
    assert!(with_nodes >= 5, "only {with_nodes} scenarios with nodes");
}

#[test]
fn a_sliced_unit_is_reported_in_gib_seconds_apart_from_gpu_seconds() {
    // SPEC §15: from the recorded history, share a held 1 GPU and 40 GiB for 10 s, b 1 GPU
    // and 20 GiB for 5 s; the GiB never add up with the GPUs.
    let (summary, r) = replay_and_report(Path::new(
        "tests/scenarios/slice-07-mixed-whole-and-sliced-summary.yaml",
    ));
    assert!(close(r.gpu_seconds_used, 15.0), "{r:?}");
    assert!(close(r.gib_seconds_used, 500.0), "{r:?}");
    assert!(close(r.utilisation, 15.0 / 20.0), "{r:?}");
    assert!(close(r.shares["a"].gpu_seconds_used, 10.0), "{r:?}");
    assert!(close(r.shares["a"].gib_seconds_used, 400.0), "{r:?}");
    assert!(close(r.shares["b"].gib_seconds_used, 100.0), "{r:?}");
    assert_eq!(
        summary["gib_seconds_used"].as_f64(),
        Some(500.0),
        "{summary}"
    );
    // The report's JSON has the GiB beside, not inside, the GPU figures.
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["gib_seconds_used"].as_f64(), Some(500.0), "{json}");
    assert_eq!(
        json["shares"]["a"]["gpu_seconds_used"].as_f64(),
        Some(10.0),
        "{json}"
    );
    // `report --csv`: GPU-hours and GiB-hours each in their own column, as the table's
    // USED and GIB-HOURS (40 GiB × 10 s = 0.1111 GiB-hours beside 1 GPU × 10 s).
    let rep = shareq::report::Report {
        since: 0,
        until: 20,
        users_shown: false,
        fair_share: Vec::new(),
        summary: r,
    };
    let csv = shareq::cli::report_csv(&rep);
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let row = |share: &str| rows.iter().find(|r| r[1] == share).unwrap();
    assert_eq!(row("a")[col("gpu_hours_used")], "0.0028", "{csv}");
    assert_eq!(row("a")[col("gib_hours_used")], "0.1111", "{csv}");
    assert_eq!(row("b")[col("gib_hours_used")], "0.0278", "{csv}");
    let table = shareq::cli::report_table(&rep);
    assert!(table.contains("GIB-HOURS"), "{table}");
}
