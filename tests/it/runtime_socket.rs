//! The AWS Batch quota-share example run live on `sample-configs/aws-example` with real
//! `sleep` processes, and the control socket's answers to bad requests.

use crate::common;

use common::{BIN, Server, config, share};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

fn aws_example() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sample-configs/aws-example");
    Server::start_dir(dir, src, &["--stop-jobs-on-exit"])
}

fn ids(list: &Value) -> Vec<u64> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_u64().unwrap())
        .collect()
}

#[test]
fn aws_example_borrow_reclaim_and_in_share_preemption() {
    let s = aws_example();
    let j3 = s.submit(
        &["--share", "qs1", "--priority", "3", "--name", "j3"],
        &["sleep", "300"],
    );
    let j2 = s.submit(
        &["--share", "qs1", "--priority", "2", "--name", "j2"],
        &["sleep", "300"],
    );
    let j1 = s.submit(
        &["--share", "qs1", "--priority", "1", "--name", "j1"],
        &["sleep", "300"],
    );
    s.wait_state(j3, "RUNNING", 20);
    let b = s.wait_state(j2, "RUNNING", 20);
    assert_eq!(b["on_borrowed"], true, "qs1 borrows qs2's idle GPU: {b}");
    // qs3 is RESERVE: j1 waits instead of borrowing its GPU.
    let w = s.job(j1);
    assert_eq!(w["state"], "RUNNABLE");
    assert!(
        w["reason"].as_str().unwrap().contains("qs3 reserves"),
        "{w}"
    );

    // qs2 takes its GPU back.
    let k = s.submit(&["--share", "qs2", "--name", "k"], &["sleep", "300"]);
    s.wait_state(k, "RUNNING", 20);
    s.wait_state(j2, "RUNNABLE", 20);
    let r = s.submit(&["--share", "qs3", "--name", "r"], &["sleep", "300"]);
    s.wait_state(r, "RUNNING", 20);

    // A raised priority preempts inside qs1.
    assert!(s.cli(&["priority", &j1.to_string(), "4"]).status.success());
    s.wait_state(j1, "RUNNING", 20);
    s.wait_state(j3, "RUNNABLE", 20);

    let jobs = s.jobs();
    let mut running = ids(&jobs["running"]);
    running.sort();
    assert_eq!(running, vec![j1, k, r]);
    assert_eq!(ids(&jobs["queue"]), vec![j3, j2], "priority order");
    let p = jobs["preemptions"].as_array().unwrap();
    assert_eq!(p.len(), 2, "{p:?}");
    // Newest first.
    assert_eq!(
        (p[1]["victim"].as_u64(), p[1]["by"].as_u64()),
        (Some(j2), Some(k))
    );
    assert_eq!(p[1]["reason"], "CROSS_SHARE_RECLAIM");
    assert_eq!(p[1]["victim_share"], "qs1");
    assert_eq!(p[1]["by_share"], "qs2");
    assert_eq!(p[1]["outcome"], "requeued");
    assert_eq!(
        (p[0]["victim"].as_u64(), p[0]["by"].as_u64()),
        (Some(j3), Some(j1))
    );
    assert_eq!(p[0]["reason"], "IN_SHARE_PRIORITY");
    assert_eq!(p[0]["outcome"], "requeued");

    // `status` shows the shares.
    let out = s.cli(&["status", "--json"]);
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    let qs1 = st["shares"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "qs1")
        .unwrap();
    assert_eq!(qs1["usage"], 1);
    assert_eq!(st["units"][0]["used"], 3);
}

/// Send raw lines on one connection, return the answers.
pub(crate) fn ask(s: &Server, lines: &[&[u8]]) -> Vec<Value> {
    let stream = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    let mut out = Vec::new();
    for l in lines {
        w.write_all(l).unwrap();
        let mut a = String::new();
        r.read_line(&mut a).unwrap();
        out.push(serde_json::from_str(&a).unwrap_or(Value::Null));
    }
    out
}

fn error_of(v: &Value) -> String {
    assert_eq!(v["ok"], false, "{v}");
    v["error"].as_str().unwrap_or("").to_string()
}

