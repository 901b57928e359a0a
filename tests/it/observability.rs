//! Issue 16 end to end: a live `shareq serve --metrics` on the AWS example (three fake
//! GPUs) runs the AWS blog scenario for real. A Prometheus text parser reads `/metrics`
//! while qs1 borrows and after qs2 reclaims; `shareq events --follow` (started before the
//! first submit) shows every decision as it happens, and they are the replay's decisions
//! for the same scenario; `shareq report` gives per-share figures that match the history
//! the stream shows.

use crate::common;

use common::{BIN, Server, wait_for};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn aws_server() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    for f in ["environment.yaml", "shares.yaml"] {
        std::fs::copy(format!("sample-configs/aws-example/{f}"), config.join(f)).unwrap();
    }
    Server::start_dir(
        dir,
        config,
        &["--stop-jobs-on-exit", "--metrics", "127.0.0.1:0"],
    )
}

/// The metrics address the server logged (it listens on a port the kernel chose).
pub(crate) fn metrics_addr(s: &Server) -> String {
    let mut addr = String::new();
    wait_for(10, "the metrics address in the log", || {
        let err = s.stderr();
        let Some(line) = err
            .lines()
            .find(|l| l.contains("serving Prometheus metrics"))
        else {
            return false;
        };
        addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split("/metrics").next())
            .unwrap_or_default()
            .to_string();
        !addr.is_empty()
    });
    addr
}

/// GET /metrics after everything done so far is in the published snapshot (`status`
/// syncs with the runtime; the gauges follow the snapshot, at most 20 ms behind).
pub(crate) fn fresh_scrape(s: &Server, addr: &str) -> prometheus_parse::Scrape {
    let out = s.cli(&["status"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    scrape(addr)
}

/// GET /metrics, parsed by a Prometheus text-format parser.
fn scrape(addr: &str) -> prometheus_parse::Scrape {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let lines = body.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).expect("a valid Prometheus text exposition")
}

/// The value of the sample `metric` whose labels include `labels`.
pub(crate) fn value(
    s: &prometheus_parse::Scrape,
    metric: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    s.samples
        .iter()
        .find(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match &x.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            other => panic!("{metric}: unexpected {other:?}"),
        })
}

fn lane(s: &prometheus_parse::Scrape, metric: &str, share: &str) -> f64 {
    value(s, metric, &[("share", share), ("unit", "gpu")])
        .unwrap_or_else(|| panic!("no {metric}{{share={share}}}"))
}

