//! Restart recovery with the real binary (issue 6): jobs running when the scheduler is
//! killed are adopted, not restarted, and their later exits are recorded; jobs that ended
//! while it was down get their exit status; jobs whose supervisor vanished run again
//! (`LOST_ON_RESTART`); queued jobs stay queued. And the failure cases at start: a
//! read-only state directory, a corrupt database, a schema that is too new, a decision
//! that cannot be stored.

use crate::common;

use common::{BIN, Cleanup, Serve, alive, config, share, wait_for};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn cli(state: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(&args[..1])
        .arg("--state")
        .arg(state)
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn submit(state: &Path, name: &str, cmd: &str) -> u64 {
    let out = cli(
        state,
        &["submit", "--share", "team", "--name", name, "--", cmd],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn job(state: &Path, id: u64) -> Value {
    let out = cli(state, &["jobs", "--all", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for list in ["running", "queue", "finished"] {
        if let Some(j) = v[list].as_array().unwrap().iter().find(|j| j["id"] == id) {
            return j.clone();
        }
    }
    panic!("job {id} missing: {v}");
}

fn wait_state(state: &Path, id: u64, want: &str) -> Value {
    let t = Instant::now();
    loop {
        let j = job(state, id);
        if j["state"] == want {
            return j;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "job {id} not {want}: {j}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pid_of(state: &Path, id: u64, attempt: u32) -> i32 {
    common::record_pid(state, id, attempt).unwrap()
}

/// (outcome, exit code) of each attempt, from the database.
fn attempts(state: &Path, id: u64) -> Vec<(Option<String>, Option<i64>)> {
    let db = rusqlite::Connection::open_with_flags(
        state.join("shareq.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut stmt = db
        .prepare("SELECT outcome, exit_code FROM attempts WHERE job = ?1 ORDER BY attempt")
        .unwrap();
    stmt.query_map([id as i64], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The directory holding the unified-hierarchy group of process `pid`'s attempt (the
/// scheduler's `shareq-…` base), when it is in one.
fn attempt_groups_beside(pid: i32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    if !path.contains("/shareq-") {
        return None;
    }
    let root = Path::new("/sys/fs/cgroup");
    let mount = if root.join("unified/cgroup.controllers").exists() {
        root.join("unified")
    } else {
        root.to_path_buf()
    };
    Some(
        mount
            .join(path.trim_start_matches('/'))
            .parent()?
            .to_path_buf(),
    )
}

fn setup(gpus: u32) -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("c.yaml"),
        config(gpus, 1, &share("team", gpus, "LEND", false)),
    )
    .unwrap();
    let state = dir.path().join("state");
    let err = dir.path().join("serve.err");
    (dir, cfg, state, err)
}

#[test]
fn a_restart_adopts_running_jobs_and_recovers_the_rest() {
    let (dir, cfg, state, err) = setup(3);
    let _cleanup = Cleanup(state.clone());
    let d = dir.path().display();
    std::fs::create_dir_all(dir.path().join("R")).unwrap();
    let mut serve = Serve::start(&state, &cfg, &err);
    // A: runs through the restart, then fails with 3 (it records each time it starts).
    let a = submit(
        &state,
        "a",
        &format!("echo $SHAREQ_ATTEMPT >> {d}/R/a; sleep 2; exit 3"),
    );
    // B: ends while no scheduler runs.
    let b = submit(&state, "b", "sleep 0.3");
    // C: its supervisor and command are killed while no scheduler runs.
    let c = submit(
        &state,
        "c",
        &format!("if [ $SHAREQ_ATTEMPT = 1 ]; then echo $$ > {d}/R/c.pid; exec sleep 60; fi; true"),
    );
    // D: queued behind them.
    let q = submit(&state, "d", "true");
    for id in [a, b, c] {
        wait_state(&state, id, "RUNNING");
    }
    assert_eq!(job(&state, q)["state"], "RUNNABLE");
    let devices_a = job(&state, a)["devices"].clone();
    let sup_a = pid_of(&state, a, 1);
    let sup_c = pid_of(&state, c, 1);
    wait_for(10, "C's pid", || dir.path().join("R/c.pid").exists());
    let cmd_c: i32 = std::fs::read_to_string(dir.path().join("R/c.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    // Where the attempts' groups are, when they have some (root): A's, in the unified
    // hierarchy (SPEC §7).
    let groups = attempt_groups_beside(sup_a);
    let serve_pid = serve.child.as_ref().unwrap().id();
    let spawners = common::spawners_of(serve_pid);
    assert_eq!(spawners.len(), 1, "{spawners:?}");
    serve.kill9();
    // Its spawner of supervisors ends with it (its socket closes); the supervisors
    // it made stay.
    wait_for(10, "the spawner's end", || !alive(spawners[0] as i32));
    let kill = |pid: i32| {
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap()
    };
    kill(sup_c);
    kill(cmd_c);
    wait_for(10, "C gone", || !alive(sup_c) && !alive(cmd_c));
    // B ends meanwhile.
    wait_for(10, "B's exit in its record", || {
        common::exit_in_record(&state, b, 1).is_some()
    });

    let _serve = Serve::start(&state, &cfg, &err);
    // A adopted: same attempt, same GPUs, same supervisor, not started again.
    let ja = job(&state, a);
    assert_eq!(ja["state"], "RUNNING", "{ja}");
    assert_eq!(ja["attempts"], 1);
    assert_eq!(ja["devices"], devices_a);
    assert!(alive(sup_a));
    // B got the status its supervisor wrote.
    let jb = job(&state, b);
    assert_eq!(jb["state"], "SUCCEEDED", "{jb}");
    assert_eq!(
        attempts(&state, b),
        vec![(Some("SUCCEEDED".into()), Some(0))]
    );
    // C lost its supervisor: queued again, runs a second attempt.
    let jc = wait_state(&state, c, "SUCCEEDED");
    assert_eq!(jc["attempts"], 2, "{jc}");
    assert_eq!(
        attempts(&state, c)[0].0.as_deref(),
        Some("LOST_ON_RESTART"),
        "{:?}",
        attempts(&state, c)
    );
    // The groups of B and of C's first attempt, ended while no scheduler ran, are gone;
    // A's, which runs, is not.
    if let Some(dir) = &groups {
        let names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for gone in [b, c] {
            let prefix = format!("j{gone}a1@");
            assert!(!names.iter().any(|n| n.starts_with(&prefix)), "{names:?}");
        }
        let prefix = format!("j{a}a1@");
        assert!(names.iter().any(|n| n.starts_with(&prefix)), "{names:?}");
    }
    // D was queued and ran once.
    let jd = wait_state(&state, q, "SUCCEEDED");
    assert_eq!(jd["attempts"], 1);
    // A's exit, after the restart, is picked up and recorded.
    let ja = wait_state(&state, a, "FAILED");
    assert_eq!(ja["attempts"], 1, "{ja}");
    assert_eq!(
        attempts(&state, a),
        vec![(Some("NON_ZERO_EXIT".into()), Some(3))]
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("R/a")).unwrap(),
        "1\n",
        "A started more than once"
    );
}

#[test]
fn history_and_preemption_log_survive_and_jobs_all_reads_the_database() {
    let (_dir, cfg, state, err) = setup(1);
    let _cleanup = Cleanup(state.clone());
    let mut serve = Serve::start(&state, &cfg, &err);
    let ids: Vec<u64> = (0..3)
        .map(|i| submit(&state, &format!("h{i}"), "true"))
        .collect();
    for &id in &ids {
        wait_state(&state, id, "SUCCEEDED");
    }
    serve.kill9();
    // No scheduler: `jobs --all` reads the database itself, and says so.
    let out = cli(&state, &["jobs", "--all", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no scheduler is running"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<u64> = v["finished"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_u64().unwrap())
        .collect();
    for id in &ids {
        assert!(listed.contains(id), "{v}");
    }
    // With a scheduler again: the same history, through it.
    let _serve = Serve::start(&state, &cfg, &err);
    for &id in &ids {
        assert_eq!(job(&state, id)["state"], "SUCCEEDED");
    }
    let next = submit(&state, "next", "true");
    assert!(next > *ids.iter().max().unwrap(), "an id was reused");
}

fn serve_once(state: &Path, cfg: &Path, uid: Option<u32>) -> Output {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(BIN);
    c.args(["serve", "--config"])
        .arg(cfg)
        .arg("--state")
        .arg(state)
        .stdin(Stdio::null());
    if let Some(uid) = uid {
        c.uid(uid).gid(uid);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "serve started on a state it should refuse: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_corrupt_or_too_new_database_is_refused_and_left_untouched() {
    let (_dir, cfg, state, _err) = setup(1);
    std::fs::create_dir_all(&state).unwrap();
    let db = state.join("shareq.db");
    std::fs::write(&db, vec![0x5au8; 8192]).unwrap();
    let out = serve_once(&state, &cfg, None);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("not a readable shareq database"), "{e}");
    assert_eq!(std::fs::read(&db).unwrap(), vec![0x5au8; 8192]);

    std::fs::remove_file(&db).unwrap();
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("CREATE TABLE jobs (id INTEGER); PRAGMA application_id = 1936224881; PRAGMA user_version = 999;")
            .unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    let out = serve_once(&state, &cfg, None);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("newer shareq"), "{e}");
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn a_read_only_state_directory_is_a_clear_error() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, cfg, state, err) = setup(1);
    // A state with one finished job.
    {
        let _cleanup = Cleanup(state.clone());
        let mut serve = Serve::start(&state, &cfg, &err);
        let id = submit(&state, "x", "true");
        wait_state(&state, id, "SUCCEEDED");
        serve.kill9();
    }
    let db = state.join("shareq.db");
    let before = std::fs::read(&db).unwrap();
    let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    for p in [dir.path(), cfg.as_path()] {
        mode(p, 0o755).unwrap();
    }
    mode(&cfg.join("c.yaml"), 0o644).unwrap();
    mode(&state, 0o555).unwrap();
    // Root writes anywhere: run the scheduler as `nobody` then.
    let root = std::fs::metadata("/proc/self").map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    });
    let uid = root.unwrap_or(false).then_some(65534);
    let out = serve_once(&state, &cfg, uid);
    mode(&state, 0o755).unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains(&state.display().to_string())
            && (e.contains("ermission denied") || e.contains("read-only")),
        "{e}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn a_decision_that_cannot_be_stored_pauses_scheduling_until_a_write_succeeds() {
    let (_dir, cfg, state, err) = setup(1);
    let _cleanup = Cleanup(state.clone());
    let mut serve = Serve::start(&state, &cfg, &err);
    // Everything of the start is stored first (a `jobs` answer waits for the turns before
    // it), so that the submit below is the batch the lock holds back, not the config's.
    assert!(cli(&state, &["jobs"]).status.success());
    // Another process holds the database's write lock longer than the scheduler waits.
    let db = rusqlite::Connection::open(state.join("shareq.db")).unwrap();
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    // The submit's batch cannot be stored: it is neither carried out nor answered (a job
    // is accepted only once it is on disk), so the CLI gives up waiting, saying the job
    // may have been queued.
    let first = Command::new(BIN)
        .args(["submit", "--state"])
        .arg(&state)
        .args(["--share", "team", "--name", "held", "--", "true"])
        .env("SHAREQ_TIMEOUT", "3")
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&first.stderr);
    assert!(!first.status.success(), "{e}");
    assert!(
        e.contains("did not answer") && e.contains("may have been queued"),
        "{e}"
    );
    assert!(!state.join("runs/1.1").exists(), "the job was started");
    // A supervisor started for it while its start was being written (where supervisors
    // start inside their cgroup) ended without running anything.
    let serve_pid = serve.child.as_ref().unwrap().id().to_string();
    let supervisors = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| {
                let dir = e.ok()?.path();
                let status = std::fs::read_to_string(dir.join("status")).ok()?;
                let ppid = status.lines().find_map(|l| l.strip_prefix("PPid:"))?;
                let cmd = std::fs::read(dir.join("cmdline")).ok()?;
                let pid = dir.file_name()?.to_str()?.parse().ok()?;
                (ppid.trim() == serve_pid
                    && cmd.windows(11).any(|w| w == b"__supervise")
                    && !common::is_spawner(pid))
                .then_some(dir)
            })
            .count()
    };
    let t = Instant::now();
    while supervisors() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "a supervisor of the unwritten start is left"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The scheduler is up, and says why it pauses.
    let status = cli(&state, &["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(
        text.contains("PAUSED") && text.contains("cannot write"),
        "{text}"
    );
    assert!(serve.child.as_mut().unwrap().try_wait().unwrap().is_none());
    // A submit meanwhile is refused, saying why, and leaves no trace.
    let out = cli(
        &state,
        &[
            "submit", "--share", "team", "--name", "refused", "--", "true",
        ],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("scheduling is paused"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The lock goes: the held decision is written and carried out, by itself.
    db.execute_batch("ROLLBACK").unwrap();
    drop(db);
    let t = Instant::now();
    loop {
        let out = cli(&state, &["jobs", "--all", "--json"]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let done = v["finished"].as_array().unwrap();
        if done
            .iter()
            .any(|j| j["name"] == "held" && j["state"] == "SUCCEEDED")
        {
            assert!(!out.stdout.windows(7).any(|w| w == b"refused"), "{v}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "never resumed: {v}\nserve's log:\n{}",
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = cli(&state, &["status"]);
    assert!(!String::from_utf8_lossy(&status.stdout).contains("PAUSED"));
    assert!(
        std::fs::read_to_string(&err)
            .unwrap()
            .contains("scheduling is paused")
    );
}

#[test]
fn history_older_than_retain_days_is_pruned_at_start() {
    use shareq::config::{parse_documents, validate};
    use shareq::model::UnitCapacity;
    use shareq::sched::{Clock, Sched};
    use shareq::store::{Observed, Store};
    let (_dir, cfg, state, err) = setup(1);
    let yaml = config(1, 1, &share("team", 1, "LEND", false))
        .replace("preemption:", "history:\n  retainDays: 2\npreemption:");
    std::fs::write(cfg.join("c.yaml"), &yaml).unwrap();
    // Two finished jobs: one 3 days ago, one 1 day ago.
    {
        let c = validate(parse_documents(&yaml, None).unwrap()).unwrap();
        let mut s = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall);
        let mut store = Store::open(&state).unwrap();
        let day = 86_400_000;
        let now = shareq::exec::now_ms();
        for (name, at) in [("old", now - 3 * day), ("recent", now - day)] {
            let mut spec = shareq::model::JobSpec::new(name, "team", 1, 0);
            spec.command = Some(shareq::model::Command::Shell("true".into()));
            let id = s.submit(spec, at).unwrap();
            s.pass(at);
            store.record_events(at, &s.take_events(), &s).unwrap();
            let exit = [Observed::Exited { job: id, code: 0 }];
            exit[0].apply(&mut s, at + 1);
            s.pass(at + 1);
            store.record(at + 1, &exit, &s.take_events(), &s).unwrap();
            s.forget(id);
        }
    }
    let _cleanup = Cleanup(state.clone());
    let _serve = Serve::start(&state, &cfg, &err);
    let out = cli(&state, &["jobs", "--all", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["finished"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["recent"], "{v}");
    // Ids are never reused, even those of pruned jobs.
    assert_eq!(submit(&state, "next", "true"), 3);
}

#[test]
fn a_paused_scheduler_asked_to_stop_stops_and_its_held_decision_leaves_no_trace() {
    let (_dir, cfg, state, err) = setup(1);
    let _cleanup = Cleanup(state.clone());
    let mut serve = Serve::start(&state, &cfg, &err);
    // The start's batches are stored before the lock (see the test above).
    assert!(cli(&state, &["jobs"]).status.success());
    let db = rusqlite::Connection::open(state.join("shareq.db")).unwrap();
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let held = Command::new(BIN)
        .args(["submit", "--state"])
        .arg(&state)
        .args(["--share", "team", "--name", "held", "--", "true"])
        .env("SHAREQ_TIMEOUT", "3")
        .output()
        .unwrap();
    assert!(!held.status.success());
    let status = cli(&state, &["status"]);
    assert!(String::from_utf8_lossy(&status.stdout).contains("PAUSED"));
    // SIGTERM while paused: it ends, carrying nothing of the held batch out.
    let child = serve.child.as_mut().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let t = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "a paused serve did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0));
    assert!(!state.join("runs/1.1").exists(), "the held job was started");
    db.execute_batch("ROLLBACK").unwrap();
    drop(db);
    serve.child = None;
    let _serve = Serve::start(&state, &cfg, &err);
    let out = cli(&state, &["jobs", "--all", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for list in ["running", "queue", "finished"] {
        assert!(v[list].as_array().unwrap().is_empty(), "{v}");
    }
}

/// The state a job has in the database.
fn stored_state(state: &Path, id: u64) -> Option<String> {
    let db = rusqlite::Connection::open_with_flags(
        state.join("shareq.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .ok()?;
    db.query_row("SELECT state FROM jobs WHERE id = ?1", [id as i64], |r| {
        r.get(0)
    })
    .ok()
}

#[test]
fn a_running_label_held_back_is_stored_within_a_second_and_before_the_scheduler_stops() {
    // A label alone (STARTING → RUNNING) waits for the next write, at most a second.
    let mut s = common::Server::start(&config(2, 1, &share("team", 2, "LEND", false)));
    let a = s.submit(&["--share", "team"], &["sleep", "30"]);
    s.wait_state(a, "RUNNING", 20);
    wait_for(5, "the RUNNING label stored by its timer", || {
        stored_state(&s.state, a).as_deref() == Some("RUNNING")
    });
    // Stopped at once after the label (jobs left running): stored before it exits.
    s.stop();
    let mut s = common::Server::start_with(&config(2, 1, &share("team", 2, "LEND", false)), &[]);
    let b = s.submit(&["--share", "team"], &["sleep", "30"]);
    s.wait_state(b, "RUNNING", 20);
    s.stop();
    assert_eq!(stored_state(&s.state, b).as_deref(), Some("RUNNING"));
}