#[test]
fn bad_requests_get_clear_errors() {
    let s = Server::start(&config(2, 1, &share("team", 1, "LEND", false)));
    let mode = std::fs::metadata(s.state.join("shareq.sock"))
        .unwrap()
        .permissions()
        .mode();
    // SPEC §9: open to every local user under root (peer credentials decide), private
    // for a scheduler run by an ordinary user.
    let expected = if nix::unistd::geteuid().is_root() {
        0o666
    } else {
        0o600
    };
    assert_eq!(mode & 0o777, expected);
    let a = ask(
        &s,
        &[
            b"this is not json\n",
            b"{\"op\":\"fly\"}\n",
            b"{\"op\":\"submit\",\"job\":{\"jobName\":\"x\",\"quotaShareName\":\"nope\",\"command\":\"true\"}}\n",
            b"{\"op\":\"submit\",\"job\":{\"jobName\":\"x\",\"quotaShareName\":\"team\",\"quantity\":5,\"command\":\"true\"}}\n",
            b"{\"op\":\"submit\",\"job\":{\"jobName\":\"x\",\"quotaShareName\":\"team\",\"colour\":\"red\",\"command\":\"true\"}}\n",
            b"{\"op\":\"submit\",\"job\":{\"jobName\":\"x\",\"quotaShareName\":\"team\"}}\n",
            b"{\"op\":\"cancel\",\"ids\":[999]}\n",
            b"{\"op\":\"priority\",\"id\":999,\"priority\":3}\n",
            b"{\"op\":\"priority\",\"id\":1,\"priority\":10000}\n",
            b"\n",
            b"{\"op\":\"status\"}\n",
        ],
    );
    assert!(error_of(&a[0]).contains("malformed request"), "{}", a[0]);
    assert!(
        error_of(&a[1]).contains("unknown variant `fly`"),
        "{}",
        a[1]
    );
    assert!(
        error_of(&a[2]).contains("quota share `nope` does not exist"),
        "{}",
        a[2]
    );
    assert!(
        error_of(&a[3]).contains("QUOTA_MANAGEMENT_LIMIT_EXCEEDED: needs 5"),
        "{}",
        a[3]
    );
    assert!(
        error_of(&a[4]).contains("unknown field `colour`"),
        "{}",
        a[4]
    );
    assert!(error_of(&a[5]).contains("command is required"), "{}", a[5]);
    assert!(error_of(&a[6]).contains("no job 999"), "{}", a[6]);
    assert!(error_of(&a[7]).contains("no job 999"), "{}", a[7]);
    assert!(error_of(&a[8]).contains("out of range"), "{}", a[8]);
    assert!(error_of(&a[9]).contains("empty request"), "{}", a[9]);
    assert_eq!(a[10]["ok"], true, "the connection still works after errors");

    // An oversized line is refused and the connection closed.
    let mut big = vec![b'x'; (1 << 20) + 10];
    big.push(b'\n');
    let a = ask(&s, &[&big]);
    assert!(error_of(&a[0]).contains("request too large"), "{}", a[0]);

    // Nothing was queued by any of this.
    let j = s.jobs();
    assert!(
        j["queue"].as_array().unwrap().is_empty() && j["finished"].as_array().unwrap().is_empty()
    );

    // The CLI reports rejections in words, with a non-zero exit.
    let out = std::process::Command::new(BIN)
        .args(["submit", "--share", "team", "--gpus", "9", "--state"])
        .arg(&s.state)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("QUOTA_MANAGEMENT_LIMIT_EXCEEDED"));
}

#[test]
fn a_second_scheduler_on_the_same_state_directory_is_refused() {
    let s = Server::start(&config(1, 1, &share("team", 1, "LEND", false)));
    let out = std::process::Command::new(BIN)
        .arg("serve")
        .arg("--config")
        .arg(&s.config)
        .arg("--state")
        .arg(&s.state)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let holder = std::fs::read_to_string(s.state.join("shareq.lock")).unwrap();
    assert!(
        err.contains("already scheduling") && err.contains(&format!("pid {}", holder.trim())),
        "{err}"
    );
}

/// Many requests written at once on one connection: each is answered, in order, and a
/// `jobs` sent last sees every submit before it (read-your-writes holds when pipelined).
#[test]
fn pipelined_requests_are_answered_in_order() {
    let s = Server::start(&config(1, 1, &share("team", 1, "LEND", false)));
    let stream = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
    let mut w = stream.try_clone().unwrap();
    let mut batch = Vec::new();
    for i in 0..300 {
        batch.extend_from_slice(
            format!(
                "{{\"op\":\"submit\",\"job\":{{\"jobName\":\"p{i}\",\"quotaShareName\":\"team\",\"command\":[\"sleep\",\"300\"]}}}}\n"
            )
            .as_bytes(),
        );
    }
    batch.extend_from_slice(b"{\"op\":\"cancel\",\"ids\":[999999]}\n{\"op\":\"jobs\"}\n");
    w.write_all(&batch).unwrap();
    let mut r = BufReader::new(stream);
    let mut answers = Vec::new();
    for _ in 0..302 {
        let mut a = String::new();
        r.read_line(&mut a).unwrap();
        answers.push(serde_json::from_str::<Value>(&a).unwrap());
    }
    let submitted: Vec<u64> = answers[..300]
        .iter()
        .map(|a| a["id"].as_u64().expect("submitted"))
        .collect();
    assert!(
        submitted.windows(2).all(|p| p[0] < p[1]),
        "answers in request order"
    );
    assert!(error_of(&answers[300]).contains("no job 999999"));
    let jobs = &answers[301]["jobs"];
    let mut seen = ids(&jobs["queue"]);
    seen.extend(ids(&jobs["running"]));
    seen.sort();
    assert_eq!(seen, submitted, "jobs sees every submit sent before it");
}

