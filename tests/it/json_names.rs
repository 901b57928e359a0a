//! Every key shareq writes for programs is camelCase (docs/API.md, "Key names"): each
//! answer of a real `serve` over the socket (streams included) and each `--json` output
//! of the CLI, walked to the bottom. A snake_case key passes only as a deprecated old
//! name listed in docs/API.md, written beside its camelCase name with the same value.
//!
//! Keys that are data are told from field names by what the test gave the scheduler:
//! its share, unit and user names, job states and ids (numbers) may be keys of maps
//! (a report's `shares` and `users`, an array's `counts`). The share names fail the
//! camelCase rule (`qs_a`, `qs-b`), and the walk must see them as keys as they were
//! given: the renaming leaves data alone.

use crate::api_doc::deprecated;
use crate::common::{Server, config, me, share};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

fn is_camel(k: &str) -> bool {
    let mut c = k.chars();
    c.next().is_some_and(|f| f.is_ascii_lowercase()) && c.all(|c| c.is_ascii_alphanumeric())
}

/// The keys of `v` (at any depth, the JSON inside an event's `line` included) that are
/// neither camelCase, nor data, nor a listed old name beside its new one.
fn bad_keys(
    v: &Value,
    at: &str,
    data: &BTreeSet<String>,
    old: &BTreeMap<String, String>,
    out: &mut Vec<String>,
) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let path = format!("{at}.{k}");
                let fine = is_camel(k)
                    || data.contains(k)
                    || k.bytes().all(|b| b.is_ascii_digit())
                    || old.get(k).is_some_and(|new| m.get(new) == Some(x));
                if !fine {
                    out.push(path.clone());
                }
                if k == "line"
                    && let Some(Ok(inner)) = x.as_str().map(serde_json::from_str::<Value>)
                {
                    bad_keys(&inner, &path, data, old, out);
                }
                bad_keys(x, &path, data, old, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                bad_keys(x, &format!("{at}[{i}]"), data, old, out);
            }
        }
        _ => {}
    }
}

struct Check {
    data: BTreeSet<String>,
    old: BTreeMap<String, String>,
    bad: Vec<String>,
    /// Every key seen, to show the test saw what it means to check.
    seen: BTreeSet<String>,
}

impl Check {
    fn new() -> Check {
        let mut data: BTreeSet<String> = ["qs_a", "qs-b", "gpu", &me()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for s in [
            "SUBMITTED",
            "PENDING",
            "RUNNABLE",
            "SCHEDULED",
            "STARTING",
            "RUNNING",
            "SUCCEEDED",
            "FAILED",
        ] {
            data.insert(s.to_string());
        }
        Check {
            data,
            old: deprecated(),
            bad: Vec::new(),
            seen: BTreeSet::new(),
        }
    }

    fn value(&mut self, what: &str, v: &Value) {
        collect(v, &mut self.seen);
        bad_keys(v, what, &self.data, &self.old, &mut self.bad);
    }

    fn text(&mut self, what: &str, text: &[u8]) {
        let text = String::from_utf8_lossy(text);
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{what} is not JSON ({e}): {text}"));
        self.value(what, &v);
    }
}

fn collect(v: &Value, seen: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                seen.insert(k.clone());
                if k == "line"
                    && let Some(Ok(inner)) = x.as_str().map(serde_json::from_str::<Value>)
                {
                    collect(&inner, seen);
                }
                collect(x, seen);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect(x, seen)),
        _ => {}
    }
}

/// One request on a fresh connection; its answer line.
fn ask(s: &Server, req: &Value) -> Value {
    lines(s, req, Some(1)).remove(0)
}

/// The first `most` lines the scheduler writes after `req` (all of them up to its close
/// when `None`).
fn lines(s: &Server, req: &Value, most: Option<usize>) -> Vec<Value> {
    let mut c = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    writeln!(c, "{req}").unwrap();
    let mut out = Vec::new();
    for line in BufReader::new(c).lines() {
        let line = line.unwrap();
        out.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
        if most.is_some_and(|m| out.len() >= m) {
            break;
        }
    }
    assert!(!out.is_empty(), "no answer to {req}");
    out
}

