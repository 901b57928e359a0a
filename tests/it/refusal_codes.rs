//! Every kind of refusal through the real control socket, with the error code it gets:
//! the code comes from the refusal's kind (`ErrorCode::of`), never from its words, so each
//! family is pinned here with the message users read.

use crate::common::{Server, config, share};
use crate::runtime_socket::ask;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The `(code, error)` of a refused answer.
fn refused(a: &Value) -> (String, String) {
    assert_eq!(a["ok"], false, "{a}");
    let code = a["code"].as_str().unwrap_or("none").to_string();
    (code, a["error"].as_str().unwrap_or("").to_string())
}

fn submit(job: Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({"op": "submit", "job": job})).unwrap();
    line.push(b'\n');
    line
}

fn job(extra: Value) -> Value {
    let mut j = json!({"jobName": "x", "quotaShareName": "team", "command": ["sleep", "300"]});
    if let (Some(j), Some(e)) = (j.as_object_mut(), extra.as_object()) {
        j.extend(e.clone());
    }
    j
}

#[test]
fn each_refusal_of_the_runtime_has_its_code() {
    let yaml = config(1, 1, &share("team", 1, "LEND", false)).replacen(
        "preemption:",
        "limits: {maxQueuedJobsPerUser: 2}\npreemption:",
        1,
    );
    let s = Server::start(&yaml);
    let big = "e".repeat(70 << 10);
    let lines = [
        submit(job(json!({"quotaShareName": "nope"}))),
        submit(json!({"jobName": "x", "quotaShareName": "team"})),
        submit(job(json!({"workingDirectory": "/no/such/dir"}))),
        // Wrong in two ways: the command is named, as before the check moved.
        submit(json!({"jobName": "x", "quotaShareName": "team", "workingDirectory": "/no/such"})),
        submit(job(json!({"clientToken": "has space"}))),
        submit(job(json!({"env": {"BIG": big}}))),
        b"{\"op\":\"priority\",\"id\":999,\"priority\":3}\n".to_vec(),
        b"{\"op\":\"priority\",\"id\":1,\"priority\":10000}\n".to_vec(),
        submit(job(json!({"workingDirectory": "/"}))),
        submit(job(json!({}))),
        submit(job(json!({}))),
    ];
    let lines: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
    let a = ask(&s, &lines);
    let expect = [
        (
            "rejected",
            "quota share `nope` does not exist (shares: team)",
        ),
        ("rejected", "command is required"),
        (
            "rejected",
            "workingDirectory `/no/such/dir` is not a directory",
        ),
        ("rejected", "command is required"),
        (
            "rejected",
            "clientToken must be 1 to 128 printable ASCII characters without spaces",
        ),
        (
            "limit",
            "the job's command and environment take 71 KiB, more than the 64 KiB a job may \
             carry (limit: command + env); pass large data in a file",
        ),
        ("not_found", "no job 999"),
        ("bad_request", "priority 10000 is out of range 0..9999"),
    ];
    for (i, (code, error)) in expect.iter().enumerate() {
        assert_eq!(
            refused(&a[i]),
            (code.to_string(), error.to_string()),
            "line {i}"
        );
        assert!(a[i].get("not_allowed").is_none(), "{}", a[i]);
    }
    // Two jobs are the most one user may have queued or running: the third is a limit.
    assert!(a[8]["id"].is_u64() && a[9]["id"].is_u64(), "{a:?}");
    let (code, error) = refused(&a[10]);
    assert_eq!(code, "limit");
    assert!(
        error.ends_with(
            "has 2 jobs queued or running, the most one user may have \
             (limits.maxQueuedJobsPerUser = 2): wait for some to end"
        ),
        "{error}"
    );

    // A config that does not validate: `rejected`, its errors after `config rejected:`.
    std::fs::write(s.config.join("broken.yaml"), "kind: QuotaShare\n").unwrap();
    let a = ask(&s, &[b"{\"op\":\"reload\"}\n"]);
    let (code, error) = refused(&a[0]);
    assert_eq!(code, "rejected");
    assert!(error.starts_with("config rejected:\n"), "{error}");
    assert!(error.contains("broken.yaml"), "{error}");
}

