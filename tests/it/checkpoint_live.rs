//! SPEC §14's checkpoint reports, live: a job that saves with `shareq checkpoint --note`
//! and exits 0 when a reclaim stops it is requeued with its note stored (database, `jobs
//! --json`) and handed to its next attempt; the save survives a restart of the scheduler;
//! a report for another job (its id, a wrong token) or from another user is refused.

use super::common::{BIN, Server, config, share, wait_for};
use super::multi_user::{Lab, Users, skip_reason};
use serde_json::Value;
use std::process::{Command, Output};

/// `own` lends 1 GPU that `bor` borrows; `side` keeps its own (3 GPUs in all).
fn lending() -> String {
    config(
        3,
        10,
        &format!(
            "{}---\n{}---\n{}",
            share("own", 1, "LEND", false),
            share("bor", 1, "LEND_AND_BORROW", false),
            share("side", 1, "RESERVE", false)
        ),
    )
}

/// The job: says what it was told of its last save, saves as `step7`, then saves again
/// (`again`) whenever the test drops a trigger file; exits 0 when told to stop.
fn saver(bin: &str, trigger: &std::path::Path) -> String {
    format!(
        "trap 'echo stopped; exit 0' TERM; \
         echo \"attempt=$SHAREQ_ATTEMPT last=[$SHAREQ_LAST_CHECKPOINT_NOTE] at=[$SHAREQ_LAST_CHECKPOINT]\"; \
         {bin} checkpoint --note step7 && echo saved-$SHAREQ_ATTEMPT; \
         while true; do \
           if [ -e {t} ]; then rm -f {t}; {bin} checkpoint --note again && echo saved-again; fi; \
           sleep 0.1; \
         done",
        t = trigger.display()
    )
}

