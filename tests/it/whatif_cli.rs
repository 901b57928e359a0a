//! `shareq whatif`, `shareq export-trace` and `shareq check DIR --against STATE` on the
//! history and the jobs of a live `shareq serve` on fake GPUs.

use crate::common;

use common::{BIN, Server, config, wait_for};
use serde_json::Value;
use std::process::Command;

fn shares(a_limit: u32, a_borrow: Option<i32>, b_limit: u32) -> String {
    let borrow = a_borrow.map_or(String::new(), |b| format!(", borrowLimit: {b}"));
    format!(
        "kind: QuotaShare\nquotaShareName: a\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: {a_limit}}}]\nresourceSharingConfiguration: {{strategy: LEND_AND_BORROW{borrow}}}\n---\nkind: QuotaShare\nquotaShareName: b\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: {b_limit}}}]\nresourceSharingConfiguration: {{strategy: LEND}}\n"
    )
}

fn write_config(s: &Server, name: &str, yaml: &str) -> std::path::PathBuf {
    let dir = s.path(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("c.yaml"), yaml).unwrap();
    dir
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn whatif_replays_the_real_history_under_both_configs() {
    let s = Server::start(&config(4, 1, &shares(1, None, 3)));
    let ids: Vec<u64> = (0..4)
        .map(|_| s.submit(&["--share", "a"], &["sleep 2"]))
        .collect();
    for &id in &ids {
        s.wait_state(id, "SUCCEEDED", 30);
    }
    let state = s.state.display().to_string();
    // The trace: four 2-second jobs of a, submitted together.
    let (ok, csv, err) = run(&["export-trace", "--state", &state, "--since", "1h"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "at,duration,quantity,quotaShareName,jobName,schedulingPriority,capacityUnit,user"
    );
    let me = crate::common::me();
    assert_eq!(lines.len(), 5, "{csv}");
    for (l, id) in lines[1..].iter().zip(&ids) {
        // The submitter too: fair share orders by it (SPEC §12).
        assert!(l.ends_with(&format!(",1,a,{id}-sleep,0,gpu,{me}")), "{csv}");
        assert!(
            l.starts_with("0,2,") || l.starts_with("0,3,") || l.starts_with("1,"),
            "{csv}"
        );
    }
    // As a scenario that replays as it is.
    let out = s.path("exported");
    let (ok, _, err) = run(&[
        "export-trace",
        "--state",
        &state,
        "--since",
        "1h",
        "--out",
        &out.display().to_string(),
    ]);
    assert!(ok && err.contains("4 jobs written"), "{err}");
    let (ok, replay, err) = run(&[
        "replay",
        &out.join("scenario.yaml").display().to_string(),
        "--summary",
        "--json",
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        replay.matches("\"event\":\"started\"").count(),
        4,
        "{replay}"
    );
    // What if a could not borrow: its jobs run one after the other.
    let strict = write_config(&s, "strict", &config(4, 1, &shares(1, Some(0), 3)));
    let strict = strict.display().to_string();
    let (ok, json, err) = run(&[
        "whatif", "--state", &state, "--since", "1h", "--config", &strict, "--json",
    ]);
    assert!(ok, "{err}");
    let w: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(w["jobs"], 4, "{w}");
    let (cur, new) = (&w["current"]["shares"]["a"], &w["proposed"]["shares"]["a"]);
    assert_eq!(cur["jobs_started"], 4, "{w}");
    assert_eq!(new["jobs_started"], 4, "{w}");
    assert!(cur["wait_p95"].as_i64().unwrap() <= 1, "{w}");
    assert!(
        new["wait_p95"].as_i64().unwrap() >= 6,
        "three wait for the one before: {w}"
    );
    assert!(cur["gpu_hours_borrowed"].as_f64().unwrap() > 0.0, "{w}");
    assert_eq!(new["gpu_hours_borrowed"], 0.0, "{w}");
    // The table says the same side by side.
    let (ok, text, err) = run(&[
        "whatif", "--state", &state, "--since", "1h", "--config", &strict,
    ]);
    assert!(ok, "{err}");
    assert!(
        text.contains("current") && text.contains("proposed") && text.contains("wait p95"),
        "{text}"
    );
    // A bad window is refused with what is wrong.
    let (ok, _, err) = run(&[
        "whatif", "--state", &state, "--since", "7x", "--config", &strict,
    ]);
    assert!(!ok && err.contains("--since"), "{err}");
}

#[test]
fn check_against_says_what_a_config_would_do_to_the_jobs_now() {
    let s = Server::start(&config(4, 1, &shares(2, None, 2)));
    let a1 = s.submit(&["--share", "a"], &["sleep 120"]);
    let a2 = s.submit(&["--share", "a"], &["sleep 120"]);
    s.wait_state(a1, "RUNNING", 20);
    s.wait_state(a2, "RUNNING", 20);
    // Fits a's limit plus borrowing today; waits for GPUs.
    let big = s.submit(&["--share", "a", "--gpus", "3"], &["sleep 1"]);
    wait_for(10, "big queued", || s.state_of(big) == "RUNNABLE");
    let new = write_config(&s, "new", &config(4, 1, &shares(1, Some(0), 3)));
    let state = s.state.display().to_string();
    let (ok, text, err) = run(&["check", &new.display().to_string(), "--against", &state]);
    assert!(ok, "{err}");
    assert!(text.contains("valid"), "{text}");
    assert!(text.contains("2 job(s) would become reclaimable"), "{text}");
    assert!(
        text.contains(&format!("{a2} sleep (a): a now borrows on gpu: the job can be reclaimed (a reclaim takes it first)")),
        "the most recent start goes first: {text}"
    );
    assert!(
        text.contains(&format!(
            "{a1} sleep (a): a now borrows on gpu: the job can be reclaimed\n"
        )),
        "{text}"
    );
    assert!(text.contains("1 job(s) would become impossible"), "{text}");
    assert!(
        text.contains(&format!("{big} sleep (a): QUOTA_MANAGEMENT_LIMIT_EXCEEDED")),
        "{text}"
    );
    // The live scheduler was not touched.
    assert_eq!(s.state_of(a1), "RUNNING");
    assert_eq!(s.state_of(big), "RUNNABLE");
    // The config in force changes nothing.
    let (ok, text, _) = run(&[
        "check",
        &s.config.display().to_string(),
        "--against",
        &state,
    ]);
    assert!(ok && text.contains("changes nothing"), "{text}");
}

/// The "current" column replays the configs that were in force over the window, each
/// from when it was applied (issue 25 item 8): a preemption that happened under the
/// config of the window's start shows there, although the config in force at its end
/// (the same as the proposed one here) would not have made it.
#[test]
fn whatif_current_replays_the_configs_in_force_over_the_window() {
    let before = config(1, 1, &common::share("a", 1, "LEND", true));
    let s = Server::start(&before);
    let low = s.submit(&["--share", "a", "--priority", "1"], &["sleep 3"]);
    s.wait_state(low, "RUNNING", 20);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let high = s.submit(&["--share", "a", "--priority", "10"], &["sleep 1"]);
    s.wait_state(high, "SUCCEEDED", 30);
    s.wait_state(low, "SUCCEEDED", 30);
    assert!(s.job(low)["preempted_count"].as_u64() >= Some(1));
    // In-share preemption turned off afterwards: the config in force at the end.
    let after = config(1, 1, &common::share("a", 1, "LEND", false));
    std::fs::write(s.config.join("config.yaml"), &after).unwrap();
    assert!(s.cli(&["reload"]).status.success());
    let state = s.state.display().to_string();
    let proposed = write_config(&s, "proposed", &after);
    let whatif = |extra: &[&str]| {
        let mut args = vec!["whatif", "--state", &state, "--since", "1h", "--config"];
        args.push(proposed.to_str().unwrap());
        args.extend_from_slice(extra);
        run(&args)
    };
    let (ok, out, err) = whatif(&["--json"]);
    assert!(ok, "{err}");
    let w: Value = serde_json::from_str(&out).unwrap();
    assert!(
        w["current"]["shares"]["a"]["preemptions"].as_u64() >= Some(1),
        "the preemption under the first config is replayed:\n{out}"
    );
    assert_eq!(w["proposed"]["shares"]["a"]["preemptions"], 0, "{out}");
    let (ok, text, err) = whatif(&[]);
    assert!(ok, "{err}");
    assert!(
        text.contains("the 2 configs in force over the window"),
        "{text}"
    );
}
