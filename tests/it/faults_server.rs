//! Faults around the scheduler process, with the real binary: a deleted or replaced state
//! directory stops it with an error; idle and excess socket connections cannot starve it;
//! odd files in the config directory (a FIFO, a link to `/dev/zero`, huge or deeply nested
//! YAML) never block it; a command whose reader goes away ends quietly.

use crate::common;

use common::{BIN, Server, config, share};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn cfg() -> String {
    config(1, 1, &share("a", 1, "LEND", false))
}

fn exits_within(s: &mut Server, secs: u64) -> Option<i32> {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(secs) {
        if let Some(Ok(Some(st))) = s.child().map(|c| c.try_wait()) {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn a_deleted_state_directory_stops_the_scheduler() {
    let mut s = Server::start(&cfg());
    std::fs::remove_dir_all(&s.state).unwrap();
    assert_eq!(exits_within(&mut s, 10), Some(1), "{}", s.stderr());
    assert!(s.stderr().contains("deleted or replaced"), "{}", s.stderr());
}

#[test]
fn a_replaced_state_directory_stops_the_scheduler() {
    let mut s = Server::start(&cfg());
    let old = s.path("state.old");
    std::fs::rename(&s.state, &old).unwrap();
    std::fs::create_dir_all(&s.state).unwrap();
    assert_eq!(exits_within(&mut s, 10), Some(1), "{}", s.stderr());
    assert!(s.stderr().contains("deleted or replaced"), "{}", s.stderr());
}

fn request(state: &std::path::Path, line: &str) -> String {
    let mut c = UnixStream::connect(state.join("shareq.sock")).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A connection over the cap is answered and closed at once: the write may fail.
    let _ = c.write_all(format!("{line}\n").as_bytes());
    let mut answer = String::new();
    let _ = BufReader::new(c).read_line(&mut answer);
    answer
}

#[test]
fn idle_connections_are_capped_and_timed_out() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("config");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(c.join("c.yaml"), cfg()).unwrap();
    let s = Server::start_dir(
        dir,
        c,
        &[
            "--stop-jobs-on-exit",
            "--max-connections",
            "20",
            "--idle-timeout",
            "2",
        ],
    );
    // The harness's own probe connection must be gone before the count starts.
    std::thread::sleep(Duration::from_millis(500));
    let idle: Vec<UnixStream> = (0..20)
        .map(|_| UnixStream::connect(s.state.join("shareq.sock")).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // One too many: told so at once, not left hanging.
    let t = Instant::now();
    let answer = request(&s.state, r#"{"op":"status"}"#);
    assert!(answer.contains("too many connections"), "{answer}");
    assert!(t.elapsed() < Duration::from_secs(2));
    // The idle ones are closed after the timeout; then the CLI works again.
    for mut c in idle {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(
            c.read(&mut buf).unwrap_or(0),
            0,
            "an idle connection stayed open"
        );
    }
    let out = s.cli(&["status"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = s.submit(&["--share", "a"], &["true"]);
    s.wait_state(id, "SUCCEEDED", 20);
}

#[test]
fn odd_files_in_the_config_directory_never_block_the_scheduler() {
    let s = Server::start(&cfg());
    nix::unistd::mkfifo(
        &s.config.join("fifo.yaml"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    std::os::unix::fs::symlink("/dev/zero", s.config.join("zero.yaml")).unwrap();
    let t = Instant::now();
    let answer = request(&s.state, r#"{"op":"reload"}"#);
    assert!(answer.contains("\"ok\":true"), "{answer}");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(s.stderr().contains("not a regular file"), "{}", s.stderr());

    // A huge file and a deeply nested one: refused with a clear error, quickly.
    std::fs::write(s.config.join("big.yaml"), "#".repeat(2 << 20)).unwrap();
    let answer = request(&s.state, r#"{"op":"reload"}"#);
    assert!(answer.contains("larger than"), "{answer}");
    std::fs::remove_file(s.config.join("big.yaml")).unwrap();
    let deep = format!("x: {}1{}\n", "[".repeat(20_000), "]".repeat(20_000));
    std::fs::write(s.config.join("deep.yaml"), deep).unwrap();
    let t = Instant::now();
    let answer = request(&s.state, r#"{"op":"reload"}"#);
    assert!(answer.contains("nested more than"), "{answer}");
    assert!(t.elapsed() < Duration::from_secs(5));
    // Meanwhile the scheduler answered everyone else.
    let out = s.cli(&["status"]);
    assert!(out.status.success());
}

#[test]
fn a_closed_pipe_ends_commands_quietly() {
    let s = Server::start(&cfg());
    for i in 0..20 {
        s.submit(
            &["--share", "a", "--name", &format!("j{i}")],
            &["sleep 300"],
        );
    }
    let state = s.state.display().to_string();
    let check_dir = s.config.display().to_string();
    for args in [
        vec!["jobs", "--state", &state],
        vec!["jobs", "--all", "--json", "--state", &state],
        vec!["status", "--state", &state],
        vec!["check", &check_dir],
    ] {
        let (r, w) = nix::unistd::pipe().unwrap();
        drop(r); // the reader is gone before anything is written
        let out = Command::new(BIN)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(w))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.is_empty(), "{args:?}: {err}");
        assert_ne!(out.status.code(), Some(101), "{args:?} panicked");
    }
}

/// With a low open-file limit, connections that never end cannot take the descriptors a
/// job start needs: the job queued behind a running one still starts and succeeds.
#[test]
fn a_job_starts_while_connections_are_exhausted() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("config");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(c.join("c.yaml"), cfg()).unwrap();
    let state = dir.path().join("state");
    let _cleanup = common::Cleanup(state.clone());
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--config"])
        .arg(&c)
        .arg("--state")
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, 700, 700)
                .map_err(std::io::Error::from)
        });
    }
    let mut serve = common::Serve {
        child: Some(cmd.spawn().unwrap()),
    };
    let sock = state.join("shareq.sock");
    common::wait_for(20, "the socket", || UnixStream::connect(&sock).is_ok());
    std::thread::sleep(Duration::from_millis(300));
    let submit = |cmd: &str| {
        let line = format!(
            r#"{{"op":"submit","job":{{"jobName":"j","quotaShareName":"a","command":"{cmd}"}}}}"#
        );
        let answer = request(&state, &line);
        let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
        v["id"].as_u64().unwrap()
    };
    let first = submit("sleep 2");
    let second = submit("true");
    // Far more connections than descriptors: most are refused, none starves the jobs.
    let mut held = Vec::new();
    for _ in 0..1000 {
        if let Ok(s) = UnixStream::connect(&sock) {
            held.push(s);
        }
    }
    let exit = |id: u64| {
        std::fs::read_to_string(state.join(format!("runs/{id}/1.exit")))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["code"].as_i64())
    };
    common::wait_for(20, "the second job's exit", || exit(second).is_some());
    assert_eq!(exit(first), Some(0));
    assert_eq!(exit(second), Some(0), "the job behind could not start");
    drop(held);
    serve.kill9();
}
