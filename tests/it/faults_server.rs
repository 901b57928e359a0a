//! Faults around the scheduler process, with the real binary: a deleted or replaced state
//! directory stops it with an error; idle and excess socket connections cannot starve it;
//! odd files in the config directory (a FIFO, a link to `/dev/zero`, a dangling or looping
//! symlink, huge or deeply nested YAML) never block it and are never skipped in silence; a command whose reader goes away ends quietly.

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
    // Neither is read (that would block for ever, or never end), and neither is skipped
    // without a word (SPEC §5): the reload is refused, naming each file, quickly.
    let t = Instant::now();
    let answer = request(&s.state, r#"{"op":"reload"}"#);
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(answer.contains("\"ok\":false"), "{answer}");
    assert!(
        answer.contains("fifo.yaml") && answer.contains("a named pipe"),
        "{answer}"
    );
    assert!(
        answer.contains("zero.yaml") && answer.contains("a device"),
        "{answer}"
    );
    std::fs::remove_file(s.config.join("fifo.yaml")).unwrap();
    std::fs::remove_file(s.config.join("zero.yaml")).unwrap();

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
    let exit = |id: u64| crate::common::stored_exit_code(&state, id, 1);
    common::wait_for(20, "the second job's exit", || exit(second).is_some());
    assert_eq!(exit(first), Some(0));
    assert_eq!(exit(second), Some(0), "the job behind could not start");
    drop(held);
    serve.kill9();
}