/// `shareq checkpoint` run by this test (outside any job) with the job environment `env`.
fn report_from_outside(s: &Server, env: &[(&str, String)], note: &str) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["checkpoint", "--note", note])
        .env_remove("SHAREQ_ATTEMPT_TOKEN")
        .env("SHAREQ_SOCKET", s.state.join("shareq.sock"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The token the attempt got (as root reads the scheduler's key and database identity).
fn attempt_token(state: &std::path::Path, job: u64, attempt: u32) -> String {
    let key = shareq::exec::state::runfiles::AttemptKey::of(state).unwrap();
    let store = shareq::store::Store::open_read_only(state).unwrap();
    let db = store.identity().unwrap().db;
    key.token(&db, shareq::model::JobId(job), attempt).0
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What the database keeps of a job's checkpoint: (at, attempt, note).
fn stored(s: &Server, id: u64) -> (Option<i64>, Option<i64>, Option<String>) {
    let db = rusqlite::Connection::open_with_flags(
        s.state.join("shareq.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    db.query_row(
        "SELECT ckpt_at, ckpt_attempt, ckpt_note FROM jobs WHERE id = ?1",
        [id as i64],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

#[test]
fn a_saved_job_is_requeued_with_its_note_which_its_next_attempt_gets_and_a_restart_keeps() {
    // Jobs outlive the scheduler: the restart below adopts the running attempt.
    let mut s = Server::start_with(&lending(), &[]);
    let trigger = s.path("trigger");
    let id = s.submit(
        &["--share", "bor", "--gpus", "2", "--checkpoint-every", "30m"],
        &[&saver(BIN, &trigger)],
    );
    s.wait_state(id, "RUNNING", 20);
    wait_for(20, "the first save", || s.log(id, 1).contains("saved-1"));
    assert!(
        s.log(id, 1).contains("attempt=1 last=[] at=[]"),
        "{}",
        s.log(id, 1)
    );
    let j = s.job(id);
    let cp = &j["lastCheckpoint"];
    assert_eq!(
        (&cp["note"], &cp["attempt"]),
        (&Value::from("step7"), &Value::from(1)),
        "{j}"
    );
    assert_eq!(j["checkpointEverySeconds"], 1800, "{j}");
    let (at, attempt, note) = stored(&s, id);
    assert_eq!(
        (at, attempt, note.as_deref()),
        (cp["at"].as_i64(), Some(1), Some("step7"))
    );
    let table = text(&s.cli(&["jobs"]).stdout);
    assert!(table.contains("saved "), "{table}");

    // Not this job's process: a wrong token for it, then another job's id with the token
    // of the first, are refused; the right token from outside a job is taken.
    let mut env = vec![
        ("SHAREQ_JOB_ID", id.to_string()),
        ("SHAREQ_ATTEMPT", "1".to_string()),
        ("SHAREQ_ATTEMPT_TOKEN", "0".repeat(64)),
    ];
    let wrong = report_from_outside(&s, &env, "forged");
    assert!(!wrong.status.success());
    let why = text(&wrong.stderr);
    assert!(
        why.contains(&format!(
            "may not report a checkpoint for job {id} attempt 1"
        )),
        "{why}"
    );
    let token = attempt_token(&s.state, id, 1);
    env[2].1 = token.clone();
    env[0].1 = (id + 1).to_string();
    let other = report_from_outside(&s, &env, "forged");
    assert!(!other.status.success(), "{}", text(&other.stdout));
    env[0].1 = id.to_string();
    let right = report_from_outside(&s, &env, "from-outside");
    assert!(right.status.success(), "{}", text(&right.stderr));
    assert_eq!(s.job(id)["lastCheckpoint"]["note"], "from-outside");
    let long = report_from_outside(&s, &env, &"x".repeat(201));
    assert_eq!(long.status.code(), Some(2));
    assert!(text(&long.stderr).contains("at most 200 bytes; this one has 201"));
    // The token never shows in what the scheduler lists or logs.
    assert!(
        !s.cli(&["jobs", "--all", "--json"])
            .stdout
            .windows(64)
            .any(|w| w == token.as_bytes())
    );
    assert!(!s.stderr().contains(&token));

    // A job of another id reports for this one from inside it: refused.
    let forger = s.submit(
        &["--share", "side", "--env", &format!("TARGET={id}")],
        &[&format!(
            "SHAREQ_JOB_ID=$TARGET SHAREQ_ATTEMPT=1 {BIN} checkpoint --note forged; echo forged-rc=$?"
        )],
    );
    s.wait_state(forger, "SUCCEEDED", 30);
    let log = s.log(forger, 1);
    assert!(log.contains("forged-rc=3"), "{log}");
    assert_eq!(s.job(id)["lastCheckpoint"]["note"], "from-outside");

    // Saved again as step7 from inside, then reclaimed: it traps SIGTERM and exits 0.
    std::fs::write(&trigger, "").unwrap();
    wait_for(20, "the second save", || {
        s.log(id, 1).contains("saved-again")
    });
    let again = s.job(id)["lastCheckpoint"].clone();
    assert_eq!(again["note"], "again");
    let reclaim = s.submit(&["--share", "own"], &["sleep 1"]);
    s.wait_state(reclaim, "SUCCEEDED", 30);
    wait_for(30, "the second attempt", || {
        s.log(id, 2).contains("saved-2")
    });
    assert!(s.log(id, 1).contains("stopped"), "{}", s.log(id, 1));
    let next = s.log(id, 2);
    assert!(next.contains("attempt=2 last=[again] at=[20"), "{next}");
    assert_eq!(s.exit_code(id, 1), Some(0));
    let j = s.wait_state(id, "RUNNING", 20);
    assert_eq!(j["preempted_count"], 1, "{j}");
    assert_eq!(j["lastCheckpoint"]["attempt"], 2, "{j}");

    // A restart keeps the last save, and takes the adopted attempt's next report.
    let before = s.job(id)["lastCheckpoint"].clone();
    s.restart(&[]);
    assert_eq!(s.job(id)["lastCheckpoint"], before);
    std::fs::write(&trigger, "").unwrap();
    wait_for(20, "a save after the restart", || {
        s.log(id, 2).contains("saved-again")
    });
    let after = s.job(id)["lastCheckpoint"].clone();
    assert_eq!(
        (&after["note"], &after["attempt"]),
        (&Value::from("again"), &Value::from(2))
    );
    assert_eq!(stored(&s, id).2.as_deref(), Some("again"));
    let out = s.cli(&["cancel", &id.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    s.wait_state(id, "FAILED", 30);
}

#[test]
fn another_user_cannot_report_for_a_job_even_with_its_token() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping: {why} (a second user needs root)");
        return;
    }
    let users = Users::create(&["alice", "bob"], &[]);
    let (alice, bob) = (users.name("alice"), users.name("bob"));
    let mut lab = Lab::new();
    lab.write_config(&lending());
    lab.serve().unwrap();
    let bin = lab.bin().display().to_string();
    let cmd = format!("{bin} checkpoint --note mine && echo saved; while true; do sleep 0.1; done");
    let out = lab.submit_as(&alice, "bor", "mine", &cmd);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id: u64 = text(&out.stdout).trim().parse().unwrap();
    lab.wait_state(id, &["RUNNING"]);
    wait_for(20, "alice's job saves", || lab.log(id).contains("saved"));
    assert_eq!(lab.job(id)["lastCheckpoint"]["note"], "mine");
    let token = attempt_token(lab.state(), id, 1);
    let forged = Command::new("runuser")
        .args(["-u", &bob, "--", "env"])
        .arg(format!("SHAREQ_JOB_ID={id}"))
        .arg("SHAREQ_ATTEMPT=1")
        .arg(format!("SHAREQ_ATTEMPT_TOKEN={token}"))
        .arg(format!(
            "SHAREQ_SOCKET={}",
            lab.state().join("shareq.sock").display()
        ))
        .args([bin.as_str(), "checkpoint", "--note", "forged"])
        .current_dir(&lab.root)
        .output()
        .unwrap();
    assert_eq!(forged.status.code(), Some(3), "{}", text(&forged.stderr));
    let why = text(&forged.stderr);
    assert!(
        why.contains(&format!(
            "{bob} may not report a checkpoint for job {id}: it runs as {alice}"
        )),
        "{why}"
    );
    assert_eq!(lab.job(id)["lastCheckpoint"]["note"], "mine");
}