#[test]
fn a_full_state_filesystem_is_a_limit() {
    // No filesystem has 4 PiB free: every submit finds the state filesystem below it.
    let yaml = config(1, 1, &share("team", 1, "LEND", false)).replacen(
        "preemption:",
        "logs: {minFreeMiB: 4294967295}\npreemption:",
        1,
    );
    let s = Server::start(&yaml);
    let line = submit(job(json!({})));
    let a = ask(&s, &[&line]);
    let (code, error) = refused(&a[0]);
    assert_eq!(code, "limit", "{error}");
    assert!(
        error.contains("below the reserve of 4294967295 MiB (logs.minFreeMiB)"),
        "{error}"
    );
    assert!(error.starts_with("the state filesystem has "), "{error}");
}

#[test]
fn a_submit_while_scheduling_is_paused_is_unavailable() {
    let s = Server::start(&config(1, 1, &share("team", 1, "LEND", false)));
    // The start's batches are stored first (a `jobs` answer waits for the turns before
    // it); then another process holds the write lock longer than the scheduler waits.
    ask(&s, &[b"{\"op\":\"jobs\"}\n"]);
    let db = rusqlite::Connection::open(s.state.join("shareq.db")).unwrap();
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let held = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
    (&held)
        .write_all(&submit(job(json!({"jobName": "held"}))))
        .unwrap();
    let t = Instant::now();
    while ask(&s, &[b"{\"op\":\"status\"}\n"])[0]["status"]["paused"].is_null() {
        assert!(t.elapsed() < Duration::from_secs(30), "never paused");
        std::thread::sleep(Duration::from_millis(100));
    }
    let line = submit(job(json!({"jobName": "refused"})));
    let a = ask(&s, &[&line]);
    let (code, error) = refused(&a[0]);
    assert_eq!(code, "unavailable", "{error}");
    assert!(
        error.starts_with("scheduling is paused: the scheduler cannot write its decisions"),
        "{error}"
    );
    // The lock goes: the held submit is written and answered.
    db.execute_batch("ROLLBACK").unwrap();
    drop(db);
    held.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut answer = String::new();
    BufReader::new(&held).read_line(&mut answer).unwrap();
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["ok"], true, "{answer}");
}

/// One request on a connection of its own, its answer waited for at most `within`.
fn answer_within(s: &Server, line: &[u8], within: Duration) -> Value {
    let stream = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
    stream.set_read_timeout(Some(within)).unwrap();
    (&stream).write_all(line).unwrap();
    let mut a = String::new();
    let read = BufReader::new(&stream).read_line(&mut a);
    assert!(
        matches!(read, Ok(n) if n > 0),
        "no answer to {} within {within:?}: {read:?}",
        String::from_utf8_lossy(line).trim()
    );
    serde_json::from_str(&a).unwrap()
}

/// While scheduling is paused (SPEC §8), reads answer from memory and the database opened
/// read-only, and a cancel is refused at once, saying why; nothing of it is carried out.
#[test]
fn while_paused_reads_answer_and_a_cancel_is_refused_at_once() {
    let s = Server::start(&config(1, 1, &share("team", 1, "LEND", false)));
    let a = ask(&s, &[&submit(job(json!({"jobName": "kept"})))]);
    let id = a[0]["id"].as_u64().expect("an id");
    ask(&s, &[b"{\"op\":\"jobs\"}\n"]);
    let db = rusqlite::Connection::open(s.state.join("shareq.db")).unwrap();
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    // A change that cannot be written pauses scheduling.
    let held = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
    (&held)
        .write_all(&submit(job(json!({"jobName": "held"}))))
        .unwrap();
    let t = Instant::now();
    while ask(&s, &[b"{\"op\":\"status\"}\n"])[0]["status"]["paused"].is_null() {
        assert!(t.elapsed() < Duration::from_secs(30), "never paused");
        std::thread::sleep(Duration::from_millis(100));
    }
    let second = Duration::from_secs(1);
    let status = answer_within(&s, b"{\"op\":\"status\"}\n", second);
    assert_eq!(status["ok"], true, "{status}");
    let all = answer_within(&s, b"{\"op\":\"jobs\",\"all\":true}\n", second);
    assert_eq!(all["ok"], true, "{all}");
    assert!(all["jobs"].to_string().contains("\"kept\""), "{all}");
    let history = answer_within(&s, b"{\"op\":\"history\"}\n", second);
    assert_eq!(history["ok"], true, "{history}");
    assert!(history["history"].is_object(), "{history}");
    let predict = serde_json::to_vec(&json!({"op": "predict", "job": job(json!({}))})).unwrap();
    let predict = answer_within(&s, &[predict, b"\n".to_vec()].concat(), second);
    assert_eq!(predict["ok"], true, "{predict}");
    let t = Instant::now();
    let cancel = format!("{{\"op\":\"cancel\",\"ids\":[{id}]}}\n");
    let a = answer_within(&s, cancel.as_bytes(), second);
    assert!(t.elapsed() < second, "the cancel waited {:?}", t.elapsed());
    let (code, error) = refused(&a);
    assert_eq!(code, "unavailable", "{error}");
    assert!(error.starts_with("scheduling is paused: "), "{error}");
    assert_eq!(a["cancelled"][0]["cancelled"], false, "{a}");
    let priority = format!("{{\"op\":\"priority\",\"id\":{id},\"priority\":7}}\n");
    let a = answer_within(&s, priority.as_bytes(), second);
    let (code, error) = refused(&a);
    assert_eq!(code, "unavailable", "{error}");
    // The lock goes: the held submit is answered, the refused cancel was never done.
    db.execute_batch("ROLLBACK").unwrap();
    drop(db);
    held.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut answer = String::new();
    let read = BufReader::new(&held).read_line(&mut answer);
    assert!(read.is_ok(), "{read:?}: {}", s.stderr());
    assert!(answer.contains("\"ok\":true"), "{answer}");
    assert_ne!(s.state_of(id), "CANCELLED");
}

