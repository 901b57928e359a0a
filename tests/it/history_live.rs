//! The utilisation history and the time window of `jobs`, live: a real `shareq serve`
//! sampling every second on fake GPUs, read back through the socket (`shareq history`,
//! `{"op":"history"}`) and, with no scheduler running, from the database itself.

use crate::common;

use common::{Server, config, share};
use serde_json::Value;
use std::time::{Duration, Instant};

fn start() -> Server {
    let shares = format!(
        "{}---\n{}",
        share("alpha", 1, "LEND_AND_BORROW", false),
        share("beta", 3, "LEND", false)
    );
    Server::start_with(
        &config(4, 1, &shares),
        &["--stop-jobs-on-exit", "--sample-seconds", "1"],
    )
}

fn history(s: &Server, window: &str) -> Value {
    let out = s.cli(&["history", "--json", "--window", window]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The newest bucket of a share's series in which `f` holds.
fn seen(h: &Value, share: &str, f: impl Fn(&Value) -> bool) -> bool {
    h["series"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["share"] == share)
        .flat_map(|s| s["points"].as_array().unwrap().iter())
        .any(f)
}

#[test]
fn samples_of_own_borrowed_lent_and_waits_reach_the_history() {
    let mut s = start();
    // alpha holds 3 GPUs: 1 own and 2 borrowed from beta's idle guarantee; a second job
    // of alpha waits for 2 more.
    let a = s.submit(&["--share", "alpha", "--gpus", "3"], &["sleep", "300"]);
    s.wait_state(a, "RUNNING", 20);
    let b = s.submit(&["--share", "alpha", "--gpus", "2"], &["sleep", "300"]);
    let t = Instant::now();
    let h = loop {
        let h = history(&s, "hour");
        let waiting = |p: &Value| {
            p["own"].as_f64() > Some(0.0)
                && p["queued_gpus"].as_f64() > Some(0.0)
                && p["wait_max_ms"].as_i64() > Some(0)
        };
        if seen(&h, "alpha", waiting) {
            break h;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no sample yet: {h}");
        std::thread::sleep(Duration::from_millis(200));
    };
    // A bucket averages its samples, some of which may predate the start; but in every
    // sample alpha's job held 1 own and 2 borrowed GPUs together, and the 2 it borrowed
    // were beta's: bucket by bucket, borrowed = 2 × own = beta's lent.
    let points = |share: &str| -> Vec<Value> {
        h["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["share"] == share)
            .map(|x| x["points"].as_array().unwrap().clone())
            .unwrap_or_else(|| panic!("no series of {share}: {h}"))
    };
    let f = |p: &Value, k: &str| p[k].as_f64().unwrap();
    for (a, b) in points("alpha").iter().zip(points("beta")) {
        assert!((f(a, "borrowed") - 2.0 * f(a, "own")).abs() < 1e-9, "{h}");
        assert!((f(&b, "lent") - f(a, "borrowed")).abs() < 1e-9, "{h}");
        assert!(f(a, "queued_gpus") <= 2.0 && f(a, "own") <= 1.0, "{h}");
    }
    assert!(
        seen(&h, "alpha", |p| p["started"].as_u64() >= Some(1)),
        "{h}"
    );
    assert_eq!(h["window"], "hour");
    assert_eq!(h["samples"].as_array().unwrap().len(), 120);
    assert_eq!(h["every_ms"], 1000);
    // The table says the same, per share.
    let out = s.cli(&["history", "--window", "hour"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |share: &str| -> Vec<f64> {
        let line = text.lines().find(|l| l.starts_with(share)).unwrap_or("");
        line.split_whitespace()
            .skip(1)
            .take(4)
            .map(|v| v.parse().unwrap_or(f64::NAN))
            .collect()
    };
    let (alpha, beta) = (row("alpha"), row("beta"));
    // OWN BORROWED LENT PEAK, one decimal.
    assert!(
        alpha[0] > 0.0 && (alpha[1] - 2.0 * alpha[0]).abs() <= 0.1,
        "{text}"
    );
    assert!(
        (beta[2] - alpha[1]).abs() <= 0.1 && alpha[3] <= 3.0,
        "{text}"
    );
    // The socket answers a window it does not know with an error.
    let out = s.cli(&["history", "--window", "year"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("hour, day or week"));
    // The week is read back too (coarser buckets), and after the scheduler stopped the
    // database still answers.
    assert!(seen(&history(&s, "week"), "alpha", |p| p["own"].as_f64()
        > Some(0.0)));
    let _ = b;
    s.stop();
    let out = s.cli(&["history", "--json", "--window", "day"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no scheduler is running"));
    let h: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        seen(&h, "alpha", |p| p["borrowed"].as_f64() > Some(0.0)),
        "{h}"
    );
}

fn jobs(s: &Server, args: &[&str]) -> (Vec<u64>, Value) {
    let v = s.jobs_json(args);
    let mut ids: Vec<u64> = ["queue", "running", "finished"]
        .iter()
        .flat_map(|k| v[*k].as_array().unwrap().iter())
        .map(|j| j["id"].as_u64().unwrap())
        .collect();
    ids.sort();
    (ids, v)
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .to_rfc3339()
}

#[test]
fn jobs_since_and_until_keep_the_jobs_of_a_time_window() {
    let mut s = start();
    let early = s.submit(&["--share", "beta", "--name", "early"], &["true"]);
    s.wait_state(early, "SUCCEEDED", 20);
    std::thread::sleep(Duration::from_millis(1100));
    let mid = chrono::Utc::now().timestamp_millis();
    std::thread::sleep(Duration::from_millis(1100));
    let late = s.submit(&["--share", "beta", "--name", "late"], &["true"]);
    s.wait_state(late, "SUCCEEDED", 20);
    let running = s.submit(
        &["--share", "alpha", "--name", "running"],
        &["sh", "-c", "sleep 300 # it's long"],
    );
    s.wait_state(running, "RUNNING", 20);
    let since = rfc3339(mid);
    let check = |s: &Server| {
        assert_eq!(jobs(s, &["--since", &since]).0, vec![late, running]);
        assert_eq!(jobs(s, &["--until", &since]).0, vec![early]);
        assert_eq!(jobs(s, &["--since", "1h"]).0, vec![early, late, running]);
        // A window with no job, and the filters together with a window.
        let before = rfc3339(mid - 3_600_000);
        assert_eq!(jobs(s, &["--until", &before]).0, Vec::<u64>::new());
        assert_eq!(
            jobs(s, &["--since", &since, "--share", "beta"]).0,
            vec![late]
        );
    };
    check(&s);
    // The command, in the JSON and in the table.
    let (_, v) = jobs(&s, &["--status", "running"]);
    assert_eq!(
        v["running"][0]["command"],
        "sh -c 'sleep 300 # it'\\''s long'"
    );
    let out = s.cli(&["jobs", "--all"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().next().unwrap().contains("COMMAND"), "{text}");
    let early_row = text.lines().find(|l| l.contains("early")).unwrap();
    assert!(early_row.contains(" true "), "{text}");
    // Bad times are refused with the forms that work.
    let out = s.cli(&["jobs", "--since", "2x"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--since: `2x` is not a time"), "{err}");
    // Without a scheduler the database answers the same (the running job was stopped
    // with the scheduler: it finished after `since`, so it is still in the window).
    s.stop();
    check(&s);
}

/// The in-process console's path: its action goes through the bridge to the runtime it
/// booted, which reads its own database; a runtime without a database says it has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_process_console_reads_the_history_through_the_bridge() {
    use shareq::exec::{Discovery, StateDir};
    use shareq::server::boot::{self, BootOptions};
    use shareq::snapshot::usage::Window;
    use shareq::tui::Action;
    use shareq::tui::bridge::{Feed, forward};
    use tokio::sync::mpsc;

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config");
    std::fs::create_dir_all(&cfg).unwrap();
    let shares = share("alpha", 2, "LEND_AND_BORROW", false);
    std::fs::write(cfg.join("config.yaml"), config(2, 1, &shares)).unwrap();
    let state = StateDir::new(dir.path().join("state"));
    let mut opts = BootOptions::new(state.clone(), cfg.clone());
    opts.supervisor_exe = Some(common::BIN.into());
    opts.discovery = Some(Discovery::skipped());
    opts.listen = false;
    opts.watch_config = false;
    opts.sample_every = Duration::from_millis(200);
    let handle = boot::start(opts).await.expect("boots");
    let _cleanup = common::Cleanup(state.root().to_path_buf());
    let mut spec = shareq::model::JobSpec::new("hist", "alpha", 1, 0);
    spec.command = Some(shareq::model::Command::Argv(vec![
        "sleep".into(),
        "300".into(),
    ]));
    let (tx, rx) = tokio::sync::oneshot::channel();
    handle
        .inputs
        .send(shareq::server::Input::Submit {
            spec,
            reply: Some(tx),
        })
        .unwrap();
    rx.await.unwrap().expect("submitted");

    let (act_tx, act_rx) = mpsc::channel(8);
    let (feed_tx, mut feed_rx) = mpsc::unbounded_channel();
    let bridge = tokio::spawn(forward(
        act_rx,
        handle.inputs.clone(),
        "tester".into(),
        feed_tx,
        shareq::server::runtime::audit::Audit::off(),
    ));
    let t = Instant::now();
    loop {
        act_tx.send(Action::History(Window::Hour)).await.unwrap();
        match feed_rx.recv().await.unwrap() {
            Feed::History(Ok(h))
                if h.series
                    .iter()
                    .any(|s| s.share == "alpha" && s.points.iter().any(|p| p.own > 0.0)) =>
            {
                break;
            }
            Feed::History(Err(e)) => panic!("{e}"),
            _ => {}
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no sample of alpha");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    act_tx.send(Action::Quit { stop_jobs: true }).await.unwrap();
    bridge.await.unwrap();
    handle.shutdown(true).await;

    // A scheduler in memory only keeps no history, and says so.
    let loaded = shareq::config::load_dir(&cfg).unwrap();
    let mem = shareq::server::RuntimeHandle::start(
        shareq::server::RuntimeOptions {
            state: StateDir::new(dir.path().join("mem")),
            config_dir: cfg,
            supervisor_exe: common::BIN.into(),
            discovery: Discovery::skipped(),
        },
        loaded,
    );
    let (tx, rx) = tokio::sync::oneshot::channel();
    mem.inputs
        .send(shareq::server::Input::History {
            window: Window::Day,
            reply: tx,
        })
        .unwrap();
    let e = rx.await.unwrap().unwrap_err();
    assert_eq!(e, shareq::server::Refusal::NoHistory);
    assert!(e.to_string().contains("keeps no database"), "{e}");
    mem.shutdown(false).await;
}

/// SPEC §15 live: a share's samples of a sliced unit are marked GiB (`memoryGiB` in the
/// JSON), and `shareq history` averages them in a table of their own, never in its GPUs.
#[test]
fn a_sliced_units_gib_are_averaged_apart_from_gpus() {
    let yaml = "kind: ServiceEnvironment\nname: lab\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}\n  - {capacityUnit: mem, maxCapacity: 80, devices: {fake: 1}, slicing: {memoryGiB: 80}}\npreemption:\n  gracePeriodSeconds: 1\n---\nkind: QuotaShare\nquotaShareName: team\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 2}\n  - {capacityUnit: mem, maxCapacity: 80}\nresourceSharingConfiguration: {strategy: LEND}\n";
    let s = Server::start_with(yaml, &["--stop-jobs-on-exit", "--sample-seconds", "1"]);
    let whole = s.submit(
        &["--share", "team", "--unit", "gpu", "--gpus", "1"],
        &["sleep", "300"],
    );
    let slice = s.submit(
        &["--share", "team", "--unit", "mem", "--gpu-memory", "20G"],
        &["sleep", "300"],
    );
    s.wait_state(whole, "RUNNING", 20);
    s.wait_state(slice, "RUNNING", 20);
    let t = Instant::now();
    let h = loop {
        let h = history(&s, "hour");
        let held = |unit: &str, v: f64| {
            h["series"].as_array().unwrap().iter().any(|x| {
                x["unit"] == unit
                    && x["points"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|p| p["own"].as_f64() > Some(v))
            })
        };
        if held("gpu", 0.0) && held("mem", 0.0) {
            break h;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no sample yet: {h}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let series = h["series"].as_array().unwrap();
    let of = |unit: &str| series.iter().find(|x| x["unit"] == unit).unwrap();
    assert_eq!(of("mem")["memoryGiB"], 80, "{h}");
    assert_eq!(of("mem")["limit"], 80, "{h}");
    assert!(of("gpu").get("memoryGiB").is_none(), "{h}");
    // The table: GPUs first, then the GiB under a line of their own. Once the window's
    // GiB average passes 1, GiB added to the GPUs would lift them past the 1 GPU held.
    let own = |part: &str| -> f64 {
        let line = part.lines().find(|l| l.starts_with("team")).unwrap_or("");
        line.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let t = Instant::now();
    let (text, gib_at) = loop {
        let out = s.cli(&["history", "--window", "hour"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let gib_at = text.find("averages in GiB of GPU memory (not GPUs)");
        if let Some(at) = gib_at.filter(|&at| own(&text[at..]) > 1.0) {
            break (text, at);
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no GiB table: {text}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let (gpus, gib) = (own(&text[..gib_at]), own(&text[gib_at..]));
    assert!(text[..gib_at].contains("averages in GPUs:"), "{text}");
    assert!(gpus > 0.0 && gpus <= 1.0, "the GPUs hold no GiB: {text}");
    assert!(gib <= 20.0, "{text}");
}
