//! Dependencies and arrays on a real `shareq serve` (SPEC §13, issue 26): a pipeline of
//! real commands with a failing step, an array of 100 `true` jobs on 8 fake GPUs, the
//! array index in each child's environment, and restarts with PENDING jobs (the release
//! re-evaluated from the store, also when a crash left it unwritten).

use crate::common::{Server, config, share, wait_for};
use serde_json::Value;

fn server(gpus: u32) -> Server {
    Server::start(&config(
        gpus,
        2,
        &share("team", gpus, "LEND_AND_BORROW", false),
    ))
}

/// Every job of a `jobs --all --json --expand` answer, whatever its list.
fn all_jobs(s: &Server) -> Vec<Value> {
    let j = s.jobs_json(&["--all", "--expand"]);
    let mut out = Vec::new();
    for list in ["running", "queue", "pending", "arrays", "finished"] {
        out.extend(j[list].as_array().cloned().unwrap_or_default());
    }
    out
}

fn find(s: &Server, id: u64) -> Option<Value> {
    all_jobs(s).into_iter().find(|j| j["id"] == id)
}

fn wait_job(s: &Server, id: u64, state: &str, secs: u64) -> Value {
    let mut last = Value::Null;
    wait_for(secs, &format!("job {id} to be {state}"), || {
        last = find(s, id).unwrap_or(Value::Null);
        last["state"] == state
    });
    last
}

fn submit_err(s: &Server, args: &[&str]) -> String {
    let mut all = vec!["submit"];
    all.extend_from_slice(args);
    let out = s.cli(&all);
    assert!(!out.status.success(), "accepted: {args:?}");
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn a_pipeline_waits_step_by_step_and_a_failed_step_fails_the_rest() {
    let s = server(2);
    let dir = s.path("work");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display().to_string();
    let prep = s.submit(
        &["--share", "team", "--name", "prep"],
        &[&format!("sleep 4; echo data > {d}/prep.out")],
    );
    let after_prep = prep.to_string();
    let train = s.submit(
        &["--share", "team", "--name", "train", "--after", &after_prep],
        &[&format!("cat {d}/prep.out > {d}/train.out; exit 3")],
    );
    let eval = s.submit(
        &[
            "--share",
            "team",
            "--name",
            "eval",
            "--after",
            &train.to_string(),
        ],
        &[&format!("touch {d}/eval.out")],
    );
    // While prep runs, train is PENDING (not queued, although a GPU is idle), and says
    // what it waits for.
    wait_job(&s, prep, "RUNNING", 20);
    let t = find(&s, train).unwrap();
    assert_eq!(t["state"], "PENDING", "{t}");
    assert_eq!(
        t["reason"].as_str().unwrap(),
        format!("waiting for job {prep} (RUNNING)"),
        "{t}"
    );
    assert_eq!(t["dependsOn"][0]["job"], prep, "{t}");
    let e = find(&s, eval).unwrap();
    assert_eq!(
        e["reason"].as_str().unwrap(),
        format!("waiting for job {train} (PENDING)")
    );
    let text = String::from_utf8_lossy(&s.cli(&["jobs"]).stdout).to_string();
    assert!(text.contains("PENDING"), "{text}");
    let text = String::from_utf8_lossy(&s.cli(&["status"]).stdout).to_string();
    assert!(text.contains("(1 running, 0 queued, 2 pending)"), "{text}");
    // prep succeeds, train runs on its output and fails, eval fails without running.
    wait_job(&s, prep, "SUCCEEDED", 20);
    wait_job(&s, train, "FAILED", 20);
    let e = wait_job(&s, eval, "FAILED", 20);
    assert_eq!(
        e["reason"].as_str().unwrap(),
        format!("DEPENDENCY_FAILED: job {train} FAILED"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("train.out")).unwrap(),
        "data\n"
    );
    assert!(!dir.join("eval.out").exists(), "eval ran");
    assert_eq!(e["attempts"], 0);
    // The decision stream carries the dependency failure.
    let out = s.cli(&["events", "--json", "--on", "failed"]);
    let lines = String::from_utf8_lossy(&out.stdout).to_string();
    let dep = lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["id"] == eval)
        .unwrap_or_else(|| panic!("no failed line for eval: {lines}"));
    assert_eq!(dep["reason"], "DEPENDENCY_FAILED", "{dep}");
    assert_eq!(dep["dependency"], "train", "{dep}");
    assert_eq!(dep["dependency_id"], train, "{dep}");
    // Bad dependencies are refused at the door, with a clear error.
    let err = submit_err(&s, &["--share", "team", "--after", "999", "--", "true"]);
    assert!(err.contains("job 999 does not exist"), "{err}");
    let err = submit_err(&s, &["--share", "team", "--after", "x1", "--", "true"]);
    assert!(err.contains("is not a job id"), "{err}");
    let err = submit_err(&s, &["--share", "team", "--array", "1", "--", "true"]);
    assert!(err.contains("2..10000"), "{err}");
    let many: Vec<String> = (0..21).map(|_| prep.to_string()).collect();
    let err = submit_err(
        &s,
        &["--share", "team", "--after", &many.join(","), "--", "true"],
    );
    assert!(err.contains("at most 20"), "{err}");
    // A job after one that already failed fails at once; after one that succeeded, runs.
    let late = s.submit(
        &["--share", "team", "--after", &train.to_string()],
        &["true"],
    );
    let l = wait_job(&s, late, "FAILED", 10);
    assert!(
        l["reason"]
            .as_str()
            .unwrap()
            .starts_with("DEPENDENCY_FAILED")
    );
    let ok = s.submit(&["--share", "team", "--after", &after_prep], &["true"]);
    wait_job(&s, ok, "SUCCEEDED", 20);
}

