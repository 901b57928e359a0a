//! The live scheduler runs real processes on fake GPUs: environment, exit codes and
//! retries, the SIGTERM → grace → SIGKILL stop path, background children, timeouts,
//! cancels, and jobs that outlive the scheduler.

use crate::common;

use common::{Server, alive, config, share, wait_for};
use shareq::exec::containment::session::ProcStat;
use std::time::{Duration, Instant};

fn one_share(gpus: u32, limit: u32, grace: u32) -> Server {
    Server::start(&config(
        gpus,
        grace,
        &share("team", limit, "LEND_AND_BORROW", true),
    ))
}

#[test]
fn a_job_sees_its_devices_and_shareq_variables() {
    let s = one_share(2, 2, 1);
    let id = s.submit(
        &[
            "--share", "team", "--gpus", "2", "--name", "envcheck", "--env", "FOO=bar",
        ],
        &["env"],
    );
    s.wait_state(id, "SUCCEEDED", 20);
    let log = s.log(id, 1);
    for line in [
        "CUDA_VISIBLE_DEVICES=0,1",
        "NVIDIA_VISIBLE_DEVICES=0,1",
        "CUDA_DEVICE_ORDER=PCI_BUS_ID",
        &format!("SHAREQ_JOB_ID={id}"),
        "SHAREQ_JOB_NAME=envcheck",
        "SHAREQ_SHARE=team",
        "SHAREQ_ATTEMPT=1",
        "SHAREQ_PREEMPTED_COUNT=0",
        "FOO=bar",
    ] {
        assert!(log.lines().any(|l| l == line), "missing {line} in:\n{log}");
    }
    assert_eq!(s.exit_code(id, 1), Some(0));
    // `shareq log` prints the same output.
    let out = s.cli(&["log", &id.to_string()]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("SHAREQ_SHARE=team"));
}

#[test]
fn exit_codes_decide_success_failure_and_retries() {
    let s = one_share(2, 2, 1);
    let ok = s.submit(&["--share", "team"], &["exit 0"]);
    let bad = s.submit(&["--share", "team"], &["exit 3"]);
    let flaky = s.submit(
        &["--share", "team", "--attempts", "3"],
        &["test \"$SHAREQ_ATTEMPT\" = 2 || exit 3"],
    );
    let hopeless = s.submit(&["--share", "team", "--attempts", "2"], &["exit 3"]);
    s.wait_state(ok, "SUCCEEDED", 20);
    let b = s.wait_state(bad, "FAILED", 20);
    assert!(
        b["reason"].as_str().unwrap().contains("NON_ZERO_EXIT"),
        "{b}"
    );
    assert_eq!(s.exit_code(bad, 1), Some(3));
    let f = s.wait_state(flaky, "SUCCEEDED", 20);
    assert_eq!(f["attempts"], 2, "{f}");
    let h = s.wait_state(hopeless, "FAILED", 20);
    assert_eq!(h["attempts"], 2, "{h}");
    assert_eq!(s.exit_code(hopeless, 2), Some(3));
}

#[test]
fn a_job_that_exits_on_sigterm_is_requeued_and_runs_again() {
    let s = one_share(1, 1, 5);
    let low = s.submit(
        &["--share", "team", "--priority", "1"],
        &["trap 'echo got-term; exit 0' TERM; echo run-$SHAREQ_ATTEMPT-$SHAREQ_PREEMPTED_COUNT; while true; do sleep 0.1; done"],
    );
    s.wait_state(low, "RUNNING", 20);
    wait_for(10, "first attempt output", || {
        s.log(low, 1).contains("run-1-0")
    });
    let t = Instant::now();
    let high = s.submit(&["--share", "team", "--priority", "5"], &["sleep 0.5"]);
    s.wait_state(high, "RUNNING", 20);
    // Released by the job itself, before the 5 s grace period ended.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(s.log(low, 1).contains("got-term"));
    assert_eq!(s.exit_code(low, 1), Some(0));
    s.wait_state(high, "SUCCEEDED", 20);
    let again = s.wait_state(low, "RUNNING", 20);
    assert_eq!(again["preempted_count"], 1, "{again}");
    wait_for(10, "second attempt output", || {
        s.log(low, 2).contains("run-2-1")
    });
    let p = &s.jobs()["preemptions"][0];
    assert_eq!(p["victim"], low);
    assert_eq!(p["by"], high);
    assert_eq!(p["reason"], "IN_SHARE_PRIORITY");
    assert_eq!(p["outcome"], "requeued");
}

