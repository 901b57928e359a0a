//! The Python client (`clients/python`, docs/API.md) against a real `shareq serve` on fake
//! GPUs: each test runs a python3 script that imports the client from the source tree
//! and prints what the Rust side checks. Skipped, saying so, only when no `python3` runs.

use crate::common;

use common::{Server, config, share};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The client's source directory (what `pip install ./clients/python` installs).
pub(crate) fn client_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python/src")
}

/// A python3 that runs, or why there is none.
pub(crate) fn python() -> Result<String, String> {
    let found = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .stdin(Stdio::null())
        .output();
    match found {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => Err(format!(
            "python3 failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Err(format!("no python3: {e}")),
    }
}

macro_rules! needs_python {
    () => {
        match python() {
            Ok(p) => p,
            Err(why) => {
                eprintln!("skipping {}: {why}", module_path!());
                return;
            }
        }
    };
}

/// Run `script` with the client importable and `SHAREQ_STATE` pointing at the server;
/// the script's last stdout line is JSON.
pub(crate) fn run_py(py: &str, s: &Server, script: &str) -> Value {
    let out = Command::new(py)
        .arg("-c")
        .arg(script)
        .env("PYTHONPATH", client_src())
        .env("SHAREQ_STATE", &s.state)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run python3");
    last_json(&out, &s.stderr())
}

pub(crate) fn last_json(out: &Output, context: &str) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python failed: {}\nstdout: {stdout}\n{context}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

fn two_shares() -> String {
    config(
        2,
        1,
        &format!(
            "{}---\n{}",
            share("qs1", 2, "LEND_AND_BORROW", false),
            share("qs2", 1, "LEND", false)
        ),
    )
}

#[test]
fn submit_wait_succeeds_and_the_log_is_readable() {
    let py = needs_python!();
    let s = Server::start(&two_shares());
    let r = run_py(
        &py,
        &s,
        r#"
import json, os, pwd, shareq
# The CLI's state lookup (no socket anywhere: the user's own directory; the rest of the
# order is compared with the CLI's in the_client_finds_the_scheduler_as_the_cli_does).
none = lambda p: False
d = lambda env: shareq.default_state_dir(env, none)
assert d({"SHAREQ_STATE": "/s", "XDG_STATE_HOME": "/x", "HOME": "/h"}) == "/s"
assert d({"SHAREQ_STATE": "", "XDG_STATE_HOME": "/x", "HOME": "/h"}) == "/x/shareq"
assert d({"HOME": "/h"}) == "/h/.local/state/shareq"
try:
    d({})
    raise AssertionError("no state directory must be an error")
except shareq.ShareqError:
    pass
c = shareq.Client()
assert c.state == os.environ["SHAREQ_STATE"]
hello = c.hello()
job = c.submit(share="qs1", command=["sh", "-c", "echo epochs=$EPOCHS"], gpus=1,
               name="resnet", priority=5, env={"EPOCHS": "10"}, timeout=3600)
assert job.state in ("RUNNABLE", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED"), job
done = c.wait(job.id, timeout=60)
log = c.log(job.id)
try:
    c.job(99999)
    missing = None
except shareq.NotFound as e:
    missing = [e.code, e.message]
print(json.dumps({"hello": hello, "id": job.id, "name": job.name, "user": job.user,
                  "me": pwd.getpwuid(os.getuid()).pw_name, "priority": job.priority,
                  "gpus": job.gpus, "state": done.state, "devices": done.devices,
                  "log": log, "missing": missing, "finished": done.finished is not None}))
"#,
    );
    assert_eq!(r["hello"]["api"], 1, "{r}");
    assert_eq!(r["hello"]["apis"], serde_json::json!([1]), "{r}");
    assert_eq!(r["hello"]["user"], r["me"], "{r}");
    assert_eq!(r["user"], r["me"], "{r}");
    assert_eq!(r["name"], "resnet");
    assert_eq!(r["priority"], 5);
    assert_eq!(r["gpus"], 1);
    assert_eq!(r["state"], "SUCCEEDED", "{r}\n{}", s.stderr());
    assert_eq!(r["finished"], true);
    assert_eq!(r["log"], "epochs=10\n", "{r}");
    assert_eq!(
        r["missing"],
        serde_json::json!(["not_found", "no job 99999"])
    );
    let id = r["id"].as_u64().unwrap();
    assert_eq!(s.log(id, 1), "epochs=10\n");
}

/// One lookup order for the CLI and the client (docs/DEPLOY.md, "Where the CLI looks for
/// the scheduler"): the same environments and sockets give the same directory, the system
/// scheduler's `/var/lib/shareq` included, and no directory in neither.
#[test]
fn the_client_finds_the_scheduler_as_the_cli_does() {
    let py = needs_python!();
    let own = "/home/a/.local/state/shareq/shareq.sock";
    let xdg = "/x/shareq/shareq.sock";
    let system = "/var/lib/shareq/shareq.sock";
    let envs: Vec<Vec<(&str, &str)>> = vec![
        vec![("HOME", "/home/a")],
        vec![("HOME", "/home/a"), ("XDG_STATE_HOME", "/x")],
        vec![("HOME", "/home/a"), ("SHAREQ_STATE", "/s")],
        vec![("HOME", "/home/a"), ("SHAREQ_STATE", "")],
        vec![("HOME", "")],
        vec![],
    ];
    let socket_sets: Vec<Vec<&str>> = vec![
        vec![],
        vec![system],
        vec![own, system],
        vec![xdg, system],
        vec![own],
    ];
    let mut cases = Vec::new();
    for env in &envs {
        for sockets in &socket_sets {
            let map: std::collections::BTreeMap<&str, &str> = env.iter().copied().collect();
            let cli = shareq::cli::client_state(
                None,
                |k| map.get(k).map(std::ffi::OsString::from),
                |p| sockets.iter().any(|s| Path::new(s) == p),
            )
            .ok()
            .map(|d| d.root().display().to_string());
            cases.push(serde_json::json!({"env": map, "sockets": sockets, "cli": cli}));
        }
    }
    let script = format!(
        r#"
import json, shareq
cases = json.loads({cases:?})
out = []
for c in cases:
    try:
        got = shareq.default_state_dir(c["env"], lambda p: p in c["sockets"])
    except shareq.ShareqError:
        got = None
    out.append(got)
print(json.dumps(out))
"#,
        cases = serde_json::to_string(&cases).unwrap()
    );
    let out = Command::new(&py)
        .arg("-c")
        .arg(&script)
        .env("PYTHONPATH", client_src())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run python3");
    let got = last_json(&out, "");
    for (i, case) in cases.iter().enumerate() {
        assert_eq!(got[i], case["cli"], "the client and the CLI differ: {case}");
    }
    // The system scheduler is found when the user runs none of their own.
    assert!(
        cases.iter().any(|c| c["cli"] == "/var/lib/shareq"),
        "{cases:?}"
    );
}

/// After `wait()`, a job ended since serve started still says when its attempt started
/// (the server's `job` answer, through the raw socket and the client); an array child is
/// named `"P:I"` in `log` and `job` as on the CLI; `events(since=)` takes the API's ms or
/// an aware datetime, and refuses a naive one.
#[test]
fn an_ended_job_keeps_its_start_and_a_child_is_named_as_on_the_cli() {
    let py = needs_python!();
    let s = Server::start(&two_shares());
    let r = run_py(
        &py,
        &s,
        r#"
import json, socket, time, shareq
from datetime import datetime, timezone, timedelta
c = shareq.Client()
t0 = int(time.time() * 1000) - 1000
job = c.submit(share="qs1", command=["true"], cwd="/")
done = c.wait(job.id, timeout=60)
arr = c.submit(share="qs1", command=["sh", "-c", "echo child=$SHAREQ_ARRAY_INDEX"], array=3,
               cwd="/")
child = c.wait(f"{arr.id}:2", timeout=60)
log = c.log(f"{arr.id}:2")
# The same answer on the raw socket.
s = socket.socket(socket.AF_UNIX)
s.connect(c.socket_path)
s.sendall((json.dumps({"op": "job", "id": job.id}) + "\n").encode())
raw = json.loads(s.makefile().readline())
s.close()
def names(since):
    return sorted({e.get("event") for e in c.events(follow=False, since=since)
                   if e.get("id") == job.id})
ms = names(t0)
aware = names(datetime.fromtimestamp(t0 / 1000, timezone.utc))
try:
    names(datetime.now())
    naive = None
except ValueError as e:
    naive = str(e)
try:
    c.log("x:1")
    bad = None
except ValueError as e:
    bad = str(e)
print(json.dumps({"state": done.state, "started": done.started is not None,
                  "order": bool(done.started and done.started <= done.finished),
                  "raw": raw["job"].get("started"), "child": child.id,
                  "child_state": child.state, "child_started": child.started is not None,
                  "arr": arr.id, "log": log, "ms": ms, "aware": aware, "naive": naive,
                  "bad": bad}))
"#,
    );
    assert_eq!(r["state"], "SUCCEEDED", "{r}");
    assert_eq!(r["started"], true, "job(id).started after wait(): {r}");
    assert_eq!(r["order"], true, "{r}");
    assert!(
        r["raw"].is_i64(),
        "the socket's `job` answer has `started`: {r}"
    );
    let arr = r["arr"].as_u64().unwrap();
    assert_eq!(r["child"].as_u64(), Some(arr + 3), "child 2 of {arr}: {r}");
    assert_eq!(r["child_state"], "SUCCEEDED", "{r}");
    assert_eq!(r["child_started"], true, "{r}");
    assert_eq!(r["log"], "child=2\n", "{r}");
    assert!(
        r["ms"].as_array().is_some_and(|v| !v.is_empty()),
        "events since ms: {r}"
    );
    assert_eq!(r["ms"], r["aware"], "one instant, two spellings: {r}");
    assert!(
        r["naive"]
            .as_str()
            .unwrap_or_default()
            .contains("no timezone"),
        "{r}"
    );
    assert!(
        r["bad"]
            .as_str()
            .unwrap_or_default()
            .contains("is not a job id"),
        "{r}"
    );
    // The CLI names the child the same way.
    let out = s.cli(&["log", &format!("{arr}:2")]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "child=2\n");
}

#[test]
fn wait_times_out_and_priority_and_cancel_work() {
    let py = needs_python!();
    let s = Server::start(&two_shares());
    let r = run_py(
        &py,
        &s,
        r#"
import json, shareq
c = shareq.Client()
a = c.submit(share="qs1", command="sleep 300", gpus=2, name="long")
b = c.submit(share="qs1", command="sleep 300", gpus=2, name="behind")
try:
    c.wait(a.id, timeout=0.3)
    timed_out = False
except TimeoutError:
    timed_out = True
changed = c.set_priority(b.id, 9)
queued = [j.id for j in c.jobs(share="qs1", status="queued")]
try:
    c.set_priority(b.id, 10000)
    bad = None
except shareq.BadRequest as e:
    bad = e.code
cancelled = c.cancel(b.id)
again = c.cancel(b.id)
final = c.wait(b.id, timeout=30)
print(json.dumps({"timed_out": timed_out, "changed": changed, "queued": queued,
                  "b": b.id, "prio": c.job(b.id).priority, "bad": bad,
                  "cancelled": cancelled, "again": again, "state": final.state,
                  "reason": final.reason}))
"#,
    );
    assert_eq!(r["timed_out"], true, "{r}");
    assert_eq!(r["changed"], true, "{r}");
    assert_eq!(r["queued"], serde_json::json!([r["b"]]), "{r}");
    assert_eq!(r["prio"], 9, "{r}");
    assert_eq!(r["bad"], "bad_request", "{r}");
    assert_eq!(r["cancelled"], true, "{r}");
    assert_eq!(r["again"], false, "{r}");
    assert_eq!(r["state"], "FAILED", "{r}");
    assert!(
        r["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("CANCELLED: by "),
        "{r}"
    );
}

#[test]
fn dependencies_and_arrays_from_python() {
    let py = needs_python!();
    let s = Server::start(&two_shares());
    let r = run_py(
        &py,
        &s,
        r#"
import json, shareq
c = shareq.Client()
first = c.submit(share="qs1", command="sleep 1", name="first")
arr = c.submit(share="qs1", command="true", name="sweep", array=3, after=[first.id])
pending = c.job(arr.id + 1)
done = c.wait(arr.id, timeout=60)
print(json.dumps({"pending": pending.state, "reason": pending.reason,
                  "parent": pending.parent, "index": pending.array_index,
                  "dep": pending.depends_on[0]["job"], "state": done.state,
                  "size": done.array["size"], "ok": done.array["counts"].get("SUCCEEDED"),
                  "first": first.id, "arr": arr.id}))
"#,
    );
    assert_eq!(r["pending"], "PENDING", "{r}");
    assert_eq!(r["parent"], r["arr"], "{r}");
    assert_eq!(r["index"], 0, "{r}");
    assert_eq!(r["dep"], r["first"], "{r}");
    assert_eq!(r["state"], "SUCCEEDED", "{r}");
    assert_eq!(r["size"], 3, "{r}");
    assert_eq!(r["ok"], 3, "{r}");
}

#[test]
fn refusals_raise_rejected_limit_exceeded_and_not_running() {
    let py = needs_python!();
    let s = Server::start(&two_shares());
    let empty = tempfile::tempdir().unwrap();
    let script = format!(
        r#"
import json, shareq
c = shareq.Client()
out = {{}}
try:
    c.submit(share="qs2", command=["true"], gpus=4)
except shareq.Rejected as e:
    out["over"] = [e.code, e.reason]
try:
    c.submit(share="nope", command=["true"])
except shareq.Rejected as e:
    out["unknown"] = e.reason
try:
    c.submit(share="qs1", command=["true"], env={{"BIG": "x" * (1 << 20)}})
except shareq.LimitExceeded as e:
    out["big"] = [e.code, e.message]
try:
    shareq.Client(state={empty:?}).submit(share="qs1", command=["true"])
except shareq.NotRunning as e:
    out["down"] = e.message
out["jobs"] = len(c.jobs(all=True))
print(json.dumps(out))
"#,
        empty = empty.path().display().to_string()
    );
    let r = run_py(&py, &s, &script);
    assert_eq!(r["over"][0], "rejected", "{r}");
    assert_eq!(
        r["over"][1], "QUOTA_MANAGEMENT_LIMIT_EXCEEDED: needs 4, qs2 may hold at most 1",
        "{r}"
    );
    assert!(
        r["unknown"].as_str().unwrap_or_default().contains("nope"),
        "{r}"
    );
    assert_eq!(r["big"][0], "limit", "{r}");
    assert!(
        r["big"][1]
            .as_str()
            .unwrap_or_default()
            .starts_with("request too large"),
        "{r}"
    );
    assert!(
        r["down"]
            .as_str()
            .unwrap_or_default()
            .starts_with("no scheduler is listening on"),
        "{r}"
    );
    assert_eq!(r["jobs"], 0, "nothing refused was queued: {r}");
}

#[test]
fn events_follow_sees_a_reclaim_as_it_happens() {
    let py = needs_python!();
    let s = Server::start(&config(
        2,
        1,
        &format!(
            "{}---\n{}",
            share("b", 1, "LEND_AND_BORROW", false),
            share("l", 1, "LEND", false)
        ),
    ));
    let r = run_py(
        &py,
        &s,
        r#"
import json, signal, threading, time, shareq
signal.alarm(60)
c = shareq.Client()
b = [c.submit(share="b", command="sleep 300", name=n).id for n in ("b1", "b2")]
while any(c.job(i).state != "RUNNING" for i in b):
    time.sleep(0.05)
running = [j for j in c.jobs(share="b", status="running")]
assert len(running) == 2, running
stream = c.events(follow=True)
got = []
def reclaim():
    time.sleep(0.3)
    got.append(c.submit(share="l", command="sleep 300", name="l1").id)
threading.Thread(target=reclaim).start()
lines = []
for ev in stream:
    lines.append(ev)
    if ev["event"] == "preempted":
        break
stream.close()
victim = lines[-1]
print(json.dumps({"victim": victim, "b": [j.id for j in running],
                  "events": [e["event"] for e in lines]}))
"#,
    );
    let victim = &r["victim"];
    assert_eq!(victim["event"], "preempted", "{r}");
    assert!(r["b"].as_array().unwrap().contains(&victim["id"]), "{r}");
    assert_eq!(victim["share"], "b", "{r}");
    assert_eq!(victim["by"], "l1", "{r}");
    assert_eq!(victim["reason"], "CROSS_SHARE_RECLAIM", "{r}");
    assert!(victim["seq"].as_u64().unwrap() > 0, "{r}");
    // The same line as `shareq events --json` prints.
    let out = s.cli(&["events", "--json", "--since", "1h", "--on", "preempted"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli: Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default(),
    )
    .unwrap();
    assert_eq!(&cli, victim, "{r}");
}

#[test]
fn a_token_retried_after_a_dropped_connection_gives_the_same_job() {
    let py = needs_python!();
    let s = Server::start(&two_shares());
    let r = run_py(
        &py,
        &s,
        r#"
import json, os, socket, time, shareq
c = shareq.Client()
# A submit whose answer is never read: the connection is dropped right after the request.
token = "retry-" + os.urandom(8).hex()
spec = {"jobName": "dropped", "quotaShareName": "qs1", "command": ["sleep", "300"],
        "clientToken": token}
s = socket.socket(socket.AF_UNIX)
s.connect(c.socket_path)
s.sendall(json.dumps({"op": "submit", "job": spec}).encode() + b"\n")
s.close()
time.sleep(0.5)
again = c.submit(share="qs1", command=["sleep", "300"], name="dropped", client_token=token)

# The client's own retry: the first answer is lost (the connection breaks before it is
# read); the client sends the same submission again with the same token.
class Dropping(shareq.Client):
    drops = 1
    def _receive(self, reader):
        if self.drops:
            self.drops -= 1
            raise ConnectionResetError("dropped by the test")
        return super()._receive(reader)
d = Dropping()
retried = d.submit(share="qs1", command=["sleep", "300"], name="retried")
names = [j.name for j in c.jobs(all=True)]
print(json.dumps({"again": again.id, "dropped": names.count("dropped"),
                  "retried": names.count("retried"), "drops_left": d.drops,
                  "ids": sorted(j.id for j in c.jobs(all=True))}))
"#,
    );
    assert_eq!(
        r["dropped"], 1,
        "one job for the dropped submit and its retry: {r}"
    );
    assert_eq!(r["retried"], 1, "one job for the client's own retry: {r}");
    assert_eq!(r["drops_left"], 0, "{r}");
    assert_eq!(r["ids"], serde_json::json!([1, 2]), "{r}");
    assert_eq!(r["again"], 1, "{r}");
}

#[test]
fn the_cli_and_the_client_agree_on_every_field_of_jobs() {
    let py = needs_python!();
    let s = Server::start(&two_shares());
    let done = s.submit(&["--share", "qs2", "--name", "done"], &["true"]);
    s.wait_state(done, "SUCCEEDED", 30);
    let run = s.submit(
        &["--share", "qs1", "--gpus", "2", "--name", "run"],
        &["sleep", "300"],
    );
    s.wait_state(run, "RUNNING", 30);
    s.submit(
        &["--share", "qs2", "--name", "wait", "--priority", "3"],
        &["sleep", "1"],
    );
    let cli = s.jobs();
    let r = run_py(
        &py,
        &s,
        r#"
import json, shareq
c = shareq.Client()
answer = c.jobs_answer(all=True)
jobs = c.jobs(all=True)
fields = [{"id": j.id, "name": j.name, "share": j.share, "unit": j.unit, "gpus": j.gpus,
           "priority": j.priority, "state": j.state, "reason": j.reason,
           "devices": j.devices, "user": j.user, "uid": j.uid, "command": j.command,
           "attempts": j.attempts, "preempted_count": j.preempted_count,
           "submitted": int(j.submitted.timestamp() * 1000 + 0.5),
           "started": j.started and int(j.started.timestamp() * 1000 + 0.5),
           "estimated_start": j.estimated_start and int(j.estimated_start.timestamp() * 1000 + 0.5),
           "raw": j.raw} for j in jobs]
queued = [j.id for j in c.jobs(share="qs2", status="queued")]
print(json.dumps({"answer": answer, "fields": fields, "queued": queued}))
"#,
    );
    let mut api = r["answer"].clone();
    let mut cli = cli;
    // A queued job's estimate is the forecast's, refreshed between the two reads.
    for v in [&mut api, &mut cli] {
        for j in v["queue"].as_array_mut().unwrap() {
            let o = j.as_object_mut().unwrap();
            for k in [
                "estimatedStart",
                "estimatedStartEarliest",
                "estimatedStartLatest",
                "estimateKind",
                "estimateNote",
            ] {
                o.remove(k);
            }
        }
    }
    assert_eq!(api, cli, "the CLI's --json and the client's answer differ");
    for f in r["fields"].as_array().unwrap() {
        let raw = &f["raw"];
        for (mine, theirs) in [
            ("id", "id"),
            ("name", "name"),
            ("share", "share"),
            ("unit", "unit"),
            ("gpus", "quantity"),
            ("priority", "priority"),
            ("state", "state"),
            ("reason", "reason"),
            ("devices", "devices"),
            ("command", "command"),
            ("attempts", "attempts"),
            ("preempted_count", "preempted_count"),
            ("submitted", "submitted"),
            ("started", "started"),
        ] {
            assert_eq!(f[mine], raw[theirs], "{mine} vs {theirs}: {f}");
        }
        assert_eq!(f["user"], raw["submitter"]["name"], "{f}");
        assert_eq!(f["uid"], raw["submitter"]["uid"], "{f}");
        if let Some(t) = raw.get("estimatedStart") {
            assert_eq!(&f["estimated_start"], t, "{f}");
        }
    }
    let ids: Vec<u64> = r["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [run, 3, done], "running, queue, finished: {r}");
    let filtered = s.jobs_json(&["--share", "qs2", "--status", "queued"]);
    let cli_ids: Vec<&Value> = filtered["queue"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| &v["id"])
        .collect();
    assert_eq!(
        serde_json::json!(cli_ids),
        r["queued"],
        "the filters agree: {r}"
    );
}

// ---- a second real user ---------------------------------------------------------------

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Why the two-user test cannot run here, if it cannot.
pub(crate) fn multi_user_skip() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not running as root".into());
    }
    for tool in ["useradd", "userdel", "runuser"] {
        let found = Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {tool}"))
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    None
}

/// A test user, removed on drop (also when the test fails).
pub(crate) struct TestUser(pub(crate) String);

impl TestUser {
    pub(crate) fn create() -> TestUser {
        let name = format!(
            "sqpy{}{}",
            std::process::id() % 100_000,
            SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let out = Command::new("useradd")
            .args(["-M", "-N", "-s", "/bin/sh", "-d", "/nonexistent", &name])
            .output()
            .expect("useradd");
        assert!(
            out.status.success(),
            "useradd: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        TestUser(name)
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("pkill")
            .args(["-KILL", "-u", &self.0])
            .status();
        let _ = Command::new("userdel")
            .arg(&self.0)
            .stderr(Stdio::null())
            .status();
    }
}

/// Copy the client package where every user can read it.
pub(crate) fn public_copy(to: &Path) {
    let dst = to.join("shareq");
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)).unwrap();
    for e in std::fs::read_dir(client_src().join("shareq")).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            let f = dst.join(p.file_name().unwrap());
            std::fs::copy(&p, &f).unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
}

/// A python3 that `user` may run (the one on root's PATH may live under /root).
pub(crate) fn python_for(user: &str, first: &str) -> Option<String> {
    let real = std::fs::canonicalize(first)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| first.to_string());
    [real.as_str(), "/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|py| {
            Command::new("runuser")
                .args(["-u", user, "--", py, "-c", "import json, socket"])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(str::to_string)
}

#[test]
fn a_refusal_raises_not_allowed_with_the_rules_words() {
    let py = needs_python!();
    if let Some(why) = multi_user_skip() {
        eprintln!(
            "skipping {}: {why} (a second real user is needed)",
            module_path!()
        );
        return;
    }
    let bob = TestUser::create();
    let Some(bob_py) = python_for(&bob.0, &py) else {
        eprintln!("skipping: no python3 that user {} may run", bob.0);
        return;
    };
    let shares = format!(
        "{}members: [root]\n",
        share("private", 2, "LEND_AND_BORROW", false)
    );
    let s = Server::start(&config(2, 1, &shares));
    // Let every user reach the socket (the state directory is 0711, the socket 0666).
    std::fs::set_permissions(s.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let lib = s.dir.path().join("py");
    public_copy(&lib);
    let mine = s.submit(
        &["--share", "private", "--name", "roots"],
        &["sleep", "300"],
    );
    let script = format!(
        r#"
import json, shareq
c = shareq.Client(state={state:?})
out = {{"hello": c.hello()}}
try:
    c.submit(share="private", command=["true"], cwd="/")
except shareq.NotAllowed as e:
    out["submit"] = [e.code, e.message]
try:
    c.cancel({mine})
except shareq.NotAllowed as e:
    out["cancel"] = [e.code, e.message]
try:
    c.log({mine})
except shareq.NotAllowed as e:
    out["log"] = e.code
out["state"] = c.job({mine}).state
print(json.dumps(out))
"#,
        state = s.state.display().to_string()
    );
    let out = Command::new("runuser")
        .args(["-u", &bob.0, "--", &bob_py, "-c", &script])
        .env("PYTHONPATH", &lib)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("SHAREQ_STATE")
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .expect("runuser");
    let r = last_json(&out, &s.stderr());
    assert_eq!(r["hello"]["user"], bob.0.as_str(), "{r}");
    assert_eq!(r["hello"]["admin"], false, "{r}");
    assert_eq!(
        r["submit"],
        serde_json::json!([
            "not_allowed",
            format!("{} may not submit to private: members are root", bob.0)
        ]),
        "{r}"
    );
    assert_eq!(r["cancel"][0], "not_allowed", "{r}");
    let words = r["cancel"][1].as_str().unwrap_or_default();
    assert!(
        words.starts_with(&format!(
            "{} may not cancel job {mine}: it belongs to root",
            bob.0
        )),
        "{r}"
    );
    assert_eq!(r["log"], "not_allowed", "{r}");
    assert_ne!(
        r["state"], "FAILED",
        "the refused cancel changed nothing: {r}"
    );
}

#[test]
fn a_submit_while_scheduling_is_paused_is_unavailable_not_rejected() {
    let py = needs_python!();
    let s = Server::start(&two_shares());
    let r = run_py(
        &py,
        &s,
        r#"
import json, os, socket, sqlite3, time, shareq
c = shareq.Client()
c.jobs()   # the start's batches are stored before the lock (the answer waits for them)
# Another process holds the database's write lock longer than the scheduler waits: the
# first submit's decision cannot be written, and scheduling pauses (SPEC §8).
db = sqlite3.connect(os.path.join(c.state, "shareq.db"), isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
spec = {"jobName": "x", "quotaShareName": "qs1", "command": ["true"]}
held = socket.socket(socket.AF_UNIX)
held.connect(os.path.join(c.state, "shareq.sock"))
held.sendall((json.dumps({"op": "submit", "job": spec}) + "\n").encode())
# Wait until the scheduler says it is paused.
for _ in range(100):
    if c.status().get("paused"):
        break
    time.sleep(0.1)
try:
    c._call({"op": "submit", "job": dict(spec, jobName="y")})
    out = {"outcome": "ok"}
except shareq.ShareqError as e:
    out = {"outcome": e.code, "message": e.message, "cls": type(e).__name__}
db.execute("ROLLBACK")
db.close()
# The held submit is written and answered once the lock goes.
held.settimeout(30)
out["held"] = json.loads(held.makefile().readline())
print(json.dumps(out))
"#,
    );
    assert_eq!(r["outcome"], "unavailable", "{r}");
    assert_eq!(r["cls"], "Unavailable", "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap_or_default()
            .contains("scheduling is paused"),
        "{r}"
    );
    assert_eq!(r["held"]["ok"], true, "{r}");
    assert!(
        s.stderr().contains("scheduling is paused"),
        "{}",
        s.stderr()
    );
}

#[test]
fn a_job_reports_its_checkpoint_with_shareq_checkpoint_from_python() {
    let py = needs_python!();
    let s = Server::start(&two_shares());
    let job_script = "import json, shareq, time\n\
                      r = shareq.checkpoint(note='py-step')\n\
                      print('saved', json.dumps(r), flush=True)\n\
                      time.sleep(60)\n";
    let script = format!(
        r#"
import json, os, time, shareq
try:
    shareq.checkpoint()
    outside = None
except shareq.ShareqError as e:
    outside = e.message
c = shareq.Client()
job = c.submit(share="qs1", command=[{py:?}, "-c", {job_script:?}], gpus=1,
               env={{"PYTHONPATH": {src:?}}})
t = time.time()
while "saved" not in c.log(job.id):
    assert time.time() - t < 30, c.log(job.id)
    time.sleep(0.1)
sock = os.path.join(os.environ["SHAREQ_STATE"], "shareq.sock")
forged_env = {{"SHAREQ_JOB_ID": str(job.id), "SHAREQ_ATTEMPT": "1",
               "SHAREQ_ATTEMPT_TOKEN": "0" * 64, "SHAREQ_SOCKET": sock}}
try:
    shareq.checkpoint(note="forged", env=forged_env)
    forged = None
except shareq.NotAllowed as e:
    forged = e.code
try:
    shareq.checkpoint(note="x" * 201, env=forged_env)
    long = None
except shareq.BadRequest as e:
    long = e.message
print(json.dumps({{"id": job.id, "outside": outside, "forged": forged, "long": long,
                  "log": c.log(job.id)}}))
"#,
        src = client_src().display().to_string(),
    );
    let r = run_py(&py, &s, &script);
    assert!(
        r["outside"]
            .as_str()
            .unwrap()
            .starts_with("SHAREQ_JOB_ID is not set"),
        "{r}"
    );
    assert_eq!(r["forged"], "not_allowed", "{r}");
    assert_eq!(
        r["long"],
        "--note: a checkpoint note may hold at most 200 bytes; this one has 201"
    );
    let log = r["log"].as_str().unwrap();
    let stored: Value = serde_json::from_str(log.trim().trim_start_matches("saved ")).unwrap();
    assert_eq!(stored["note"], "py-step", "{log}");
    let id = r["id"].as_u64().unwrap();
    let j = s.job(id);
    assert_eq!(j["lastCheckpoint"], stored, "{j}");
    assert!(s.cli(&["cancel", &id.to_string()]).status.success());
}

/// `submit(expect=...)` declares the job's runtime (SPEC §11): the job queued behind it is
/// estimated to start when that runtime is over, a range of one instant, which the client
/// reads as `estimated_start_earliest`/`_latest` and `estimate_kind`.
#[test]
fn a_declared_runtime_from_python_sets_the_estimate_of_the_job_behind() {
    let py = needs_python!();
    let s = Server::start(&config(1, 1, &share("qs1", 1, "RESERVE", false)));
    let r = run_py(
        &py,
        &s,
        r#"
import json, time, shareq
c = shareq.Client()
a = c.submit(share="qs1", command="sleep 30", expect=20)
while c.job(a.id).started is None:
    time.sleep(0.05)
b = c.submit(share="qs1", command="true")
for _ in range(200):
    j = c.job(b.id)
    if j.estimate_kind is not None:
        break
    time.sleep(0.1)
started = c.job(a.id).started
print(json.dumps({
    "a_started": int(started.timestamp() * 1000 + 0.5),
    "kind": j.estimate_kind,
    "earliest": j.estimated_start_earliest and int(j.estimated_start_earliest.timestamp() * 1000 + 0.5),
    "latest": j.estimated_start_latest and int(j.estimated_start_latest.timestamp() * 1000 + 0.5),
}))
c.cancel(a.id)
"#,
    );
    let at = r["a_started"].as_i64().unwrap() + 20_000;
    assert_eq!(r["kind"], "range", "{r}");
    assert_eq!(r["earliest"], at, "{r}");
    assert_eq!(r["latest"], at, "{r}");
}

/// A multi-node job (SPEC §16) from the client: `nodes=`, `gpus_per_node=` reach the
/// scheduler as `numNodes` and the per-node `quantity` (this one machine has no `nodes`:
/// refused by name, by `predict` too); `gpus` stays the total, and a contradiction raises
/// ValueError with nothing sent; a gang's `JobView` reads as `num_nodes`, `placements`
/// and `gpus_per_node`.
#[test]
fn a_gang_is_asked_with_nodes_and_gpus_per_node() {
    let py = needs_python!();
    let s = Server::start(&two_shares());
    let r = run_py(
        &py,
        &s,
        r#"
import json, shareq
from shareq.client import Client
c = shareq.Client()
errors = []
for kw in [dict(nodes=2, gpus=6, gpus_per_node=4), dict(nodes=2, gpus=3),
           dict(gpus_per_node=2), dict(nodes=1), dict(nodes=2, gpu_memory=20)]:
    try:
        c.submit(share="qs1", command=["true"], cwd="/", **kw)
        errors.append(None)
    except ValueError as e:
        errors.append(str(e))
try:
    c.submit(share="qs1", command=["true"], cwd="/", nodes=2, gpus_per_node=1)
    rejected = None
except shareq.Rejected as e:
    rejected = e.reason
predicted = c.predict(share="qs1", command=["true"], nodes=2, gpus=2)
spec = Client._spec("qs1", ["true"], 4, None, 0, None, None, None, "/", None, None, None,
                    nodes=2)
view = shareq.Job.from_view({
    "id": 7, "name": "g", "share": "qs1", "unit": "gpu", "quantity": 8, "priority": 0,
    "state": "RUNNING", "submitted": 0, "devices": [0, 1, 2, 3], "node": "n1",
    "numNodes": 2, "placements": [{"node": "n1", "devices": [0, 1, 2, 3]},
                                  {"node": "n2", "devices": [0, 1, 2, 3]}]})
print(json.dumps({"errors": errors, "rejected": rejected, "predicted": predicted,
                  "spec": [spec["quantity"], spec["numNodes"]],
                  "view": [view.gpus, view.num_nodes, view.gpus_per_node,
                           [p["node"] for p in view.placements]],
                  "jobs": len(c.jobs(all=True))}))
"#,
    );
    let errors = r["errors"].as_array().cloned().unwrap_or_default();
    let says = [
        "gpus=6 counts the job's GPUs in all, and nodes=2 × gpus_per_node=4 is 8",
        "3 does not split evenly over nodes=2",
        "gpus_per_node=2 is for a multi-node job: add nodes=N",
        "nodes=1: a multi-node job runs on 2..64 nodes",
        "gpu_memory cannot be used with nodes",
    ];
    assert_eq!(errors.len(), says.len(), "{r}");
    for (e, says) in errors.iter().zip(says) {
        assert!(e.as_str().unwrap_or_default().contains(says), "{says}: {r}");
    }
    assert!(
        r["rejected"]
            .as_str()
            .unwrap_or_default()
            .contains("--nodes needs an environment with nodes"),
        "{r}"
    );
    assert!(
        r["predicted"]
            .to_string()
            .contains("--nodes needs an environment with nodes"),
        "{r}"
    );
    assert_eq!(r["spec"], serde_json::json!([4, 2]), "{r}");
    assert_eq!(r["view"], serde_json::json!([8, 2, 4, ["n1", "n2"]]), "{r}");
    assert_eq!(r["jobs"], 0, "nothing was queued: {r}");
}