/// `shareq events --follow --json` in the background: the lines it printed so far.
struct Follower {
    child: std::process::Child,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Follower {
    fn start(s: &Server) -> Follower {
        let mut child = Command::new(BIN)
            .args(["events", "--follow", "--json", "--since", "1h", "--state"])
            .arg(&s.state)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                sink.lock().unwrap().push(serde_json::from_str(&l).unwrap());
            }
        });
        Follower { child, lines }
    }

    fn has(&self, event: &str, job: &str) -> bool {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l["event"] == event && (job.is_empty() || l["job"] == job))
    }

    fn wait(&self, event: &str, job: &str) {
        wait_for(20, &format!("{event} {job} in the stream"), || {
            self.has(event, job)
        });
    }

    fn lines(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A line without what only the live stream has (times, ids, users, who acted, sequence
/// numbers, the camelCase names it writes beside the replay's old ones: `byShare`).
fn decision(v: &Value) -> Value {
    let mut m = v.as_object().unwrap().clone();
    let keys: Vec<String> = m.keys().cloned().collect();
    m.retain(|k, _| !shareq::wire::is_new_twin(k, keys.iter().map(String::as_str)));
    for k in [
        "t",
        "id",
        "user",
        "by_id",
        "byId",
        "cancelled_by",
        "cancelledBy",
        "reprioritized_by",
        "reprioritizedBy",
        "seq",
        // What a preemption lost, on every live line that ends one (SPEC §14); the
        // replay says it only for jobs that save or get a notice.
        "lostGpuSeconds",
        "lostGpus",
        "lastSave",
        "saved",
    ] {
        m.remove(k);
    }
    Value::Object(m)
}

fn at(lines: &[Value], event: &str, job: &str) -> f64 {
    lines
        .iter()
        .find(|l| l["event"] == event && l["job"] == job)
        .and_then(|l| l["t"].as_f64())
        .unwrap_or_else(|| panic!("no {event} {job}"))
}

#[test]
fn a_live_aws_run_is_scraped_streamed_and_reported() {
    let s = aws_server();
    let addr = metrics_addr(&s);
    let follow = Follower::start(&s);
    follow.wait("config_applied", "");
    let sleep = ["sleep", "600"];
    let j3 = s.submit(
        &["--share", "qs1", "--name", "j3", "--priority", "3"],
        &sleep,
    );
    s.wait_state(j3, "RUNNING", 20);
    let j2 = s.submit(
        &["--share", "qs1", "--name", "j2", "--priority", "2"],
        &sleep,
    );
    s.wait_state(j2, "RUNNING", 20);
    let j1 = s.submit(
        &["--share", "qs1", "--name", "j1", "--priority", "1"],
        &sleep,
    );
    follow.wait("submitted", "j1");

    // qs1 borrows qs2's idle GPU (qs3's is reserved): the scrape shows it.
    let m = fresh_scrape(&s, &addr);
    assert_eq!(lane(&m, "shareq_share_usage_gpus", "qs1"), 2.0);
    assert_eq!(lane(&m, "shareq_share_borrowed_gpus", "qs1"), 1.0);
    assert_eq!(lane(&m, "shareq_share_lent_gpus", "qs2"), 1.0);
    assert_eq!(lane(&m, "shareq_share_lent_gpus", "qs3"), 0.0);
    assert_eq!(lane(&m, "shareq_share_limit_gpus", "qs1"), 1.0);
    assert_eq!(lane(&m, "shareq_queued_jobs", "qs1"), 1.0);
    assert_eq!(lane(&m, "shareq_queued_gpus", "qs1"), 1.0);
    assert_eq!(
        value(&m, "shareq_unit_usable_gpus", &[("unit", "gpu")]),
        Some(3.0)
    );
    assert_eq!(
        value(&m, "shareq_unit_used_gpus", &[("unit", "gpu")]),
        Some(2.0)
    );
    assert_eq!(
        value(&m, "shareq_job_starts_total", &[("share", "qs1")]),
        Some(2.0)
    );
    assert_eq!(value(&m, "shareq_preemptions_total", &[]), None);
    // Fake GPUs have no telemetry: no device figures are made up.
    assert_eq!(value(&m, "shareq_device_utilization_ratio", &[]), None);

    // qs2's own job reclaims its GPU: seen live in the stream and in the next scrape.
    let k = s.submit(&["--share", "qs2", "--name", "k"], &sleep);
    follow.wait("preempted", "j2");
    s.wait_state(k, "RUNNING", 20);
    let m = fresh_scrape(&s, &addr);
    assert_eq!(lane(&m, "shareq_share_borrowed_gpus", "qs1"), 0.0);
    assert_eq!(lane(&m, "shareq_share_lent_gpus", "qs2"), 0.0);
    assert_eq!(lane(&m, "shareq_share_usage_gpus", "qs2"), 1.0);
    assert_eq!(lane(&m, "shareq_queued_jobs", "qs1"), 2.0);
    let reclaim = [
        ("reason", "CROSS_SHARE_RECLAIM"),
        ("share", "qs1"),
        ("by_share", "qs2"),
    ];
    assert_eq!(value(&m, "shareq_preemptions_total", &reclaim), Some(1.0));
    let wait_count = value(&m, "shareq_job_wait_seconds_count", &[("share", "qs1")]);
    assert_eq!(wait_count, Some(2.0), "first starts of j3 and j2");
    assert!(value(&m, "shareq_submit_latency_seconds_count", &[]).unwrap() >= 4.0);
    assert!(value(&m, "shareq_scheduling_pass_seconds_count", &[]).unwrap() >= 4.0);
    assert_eq!(
        value(&m, "shareq_config_reloads_total", &[("result", "applied")]),
        Some(1.0)
    );

    let r = s.submit(&["--share", "qs3", "--name", "r"], &sleep);
    s.wait_state(r, "RUNNING", 20);
    let out = s.cli(&["priority", &j1.to_string(), "4"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.wait_state(j1, "RUNNING", 20);
    follow.wait("started", "j1");

    // The stream holds the replay's decisions for the same scenario, in its order.
    let replay = Command::new(BIN)
        .args(["replay", "tests/scenarios/aws-01-blog-example.yaml"])
        .output()
        .unwrap();
    let want: Vec<Value> = String::from_utf8_lossy(&replay.stdout)
        .lines()
        .map(|l| decision(&serde_json::from_str(l).unwrap()))
        .collect();
    let lines = follow.lines();
    let got: Vec<Value> = lines
        .iter()
        .filter(|l| l["event"] != "config_applied")
        .map(decision)
        .collect();
    assert_eq!(got, want, "live stream vs replay");
    // Live lines carry ids, the submitter and a growing sequence number.
    let me = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .map(|u| u.name)
        .unwrap_or_default();
    let pre = lines.iter().find(|l| l["event"] == "preempted").unwrap();
    assert_eq!(pre["id"], j2);
    assert_eq!(pre["by_id"], k);
    assert_eq!(pre["user"], me.as_str());
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");

    // The past, read from the database, is what the follower saw live.
    let past = s.cli(&["events", "--json", "--since", "1h"]);
    assert!(past.status.success());
    let past: Vec<Value> = String::from_utf8_lossy(&past.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(past, lines);
    // Resuming after a line gives exactly the lines after it.
    let mid = lines[lines.len() / 2]["seq"].as_u64().unwrap();
    let rest = s.cli(&["events", "--json", "--after", &mid.to_string()]);
    let rest: Vec<Value> = String::from_utf8_lossy(&rest.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rest, lines[lines.len() / 2 + 1..].to_vec());
    let only = s.cli(&["events", "--since", "1h", "--on", "preempted"]);
    let text = String::from_utf8_lossy(&only.stdout);
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.contains("reason=CROSS_SHARE_RECLAIM") && text.contains("by=k"),
        "{text}"
    );

    // The report's per-share figures are the history's: qs1 borrowed (and qs2 lent) from
    // j2's start until its GPU was released; the preempted attempts' work is lost.
    let rep = s.cli(&["report", "--since", "1h", "--json"]);
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let rep: Value = serde_json::from_slice(&rep.stdout).unwrap();
    let borrowed = at(&lines, "requeued", "j2") - at(&lines, "started", "j2");
    let held = borrowed + at(&lines, "requeued", "j3") - at(&lines, "started", "j3");
    // SPEC §14: what each preemption lost, as the line that ends it says (from the
    // attempt's start to the release of its GPUs, which the line reports a moment later).
    let lost: f64 = lines
        .iter()
        .filter(|l| l["event"] == "requeued")
        .map(|l| l["lostGpuSeconds"].as_f64().unwrap())
        .sum();
    assert!(lost > 0.0 && lost <= held + 0.0015, "{lost} vs {held}");
    let qs1 = &rep["shares"]["qs1"];
    let near = |a: &Value, b: f64| (a.as_f64().unwrap() - b).abs() < 0.0015;
    assert!(
        near(&qs1["gpu_seconds_borrowed"], borrowed),
        "{qs1} vs {borrowed}"
    );
    assert!(
        near(&rep["shares"]["qs2"]["gpu_seconds_lent"], borrowed),
        "{rep}"
    );
    assert!(
        near(&qs1["gpu_seconds_lost_to_preemption"], lost),
        "{qs1} vs {lost}"
    );
    assert_eq!(qs1["preemptions"], 2);
    assert_eq!(qs1["jobs_finished"], 0);
    assert_eq!(rep["shares"]["qs3"]["gpu_seconds_lent"].as_f64(), Some(0.0));
    assert!(
        rep["users_shown"].as_bool().unwrap(),
        "the scheduler's own user is an admin"
    );
    assert_eq!(rep["users"][me.as_str()]["preemptions"], 2);
    let csv = s.cli(&["report", "--since", "1h", "--csv"]);
    let csv = String::from_utf8_lossy(&csv.stdout);
    let mut rows = csv.lines();
    assert!(rows.next().unwrap().starts_with("kind,name,gpu_hours_used"));
    assert!(rows.any(|r| r.starts_with("share,qs1,")), "{csv}");
    let table = s.cli(&["report", "--since", "1h"]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("SHARE") && table.contains("qs2"), "{table}");
}

#[test]
fn bad_arguments_get_clear_errors() {
    let s = Server::start(&common::config(1, 1, &common::share("a", 1, "LEND", false)));
    let out = s.cli(&["events", "--on", "exploded"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--on exploded: no such event"));
    let out = s.cli(&["report", "--since", "last tuesday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a time"));
    let out = s.cli(&["report", "--since", "1h", "--until", "2h"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is before --since"));
    // A taken or malformed metrics address stops serve with the reason.
    let out = Command::new(BIN)
        .args(["serve", "--metrics", "localhost", "--config"])
        .arg(&s.config)
        .arg("--state")
        .arg(s.path("other-state"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`localhost` is not ADDR:PORT"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_hook_command_gets_each_matching_line() {
    let s = Server::start(&common::config(1, 1, &common::share("a", 1, "LEND", false)));
    let id = s.submit(&["--share", "a", "--name", "hello"], &["true"]);
    s.wait_state(id, "SUCCEEDED", 20);
    let got = s.path("hook.out");
    let script = format!(
        "echo \"$SHAREQ_EVENT $SHAREQ_EVENT_ID $SHAREQ_EVENT_JOB $SHAREQ_EVENT_SHARE\" >> {0}; cat >> {0}",
        got.display()
    );
    let out = s.cli(&[
        "events",
        "--since",
        "1h",
        "--on",
        "started,succeeded",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "with a command, lines are not printed"
    );
    let text = std::fs::read_to_string(&got).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(lines[0], format!("started {id} hello a"));
    let started: Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(started["event"], "started");
    assert_eq!(started["devices"], serde_json::json!([0]));
    assert_eq!(lines[2], format!("succeeded {id} hello a"));
}

#[test]
fn the_grafana_dashboard_uses_documented_metrics_that_serve_exposes() {
    let s = aws_server();
    let addr = metrics_addr(&s);
    // Something of every family: a finished job, a borrow and its reclaim.
    let id = s.submit(&["--share", "qs1", "--name", "a"], &["true"]);
    s.wait_state(id, "SUCCEEDED", 20);
    let sleep = ["sleep", "600"];
    s.submit(&["--share", "qs1", "--name", "b"], &sleep);
    let c = s.submit(&["--share", "qs1", "--name", "c"], &sleep);
    s.wait_state(c, "RUNNING", 20);
    let k = s.submit(&["--share", "qs2", "--name", "k"], &sleep);
    s.wait_state(k, "RUNNING", 20);
    let m = fresh_scrape(&s, &addr);
    let exposed: std::collections::BTreeSet<&str> = m.docs.keys().map(String::as_str).collect();
    let docs = std::fs::read_to_string("docs/METRICS.md").unwrap();
    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string("assets/grafana-shareq.json").unwrap())
            .unwrap();
    let mut used = std::collections::BTreeSet::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(i) = rest.find("shareq_") {
                let name: String = rest[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[i + name.len()..];
                let base = ["_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(&name)
                    .to_string();
                used.insert(base);
            }
        }
    }
    assert!(used.len() >= 15, "{used:?}");
    for name in &used {
        assert!(
            docs.contains(&format!("`{name}`")),
            "{name} is not in docs/METRICS.md"
        );
        assert!(
            exposed.contains(name.as_str()),
            "{name} is not served: {exposed:?}"
        );
    }
    // And every family served is documented.
    for name in &exposed {
        assert!(
            docs.contains(&format!("`{name}`")),
            "{name} is not in docs/METRICS.md"
        );
    }
}

#[test]
fn a_follower_says_so_when_the_scheduler_stops() {
    let mut s = Server::start(&common::config(1, 1, &common::share("a", 1, "LEND", false)));
    let mut follow = Follower::start(&s);
    follow.wait("config_applied", "");
    s.stop();
    let child = &mut follow.child;
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the follower did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(1));
}

/// Fair share (SPEC §12) where operators look: the user's decayed usage as a metric of
/// the fair-share share only (once `metrics.userLabels` turns user names on), and
/// `report --users` setting it against the weight.
#[test]
fn a_fair_share_shares_usage_is_a_metric_and_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    let me = common::me();
    std::fs::write(
        config.join("c.yaml"),
        format!(
            "{}---\n{}fairShare: {{halfLifeSeconds: 3600, weights: {{{me}: 2}}}}\n---\n{}",
            "kind: ServiceEnvironment\nname: t\ncapacityLimits: [{capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}]\n",
            common::share("team", 1, "LEND", false),
            common::share("plain", 1, "LEND", false),
        ),
    )
    .unwrap();
    let s = Server::start_dir(
        dir,
        config,
        &["--stop-jobs-on-exit", "--metrics", "127.0.0.1:0"],
    );
    let addr = metrics_addr(&s);
    let a = s.submit(&["--share", "team"], &["sleep", "1"]);
    let b = s.submit(&["--share", "plain"], &["sleep", "1"]);
    s.wait_state(a, "SUCCEEDED", 30);
    s.wait_state(b, "SUCCEEDED", 30);
    // The endpoint asks no one who they are: no user names until the admin turns them on.
    let m = fresh_scrape(&s, &addr);
    assert!(
        !m.samples
            .iter()
            .any(|x| x.metric == "shareq_user_usage_gpu_seconds"),
        "per-user series without metrics.userLabels"
    );
    let env = std::fs::read_to_string(s.config.join("c.yaml"))
        .unwrap()
        .replacen(
            "name: t\n",
            "name: t\nmetrics: {listen: \"127.0.0.1:0\", userLabels: true}\n",
            1,
        );
    std::fs::write(s.config.join("c.yaml"), env).unwrap();
    let out = s.cli(&["reload"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = fresh_scrape(&s, &addr);
    let used = value(
        &m,
        "shareq_user_usage_gpu_seconds",
        &[("share", "team"), ("user", &me)],
    )
    .expect("the fair-share share's user has a series");
    assert!((0.5..5.0).contains(&used), "usage {used}");
    assert_eq!(
        value(
            &m,
            "shareq_user_usage_gpu_seconds",
            &[("share", "plain"), ("user", &me)]
        ),
        None,
        "no series for a share without fairShare"
    );
    let out = s.cli(&["report", "--users"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("team") && l.contains(&me))
        .unwrap_or_else(|| panic!("no fair-share row for {me}:\n{text}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells[3], "2", "weight in {line}");
    assert_eq!(cells[4], "100%", "entitled in {line}");
    assert!(text.contains("FAIR SHARE"), "{text}");
}

/// A burst of submits shares transactions (SPEC §8 unchanged: each answered ok only once
/// it is stored): 40 submits sent at once, on 40 connections, to a scheduler stopped
/// meanwhile, take fewer commits than submits; and every one answered ok survives a
/// `kill -9` right after the answers.
#[test]
fn a_burst_of_submits_is_committed_together_and_every_ok_survives_kill_9() {
    let cfg = common::config(2, 1, &common::share("a", 2, "LEND", false));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("c.yaml"), cfg).unwrap();
    let mut s = Server::start_dir(dir, config, &["--metrics", "127.0.0.1:0"]);
    let addr = metrics_addr(&s);
    let commits = |addr: &str| value(&scrape(addr), "shareq_store_commits_total", &[]).unwrap();
    let before = commits(&addr);
    let pid = nix::unistd::Pid::from_raw(s.child().unwrap().id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let sock = s.state.join("shareq.sock");
    let n = 40;
    let senders: Vec<_> = (0..n)
        .map(|i| {
            let sock = sock.clone();
            std::thread::spawn(move || {
                let c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
                let mut w = c.try_clone().unwrap();
                writeln!(
                    w,
                    r#"{{"op":"submit","job":{{"jobName":"burst{i}","quotaShareName":"a","command":"sleep 600"}}}}"#
                )
                .unwrap();
                let mut line = String::new();
                BufReader::new(c).read_line(&mut line).unwrap();
                let v: Value = serde_json::from_str(&line).unwrap();
                assert_eq!(v["ok"], true, "{line}");
                v["id"].as_u64().unwrap()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let mut ids: Vec<u64> = senders.into_iter().map(|t| t.join().unwrap()).collect();
    let took = commits(&addr) - before;
    // Killed at once: nothing after the answers had time to be written.
    let child = s.child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        took < f64::from(n),
        "{n} submits took {took} commits: none was shared"
    );
    common::kill_supervisors_of(&s.state);
    s.spawn(&["--stop-jobs-on-exit"]);
    let listed = s.jobs_json(&["--all"]);
    let mut found: Vec<u64> = ["queue", "running", "finished"]
        .iter()
        .flat_map(|k| listed[*k].as_array().cloned().unwrap_or_default())
        .filter(|j| j["name"].as_str().is_some_and(|n| n.starts_with("burst")))
        .map(|j| j["id"].as_u64().unwrap())
        .collect();
    ids.sort();
    found.sort();
    assert_eq!(
        found, ids,
        "every submit answered ok is there after kill -9"
    );
}

/// One client holding connections to `/metrics` open gets a few, not all: the next one is
/// told why and closed, and once it lets one go a scrape works again.
#[test]
fn one_client_cannot_hold_every_metrics_connection() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    let cfg = common::config(1, 1, &common::share("a", 1, "LEND", false));
    std::fs::write(config.join("c.yaml"), cfg).unwrap();
    let s = Server::start_dir(dir, config, &["--metrics", "127.0.0.1:0"]);
    let addr = metrics_addr(&s);
    let held: Vec<std::net::TcpStream> = (0..shareq::metrics::http::PER_CLIENT)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    // The held ones are counted once accepted: the next is refused, with the reason.
    let mut text = String::new();
    wait_for(10, "a refusal", || {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = write!(
            c,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        );
        text.clear();
        let _ = c.read_to_string(&mut text);
        text.starts_with("HTTP/1.1 503")
    });
    assert!(text.contains("at most 4 per client"), "{text}");
    drop(held);
    wait_for(10, "a scrape once the connections are let go", || {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        let _ = write!(
            c,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        );
        let mut t = String::new();
        let _ = c.read_to_string(&mut t);
        t.starts_with("HTTP/1.1 200")
    });
}