#[test]
fn a_broken_symlink_in_the_config_directory_is_an_error_not_a_config_without_it() {
    // The shares live in their own file, as in the samples.
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    let full = cfg();
    let (env, shares) = full.split_once("---\n").unwrap();
    std::fs::write(config_dir.join("env.yaml"), env).unwrap();
    std::fs::write(config_dir.join("real-shares.yml.txt"), shares).unwrap();
    std::os::unix::fs::symlink("real-shares.yml.txt", config_dir.join("shares.yaml")).unwrap();
    let s = Server::start_dir(dir, config_dir.clone(), &["--stop-jobs-on-exit"]);
    let id = s.submit(&["--share", "a"], &["sleep", "30"]);
    s.wait_state(id, "RUNNING", 20);

    for (target, words) in [
        ("gone.yaml", "a dangling symlink"),
        ("shares.yaml", "a symlink that loops"),
    ] {
        std::fs::remove_file(config_dir.join("shares.yaml")).unwrap();
        std::os::unix::fs::symlink(target, config_dir.join("shares.yaml")).unwrap();
        let answer = request(&s.state, r#"{"op":"reload"}"#);
        assert!(answer.contains("\"ok\":false"), "{answer}");
        assert!(
            answer.contains("shares.yaml") && answer.contains(words),
            "{words}: {answer}"
        );
        // The config in force is kept: the share is still there and its job runs on,
        // within its limit (not "(removed)", not reclaimable).
        let job = s.job(id);
        assert_eq!(job["state"], "RUNNING", "{job}");
        let out = Command::new(BIN)
            .args(["check", config_dir.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("shares.yaml") && err.contains(words), "{err}");
    }
    let status = String::from_utf8_lossy(&s.cli(&["status"]).stdout).to_string();
    assert!(!status.contains("removed"), "{status}");
}

#[test]
fn the_global_state_option_is_honoured_or_refused_never_ignored() {
    let s = Server::start(&cfg());
    let id = s.submit(&["--share", "a"], &["sleep", "30"]);
    let state = s.state.to_str().unwrap();
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env_remove("SHAREQ_STATE")
            .env("XDG_STATE_HOME", s.path("nowhere"))
            .output()
            .unwrap()
    };
    for sub in ["jobs", "status"] {
        let out = run(&["--state", state, sub]);
        assert!(
            out.status.success(),
            "{sub}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if sub == "jobs" {
            assert!(String::from_utf8_lossy(&out.stdout).contains(&format!(" {id} ")));
        }
    }
    let out = run(&["--state", state, "submit", "--share", "a", "--", "true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Two different ones, or one a subcommand does not use: refused, saying why.
    let other = s.path("other");
    let out = run(&["--state", state, "jobs", "--state", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("two state directories given"));
    let out = run(&["--state", state, "replay", "x.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not use a state directory"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_stopped_scheduler_gives_the_cli_a_clear_timeout() {
    let mut s = Server::start(&cfg());
    let pid = nix::unistd::Pid::from_raw(s.child().unwrap().id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let t = Instant::now();
    let out = Command::new(BIN)
        .args(["status", "--state"])
        .arg(&s.state)
        .env("SHAREQ_TIMEOUT", "2")
        .output()
        .unwrap();
    let waited = t.elapsed();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did not answer within 2 s"), "{err}");
    assert!(waited < Duration::from_secs(6), "{waited:?}");
    // Running again, it answers.
    assert!(s.cli(&["status"]).status.success());
}

#[test]
fn a_stopped_scheduler_neither_stretches_a_run_time_nor_delays_a_timeout() {
    let mut s = Server::start(&config(2, 1, &share("a", 2, "LEND", false)));
    let short = s.submit(&["--share", "a"], &["sleep", "2"]);
    let limited = s.submit(&["--share", "a", "--timeout", "3"], &["sleep", "1000"]);
    s.wait_state(short, "RUNNING", 20);
    s.wait_state(limited, "RUNNING", 20);
    let pid = nix::unistd::Pid::from_raw(s.child().unwrap().id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let stopped = Instant::now();
    std::thread::sleep(Duration::from_secs(10));
    // While the scheduler was stopped, the supervisor ended the timed-out attempt at its
    // timeout (its process is gone well before the scheduler resumes).
    let sleeping = Command::new("pgrep")
        .args(["-f", "^sleep 1000$"])
        .output()
        .unwrap();
    let still = String::from_utf8_lossy(&sleeping.stdout).trim().to_string();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert!(
        still.is_empty() || stopped.elapsed() < Duration::from_secs(5),
        "the timed-out job still ran while serve was stopped: {still}"
    );
    let j = s.wait_state(short, "SUCCEEDED", 20);
    let ran = j["finished"].as_i64().unwrap() - j["started"].as_i64().unwrap();
    assert!(
        (1_900..4_000).contains(&ran),
        "recorded run time {ran} ms: {j}"
    );
    let t = s.wait_state(limited, "FAILED", 20);
    assert!(t["reason"].as_str().unwrap().contains("TIMEOUT"), "{t}");
    let ran = t["finished"].as_i64().unwrap() - t["started"].as_i64().unwrap();
    assert!(
        (2_900..6_000).contains(&ran),
        "timed out after {ran} ms: {t}"
    );
}

#[test]
fn config_errors_quote_what_the_file_says_inert() {
    let s = Server::start(&cfg());
    // A key holding an escape sequence (YAML's "\x1b" is the real byte).
    let evil = cfg().replacen(
        "capacityLimits:",
        "\"x\\x1b]0;pwned\\x07\": 1\ncapacityLimits:",
        1,
    );
    std::fs::write(s.config.join("config.yaml"), evil).unwrap();
    let check = Command::new(BIN)
        .arg("check")
        .arg(&s.config)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1));
    assert!(!check.stderr.contains(&0x1b), "check printed a raw escape");
    assert!(String::from_utf8_lossy(&check.stderr).contains("\\x1b]0;pwned"));
    let reload = s.cli(&["reload"]);
    assert!(!reload.status.success());
    let err = String::from_utf8_lossy(&reload.stderr);
    assert!(
        !reload.stderr.contains(&0x1b),
        "reload printed a raw escape"
    );
    // Several errors stay on several lines, not one with literal `\n`s.
    assert!(!err.contains("rejected:\\n"), "{err}");
    assert!(err.contains("\\x1b]0;pwned"), "{err}");
}