#[test]
fn an_array_of_100_true_jobs_on_8_gpus_ends_with_its_parent_succeeded() {
    let s = server(8);
    let parent = s.submit(
        &["--share", "team", "--name", "sweep", "--array", "100"],
        &["true"],
    );
    let p = wait_job(&s, parent, "SUCCEEDED", 120);
    assert_eq!(p["array"]["size"], 100, "{p}");
    assert_eq!(p["array"]["counts"]["SUCCEEDED"], 100, "{p}");
    let children: Vec<Value> = all_jobs(&s)
        .into_iter()
        .filter(|j| j["parent"] == parent)
        .collect();
    assert_eq!(children.len(), 100);
    let mut idx: Vec<u64> = children
        .iter()
        .map(|c| c["arrayIndex"].as_u64().unwrap())
        .collect();
    idx.sort_unstable();
    assert_eq!(idx, (0..100).collect::<Vec<_>>());
    assert!(children.iter().all(|c| c["state"] == "SUCCEEDED"));
    // Folded, `jobs` shows one row for the array; a child is named PARENT:INDEX.
    let folded = s.jobs_json(&["--all"]);
    let rows = folded["finished"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{folded}");
    let text = String::from_utf8_lossy(&s.cli(&["jobs", "--all"]).stdout).to_string();
    assert!(text.contains("array 100: 100 succeeded"), "{text}");
    let text = String::from_utf8_lossy(&s.cli(&["jobs", "--all", "--expand"]).stdout).to_string();
    assert!(text.contains(&format!("{parent}:99")), "{text}");
}

#[test]
fn each_child_sees_its_index_and_cancelling_the_parent_cancels_the_rest() {
    let s = server(2);
    let parent = s.submit(
        &["--share", "team", "--name", "idx", "--array", "3"],
        &["echo $SHAREQ_ARRAY_INDEX $AWS_BATCH_JOB_ARRAY_INDEX"],
    );
    wait_job(&s, parent, "SUCCEEDED", 30);
    for i in 0..3u64 {
        let log = s.log(parent + 1 + i, 1);
        assert_eq!(log.trim(), format!("{i} {i}"), "child {i}");
        // The CLI names a child PARENT:INDEX.
        let out = s.cli(&["log", &format!("{parent}:{i}")]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("{i} {i}")
        );
    }
    // 4 long children on 2 GPUs: 2 run, 2 queue; the counts say so; cancel ends them all.
    let long = s.submit(
        &["--share", "team", "--name", "long", "--array", "4"],
        &["sleep 30"],
    );
    wait_for(20, "two children running", || {
        find(&s, long).is_some_and(|p| p["array"]["counts"]["RUNNING"] == 2)
    });
    let p = find(&s, long).unwrap();
    assert_eq!(p["state"], "RUNNING", "{p}");
    assert_eq!(p["array"]["counts"]["RUNNABLE"], 2, "{p}");
    let text = String::from_utf8_lossy(&s.cli(&["jobs"]).stdout).to_string();
    assert!(text.contains("array 4: 2 running, 2 queued"), "{text}");
    let out = s.cli(&["cancel", &long.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = wait_job(&s, long, "FAILED", 20);
    assert!(
        p["reason"].as_str().unwrap().starts_with("CANCELLED: by"),
        "{p}"
    );
    assert_eq!(p["array"]["counts"]["FAILED"], 4, "{p}");
}

#[test]
fn cancelling_a_sequential_array_cancels_every_child_as_one_action() {
    let s = server(2);
    let dir = s.path("work");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display().to_string();
    // Each child of a SEQUENTIAL array of 3 waits for the one before; a job outside the
    // array waits for child 1.
    let steps = s.submit(
        &[
            "--share",
            "team",
            "--name",
            "steps",
            "--array",
            "3",
            "--after",
            "SEQUENTIAL",
        ],
        &[&format!("touch {d}/step-$SHAREQ_ARRAY_INDEX; sleep 30")],
    );
    let after = s.submit(
        &[
            "--share",
            "team",
            "--name",
            "after",
            "--after",
            &format!("{steps}:1"),
        ],
        &[&format!("touch {d}/after")],
    );
    wait_job(&s, steps + 1, "RUNNING", 20);
    wait_for(10, "child 0's process", || dir.join("step-0").exists());
    assert_eq!(find(&s, steps + 2).unwrap()["state"], "PENDING");
    let out = s.cli(&["cancel", &steps.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = wait_job(&s, steps, "FAILED", 20);
    assert!(
        p["reason"].as_str().unwrap().starts_with("CANCELLED: by"),
        "{p}"
    );
    // Every child reads CANCELLED: the running one and the two that waited for a sibling
    // cancelled by the same action; none DEPENDENCY_FAILED.
    for i in 0..3u64 {
        let c = wait_job(&s, steps + 1 + i, "FAILED", 20);
        assert!(
            c["reason"].as_str().unwrap().starts_with("CANCELLED: by"),
            "child {i}: {c}"
        );
    }
    // The job outside the array fails because its dependency was cancelled.
    let a = wait_job(&s, after, "FAILED", 20);
    assert_eq!(
        a["reason"].as_str().unwrap(),
        format!("DEPENDENCY_FAILED: job {steps}:1 FAILED"),
        "{a}"
    );
    // The decision stream says `cancelled` for each child.
    let out = s.cli(&["events", "--json", "--on", "cancelled"]);
    let lines = String::from_utf8_lossy(&out.stdout).to_string();
    for i in 0..3u64 {
        assert!(
            lines
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|l| l["id"] == steps + 1 + i),
            "no cancelled line for child {i}: {lines}"
        );
    }
    assert!(!dir.join("step-1").exists(), "child 1 ran");
    assert!(!dir.join("after").exists(), "after ran");
}

#[test]
fn pending_jobs_stay_pending_over_a_restart_and_a_lost_release_is_not_lost() {
    // Jobs outlive the scheduler (no --stop-jobs-on-exit): a restart adopts them.
    let mut s = Server::start_with(
        &config(2, 2, &share("team", 2, "LEND_AND_BORROW", false)),
        &[],
    );
    let first = s.submit(&["--share", "team", "--name", "first"], &["sleep 600"]);
    let second = s.submit(
        &[
            "--share",
            "team",
            "--name",
            "second",
            "--after",
            &first.to_string(),
        ],
        &["true"],
    );
    wait_job(&s, first, "RUNNING", 20);
    // A restart in the middle: first is adopted, running; second is still PENDING,
    // waiting for it.
    s.restart(&[]);
    let want = format!("waiting for job {first} (RUNNING)");
    let mut last = Value::Null;
    let waited = std::time::Instant::now();
    while !(last["state"] == "PENDING" && last["reason"] == want.as_str()) {
        assert!(
            waited.elapsed().as_secs() < 20,
            "second after the restart: {last}\n{}",
            s.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
        last = find(&s, second).unwrap_or(Value::Null);
    }
    // first succeeds; now fake a crash right after that commit, before the release was
    // stored: second's row says PENDING again. The restart re-evaluates it from its
    // dependency's stored end and runs it.
    let out = s.cli(&["cancel", &first.to_string()]);
    assert!(out.status.success());
    wait_job(&s, second, "FAILED", 20);
    let a = s.submit(&["--share", "team", "--name", "a"], &["true"]);
    let b = s.submit(
        &["--share", "team", "--name", "b", "--after", &a.to_string()],
        &["sleep 1"],
    );
    wait_job(&s, b, "SUCCEEDED", 30);
    s.stop();
    let db = rusqlite::Connection::open(s.state.join("shareq.db")).unwrap();
    db.execute(
        "UPDATE jobs SET state = 'PENDING', finished_at = NULL WHERE id = ?1",
        [b as i64],
    )
    .unwrap();
    db.execute("DELETE FROM attempts WHERE job = ?1", [b as i64])
        .unwrap();
    db.execute(
        "UPDATE jobs SET attempts_started = 0 WHERE id = ?1",
        [b as i64],
    )
    .unwrap();
    drop(db);
    // Nor was b ever started then: no supervisor claimed its attempt.
    std::fs::remove_file(s.state.join(format!("runs/{b}.1"))).unwrap();
    s.spawn(&[]);
    let j = wait_job(&s, b, "SUCCEEDED", 30);
    assert_eq!(j["attempts"], 1, "{j}");
}

#[test]
fn a_dependency_that_ends_while_the_scheduler_is_killed_releases_its_dependent_at_restart() {
    let mut s = Server::start_with(
        &config(2, 2, &share("team", 2, "LEND_AND_BORROW", false)),
        &[],
    );
    let a = s.submit(&["--share", "team", "--name", "a"], &["sleep 2"]);
    let b = s.submit(
        &["--share", "team", "--name", "b", "--after", &a.to_string()],
        &["true"],
    );
    wait_job(&s, a, "RUNNING", 20);
    // kill -9: a succeeds with no scheduler to see it, so b's release was never made.
    let child = s.child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    wait_for(20, "a's exit in its record", || {
        crate::common::exit_in_record(&s.state, a, 1).is_some()
    });
    s.spawn(&[]);
    wait_job(&s, a, "SUCCEEDED", 20);
    let j = wait_job(&s, b, "SUCCEEDED", 30);
    assert_eq!(j["attempts"], 1, "{j}");
}
