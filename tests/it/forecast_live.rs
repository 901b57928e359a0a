//! Start estimates and predictions on a live `shareq serve` with fake GPUs: the estimate
//! of a queued job is published in the background (`jobs --json`'s `estimatedStart`, the
//! table's START(EST) column) and the job then starts when it said; `submit --predict`
//! says what a submission would do, and the submission then does it.

use crate::common;

use common::{Server, config, share, wait_for};
use serde_json::Value;

fn queued(s: &Server, id: u64) -> Value {
    let j = s.jobs();
    j["queue"]
        .as_array()
        .and_then(|q| q.iter().find(|v| v["id"] == id).cloned())
        .unwrap_or(Value::Null)
}

#[test]
fn a_queued_job_starts_when_its_estimate_said() {
    let s = Server::start(&config(1, 2, &share("team", 1, "LEND_AND_BORROW", true)));
    // The running job will be stopped by its 12 s timeout; the queued one waits for it.
    let a = s.submit(&["--share", "team", "--timeout", "12"], &["sleep 60"]);
    let a_started = s.wait_state(a, "RUNNING", 20)["started"].as_i64().unwrap();
    let p = s.cli(&[
        "submit",
        "--share",
        "team",
        "--predict",
        "--json",
        "--",
        "true",
    ]);
    let p: Value = serde_json::from_slice(&p.stdout).unwrap();
    assert_eq!(p["verdict"], "WAIT", "{p}");
    assert_eq!(p["start"], a_started + 12_000, "{p}");
    let b = s.submit(&["--share", "team", "--timeout", "5"], &["sleep 1"]);
    let mut row = Value::Null;
    wait_for(10, "an estimate for the queued job", || {
        row = queued(&s, b);
        row["estimatedStart"].is_i64()
    });
    assert_eq!(row["estimateNote"], "estimate", "{row}");
    assert_eq!(row["estimateKind"], "range", "{row}");
    let est = row["estimatedStart"].as_i64().unwrap();
    assert_eq!(est, a_started + 12_000, "a's timeout ends it: {row}");
    // A timeout is the same number at every percentile: one time.
    assert_eq!(row["estimatedStartEarliest"], est, "{row}");
    assert_eq!(row["estimatedStartLatest"], est, "{row}");
    let table = String::from_utf8_lossy(&s.cli(&["jobs"]).stdout).to_string();
    let clock = shareq::forecast::estimate::clock(est, est, shareq::forecast::local_utc_offset());
    assert!(
        table.contains("START(EST)") && table.contains(&clock),
        "{clock}: {table}"
    );
    let started = s.wait_state(b, "RUNNING", 30)["started"].as_i64().unwrap();
    // The stop after the timeout takes a moment (SIGTERM, the release, the next pass).
    assert!(
        (started - est).abs() < 3_000,
        "estimated {est}, started {started} ({} ms off)",
        started - est
    );
}