/// A caller the rules refuse: `not_allowed`, with `not_allowed: true` for older clients.
/// Needs another user than the scheduler's: run as root, the request is sent as `nobody`
/// (by the system's Python); skipped, saying so, where that cannot be done.
#[test]
fn a_caller_the_rules_refuse_is_not_allowed() {
    let python = std::path::Path::new("/usr/bin/python3");
    if !nix::unistd::geteuid().is_root() || !python.exists() {
        eprintln!("skipping: needs root and /usr/bin/python3 to ask as another user");
        return;
    }
    let shares = format!(
        "{}---\n{}members: [root]\n",
        share("team", 1, "LEND", false),
        share("private", 1, "LEND", false)
    );
    let s = Server::start(&config(1, 1, &shares));
    // `nobody` may pass through the test's directory to the socket (SPEC §9's modes).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(s.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let request = String::from_utf8(submit(json!({
        "jobName": "x", "quotaShareName": "private", "command": ["true"]
    })))
    .unwrap();
    let script = "import socket, sys\n\
        s = socket.socket(socket.AF_UNIX)\n\
        s.connect(sys.argv[1])\n\
        s.sendall(sys.argv[2].encode())\n\
        print(s.makefile().readline(), end='')\n";
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .arg(s.state.join("shareq.sock"))
        .arg(&request)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    let (code, error) = refused(&answer);
    assert_eq!(code, "not_allowed", "{answer}");
    assert_eq!(answer["not_allowed"], true, "{answer}");
    assert!(
        error.contains("may not submit to private: members are root"),
        "{error}"
    );
}

#[test]
fn a_multi_node_job_is_refused_by_the_local_executor_by_name() {
    // SPEC §16: the local executor runs jobs on this machine only, its one node; the
    // refusal names the executor that can run one, and nothing is queued. (Without
    // `nodes`, the core's own rejection says the environment has none.)
    let one_node = config(2, 1, &share("team", 2, "LEND", false)).replacen(
        "    devices: {fake: 2}\n",
        "nodes:\n  - {name: here, devices: {gpu: {fake: 2}}}\n",
        1,
    );
    assert!(one_node.contains("name: here"), "{one_node}");
    let s = Server::start(&one_node);
    let gang = submit(job(json!({"numNodes": 2, "quantity": 1})));
    let plain = submit(job(json!({})));
    let a = ask(&s, &[&gang, &plain]);
    let (code, error) = refused(&a[0]);
    assert_eq!(code, "rejected");
    assert_eq!(
        error,
        "numNodes: 2: a multi-node job needs `executor: slurm` \
         (`executor: {kind: slurm, partition: ...}` and `nodes`); the local executor runs \
         jobs on this machine only"
    );
    // From the CLI: the same words, and the exit code of every rejected submission.
    let gang = s.cli(&[
        "submit",
        "--share",
        "team",
        "--nodes",
        "2",
        "--gpus-per-node",
        "1",
        "--",
        "true",
    ]);
    let other = s.cli(&["submit", "--share", "nope", "--", "true"]);
    assert!(
        String::from_utf8_lossy(&gang.stderr).contains("needs `executor: slurm`"),
        "{}",
        String::from_utf8_lossy(&gang.stderr)
    );
    assert_eq!(gang.status.code(), other.status.code());
    assert_ne!(gang.status.code(), Some(0));
    assert_eq!(a[1]["id"], 1, "the refused gang took no job id: {a:?}");
}