/// A subscriber gets the whole picture first, then deltas that name only what changed.
#[test]
fn subscribers_get_the_picture_then_deltas() {
    let s = Server::start(&config(1, 1, &share("team", 1, "LEND", false)));
    let first = s.submit(&["--share", "team"], &["sleep", "300"]);
    s.wait_state(first, "RUNNING", 20);
    for _ in 0..50 {
        s.submit(&["--share", "team"], &["true"]);
    }
    // `jobs` makes the runtime publish everything sent before it.
    assert_eq!(s.jobs()["queue"].as_array().map(Vec::len), Some(50));
    let stream = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
    let mut w = stream.try_clone().unwrap();
    w.write_all(b"{\"op\":\"subscribe\"}\n").unwrap();
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let full: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        full["full"]["queue"].as_array().map(Vec::len),
        Some(50),
        "{line}"
    );
    let version = full["full"]["version"].as_u64().unwrap();
    // One more job: the next message is a delta from that version with one row.
    let last = s.submit(&["--share", "team", "--name", "newest"], &["true"]);
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let d: Value = serde_json::from_str(&line).unwrap();
        let d = &d["delta"];
        assert!(d.is_object(), "a delta, not the whole picture: {line}");
        assert!(d["base"].as_u64().unwrap() >= version);
        let rows = d["queue"].as_array().unwrap();
        assert!(rows.len() <= 2, "only what changed: {line}");
        if rows
            .iter()
            .any(|c| c["upsert"]["id"].as_u64() == Some(last))
        {
            break;
        }
    }
}

#[test]
fn jobs_filters_narrow_the_lists_and_the_json() {
    let s = aws_example();
    let a = s.submit(&["--share", "qs1", "--name", "train-a"], &["sleep", "300"]);
    let b = s.submit(&["--share", "qs2", "--name", "eval-b"], &["sleep", "300"]);
    let c = s.submit(
        &["--share", "qs1", "--name", "train-c", "--gpus", "2"],
        &["sleep", "300"],
    );
    s.wait_state(a, "RUNNING", 20);
    s.wait_state(b, "RUNNING", 20);
    let json = |args: &[&str]| -> Value { s.jobs_json(args) };
    let every = |v: &Value| -> Vec<u64> {
        let mut ids: Vec<u64> = ["queue", "running"]
            .iter()
            .flat_map(|k| v[*k].as_array().unwrap().iter())
            .map(|j| j["id"].as_u64().unwrap())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(every(&json(&["--share", "qs1"])), vec![a, c]);
    assert_eq!(every(&json(&["--share", "qs1,qs2"])), vec![a, b, c]);
    assert_eq!(every(&json(&["--status", "queued"])), vec![c]);
    assert_eq!(every(&json(&["--status", "running"])), vec![a, b]);
    assert_eq!(every(&json(&["--name", "train"])), vec![a, c]);
    assert_eq!(
        every(&json(&["--share", "qs1", "--status", "RUNNING"])),
        vec![a]
    );
    // The table too.
    let out = s.cli(&["jobs", "--share", "qs2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("eval-b") && !text.contains("train-a"),
        "{text}"
    );
    // A state that does not exist is an error that says which ones do.
    let out = s.cli(&["jobs", "--status", "sleeping"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--status sleeping: not a job state"), "{err}");
}

#[test]
fn cancel_by_filter_lists_asks_and_cancels_only_the_matching_jobs() {
    let s = aws_example();
    let a = s.submit(&["--share", "qs1", "--name", "sweep-1"], &["sleep", "300"]);
    let b = s.submit(&["--share", "qs2", "--name", "eval-b"], &["sleep", "300"]);
    let c = s.submit(&["--share", "qs1", "--name", "sweep-2"], &["sleep", "300"]);
    // A sweep step that waits on another (PENDING, SPEC §13) matches too.
    let d = s.submit(
        &[
            "--share",
            "qs1",
            "--name",
            "sweep-3",
            "--after",
            &c.to_string(),
        ],
        &["sleep", "300"],
    );
    s.wait_state(a, "RUNNING", 20);
    s.wait_state(b, "RUNNING", 20);
    s.wait_state(d, "PENDING", 20);
    // Without a terminal to ask on, a filter needs --yes; nothing is cancelled.
    let out = s.cli(&["cancel", "--share", "qs1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --yes"));
    assert_eq!(s.state_of(a), "RUNNING");
    // Ids and filters together, or nothing at all, is a mistake.
    assert_eq!(
        s.cli(&["cancel", "1", "--share", "qs1"]).status.code(),
        Some(2)
    );
    assert_eq!(s.cli(&["cancel"]).status.code(), Some(2));
    let out = s.cli(&["cancel", "--share", "qs1", "--name", "sweep", "--yes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("sweep-1") && text.contains("sweep-2") && text.contains("sweep-3"),
        "{text}"
    );
    assert!(!text.contains("eval-b"), "{text}");
    s.wait_state(a, "FAILED", 20);
    s.wait_state(c, "FAILED", 20);
    s.wait_state(d, "FAILED", 20);
    assert_eq!(s.state_of(b), "RUNNING");
}
