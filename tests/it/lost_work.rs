//! Lost work live (SPEC §14): a borrower reclaimed by its lender has the GPU-seconds the
//! preemption lost in `jobs --json` (its total and the preemption log), on the `requeued`
//! line of `shareq events` (and in its text), in the database, on `/metrics` and in
//! `shareq report`, and again after a restart. And the documented example job
//! (docs/examples/train_with_checkpoints.py) saves on SIGTERM, exits 0, is requeued, and
//! resumes from its checkpoint on its next attempt.

use crate::common;
use crate::observability::{fresh_scrape, metrics_addr, value};

use common::{Server, me, wait_for};
use serde_json::Value;

/// research owns 2 GPUs and lends them; background owns 1 and borrows.
fn lending() -> String {
    common::config(
        3,
        5,
        &format!(
            "{}---\n{}",
            common::share("research", 2, "LEND", false),
            common::share("background", 1, "LEND_AND_BORROW", false)
        ),
    )
}

const FLAGS: &[&str] = &["--stop-jobs-on-exit", "--metrics", "127.0.0.1:0"];

/// The preemption log's entry for `victim`, once its outcome is known.
fn preemption_of(jobs: &Value, victim: u64) -> Value {
    jobs["preemptions"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["victim"] == victim))
        .cloned()
        .unwrap_or_else(|| panic!("no preemption of {victim}: {jobs}"))
}