/// SPEC §11 on a live scheduler: a few short jobs make a history; then a job declared with
/// `--expect` holds the GPU, and the job queued behind it gets a range that holds its real
/// start (within 2 s) and never reads `overdue` while the job ahead runs. A job queued
/// behind one whose end nobody knows (no history in its share, no timeout, nothing
/// declared) reads `≥` with the reason naming that job.
#[test]
fn a_range_holds_the_real_start_and_an_unknown_end_gives_a_lower_bound() {
    let s = Server::start(&config(
        2,
        2,
        &format!(
            "{}---\n{}",
            share("team", 1, "RESERVE", false),
            share("other", 1, "RESERVE", false)
        ),
    ));
    // History: three short attempts in team.
    let mut last = 0;
    for _ in 0..3 {
        last = s.submit(&["--share", "team"], &["sleep 0.3"]);
    }
    s.wait_state(last, "SUCCEEDED", 30);
    let a = s.submit(&["--share", "team", "--expect", "6s"], &["sleep 6"]);
    let a_started = s.wait_state(a, "RUNNING", 20)["started"].as_i64().unwrap();
    let w = s.submit(&["--share", "team"], &["sleep 0.3"]);
    let mut first: Option<Value> = None;
    let mut kinds = Vec::new();
    let t0 = std::time::Instant::now();
    let started = loop {
        assert!(t0.elapsed().as_secs() < 40, "w never started: {kinds:?}");
        let v = s.job(w);
        if v["state"] != "RUNNABLE" {
            let v = s.wait_state(w, "RUNNING", 20);
            break v["started"].as_i64().unwrap();
        }
        let row = queued(&s, w);
        if let Some(k) = row["estimateKind"].as_str() {
            if kinds.last().map(String::as_str) != Some(k) {
                kinds.push(k.to_string());
            }
            // Until a is over, the estimate never says overdue.
            if s.state_of(a) == "RUNNING" {
                assert_ne!(k, "overdue", "{row}; kinds so far {kinds:?}");
            }
            if first.is_none() && k == "range" {
                first = Some(row);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let first = first.unwrap_or_else(|| panic!("no range for w: {kinds:?}"));
    let (lo, hi) = (
        first["estimatedStartEarliest"].as_i64().unwrap(),
        first["estimatedStartLatest"].as_i64().unwrap(),
    );
    assert_eq!(lo, a_started + 6_000, "a's declared runtime: {first}");
    assert!(
        lo - 2_000 <= started && started <= hi + 2_000,
        "range {lo}..{hi}, started {started}: {first}"
    );
    // Behind a job with no known end: a lower bound naming it, never `>7d`.
    let u = s.submit(&["--share", "other"], &["sleep 60"]);
    s.wait_state(u, "RUNNING", 20);
    let v = s.submit(&["--share", "other"], &["true"]);
    let mut row = Value::Null;
    wait_for(15, "a lower bound for v", || {
        row = queued(&s, v);
        row["estimateKind"] == "lower_bound"
    });
    assert_eq!(
        row["estimateNote"],
        format!("job {u} (other) has no run-time history"),
        "{row}"
    );
    assert!(row["estimatedStartEarliest"].is_i64(), "{row}");
    assert!(row["estimatedStartLatest"].is_null(), "{row}");
    let table = String::from_utf8_lossy(&s.cli(&["jobs"]).stdout).to_string();
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{v} ")))
        .unwrap_or_default();
    assert!(
        line.contains("≥ ") && line.contains(&format!("job {u} (other)")),
        "{table}"
    );
    assert!(!line.contains(">7d"), "{line}");
}

#[test]
fn predictions_over_the_socket_are_what_then_happens() {
    let s = Server::start(&config(
        2,
        1,
        &format!(
            "{}---\n{}",
            share("a", 1, "LEND_AND_BORROW", true),
            share("b", 1, "LEND", false)
        ),
    ));
    let predict = |share: &str| -> Value {
        let out = s.cli(&[
            "submit",
            "--share",
            share,
            "--predict",
            "--json",
            "--",
            "sleep 30",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let p = predict("a");
    assert_eq!(p["verdict"], "START_NOW", "{p}");
    let a1 = s.submit(&["--share", "a"], &["sleep 30"]);
    s.wait_state(a1, "RUNNING", 20);
    let p = predict("a");
    assert_eq!(p["verdict"], "BORROW", "{p}");
    let a2 = s.submit(&["--share", "a"], &["sleep 30"]);
    let v = s.wait_state(a2, "RUNNING", 20);
    assert_eq!(v["on_borrowed"], true, "{v}");
    let p = predict("b");
    assert_eq!(p["verdict"], "PREEMPT", "{p}");
    assert!(
        p["why"].as_str().unwrap().contains("CROSS_SHARE_RECLAIM"),
        "{p}"
    );
    let b1 = s.submit(&["--share", "b"], &["sleep 30"]);
    s.wait_state(b1, "RUNNING", 20);
    wait_for(10, "a2 requeued", || s.state_of(a2) == "RUNNABLE");
    // Nothing was submitted by the predictions: three jobs only.
    let j = s.jobs();
    let n = ["queue", "running", "finished"]
        .iter()
        .map(|l| j[l].as_array().map_or(0, Vec::len))
        .sum::<usize>();
    assert_eq!(n, 3, "{j}");
    let text = String::from_utf8_lossy(
        &s.cli(&["submit", "--share", "nope", "--predict", "--", "x"])
            .stdout,
    )
    .to_string();
    assert!(text.starts_with("rejected: "), "{text}");
}

#[test]
fn an_applied_config_says_what_it_did_to_the_jobs() {
    let s = Server::start(&config(2, 1, &share("team", 2, "LEND_AND_BORROW", true)));
    let a = s.submit(&["--share", "team"], &["sleep 60"]);
    let b = s.submit(&["--share", "team"], &["sleep 60"]);
    s.wait_state(a, "RUNNING", 20);
    s.wait_state(b, "RUNNING", 20);
    // The share's limit drops to 1: one of its two jobs now runs on borrowed capacity.
    std::fs::write(
        s.config.join("config.yaml"),
        config(2, 1, &share("team", 1, "LEND_AND_BORROW", true)),
    )
    .unwrap();
    let mut status = Value::Null;
    wait_for(15, "the config's effects", || {
        let out = s.cli(&["status", "--json"]);
        status = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        status["shares"][0]["limit"] == 1
            && status["config"]["effects"].is_string()
            && status["config"]["effects"] != "no job affected"
    });
    assert_eq!(status["config"]["effects"], "2 now reclaimable", "{status}");
    let text = String::from_utf8_lossy(&s.cli(&["status"]).stdout).to_string();
    assert!(text.contains("(2 now reclaimable)"), "{text}");
    // Nothing was stopped by it.
    assert_eq!(s.state_of(a), "RUNNING");
    assert_eq!(s.state_of(b), "RUNNING");
}
