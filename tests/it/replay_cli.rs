//! `shareq replay` as a user runs it: exit codes, `--check`, `--summary`, and clear errors
//! (file, line, what is wrong) for scenarios and traces that cannot be read.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn shareq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shareq"))
        .args(args)
        .output()
        .expect("shareq runs")
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("shareq-replay-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

const CONFIG: &str = "config:
- {kind: ServiceEnvironment, name: sim, capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]}
- {kind: QuotaShare, quotaShareName: qs1, capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}], resourceSharingConfiguration: {strategy: LEND_AND_BORROW}}
";

/// Write `body` as a scenario and run it; returns (exit code, stderr).
fn broken(name: &str, body: &str, trace: Option<&str>) -> (i32, String) {
    let dir = tempdir(name);
    let path = dir.join("s.yaml");
    std::fs::write(&path, body).expect("write");
    if let Some(t) = trace {
        std::fs::write(dir.join("t.csv"), t).expect("write trace");
    }
    let out = shareq(&["replay", path.to_str().expect("utf8")]);
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn shared_scenarios_pass_check_through_the_binary() {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/reclaim-06-both-sides.yaml");
    let out = shareq(&["replay", "--check", p.to_str().expect("utf8")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = stdout.lines().next().expect("a line");
    assert!(
        first.starts_with(r#"{"t":0,"event":"submitted","job":"c1-low","share":"c1"}"#),
        "{first}"
    );
}

#[test]
fn a_failing_check_exits_1_with_a_diff() {
    let dir = tempdir("failcheck");
    let path = dir.join("s.yaml");
    std::fs::write(
        &path,
        format!(
            "{CONFIG}events:\n- at: 0\n  submit: {{jobName: a, quotaShareName: qs1, quantity: 1, duration: 5}}\nexpect:\n  include:\n  - {{t: 3, event: succeeded, job: a}}\n"
        ),
    )
    .expect("write");
    let out = shareq(&["replay", "--check", path.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("missing line"), "{err}");
    assert!(
        err.contains(r#"nearest: {"t":5,"event":"succeeded","job":"a"}"#),
        "{err}"
    );
}

/// `--summary --text` (and `--summary` at a terminal) is for people (issue 46 item 6): the
/// totals and a table per share, no decision lines and no JSON; to a pipe `--summary` is the
/// machine's, as SPEC §6 says (below).
#[test]
fn summary_as_text_is_a_human_summary() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/aws-01-blog-example.yaml");
    let out = shareq(&["replay", "--summary", "--text", p.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains('{'), "no JSON:\n{text}");
    assert!(text.lines().count() < 20, "{text}");
    assert!(
        text.contains("simulated,") && text.contains("utilisation"),
        "{text}"
    );
    let qs1 = text
        .lines()
        .find(|l| l.starts_with("qs1 "))
        .unwrap_or_else(|| panic!("no qs1 row:\n{text}"));
    // qs1: j2 borrowed qs2's GPU for 9 s, and 2 preemptions.
    let cells: Vec<&str> = qs1.split_whitespace().collect();
    assert_eq!(cells[2], "9s", "{text}");
    assert_eq!(cells[8], "2", "{text}");
    let qs2 = text.lines().find(|l| l.starts_with("qs2 ")).unwrap();
    assert_eq!(qs2.split_whitespace().nth(3), Some("9s"), "{text}");
}

/// SPEC §15: the human summary gives a sliced unit's GiB time on a line of its own, never in
/// the GPU time; a replay without sliced units has no such line.
#[test]
fn summary_as_text_gives_gib_time_apart() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let p = dir.join("slice-07-mixed-whole-and-sliced-summary.yaml");
    let out = shareq(&["replay", "--summary", "--text", p.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    // 15 GPU-seconds; 400 + 100 GiB-seconds.
    assert!(text.contains(" 15s of GPU time used"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("sliced units: "))
        .unwrap_or_else(|| panic!("no sliced line:\n{text}"));
    assert!(line.contains("8m20s of GiB time"), "{text}");
    assert!(line.ends_with(": a 6m40s, b 1m40s"), "{text}");
    let p = dir.join("aws-01-blog-example.yaml");
    let out = shareq(&["replay", "--summary", "--text", p.to_str().expect("utf8")]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("sliced units"));
}

/// SPEC §6: to a pipe (here) `--summary` adds a last summary line after the decisions, and
/// `--json` gives the same at a terminal.
#[test]
fn summary_adds_a_last_line() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/aws-01-blog-example.yaml");
    let out = shareq(&["replay", "--summary", p.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(0));
    let piped = String::from_utf8_lossy(&out.stdout).to_string();
    let out = shareq(&["replay", "--summary", "--json", p.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(piped, stdout, "--summary to a pipe is the machine form");
    assert!(
        stdout.lines().count() > 1,
        "the decisions come first:\n{stdout}"
    );
    let last: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("line")).expect("json");
    assert_eq!(last["event"], "summary");
    let qs1 = &last["shares"]["qs1"];
    assert_eq!(qs1["preemptions"], 2);
    // j2 borrowed qs2's GPU from t=1 to t=10.
    assert_eq!(qs1["gpu_seconds_borrowed"], 9.0);
    assert_eq!(last["shares"]["qs2"]["gpu_seconds_lent"], 9.0);
    assert!(last["utilisation"].as_f64().expect("number") > 0.0);
}

#[test]
fn invalid_yaml_names_the_file_and_line() {
    let (code, err) = broken(
        "yaml",
        &format!("{CONFIG}events:\n- at: 0\n  submit: {{jobName: a\n"),
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("s.yaml:"), "{err}");
}

#[test]
fn unknown_event_kind_is_an_error() {
    let (code, err) = broken(
        "kind",
        &format!("{CONFIG}events:\n- at: 0\n  kill: a\n"),
        None,
    );
    assert_eq!(code, 2);
    assert!(err.contains("unknown field `kill`"), "{err}");
    assert!(err.contains("s.yaml:6"), "{err}");
}

#[test]
fn unknown_field_in_a_submit_is_an_error() {
    let (code, err) = broken(
        "field",
        &format!(
            "{CONFIG}events:\n- at: 0\n  submit: {{jobName: a, quotaShareName: qs1, gpus: 1}}\n"
        ),
        None,
    );
    assert_eq!(code, 2);
    assert!(err.contains("unknown field `gpus`"), "{err}");
}

#[test]
fn an_event_naming_an_unknown_job_is_an_error() {
    let (code, err) = broken(
        "unknownjob",
        &format!(
            "{CONFIG}events:\n- at: 0\n  submit: {{jobName: a, quotaShareName: qs1}}\n- at: 5\n  cancel: b\n"
        ),
        None,
    );
    assert_eq!(code, 2);
    assert!(err.contains("unknown job `b`"), "{err}");
    assert!(err.contains("s.yaml:7"), "{err}");
}

#[test]
fn an_invalid_initial_config_makes_the_scenario_unreadable() {
    let (code, err) = broken(
        "config",
        "config:\n- {kind: ServiceEnvironment, name: sim, capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]}\n- {kind: QuotaShare, quotaShareName: q, capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}], resourceSharingConfiguration: {strategy: RESERVE, borrowLimit: 10}}\n",
        None,
    );
    assert_eq!(code, 2);
    assert!(err.contains("borrowLimit"), "{err}");
}

#[test]
fn trace_times_out_of_order_name_the_line() {
    let (code, err) = broken(
        "order",
        &format!("{CONFIG}trace: t.csv\n"),
        Some("at,duration,quantity,quotaShareName\n0,10,1,qs1\n5,10,1,qs1\n4,10,1,qs1\n"),
    );
    assert_eq!(code, 2);
    assert!(err.contains("t.csv:4"), "{err}");
    assert!(err.contains("time order"), "{err}");
}

#[test]
fn trace_bad_numbers_and_columns_are_errors() {
    let (code, err) = broken(
        "num",
        &format!("{CONFIG}trace: t.csv\n"),
        Some("at,duration,quantity,quotaShareName\n0,ten,1,qs1\n"),
    );
    assert_eq!(code, 2);
    assert!(err.contains("t.csv:2") && err.contains("duration"), "{err}");
    let (code, err) = broken(
        "col",
        &format!("{CONFIG}trace: t.csv\n"),
        Some("at,duration,quantity,quotaShareName,gpuType\n0,1,1,qs1,v100\n"),
    );
    assert_eq!(code, 2);
    assert!(err.contains("unknown column `gpuType`"), "{err}");
}

#[test]
fn a_trace_replays_with_default_names() {
    let dir = tempdir("trace-ok");
    std::fs::write(
        dir.join("t.csv"),
        "at,duration,quantity,quotaShareName\n0,10,1,qs1\n0,10,2,qs1\n",
    )
    .expect("write");
    let path = dir.join("s.yaml");
    std::fs::write(&path, format!("{CONFIG}trace: t.csv\n")).expect("write");
    let out = shareq(&["replay", path.to_str().expect("utf8")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(r#""event":"started","job":"job-1""#),
        "{stdout}"
    );
    assert!(stdout.contains(r#"{"t":10,"event":"started","job":"job-2","share":"qs1","unit":"gpu","quantity":2,"borrowed":1"#), "{stdout}");
}

/// SPEC §16: a trace's `numNodes` column makes a row a gang (`1` or empty: a plain job);
/// its started line carries devices per node and the nodes.
#[test]
fn a_trace_num_nodes_column_makes_gangs() {
    let dir = tempdir("trace-gangs");
    std::fs::write(
        dir.join("t.csv"),
        "at,duration,quantity,quotaShareName,numNodes\n0,10,2,qs1,2\n0,10,1,qs1,1\n0,10,1,qs1,\n",
    )
    .expect("write");
    let path = dir.join("s.yaml");
    let config = "config:
- {kind: ServiceEnvironment, name: sim, capacityLimits: [{capacityUnit: gpu, maxCapacity: 6}], nodes: [{name: n1, devices: {gpu: {fake: 3}}}, {name: n2, devices: {gpu: {fake: 3}}}]}
- {kind: QuotaShare, quotaShareName: qs1, capacityLimits: [{capacityUnit: gpu, maxCapacity: 6}], resourceSharingConfiguration: {strategy: LEND_AND_BORROW}}
";
    std::fs::write(&path, format!("{config}trace: t.csv\n")).expect("write");
    let out = shareq(&["replay", path.to_str().expect("utf8")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(r#""job":"job-1","share":"qs1","unit":"gpu","quantity":2,"borrowed":0,"devices":[[0,1],[0,1]],"nodes":["n1","n2"]"#),
        "{stdout}"
    );
    assert!(stdout.contains(r#""job":"job-2","share":"qs1","unit":"gpu","quantity":1,"borrowed":0,"devices":[2],"node":"n1""#), "{stdout}");
    assert!(stdout.contains(r#""job":"job-3","share":"qs1","unit":"gpu","quantity":1,"borrowed":0,"devices":[2],"node":"n2""#), "{stdout}");
}

#[test]
fn a_missing_file_exits_2() {
    let out = shareq(&["replay", "/nonexistent/scenario.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}

/// SPEC §13: the summary counts an array's children, not its parent: the 3 children of
/// `steps` and `report` finished, 4 jobs (the parent's own `succeeded` line is not a job).
#[test]
fn the_summary_counts_an_array_s_children_not_its_parent() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/array-01-sequential.yaml");
    let out = shareq(&["replay", "--summary", "--json", p.to_str().expect("utf8")]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(r#""job":"steps","array":3}"#),
        "the parent's succeeded line says its size: {text}"
    );
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["shares"]["A"]["jobs_finished"], 4, "{last}");
    assert_eq!(last["shares"]["A"]["jobs_succeeded"], 4, "{last}");
}

/// Three 10 s attempts of ann's make her history; x (10 s) runs from 100; y, queued at
/// 101, is estimated from that history exactly as live would: x ends at 110.
const ESTIMATED: &str = "config:
- {kind: ServiceEnvironment, name: sim, capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]}
- {kind: QuotaShare, quotaShareName: qs1, capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}], resourceSharingConfiguration: {strategy: LEND_AND_BORROW}}
events:
- {at: 0, submit: {jobName: h1, quotaShareName: qs1, duration: 10, user: ann}}
- {at: 0, submit: {jobName: h2, quotaShareName: qs1, duration: 10, user: ann}}
- {at: 0, submit: {jobName: h3, quotaShareName: qs1, duration: 10, user: ann}}
- {at: 100, submit: {jobName: x, quotaShareName: qs1, duration: 10, user: ann}}
- {at: 101, submit: {jobName: y, quotaShareName: qs1, duration: 5, user: ann}}
";

fn replay_lines(name: &str, body: &str, args: &[&str]) -> Vec<String> {
    let dir = tempdir(name);
    let path = dir.join("s.yaml");
    std::fs::write(&path, body).expect("write");
    let mut all = vec!["replay"];
    all.extend_from_slice(args);
    all.push(path.to_str().expect("utf8"));
    let out = shareq(&all);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn estimates_add_one_line_per_nth_submission_computed_from_the_replays_past() {
    let plain = replay_lines("est-plain", ESTIMATED, &[]);
    let every = replay_lines("est-1", ESTIMATED, &["--estimates", "1"]);
    let estimated: Vec<&String> = every
        .iter()
        .filter(|l| l.contains(r#""event":"estimated""#))
        .collect();
    // Everything else is the plain replay's output, line for line.
    let rest: Vec<&String> = every
        .iter()
        .filter(|l| !l.contains(r#""event":"estimated""#))
        .collect();
    assert_eq!(rest, plain.iter().collect::<Vec<_>>());
    assert_eq!(estimated.len(), 5, "{estimated:#?}");
    // h1 starts at once; h2 and h3 wait behind h1, whose end nobody knows yet (no history,
    // no timeout): lower bounds naming it.
    assert_eq!(
        estimated[0],
        r#"{"t":0,"event":"estimated","job":"h1","kind":"range","earliest":0,"start":0,"latest":0}"#
    );
    assert!(
        estimated[1].starts_with(
            r#"{"t":0,"event":"estimated","job":"h2","kind":"lower_bound","earliest":1,"start":1,"latest":null,"waitsOn":"job 1 (qs1)"#
        ),
        "{}",
        estimated[1]
    );
    // y, from ann's three 10 s attempts: x (started at 100) ends at 110.
    assert_eq!(
        estimated[4],
        r#"{"t":101,"event":"estimated","job":"y","kind":"range","earliest":110,"start":110,"latest":110}"#
    );
    // Each follows the lines of its own instant, before the next instant's.
    let y = every.iter().position(|l| l == estimated[4]).unwrap();
    assert!(every[y - 1].contains(r#""t":101"#), "{every:#?}");
    assert!(every[y + 1..].iter().all(|l| !l.contains(r#""t":101"#)));
    assert!(
        every
            .iter()
            .any(|l| l.starts_with(r#"{"t":110,"event":"started","job":"y""#)),
        "the estimate held: {every:#?}"
    );
    // Every 2nd submission: h2 and x.
    let second = replay_lines("est-2", ESTIMATED, &["--estimates", "2"]);
    let jobs: Vec<String> = second
        .iter()
        .filter(|l| l.contains(r#""event":"estimated""#))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["job"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(jobs, ["h2", "x"]);
    // 0 is refused.
    let dir = tempdir("est-0");
    let path = dir.join("s.yaml");
    std::fs::write(&path, ESTIMATED).expect("write");
    let out = shareq(&["replay", "--estimates", "0", path.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2));
}