fn cli_json(s: &Server, args: &[&str]) -> Vec<u8> {
    let out = s.cli(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn the_config() -> String {
    config(
        2,
        1,
        &format!(
            "{}---\n{}",
            share("qs_a", 1, "LEND_AND_BORROW", false),
            share("qs-b", 1, "LEND_AND_BORROW", false)
        ),
    )
}

#[test]
fn every_answer_and_json_output_of_a_live_scheduler_is_camel_case() {
    let s = Server::start(&the_config());
    let sleep = ["sleep", "600"];
    // A job that borrows, then is preempted by the lender's own: preemption records,
    // `by_share`/`by_id` lines; one that finished; one cancelled; one reprioritized; an
    // array and a job that waits for another.
    let done = s.submit(&["--share", "qs_a", "--name", "done"], &["true"]);
    s.wait_state(done, "SUCCEEDED", 20);
    let big = s.submit(&["--share", "qs_a", "--gpus", "2", "--name", "big"], &sleep);
    s.wait_state(big, "RUNNING", 20);
    let lender = s.submit(&["--share", "qs-b", "--name", "lender"], &sleep);
    s.wait_state(lender, "RUNNING", 20);
    let queued = s.submit(&["--share", "qs_a", "--name", "queued"], &sleep);
    let after = queued.to_string();
    s.submit(
        &["--share", "qs_a", "--name", "after", "--after", &after],
        &["true"],
    );
    s.submit(
        &["--share", "qs_a", "--name", "arr", "--array", "2"],
        &["true"],
    );
    assert!(s.cli(&["priority", &big.to_string(), "7"]).status.success());
    let gone = s.submit(&["--share", "qs-b", "--name", "gone"], &sleep);
    assert!(s.cli(&["cancel", &gone.to_string()]).status.success());
    s.wait_state(gone, "FAILED", 20);

    let mut check = Check::new();
    let job = json!({"jobName": "p", "quotaShareName": "qs_a", "quantity": 1,
                     "command": ["true"]});
    let shares = std::fs::read_to_string(s.config.join("config.yaml")).unwrap();
    let file = json!([{"path": "config.yaml", "text": shares}]);
    let requests = [
        json!({"op": "hello", "api": 1}),
        json!({"op": "status"}),
        json!({"op": "jobs", "all": true}),
        json!({"op": "job", "id": big}),
        json!({"op": "job", "id": 999}),
        json!({"op": "log", "id": done}),
        json!({"op": "audit", "limit": 50}),
        json!({"op": "predict", "job": job}),
        json!({"op": "history", "window": "hour"}),
        json!({"op": "report", "since": 0, "until": 4_000_000_000_000i64, "users": true}),
        json!({"op": "put_config", "file": "config.yaml", "text": shares, "dryRun": true}),
        json!({"op": "dry_run", "config": file}),
        json!({"op": "whatif", "config": file, "since": 0}),
        json!({"op": "priority", "id": queued, "priority": 3}),
        json!({"op": "cancel", "ids": [999]}),
        json!({"op": "checkpoint", "job": big, "attempt": 1, "token": "00"}),
        json!({"op": "sumbit"}),
    ];
    for r in &requests {
        let a = ask(&s, r);
        check.value(&format!("{}", r["op"]), &a);
    }
    for l in lines(&s, &json!({"op": "events", "since": 0}), None) {
        check.value("events", &l);
    }
    for l in lines(&s, &json!({"op": "subscribe"}), Some(1)) {
        check.value("subscribe", &l);
    }

    let whatif_dir = s.path("whatif");
    std::fs::create_dir_all(&whatif_dir).unwrap();
    std::fs::write(whatif_dir.join("config.yaml"), the_config()).unwrap();
    let outputs: [&[&str]; 7] = [
        &["jobs", "--all", "--json"],
        &["status", "--json"],
        &["report", "--users", "--json"],
        &["history", "--json", "--window", "hour"],
        &["audit", "--json"],
        &[
            "whatif",
            "--config",
            whatif_dir.to_str().unwrap(),
            "--since",
            "1h",
            "--json",
        ],
        &[
            "submit",
            "--share",
            "qs_a",
            "--predict",
            "--json",
            "--",
            "true",
        ],
    ];
    for args in outputs {
        let out = cli_json(&s, args);
        check.text(&args.join(" "), &out);
    }
    let events = cli_json(&s, &["events", "--json", "--since", "1h"]);
    for l in String::from_utf8_lossy(&events).lines() {
        check.text("events --json", l.as_bytes());
    }

    assert!(
        check.bad.is_empty(),
        "keys not in camelCase: {:#?}",
        check.bad
    );
    // What the walk saw: renamed fields under both names, data keys as they are.
    for k in [
        "envName",
        "env_name",
        "gracePeriodSeconds",
        "preemptedCount",
        "preempted_count",
        "victimShare",
        "byShare",
        "by_share",
        "byId",
        "cancelledBy",
        "reprioritizedBy",
        "gpuSecondsUsed",
        "gpu_seconds_used",
        "usersShown",
        "notAllowed",
        "qs_a",
        "qs-b",
        "callerIsAdmin",
    ] {
        assert!(check.seen.contains(k), "no `{k}` seen in any answer");
    }
}

/// A request written with an old key name is read as with the new one: `dry_run` on
/// `put_config` validates without writing, as `dryRun` does.
#[test]
fn an_old_key_name_in_a_request_still_works() {
    let s = Server::start(&the_config());
    let path = s.config.join("config.yaml");
    let before = std::fs::read_to_string(&path).unwrap();
    let text = before.replacen("LEND_AND_BORROW", "LEND", 1);
    assert_ne!(text, before);
    for key in ["dry_run", "dryRun"] {
        let a = ask(
            &s,
            &json!({"op": "put_config", "file": "config.yaml", "text": text, key: true}),
        );
        assert_eq!(a["ok"], true, "{key}: {a}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            before,
            "{key}: a dry run wrote the file"
        );
    }
    let a = ask(
        &s,
        &json!({"op": "put_config", "file": "config.yaml", "text": text}),
    );
    assert_eq!(a["ok"], true, "{a}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}