/// The stored lost work: the preemption's (GPU-ms, last save, saved, released) and the
/// job's total (GPU-ms).
fn stored(state: &std::path::Path, victim: u64) -> ((i64, i64, bool, i64), i64) {
    let db = rusqlite::Connection::open_with_flags(
        state.join("shareq.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let p = db
        .query_row(
            "SELECT lost_gpu_ms, last_save, saved, released FROM preemptions WHERE victim = ?1",
            [victim as i64],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    let total = db
        .query_row(
            "SELECT lost_gpu_ms FROM jobs WHERE id = ?1",
            [victim as i64],
            |r| r.get(0),
        )
        .unwrap();
    (p, total)
}

#[test]
fn a_reclaimed_borrower_has_its_lost_work_everywhere_and_after_a_restart() {
    let mut s = Server::start_with(&lending(), FLAGS);
    let addr = metrics_addr(&s);
    let b = s.submit(&["--share", "background", "--gpus", "2"], &["sleep", "600"]);
    let started = s.wait_state(b, "RUNNING", 20)["started"].as_i64().unwrap();
    assert_eq!(s.job(b)["lostGpuSeconds"], 0.0, "nothing lost yet");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let r = s.submit(&["--share", "research", "--gpus", "2"], &["sleep", "600"]);
    s.wait_state(r, "RUNNING", 30);
    let jobs = s.jobs();
    let job = s.job(b);
    assert_eq!(job["state"], "RUNNABLE", "{job}");
    let lost = job["lostGpuSeconds"].as_f64().unwrap();
    // The log: 2 GPUs × (release − start), no checkpoint reported.
    let p = preemption_of(&jobs, b);
    assert_eq!(p["outcome"], "requeued", "{p}");
    let l = &p["lost"];
    assert_eq!(
        (l["gpus"].clone(), l["saved"].clone()),
        (2.into(), false.into()),
        "{p}"
    );
    assert_eq!(l["lastSave"].as_i64(), Some(started), "{p}");
    let released = l["released"].as_i64().unwrap();
    assert!(released - started >= 1500, "{p}");
    assert_eq!(
        lost,
        2.0 * (released - started) as f64 / 1000.0,
        "{job} {p}"
    );
    // The line that ends the preemption, as JSON and as text.
    let out = s.cli(&["events", "--since", "1h", "--json", "--on", "requeued"]);
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["id"], b, "{line}");
    assert_eq!(line["lostGpuSeconds"].as_f64(), Some(lost), "{line}");
    assert_eq!(
        (line["lostGpus"].clone(), line["saved"].clone()),
        (2.into(), false.into())
    );
    assert_eq!(
        line["lastSave"].as_f64(),
        Some(started as f64 / 1000.0),
        "{line}"
    );
    let out = s.cli(&["events", "--since", "1h", "--on", "requeued"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let span = shareq::duration::short(released - started);
    assert!(text.contains(&format!("(lost 2 GPU × {span})")), "{text}");
    // The words say it once: the GPU-seconds stay a field, the rest is not repeated.
    assert!(text.contains(" lostGpuSeconds="), "{text}");
    assert!(
        !text.contains(" lost=") && !text.contains(" lostGpus=") && !text.contains(" saved="),
        "{text}"
    );
    // The database, in the same transaction as the decision.
    let ((gpu_ms, last_save, saved, rel), total) = stored(&s.state, b);
    assert_eq!((last_save, saved, rel), (started, false, released));
    assert_eq!(gpu_ms, 2 * (released - started));
    assert_eq!(total, gpu_ms);
    // The metric, per the victim's share.
    let m = fresh_scrape(&s, &addr);
    let metric = "shareq_preemption_lost_gpu_seconds_total";
    assert_eq!(value(&m, metric, &[("share", "background")]), Some(lost));
    assert_eq!(value(&m, metric, &[("share", "research")]), None);
    // The report: per share, and per user for an admin.
    let out = s.cli(&["report", "--since", "1h", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep: Value = serde_json::from_slice(&out.stdout).unwrap();
    let share_lost = rep["shares"]["background"]["gpu_seconds_lost_to_preemption"]
        .as_f64()
        .unwrap();
    assert!((share_lost - lost).abs() < 1e-6, "{share_lost} vs {lost}");
    if rep["users_shown"].as_bool() == Some(true) {
        let user_lost = rep["users"][me().as_str()]["gpu_seconds_lost_to_preemption"]
            .as_f64()
            .unwrap();
        assert!((user_lost - lost).abs() < 1e-6, "{rep}");
    }
    // A restart keeps the job's total and the log's figures.
    s.restart(FLAGS);
    let job = s.job(b);
    assert_eq!(job["lostGpuSeconds"].as_f64(), Some(lost), "{job}");
    let again = preemption_of(&s.jobs(), b);
    assert_eq!(again["lost"], p["lost"], "{again}");
    assert_eq!(stored(&s.state, b).1, total);
}

/// The example job, borrowed and reclaimed: SIGTERM makes it save and exit 0; it is
/// requeued (an exit during a preemption stop is the preemption), and its next attempt
/// resumes from the step it saved.
#[test]
fn the_example_job_saves_on_sigterm_and_resumes_after_a_reclaim() {
    let s = Server::start(&lending());
    let script = std::fs::canonicalize("docs/examples/train_with_checkpoints.py").unwrap();
    let ckpt = s.path("ckpt");
    let dir = format!("TRAIN_DIR={}", ckpt.display());
    let b = s.submit(
        &[
            "--share",
            "background",
            "--gpus",
            "2",
            "--env",
            &dir,
            "--env",
            "TRAIN_STEP_SECONDS=0.05",
            "--env",
            "TRAIN_SAVE_EVERY=100000",
            "--env",
            "TRAIN_STEPS=100000",
        ],
        &["python3", script.to_str().unwrap()],
    );
    s.wait_state(b, "RUNNING", 20);
    wait_for(20, "the example's first steps", || {
        s.log(b, 1).contains("step 3 ")
    });
    let r = s.submit(&["--share", "research", "--gpus", "2"], &["sleep", "600"]);
    s.wait_state(r, "RUNNING", 30);
    let job = s.job(b);
    assert_eq!(job["state"], "RUNNABLE", "{job}");
    assert_eq!(job["preempted_count"], 1, "{job}");
    assert_eq!(s.exit_code(b, 1), Some(0), "{}", s.log(b, 1));
    let log = s.log(b, 1);
    let saved: u64 = log
        .lines()
        .find_map(|l| l.strip_prefix("[train] SIGTERM: saved step "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no save on SIGTERM:\n{log}"));
    assert!(ckpt.join(format!("step{saved}.json")).exists(), "{log}");
    // The lender's job ends: the borrower runs again, from the saved step.
    let out = s.cli(&["cancel", &r.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(30, "the second attempt's resume", || {
        s.log(b, 2).contains("resumed from step")
    });
    let log2 = s.log(b, 2);
    assert!(
        log2.contains(&format!("resumed from step {saved} ")),
        "attempt 2 did not resume from step {saved}:\n{log2}"
    );
}

/// The example job on its own, without a scheduler: it trains, and the notice signal its
/// share names (here SIGUSR1), or SIGTERM, makes it save its step and exit 0; run again,
/// it resumes from the checkpoint the scheduler's note names.
#[test]
fn the_example_job_runs_alone_and_saves_on_the_notice_or_sigterm() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let script = std::fs::canonicalize("docs/examples/train_with_checkpoints.py").unwrap();
    let run = |signal: &str, env: &[(&str, &str)]| -> (i32, String) {
        let mut child = Command::new("python3")
            .arg(&script)
            .env("TRAIN_DIR", dir.path())
            .env("TRAIN_STEP_SECONDS", "0.02")
            .env("TRAIN_STEPS", "100000")
            .env_remove("SHAREQ_JOB_ID")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut text = String::new();
        let mut line = String::new();
        while out.read_line(&mut line).unwrap() > 0 {
            text.push_str(&line);
            if line.starts_with("[train] step ") {
                break;
            }
            line.clear();
        }
        let kill = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        text.push_str(&rest);
        (child.wait().unwrap().code().unwrap_or(-1), text)
    };
    let (code, text) = run("TERM", &[]);
    assert_eq!(code, 0, "{text}");
    let step: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("[train] SIGTERM: saved step "))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no save:\n{text}"));
    assert!(dir.path().join(format!("step{step}.json")).exists());
    let note = format!("step{step}");
    let (code, text) = run(
        "USR1",
        &[
            ("SHAREQ_NOTICE_SIGNAL", "SIGUSR1"),
            ("SHAREQ_LAST_CHECKPOINT_NOTE", &note),
        ],
    );
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!("resumed from step {step} ")),
        "{text}"
    );
    assert!(text.contains("[train] SIGUSR1: saved step "), "{text}");
}
