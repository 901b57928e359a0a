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
