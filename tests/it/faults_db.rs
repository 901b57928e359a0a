//! Faults of the database (SPEC §8), with the real binary: a lost database never fakes
//! results from old run files, ids are never reused, an empty, truncated or damaged
//! database is refused with what to do, and a retried submit (same client token) gets the
//! same job, also across a restart.

use crate::common;

use common::{BIN, Server, config, share, wait_for};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::Duration;

fn cfg() -> String {
    config(1, 1, &share("a", 1, "LEND", false))
}

/// `shareq serve` on the server's dirs, expected to refuse to start: its stderr.
fn refused(s: &Server) -> String {
    let err = s.path("refused.err");
    let mut child = Command::new(BIN)
        .arg("serve")
        .arg("--config")
        .arg(&s.config)
        .arg("--state")
        .arg(&s.state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(1), "serve should refuse to start");
    std::fs::read_to_string(&err).unwrap()
}

#[test]
fn a_lost_database_never_gives_new_jobs_old_results() {
    let s = Server::start(&cfg());
    let old = s.submit(&["--share", "a"], &["echo old; exit 7"]);
    s.wait_state(old, "FAILED", 20);
    assert_eq!(s.exit_code(old, 1), Some(7));
    let mut s = s;
    s.stop();
    // The database is lost; the run files and logs stay.
    for f in ["shareq.db", "shareq.db-wal", "shareq.db-shm"] {
        let _ = std::fs::remove_file(s.state.join(f));
    }
    s.spawn(&["--stop-jobs-on-exit"]);
    let new = s.submit(&["--share", "a"], &["true"]);
    assert!(
        new > old,
        "job id {new} was handed out before (old job {old})"
    );
    let j = s.wait_state(new, "SUCCEEDED", 20);
    assert_eq!(j["attempts"], 1, "{j}");
    // The old files were set aside, and the log says so.
    let aside = s.state.join("set-aside");
    let moved: Vec<_> = std::fs::read_dir(&aside)
        .expect("a set-aside folder")
        .flatten()
        .collect();
    assert_eq!(moved.len(), 1);
    let d = moved[0].path();
    assert!(d.join(format!("runs/{old}.1")).exists());
    assert!(d.join(format!("logs/{old}/1.log")).exists());
    assert!(!s.state.join(format!("runs/{old}.1")).exists());
    assert!(s.stderr().contains("set aside"), "{}", s.stderr());
    // The new database's run files name it.
    let pid = std::fs::read_to_string(s.state.join(format!("runs/{new}.1"))).unwrap();
    assert_eq!(pid.split_whitespace().count(), 3, "{pid}");
}

#[test]
fn an_empty_truncated_or_damaged_database_is_refused() {
    let mut s = Server::start(&cfg());
    for i in 0..30 {
        s.submit(&["--share", "a", "--name", &format!("j{i}")], &["true"]);
    }
    s.stop();
    let db = s.state.join("shareq.db");
    // Everything into the main file, so that it alone is the whole database.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    for f in ["shareq.db-wal", "shareq.db-shm"] {
        let _ = std::fs::remove_file(s.state.join(f));
    }
    let good = std::fs::read(&db).unwrap();
    assert!(good.len() >= 3 * 4096, "{} bytes", good.len());

    std::fs::write(&db, b"").unwrap();
    let err = refused(&s);
    assert!(err.contains("empty"), "{err}");
    assert!(err.contains("mv ") && err.contains("backup"), "{err}");

    std::fs::write(&db, &good[..good.len() / 2 / 4096 * 4096]).unwrap();
    let err = refused(&s);
    assert!(err.contains("truncated"), "{err}");

    // Garbage over the pages after the schema (tables and indexes): the header is
    // fine, SQLite's own check finds it.
    let mut bad = good.clone();
    for b in &mut bad[4096..3 * 4096] {
        *b = 0x5a;
    }
    std::fs::write(&db, &bad).unwrap();
    let err = refused(&s);
    assert!(err.contains("not a readable shareq database"), "{err}");
    // Nothing was changed on disk by the refusals.
    assert_eq!(std::fs::read(&db).unwrap(), bad);

    std::fs::write(&db, &good).unwrap();
    s.spawn(&[]);
    let j = s.jobs();
    let listed: usize = ["queue", "running", "finished"]
        .iter()
        .map(|l| j[l].as_array().unwrap().len())
        .sum();
    assert_eq!(listed, 30, "{j}");
}

fn raw(state: &std::path::Path, line: &str) -> serde_json::Value {
    let mut c = UnixStream::connect(state.join("shareq.sock")).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(line.as_bytes()).unwrap();
    c.write_all(b"\n").unwrap();
    let mut answer = String::new();
    BufReader::new(c).read_line(&mut answer).unwrap();
    serde_json::from_str(&answer).unwrap()
}

#[test]
fn a_retried_submit_gets_the_same_job() {
    let mut s = Server::start(&cfg());
    let submit = |token: &str| {
        let line = format!(
            r#"{{"op":"submit","job":{{"jobName":"t","quotaShareName":"a","command":"sleep 30","clientToken":"{token}"}}}}"#
        );
        raw(&s.state, &line)
    };
    let first = submit("tok-1");
    assert_eq!(first["ok"], true, "{first}");
    let again = submit("tok-1");
    assert_eq!(again["id"], first["id"], "{again}");
    let other = submit("tok-2");
    assert_ne!(other["id"], first["id"]);
    let bad = submit("has space");
    assert_eq!(bad["ok"], false, "{bad}");
    let listed = |s: &Server| {
        let j = s.jobs();
        ["queue", "running", "finished"]
            .iter()
            .map(|l| j[l].as_array().unwrap().len())
            .sum::<usize>()
    };
    assert_eq!(listed(&s), 2);
    // After a restart the token is still known (it is stored with the job).
    s.restart(&[]);
    let line = r#"{"op":"submit","job":{"jobName":"t","quotaShareName":"a","command":"sleep 30","clientToken":"tok-1"}}"#;
    let after = raw(&s.state, line);
    assert_eq!(after["id"], first["id"], "{after}");
    assert_eq!(listed(&s), 2);
    wait_for(5, "listing", || listed(&s) == 2);
}
