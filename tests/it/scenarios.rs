//! Every scenario under tests/scenarios/ must hold under `--check` semantics, and a replay
//! must be byte-for-byte deterministic.

use shareq::replay::{Options, Scenario, check, run};
use std::path::{Path, PathBuf};

fn scenarios() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/scenarios exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    v
}

fn replay(path: &Path, opts: Options) -> (Scenario, Vec<u8>, Vec<String>) {
    let sc = Scenario::load(path).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    let outcome = run(&sc, &mut out, opts).expect("runs");
    (sc, out, outcome.lines)
}

#[test]
fn every_scenario_passes_its_check() {
    let all = scenarios();
    assert!(all.len() >= 16, "the shared scenarios are copied in");
    let mut failures = Vec::new();
    for path in &all {
        let (sc, _, lines) = replay(
            path,
            Options {
                keep_lines: true,
                ..Options::default()
            },
        );
        let expect = sc
            .expect
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no expect:", path.display()));
        let report = check(expect, &lines);
        if !report.ok {
            failures.push(format!("{}:\n{}", path.display(), report.text));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn replay_is_byte_for_byte_deterministic() {
    for path in scenarios() {
        let opts = Options {
            summary: true,
            keep_lines: false,
        };
        let (_, a, _) = replay(&path, opts);
        let (_, b, _) = replay(&path, opts);
        assert!(!a.is_empty());
        assert_eq!(a, b, "{} replays differently", path.display());
    }
}

#[test]
fn a_wrong_expectation_fails_with_a_readable_diff() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/aws-01-blog-example.yaml");
    let (mut sc, _, lines) = replay(
        &path,
        Options {
            keep_lines: true,
            ..Options::default()
        },
    );
    let expect = sc.expect.as_mut().expect("expect");
    let pre = expect.preempted.as_mut().expect("preempted");
    pre[0].insert("job".into(), serde_json::json!("j3"));
    let report = check(expect, &lines);
    assert!(!report.ok);
    assert!(
        report.text.contains("preemptions differ"),
        "{}",
        report.text
    );
    assert!(report.text.contains("\"j3\""), "{}", report.text);
    assert!(report.text.contains("\"j2\""), "{}", report.text);
}

fn summary_of(name: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/scenarios")
        .join(name);
    let (_, out, _) = replay(
        &path,
        Options {
            summary: true,
            keep_lines: false,
        },
    );
    let text = String::from_utf8(out).expect("utf-8");
    let last = text.lines().last().expect("a summary line");
    serde_json::from_str(last).expect("the summary is JSON")
}

#[test]
fn the_summary_says_what_preemption_cost() {
    // a2 ran 5 s before its first preemption, a1 25 s before its only one; each was
    // preempted once: the loss is spread.
    let s = summary_of("spread-01-fewest-preemptions-first.yaml");
    assert_eq!(s["max_preemptions_of_one_job"], 1, "{s}");
    assert_eq!(s["gpu_seconds_lost_to_preemption"], 30.0, "{s}");
    assert_eq!(s["started_and_preempted_same_instant"], 0, "{s}");
    assert_eq!(s["shares"]["A"]["max_preemptions_of_one_job"], 1, "{s}");
    assert_eq!(
        s["shares"]["A"]["gpu_seconds_lost_to_preemption"], 30.0,
        "{s}"
    );
    assert_eq!(
        s["shares"]["B"]["gpu_seconds_lost_to_preemption"], 0.0,
        "{s}"
    );
    // Three victims released after 15 s and 20 s; one of them (v1) restarted at once.
    let s = summary_of("nominate-01-restarted-victim-no-longer-counts.yaml");
    assert_eq!(s["gpu_seconds_lost_to_preemption"], 55.0, "{s}");
    // A victim that finishes by itself during its stop lost nothing.
    let s = summary_of("stop-10-grace-reload-keeps-release-instant.yaml");
    assert_eq!(s["shares"]["A"]["preemptions"], 1, "{s}");
    assert_eq!(s["gpu_seconds_lost_to_preemption"], 0.0, "{s}");
}

#[test]
fn the_summary_counts_the_work_lost_since_the_last_save() {
    // b lost 50 s twice (since its saves at 200 and 500), not the 250 s and 250 s it ran.
    let s = summary_of("ckpt-11-progress-over-two-preemptions.yaml");
    assert_eq!(
        s["shares"]["bor"]["gpu_seconds_lost_to_preemption"], 100.0,
        "{s}"
    );
    assert_eq!(s["shares"]["bor"]["preemptions"], 2, "{s}");
    // With a notice: 45 s after b2's save at the notice, and b1's whole 380 s.
    let s = summary_of("ckpt-02-notice.yaml");
    assert_eq!(
        s["shares"]["bor"]["gpu_seconds_lost_to_preemption"], 425.0,
        "{s}"
    );
}

#[test]
fn a_trace_column_declares_checkpoints_and_an_empty_cell_none() {
    let dir = std::env::temp_dir().join(format!("shareq-ckpt-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("t.csv"),
        "at,duration,quantity,quotaShareName,jobName,checkpointEverySeconds\n\
         0,100000,1,bor,k,\n\
         0,1000,1,bor,b,100\n\
         250,50,1,own,o1,\n",
    )
    .expect("trace");
    std::fs::write(
        dir.join("s.yaml"),
        "config:
- {kind: ServiceEnvironment, name: sim, capacityLimits: [{capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}], preemption: {spreadSeconds: 0}}
- {kind: QuotaShare, quotaShareName: own, capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}], resourceSharingConfiguration: {strategy: LEND}}
- {kind: QuotaShare, quotaShareName: bor, capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}], resourceSharingConfiguration: {strategy: LEND_AND_BORROW}}
trace: t.csv
",
    )
    .expect("scenario");
    let (_, out, _) = replay(&dir.join("s.yaml"), Options::default());
    let text = String::from_utf8(out).expect("utf-8");
    assert!(
        text.contains(r#"{"t":250,"event":"requeued","job":"b","lost":50}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"t":1100,"event":"succeeded","job":"b"}"#),
        "{text}"
    );
    std::fs::write(
        dir.join("t.csv"),
        "at,duration,quantity,quotaShareName,checkpointEverySeconds\n0,10,1,bor,0\n",
    )
    .expect("trace");
    let err = shareq::replay::Scenario::load(&dir.join("s.yaml")).expect_err("C = 0");
    assert!(
        err.to_string().contains("checkpointEverySeconds 0"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_summary_counts_a_sliced_unit_in_gib_seconds_apart_from_gpu_seconds() {
    // SPEC §15: GPU-seconds of the whole unit, GiB-seconds of the sliced one, never added.
    let s = summary_of("slice-07-mixed-whole-and-sliced-summary.yaml");
    assert_eq!(s["gpu_seconds_used"].as_f64(), Some(15.0), "{s}");
    assert_eq!(s["gib_seconds_used"].as_f64(), Some(500.0), "{s}");
    assert_eq!(s["utilisation"].as_f64(), Some(15.0 / 20.0), "{s}");
    let (a, b) = (&s["shares"]["a"], &s["shares"]["b"]);
    assert_eq!(a["gpu_seconds_within_limit"].as_f64(), Some(10.0), "{s}");
    assert_eq!(a["gib_seconds_used"].as_f64(), Some(400.0), "{s}");
    assert_eq!(b["gpu_seconds_within_limit"].as_f64(), Some(5.0), "{s}");
    assert_eq!(b["gib_seconds_used"].as_f64(), Some(100.0), "{s}");
    // A preempted sliced job's loss is GiB-seconds, not GPU-seconds: a3 held 20 GiB from 2
    // until b2 reclaimed them at 4.
    let s = summary_of("slice-01-memory-slices.yaml");
    let a = &s["shares"]["a"];
    assert_eq!(
        a["gib_seconds_lost_to_preemption"].as_f64(),
        Some(40.0),
        "{s}"
    );
    assert_eq!(
        a["gpu_seconds_lost_to_preemption"].as_f64(),
        Some(0.0),
        "{s}"
    );
    // A replay without a sliced unit says nothing of GiB.
    let whole = summary_of("aws-01-blog-example.yaml");
    assert!(whole.get("gib_seconds_used").is_none(), "{whole}");
    assert!(
        whole["shares"]["qs1"].get("gib_seconds_used").is_none(),
        "{whole}"
    );
}