#[test]
fn a_job_ignoring_sigterm_is_killed_after_the_grace_period() {
    let s = one_share(1, 1, 1);
    let id = s.submit(&["--share", "team"], &["trap '' TERM; echo up; sleep 1000"]);
    s.wait_state(id, "RUNNING", 20);
    wait_for(10, "job output", || s.log(id, 1).contains("up"));
    let t = Instant::now();
    assert!(s.cli(&["cancel", &id.to_string()]).status.success());
    // Still holding its GPU while it ignores SIGTERM.
    let j = s.job(id);
    assert!(j["stopping"].is_array(), "{j}");
    let done = s.wait_state(id, "FAILED", 20);
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    assert!(
        done["reason"]
            .as_str()
            .unwrap()
            .starts_with("CANCELLED: by"),
        "{done}"
    );
    assert_eq!(s.exit_code(id, 1), Some(137));
}

/// A share's own `gracePeriodSeconds` (SPEC §14) governs its jobs' stops, not the
/// environment's.
#[test]
fn a_shares_grace_period_governs_its_jobs_stops() {
    let team = "kind: QuotaShare\nquotaShareName: team\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 1}\nresourceSharingConfiguration: {strategy: LEND_AND_BORROW}\npreemptionConfiguration: {inSharePreemption: ENABLED, gracePeriodSeconds: 1}\n";
    let s = Server::start(&config(1, 60, team));
    let id = s.submit(&["--share", "team"], &["trap '' TERM; echo up; sleep 1000"]);
    wait_for(20, "job output", || s.log(id, 1).contains("up"));
    let t = Instant::now();
    assert!(s.cli(&["cancel", &id.to_string()]).status.success());
    s.wait_state(id, "FAILED", 20);
    // Killed after the share's 1 s, long before the environment's 60 s.
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert_eq!(s.exit_code(id, 1), Some(137));
}

/// (ppid, process group, session) from `/proc/PID/stat`.
fn ids_of(stat: &str) -> (u32, u32, u32) {
    let f: Vec<u32> = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .skip(1)
        .take(3)
        .map(|v| v.parse().unwrap())
        .collect();
    (f[0], f[1], f[2])
}

/// A job that sleeps, and its `/proc/PID/stat` as it wrote it once running.
fn sleeper(s: &Server) -> (u64, String) {
    let out = s.path("job.stat");
    let id = s.submit(
        &["--share", "team"],
        &[&format!(
            "cat /proc/$$/stat > {}; sleep 1000",
            out.display()
        )],
    );
    wait_for(10, "the job's stat", || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.ends_with('\n'))
    });
    (id, std::fs::read_to_string(&out).unwrap())
}

#[test]
fn the_supervisor_leads_a_session_of_its_own_and_the_job_a_group_in_it() {
    let s = one_share(1, 1, 1);
    let (id, job_stat) = sleeper(&s);
    let job_pid: u32 = job_stat.split(' ').next().unwrap().parse().unwrap();
    let (sup, job_group, job_session) = ids_of(&job_stat);
    let cmdline = std::fs::read(format!("/proc/{sup}/cmdline")).unwrap();
    let line = String::from_utf8_lossy(&cmdline);
    assert!(
        line.contains("__supervise") && !common::is_spawner(sup),
        "the job's parent is its supervisor: {line}"
    );
    let (_, sup_group, sup_session) =
        ids_of(&std::fs::read_to_string(format!("/proc/{sup}/stat")).unwrap());
    // The supervisor leads its session and its group (both its pid), the job leads a
    // group of its own in that session; none of it is in this test's session.
    assert_eq!((sup_group, sup_session), (sup, sup));
    assert_eq!((job_group, job_session), (job_pid, sup));
    let (_, _, ours) = ids_of(&std::fs::read_to_string("/proc/self/stat").unwrap());
    assert_ne!(sup_session, ours);
    // And the stop still ends the group: the job is gone when the cancel is done.
    assert!(s.cli(&["cancel", &id.to_string()]).status.success());
    s.wait_state(id, "FAILED", 20);
    assert!(!alive(job_pid as i32), "the cancelled job still runs");
}

/// A field of `/proc/PID/status`: a signal mask (`SigBlk`, `SigIgn`: hexadecimal) or
/// `Umask` (octal).
fn mask(status: &str, field: &str) -> u64 {
    let radix = if field == "Umask" { 8 } else { 16 };
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| u64::from_str_radix(v.trim(), radix).ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

#[test]
fn a_jobs_command_starts_with_nothing_blocked_the_stop_signals_at_their_defaults_and_umask_022() {
    // The supervisor blocks the stop signals (it reads them from a signalfd) and keeps
    // umask 077; the command must get neither. Checked on the command's own process (a
    // plain argv: no shell between, and `sh` would clear its mask itself).
    let s = one_share(1, 1, 1);
    let id = s.submit(&["--share", "team"], &["cat", "/proc/self/status"]);
    s.wait_state(id, "SUCCEEDED", 20);
    let status = s.log(id, 1);
    assert_eq!(mask(&status, "SigBlk"), 0, "signals blocked: {status}");
    // SIGHUP 1, SIGINT 2, SIGQUIT 3, SIGPIPE 13, SIGTERM 15 (bit n-1).
    let stop = [1u32, 2, 3, 13, 15]
        .iter()
        .fold(0u64, |m, s| m | 1 << (s - 1));
    assert_eq!(mask(&status, "SigIgn") & stop, 0, "ignored: {status}");
    assert_eq!(mask(&status, "Umask"), 0o22, "{status}");
}

#[test]
fn a_command_is_found_in_the_jobs_own_path_and_a_script_without_interpreter_line_runs() {
    // What `execvp` does in the forked child, the spawned start does too (exec::supervisor::spawn).
    let s = one_share(1, 1, 1);
    let bin = s.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("hello-shareq");
    std::fs::write(&script, "echo from-the-script $1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("PATH={}:/usr/bin:/bin", bin.display());
    let by_name = s.submit(
        &["--share", "team", "--env", &path],
        &["hello-shareq", "one"],
    );
    s.wait_state(by_name, "SUCCEEDED", 20);
    assert_eq!(s.log(by_name, 1), "from-the-script one\n");
    let by_path = s.submit(&["--share", "team"], &[script.to_str().unwrap(), "two"]);
    s.wait_state(by_path, "SUCCEEDED", 20);
    assert_eq!(s.log(by_path, 1), "from-the-script two\n");
    // In the directory it was submitted from.
    let here = s.submit(&["--share", "team"], &["pwd"]);
    s.wait_state(here, "SUCCEEDED", 20);
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(s.log(here, 1).trim_end(), cwd.to_str().unwrap());
    // Not in the job's PATH (nor anywhere): 127, as a shell says.
    let missing = s.submit(&["--share", "team"], &["hello-shareq-nowhere"]);
    s.wait_state(missing, "FAILED", 20);
    assert_eq!(s.exit_code(missing, 1), Some(127));
}

#[test]
fn background_children_die_with_the_job() {
    let s = one_share(2, 2, 1);
    let pid1 = s.path("child1.pid");
    let pid2 = s.path("child2.pid");
    // A child that ignores SIGTERM, started in the background of a job that is cancelled.
    let cancelled = s.submit(
        &["--share", "team"],
        &[&format!(
            "(trap '' TERM; exec sleep 1001) & echo $! > {}; sleep 1000",
            pid1.display()
        )],
    );
    // A child left behind by a job that ends by itself.
    let finished = s.submit(
        &["--share", "team"],
        &[&format!(
            "sleep 1002 & echo $! > {}; exit 0",
            pid2.display()
        )],
    );
    wait_for(10, "pid files", || pid1.exists() && pid2.exists());
    let read = |p: &std::path::Path| -> i32 {
        let mut v = 0;
        wait_for(5, "pid", || {
            v = std::fs::read_to_string(p)
                .unwrap_or_default()
                .trim()
                .parse()
                .unwrap_or(0);
            v > 0
        });
        v
    };
    let (c1, c2) = (read(&pid1), read(&pid2));
    s.wait_state(finished, "SUCCEEDED", 20);
    assert!(!alive(c2), "the finished job's background child still runs");
    s.wait_state(cancelled, "RUNNING", 20);
    assert!(alive(c1));
    assert!(s.cli(&["cancel", &cancelled.to_string()]).status.success());
    // GPUs are released only once the stubborn child is gone.
    let j = s.job(cancelled);
    assert_ne!(j["state"], "FAILED", "released before the child died: {j}");
    s.wait_state(cancelled, "FAILED", 20);
    assert!(
        !alive(c1),
        "the cancelled job's background child still runs"
    );
}

#[test]
fn a_timeout_stops_the_attempt() {
    let s = one_share(1, 1, 1);
    let id = s.submit(&["--share", "team", "--timeout", "1"], &["sleep", "1000"]);
    let j = s.wait_state(id, "FAILED", 20);
    assert!(j["reason"].as_str().unwrap().contains("TIMEOUT"), "{j}");
}

#[test]
fn cancel_a_queued_and_a_running_job() {
    let s = one_share(1, 1, 1);
    let running = s.submit(&["--share", "team"], &["sleep", "1000"]);
    s.wait_state(running, "RUNNING", 20);
    let queued = s.submit(&["--share", "team"], &["sleep", "1000"]);
    assert_eq!(s.state_of(queued), "RUNNABLE");
    let out = s.cli(&["cancel", &queued.to_string()]);
    assert!(out.status.success());
    let q = s.job(queued);
    assert_eq!(q["state"], "FAILED");
    assert!(
        q["reason"].as_str().unwrap().starts_with("CANCELLED: by"),
        "{q}"
    );
    assert!(
        !s.state.join(format!("logs/{queued}")).exists(),
        "a cancelled queued job never ran"
    );
    assert!(s.cli(&["cancel", &running.to_string()]).status.success());
    let r = s.wait_state(running, "FAILED", 20);
    assert!(
        r["reason"].as_str().unwrap().starts_with("CANCELLED"),
        "{r}"
    );
    // Cancelling again is harmless.
    let again = s.cli(&["cancel", &running.to_string()]);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to do"));
}

#[test]
fn jobs_outlive_the_scheduler() {
    let mut s = Server::start_with(&config(1, 1, &share("team", 1, "LEND", false)), &[]);
    let id = s.submit(&["--share", "team"], &["sleep 1; echo done"]);
    s.wait_state(id, "RUNNING", 20);
    s.stop();
    assert!(!s.state.join("shareq.sock").exists(), "socket left behind");
    // The supervisor finishes the job and records its exit with no scheduler around.
    // It keeps it in the attempt's record, where the next scheduler finds it.
    wait_for(20, "the exit in the record", || {
        crate::common::exit_in_record(&s.state, id, 1).is_some()
    });
    assert_eq!(crate::common::exit_in_record(&s.state, id, 1), Some(0));
    assert!(s.log(id, 1).contains("done"));
    // And the CLI lists what the database holds, and says how to start a scheduler.
    let out = s.cli(&["jobs"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{id} ")));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("shareq serve --config"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_cancel_racing_the_start_still_stops_everything() {
    let s = one_share(4, 4, 1);
    let mut ids = Vec::new();
    for i in 0..4 {
        let pid = s.path(&format!("race{i}.pid"));
        let id = s.submit(
            &["--share", "team"],
            &[&format!("echo $$ > {}; exec sleep 1000", pid.display())],
        );
        assert!(s.cli(&["cancel", &id.to_string()]).status.success());
        ids.push((id, pid));
    }
    for (id, pid) in ids {
        s.wait_state(id, "FAILED", 20);
        if let Some(p) = std::fs::read_to_string(&pid)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            assert!(!alive(p), "job {id} still runs after its cancel");
        }
    }
}

/// SPEC §11 live: a borrower's jobs are protected for their first 3 s; the lender's job
/// waits, saying for whom and how long, and the end of the protection (no other input)
/// runs the pass that reclaims the borrowed GPU.
#[test]
fn a_minimum_runtime_delays_a_reclaim_until_it_ends() {
    let b = share("b", 1, "LEND_AND_BORROW", false).replace(
        "{inSharePreemption: DISABLED}",
        "{inSharePreemption: DISABLED, minRuntimeSeconds: 3}",
    );
    let s = Server::start(&config(
        2,
        1,
        &format!("{b}---\n{}", share("l", 1, "LEND", false)),
    ));
    let b1 = s.submit(&["--share", "b", "--name", "b1"], &["sleep", "300"]);
    let b2 = s.submit(&["--share", "b", "--name", "b2"], &["sleep", "300"]);
    s.wait_state(b1, "RUNNING", 20);
    s.wait_state(b2, "RUNNING", 20);
    let l1 = s.submit(&["--share", "l", "--name", "l1"], &["sleep", "300"]);
    let w = s.job(l1);
    assert_eq!(w["state"], "RUNNABLE", "{w}");
    let why = w["reason"].as_str().unwrap_or_default().to_string();
    // The candidate whose protection ends first is named (b1, which started first, unless
    // both started in the same millisecond).
    let named = if why.starts_with(&format!("waiting for job {b1} (b)")) {
        b1
    } else {
        b2
    };
    assert!(
        why.starts_with(&format!(
            "waiting for job {named} (b) to reach its minimum runtime ("
        )),
        "{w}"
    );
    s.wait_state(l1, "RUNNING", 20);
    // One of them is reclaimed: the named one when the pass runs between the two ends;
    // when both protections have ended by then (they started milliseconds apart and the
    // machine is busy), the most recently started one, as victim order says (SPEC §4.1).
    let states = [s.state_of(b1), s.state_of(b2)];
    assert!(
        states.contains(&"RUNNABLE".to_string()) && states.contains(&"RUNNING".to_string()),
        "{states:?}"
    );
}

/// The `jobs` table (issue 25 item 4): `--status finished` lists ended jobs without
/// `--all`; at 80 columns no row is wider than the terminal; a borrowing share's jobs say
/// `reclaim next` / `kept` as the console does; a cancelled job keeps its AWS state
/// FAILED and says who cancelled it beside it.
#[test]
fn the_jobs_table_fits_80_columns_and_speaks_the_consoles_words() {
    let shares = format!(
        "{}---\n{}",
        share("alpha", 1, "LEND_AND_BORROW", false),
        share("beta", 3, "LEND", false)
    );
    let s = Server::start(&config(4, 1, &shares));
    let long = "a-rather-long-job-name-that-does-not-fit";
    let ids: Vec<u64> = (0..3)
        .map(|_| {
            s.submit(
                &["--share", "alpha", "--name", long],
                &["sh", "-c", "sleep 1000; echo and a long command line too"],
            )
        })
        .collect();
    for id in &ids {
        s.wait_state(*id, "RUNNING", 20);
    }
    let gone = s.submit(&["--share", "beta", "--name", "gone"], &["sleep", "1000"]);
    s.wait_state(gone, "RUNNING", 20);
    assert!(s.cli(&["cancel", &gone.to_string()]).status.success());
    s.wait_state(gone, "FAILED", 20);
    let table = |args: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_shareq"));
        cmd.arg("jobs").arg("--state").arg(&s.state).args(args);
        let out = cmd.env("COLUMNS", "80").output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let text = table(&[]);
    for line in text.lines() {
        assert!(
            unicode_width::UnicodeWidthStr::width(line) <= 80,
            "wider than 80 columns: {line:?}\n{text}"
        );
    }
    assert!(text.contains("reclaim next (alpha borrows)"), "{text}");
    assert!(text.contains("kept (alpha borrows)"), "{text}");
    assert!(!text.contains("(borrowed)"), "{text}");
    let finished = table(&["--status", "finished"]);
    // Its row, and the DETAIL line under it when DETAIL does not fit beside it.
    let row = finished
        .split_once("gone")
        .map(|(_, rest)| rest.lines().take(2).collect::<Vec<_>>().join("\n"))
        .unwrap_or_else(|| panic!("--status finished lists the cancelled job:\n{finished}"));
    assert!(
        row.contains("FAILED") && row.contains("CANCELLED by "),
        "{finished}"
    );
    assert!(!finished.contains(long), "only finished jobs:\n{finished}");
}

/// An attempt creates one file on the state filesystem, its record `runs/<id>.<attempt>`:
/// the spec and the exit status go over the supervisor's channel, and the log's folder is
/// made only for a job that writes something.
#[test]
fn an_attempt_creates_one_file_and_a_log_only_when_it_writes() {
    let s = one_share(1, 1, 1);
    let silent = s.submit(&["--share", "team"], &["true"]);
    let chatty = s.submit(&["--share", "team"], &["echo hi"]);
    s.wait_state(silent, "SUCCEEDED", 20);
    s.wait_state(chatty, "SUCCEEDED", 20);
    let runs: Vec<String> = std::fs::read_dir(s.state.join("runs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    let mut want = vec![format!("{silent}.1"), format!("{chatty}.1")];
    let mut runs = runs;
    runs.sort();
    want.sort();
    assert_eq!(runs, want);
    // The record holds the pid line only: the scheduler stored the exit status.
    let rec = std::fs::read_to_string(s.state.join(format!("runs/{silent}.1"))).unwrap();
    assert_eq!(rec.lines().count(), 1, "{rec}");
    assert_eq!(s.exit_code(silent, 1), Some(0));
    assert!(!s.state.join(format!("logs/{silent}")).exists());
    assert_eq!(s.log(chatty, 1), "hi\n");
    // The silent job's log reads as empty, not as an error.
    let out = s.cli(&["log", &silent.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

/// Each start path that `SHAREQ_SUPERVISOR_START` picks runs jobs, and only the spawner's
/// starts a spawner.
#[test]
fn every_supervisor_start_path_runs_jobs() {
    for path in ["plain", "clone", "spawner"] {
        let yaml = config(1, 1, &share("team", 1, "LEND_AND_BORROW", true));
        let mut s = Server::start_with_env(
            &yaml,
            &["--stop-jobs-on-exit"],
            &[("SHAREQ_SUPERVISOR_START", path)],
        );
        let serve = s.child().unwrap().id();
        let id = s.submit(&["--share", "team"], &["echo", "ran", path]);
        s.wait_state(id, "SUCCEEDED", 20);
        assert_eq!(s.log(id, 1), format!("ran {path}\n"));
        let spawners = common::spawners_of(serve);
        assert_eq!(
            spawners.is_empty(),
            path != "spawner",
            "{path}: {spawners:?}"
        );
        let log = std::fs::read_to_string(s.state.join("shareq.log")).unwrap_or_default();
        assert!(
            log.contains(&format!("supervisors start by: {path}")),
            "{path}: serve's log says how supervisors start"
        );
    }
}

#[test]
fn supervisors_are_copies_of_the_spawner_and_outlive_it() {
    let mut s = one_share(2, 2, 1);
    let serve = s.child().unwrap().id();
    let (id, job_stat) = sleeper(&s);
    let (sup, _, _) = ids_of(&job_stat);
    let spawners = common::spawners_of(serve);
    assert_eq!(spawners.len(), 1, "serve has one spawner: {spawners:?}");
    let spawner = spawners[0];
    // The supervisor is serve's child and says what it is...
    let stat = |pid: u32| ProcStat::read(pid).unwrap();
    assert_eq!(stat(sup).ppid, serve, "the supervisor's parent");
    // (its command line is the spawner's; its name is the program's, not the spawner's).
    let cmdline = std::fs::read(format!("/proc/{sup}/cmdline")).unwrap();
    assert!(
        cmdline.ends_with(b"\0__supervise\0--spawner\0"),
        "{}",
        String::from_utf8_lossy(&cmdline)
    );
    assert!(!common::is_spawner(sup));
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{sup}/comm")).unwrap(),
        "shareq\n"
    );
    // ...but it is the spawner's copy, not a program started anew: its stack lies where
    // the spawner's does (field 28), which an `exec` places afresh at random.
    let aslr = std::fs::read_to_string("/proc/sys/kernel/randomize_va_space").unwrap();
    if aslr.trim() == "0" {
        eprintln!("skipped: without address randomisation every exec places the stack alike");
    } else {
        assert_ne!(stat(sup).stack, 0, "the stack's place is readable");
        assert_eq!(stat(sup).stack, stat(spawner).stack);
        assert_ne!(
            stat(spawner).stack,
            stat(serve).stack,
            "each exec places it anew"
        );
    }
    // Without the spawner, the running job goes on, and new jobs start as before.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(spawner as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_for(10, "the spawner's end", || !alive(spawner as i32));
    let next = s.submit(&["--share", "team"], &["echo", "started without it"]);
    s.wait_state(next, "SUCCEEDED", 20);
    assert!(s.log(next, 1).contains("started without it"));
    assert_eq!(s.state_of(id), "RUNNING");
    assert!(s.cli(&["cancel", &id.to_string()]).status.success());
    s.wait_state(id, "FAILED", 20);
    // A new spawner comes 10 s after the last one failed.
    let mut again = Vec::new();
    wait_for(30, "a new spawner", || {
        let id = s.submit(&["--share", "team"], &["true"]);
        s.wait_state(id, "SUCCEEDED", 20);
        again = common::spawners_of(serve);
        again.iter().any(|&p| p != spawner)
    });
    // One that stops answering (stopped) is given up after 5 s, and jobs start without it.
    let stuck = again[0] as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(stuck),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .unwrap();
    let t = Instant::now();
    let late = s.submit(&["--share", "team"], &["echo", "started all the same"]);
    s.wait_state(late, "SUCCEEDED", 20);
    assert!(t.elapsed() >= Duration::from_secs(4), "{:?}", t.elapsed());
    assert!(s.log(late, 1).contains("started all the same"));
    wait_for(5, "the stuck spawner's end", || !alive(stuck));
}
