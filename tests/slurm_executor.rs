//! The Slurm executor against a real Slurm (SPEC §10): a 2-node × 4-GPU cluster on
//! localhost (tests/slurm/cluster-up.sh: private munge key, its own ports, fake GPUs as
//! per-index GRES types), stopped by pid at the end. `shareq serve` on
//! sample-configs/slurm-2nodes runs the AWS example on it: QS1 borrows, a QS2 job
//! reclaims, a raised priority preempts in QS1; jobs are pinned to the node and GPUs
//! shareq chose (checked against `squeue --json`); a job that ignores SIGTERM is killed at
//! the grace period; a victim of a share with a notice gets it on its node, SIGTERM the
//! notice's seconds later (SPEC §14); `kill -9` of serve and a restart adopt the running Slurm jobs; a
//! drained node takes no new job while its job runs on; a node taken down has its job
//! preempted with DEVICE_LOST; a real user's job (`useradd`, removed at the end) is that
//! user's in `squeue` and `sacct`, writes nothing into the state directory, and its
//! output reaches `shareq log` through the scheduler (the report channel).
//!
//! Needs root and Debian's slurmctld, slurmd, slurm-client and munge (`.ci/run` installs
//! them); skips with a message otherwise. Slurm's start latency is 0.5–1.3 s: waits allow
//! for it.

#[path = "slurm/cluster.rs"]
mod cluster;
#[path = "it/common.rs"]
mod common;

use cluster::{Cluster, slurm_indices};
use common::{Server, wait_for};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The job runs where shareq put it: Slurm's node and GPU indices are shareq's.
fn assert_pinned(c: &Cluster, s: &Server, id: u64) {
    let j = s.job(id);
    let attempt = j["attempts"].as_u64().unwrap_or(1) as u32;
    let sj = c
        .live(id, attempt)
        .unwrap_or_else(|| panic!("no live Slurm job for {id}: {j}"));
    assert_eq!(
        sj["nodes"], j["node"],
        "node of {id}: slurm {sj}\nshareq {j}"
    );
    let devices: Vec<u64> = j["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(slurm_indices(&sj), devices, "GPUs of {id}");
}

/// A user made for the test (with a home, so that the job has a working directory),
/// removed with its processes and home on drop, also when the test fails.
struct Submitter {
    name: String,
}

impl Submitter {
    fn create() -> Submitter {
        let name = format!("sqslurm{}", std::process::id() % 100_000);
        let out = Command::new("useradd")
            .args(["-m", "-N", "-s", "/bin/sh", &name])
            .output()
            .expect("useradd runs");
        assert!(
            out.status.success(),
            "useradd {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Submitter { name }
    }

    fn uid(&self) -> u32 {
        nix::unistd::User::from_name(&self.name)
            .unwrap()
            .expect("the test user exists")
            .uid
            .as_raw()
    }

    /// `shareq ARGS` as this user.
    fn shareq(&self, args: &[&str]) -> std::process::Output {
        Command::new("runuser")
            .args(["-u", &self.name, "--", common::BIN])
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("runuser runs")
    }
}

impl Drop for Submitter {
    fn drop(&mut self) {
        let _ = Command::new("pkill")
            .args(["-KILL", "-u", &self.name])
            .status();
        let _ = Command::new("userdel")
            .args(["-r", &self.name])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Slurm's own accounting of finished jobs (`sacct --completion`, from the jobcomp log:
/// the test cluster has no slurmdbd): the user of the latest Slurm job named `name`.
fn accounted_user(name: &str) -> Option<String> {
    let out = Command::new("sacct")
        .args(["--completion", "-n", "-P", "-o", "JobName,User"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('|'))
        // The newest of that name (a later serve's job ids start at 1 again).
        .rfind(|(n, _)| *n == name)
        // The jobcomp log says `alice(1001)`.
        .map(|(_, u)| u.split('(').next().unwrap_or(u).trim().to_string())
}

/// A job of a real user (SPEC §10, §7): its batch job is that user's in `squeue` and in
/// Slurm's accounting, it runs as that user, it can write nothing into the state
/// directory, and its output still reaches `shareq log` (written by the scheduler, cut at
/// the log cap).
fn a_users_job_is_theirs_in_slurm_and_writes_nothing_in_the_state_directory(
    c: &Cluster,
    s: &Server,
) {
    let user = Submitter::create();
    // The user reaches the socket (the scheduler's state directory is 0711 under root).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(s.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let state = s.state.display().to_string();
    let script = format!(
        "echo uid=$(id -u) user=$USER home=$HOME; \
         touch {state}/planted 2>/dev/null && echo WROTE-state || echo denied-state; \
         mkdir {state}/logs/$SHAREQ_JOB_ID/mine 2>/dev/null && echo WROTE-logdir || echo denied-logdir; \
         echo x >> {state}/logs/$SHAREQ_JOB_ID/1.log 2>/dev/null && echo WROTE-log || echo denied-log; \
         echo x >> {state}/runs/$SHAREQ_JOB_ID.$SHAREQ_ATTEMPT 2>/dev/null && echo WROTE-exit || echo denied-exit; \
         head -c 3000000 /dev/zero | tr '\\0' a; echo; echo after-the-flood; exec sleep 600"
    );
    let t = Instant::now();
    let out = user.shareq(&[
        "submit", "--state", &state, "--share", "qs3", "--gpus", "1", "--", "sh", "-c", &script,
    ]);
    assert!(
        out.status.success(),
        "submit as {}: {}",
        user.name,
        String::from_utf8_lossy(&out.stderr)
    );
    let id: u64 = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .expect("a job id");
    s.wait_state(id, "RUNNING", 30);
    let running_after = t.elapsed();
    // Its attempt: a fresh serve may first place it on a node it has not yet seen down.
    let at = s.job(id)["attempts"].as_u64().unwrap() as u32;
    let sj = c.live(id, at).expect("its Slurm job");
    assert_eq!(sj["user_name"], user.name.as_str(), "squeue: {sj}");
    assert_eq!(sj["user_id"], user.uid(), "squeue: {sj}");
    let log = || {
        let out = user.shareq(&["log", "--state", &state, &id.to_string()]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    wait_for(20, "the user's job's log", || log().contains("denied-exit"));
    let logged_after = t.elapsed();
    let text = log();
    assert!(
        text.contains(&format!("uid={} user={}", user.uid(), user.name)),
        "the job runs as its submitter, in their environment: {}",
        &text[..text.len().min(400)]
    );
    for what in ["state", "logdir", "log", "exit"] {
        assert!(
            text.contains(&format!("denied-{what}")) && !text.contains(&format!("WROTE-{what}")),
            "the job wrote into the state directory ({what}): {}",
            &text[..text.len().min(400)]
        );
    }
    // The flood is cut at the cap (1 MiB here), by the scheduler that writes the log.
    wait_for(20, "the cut", || log().contains("log cut here"));
    let size = std::fs::metadata(s.state.join(format!("logs/{id}/{at}.log")))
        .unwrap()
        .len();
    assert!(size < (1 << 20) + 4096, "the log holds {size} bytes");
    assert!(!log().contains("after-the-flood"));
    // Nothing in the state directory belongs to the user.
    let theirs = Command::new("find")
        .arg(&s.state)
        .args(["-user", &user.name])
        .output()
        .unwrap();
    assert!(
        theirs.stdout.is_empty(),
        "files of the user in the state directory: {}",
        String::from_utf8_lossy(&theirs.stdout)
    );
    // Ended, Slurm's accounting names the user too.
    let out = user.shareq(&["cancel", "--state", &state, &id.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(20, "the user's job to end", || {
        s.state_of(id) != "RUNNING" && c.live(id, at).is_none()
    });
    let name = format!("shareq-{id}-{at}");
    wait_for(10, "sacct to list the job", || {
        accounted_user(&name).is_some()
    });
    assert_eq!(accounted_user(&name).as_deref(), Some(user.name.as_str()));
    eprintln!(
        "user job: RUNNING {:.2} s after submit, its first lines in `shareq log` after {:.2} s",
        running_after.as_secs_f64(),
        logged_after.as_secs_f64()
    );
}

/// SPEC §14 on Slurm: qs3 gets a notice (a reload of `config`); a victim of an in-share
/// preemption there gets SIGUSR1 on its node, from its supervisor inside the allocation,
/// and SIGTERM the notice's seconds later; it exits 0 then and is requeued, not
/// SUCCEEDED. `how` names the run.
fn a_preemption_with_a_notice_reaches_the_job_before_sigterm(s: &Server, config: &str, how: &str) {
    let hash = || {
        let out = s.cli(&["status", "--json"]);
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)["config"]["hash"]
            .clone()
    };
    let before = hash();
    let with_notice = config.replace(
        "resourceSharingConfiguration: {strategy: RESERVE}",
        "resourceSharingConfiguration: {strategy: RESERVE}\npreemptionConfiguration: {inSharePreemption: ENABLED, notice: {signal: SIGUSR1, seconds: 3}}",
    );
    std::fs::write(s.config.join("config.yaml"), with_notice).unwrap();
    wait_for(20, "the notice to apply", || hash() != before);
    let stem = s.path(&format!("noticed-{how}")).display().to_string();
    let script = format!(
        "[ \"$SHAREQ_ATTEMPT\" = 2 ] && exit 0; \
         echo \"vars $SHAREQ_NOTICE_SIGNAL $SHAREQ_NOTICE_SECONDS $SHAREQ_GRACE_SECONDS\"; \
         trap 'date +%s.%N > {stem}.usr1' USR1; \
         trap 'date +%s.%N > {stem}.term; exit 0' TERM; \
         echo up; while true; do sleep 0.05; done"
    );
    let victim = s.submit(
        &["--share", "qs3", "--gpus", "2", "--priority", "1"],
        &["sh", "-c", &script],
    );
    wait_for(30, "the victim to run", || s.log(victim, 1).contains("up"));
    assert!(
        s.log(victim, 1).contains("vars SIGUSR1 3 2"),
        "{}",
        s.log(victim, 1)
    );
    let high = s.submit(
        &["--share", "qs3", "--gpus", "1", "--priority", "5"],
        &["sleep", "1"],
    );
    let read = |ext: &str| -> Option<f64> {
        std::fs::read_to_string(format!("{stem}.{ext}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    wait_for(30, "SIGTERM after the notice", || read("term").is_some());
    let lead = read("term").unwrap() - read("usr1").expect("the notice came");
    assert!(
        (lead - 3.0).abs() <= 0.5,
        "the notice led SIGTERM by {lead:.3} s on the node, not 3 s"
    );
    s.wait_state(high, "SUCCEEDED", 30);
    let v = s.wait_state(victim, "SUCCEEDED", 30);
    assert_eq!(v["preempted_count"], 1, "requeued after its exit 0: {v}");
    eprintln!("notice on Slurm ({how}): SIGTERM {lead:.3} s after SIGUSR1 (3 s asked)");
}

/// SPEC §14 on a node: `shareq checkpoint` reaches the job's supervisor (its
/// `SHAREQ_SOCKET`), which checks the attempt's token and carries the report on the
/// report channel; a wrong token is refused there.
fn a_job_on_a_node_reports_its_checkpoint_through_its_supervisor(c: &Cluster, s: &Server) {
    let bin = common::BIN;
    let script = format!(
        "{bin} checkpoint --note node-step && echo saved; \
         SHAREQ_ATTEMPT_TOKEN=00 {bin} checkpoint --note forged; echo forged-rc=$?; \
         echo socket=$SHAREQ_SOCKET; exec sleep 600"
    );
    let id = s.submit(&["--share", "qs3", "--gpus", "1"], &["sh", "-c", &script]);
    s.wait_state(id, "RUNNING", 30);
    wait_for(20, "the job's reports", || {
        s.log(id, 1).contains("forged-rc=")
    });
    let log = s.log(id, 1);
    assert!(
        log.contains("saved") && log.contains("forged-rc=3"),
        "{log}"
    );
    assert!(
        !log.contains(&format!("socket={}", s.state.join("shareq.sock").display())),
        "the job reports to its supervisor, not to the scheduler's socket: {log}"
    );
    let j = s.job(id);
    assert_eq!(j["lastCheckpoint"]["note"], "node-step", "{j}");
    assert_eq!(j["lastCheckpoint"]["attempt"], 1, "{j}");
    let out = s.cli(&["cancel", &id.to_string()]);
    assert!(out.status.success());
    wait_for(20, "the saving job to end", || {
        s.state_of(id) != "RUNNING" && c.live(id, 1).is_none()
    });
}

fn config(grace: u32) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-configs/slurm-2nodes");
    let env = std::fs::read_to_string(dir.join("environment.yaml")).unwrap();
    let env = env.replace(
        "gracePeriodSeconds: 5",
        &format!("gracePeriodSeconds: {grace}"),
    );
    let shares = std::fs::read_to_string(dir.join("shares.yaml")).unwrap();
    format!("{env}logs: {{maxMiBPerAttempt: 1}}\n---\n{shares}")
}

#[test]
fn the_aws_example_runs_on_slurm_with_every_quota_rule() {
    let Some(c) = Cluster::up() else { return };
    let mut s = Server::start(&config(2));
    let long = [
        "sh",
        "-c",
        "echo CUDA=$CUDA_VISIBLE_DEVICES; exec sleep 600",
    ];

    // QS1 within its limit, then borrowing: best fit puts the second job on the other node.
    let j1 = s.submit(&["--share", "qs1", "--gpus", "3"], &long);
    s.wait_state(j1, "RUNNING", 20);
    let j2 = s.submit(&["--share", "qs1", "--gpus", "3"], &long);
    s.wait_state(j2, "RUNNING", 20);
    assert_ne!(s.job(j1)["node"], s.job(j2)["node"]);
    assert_pinned(&c, &s, j1);
    assert_pinned(&c, &s, j2);
    wait_for(10, "j1's log", || s.log(j1, 1).contains("CUDA=0,1,2"));

    // A QS2 job takes its GPUs back: the borrower on that node is preempted.
    let k = s.submit(&["--share", "qs2", "--gpus", "2"], &long);
    s.wait_state(k, "RUNNING", 30);
    let v = s.job(j2);
    assert_eq!(v["state"], "RUNNABLE", "{v}");
    assert_eq!(v["preempted_count"], 1, "{v}");
    assert_pinned(&c, &s, k);
    assert!(c.live(j2, 1).is_none(), "the victim's Slurm job is gone");

    // A raised priority preempts in QS1 (in-share preemption).
    let out = s.cli(&["priority", &j2.to_string(), "9"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.wait_state(j2, "RUNNING", 30);
    let v = s.job(j1);
    assert_eq!(
        v["state"], "RUNNABLE",
        "j1 was preempted by the raised j2: {v}"
    );
    assert_pinned(&c, &s, j2);

    // A job that ignores SIGTERM is killed at the grace period (2 s), by its supervisor.
    let stubborn = s.submit(
        &["--share", "qs3", "--gpus", "1"],
        &["sh", "-c", "trap '' TERM; while true; do sleep 1; done"],
    );
    s.wait_state(stubborn, "RUNNING", 20);
    let t = Instant::now();
    let out = s.cli(&["cancel", &stubborn.to_string()]);
    assert!(out.status.success());
    wait_for(20, "the stubborn job to end", || {
        s.job(stubborn)["state"] != "RUNNING" && c.live(stubborn, 1).is_none()
    });
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(1800) && took < Duration::from_secs(12),
        "killed after {took:?} (grace 2 s)"
    );

    a_job_on_a_node_reports_its_checkpoint_through_its_supervisor(&c, &s);
    a_users_job_is_theirs_in_slurm_and_writes_nothing_in_the_state_directory(&c, &s);
    a_preemption_with_a_notice_reaches_the_job_before_sigterm(&s, &config(2), "batch");

    // kill -9 of serve, and a restart: the running Slurm jobs are adopted, not restarted.
    if let Some(child) = s.child() {
        child.kill().unwrap();
        let _ = child.wait();
    }
    assert!(c.live(k, 1).is_some(), "the Slurm job outlives shareq");
    s.restart(&["--stop-jobs-on-exit"]);
    let v = s.wait_state(k, "RUNNING", 20);
    assert_eq!(v["attempts"], 1, "adopted, not started again: {v}");
    assert_pinned(&c, &s, k);
    // The log says where the adopted attempt runs, with no local pid it has none of
    // (issue 46 item 6: not `pid=0`); the restart names its executor.
    let said = s.stderr();
    let adopted = said
        .lines()
        .find(|l| l.contains("adopted a running attempt") && l.contains(&format!("job={k}")))
        .unwrap_or_else(|| panic!("no adoption line for {k}:\n{said}"));
    assert!(
        !adopted.contains("pid=") && adopted.contains("node="),
        "{adopted}"
    );
    assert!(said.contains("executor=slurm (partition "), "{said}");
    // Adopted by name: a cancel reaches its Slurm job.
    let out = s.cli(&["cancel", &k.to_string()]);
    assert!(out.status.success());
    wait_for(20, "k's Slurm job to go", || c.live(k, 1).is_none());
    // Its supervisor reported its end to the new scheduler (a new connection, same port).
    wait_for(10, "k's exit status", || s.exit_code(k, 1).is_some());

    // A drained node takes no new job; its running job goes on.
    let node_of_j2 = s.job(j2)["node"].as_str().unwrap().to_string();
    c.scontrol(&[
        "update",
        &format!("nodename={node_of_j2}"),
        "state=drain",
        "reason=shareq-test",
    ]);
    wait_for(10, "shareq to see the drain", || {
        s.cli(&["status"])
            .stdout
            .windows(node_of_j2.len())
            .any(|w| w == node_of_j2.as_bytes())
    });
    std::thread::sleep(Duration::from_secs(2));
    let q = s.submit(&["--share", "qs2", "--gpus", "1"], &long);
    let v = s.wait_state(q, "RUNNING", 30);
    assert_ne!(
        v["node"],
        node_of_j2.as_str(),
        "nothing new starts on a drained node: {v}"
    );
    assert_eq!(s.state_of(j2), "RUNNING");

    // The node lost (its slurmd killed, the node set DOWN, as after a crash): its job is
    // preempted with DEVICE_LOST and its GPUs count as released.
    let attempt = s.job(j2)["attempts"].as_u64().unwrap();
    let slurmd = c.base.join(format!("run/slurmd-{node_of_j2}.pid"));
    let pid = std::fs::read_to_string(&slurmd).unwrap();
    let _ = Command::new("kill").args(["-9", pid.trim()]).status();
    c.scontrol(&[
        "update",
        &format!("nodename={node_of_j2}"),
        "state=down",
        "reason=shareq-test",
    ]);
    wait_for(20, "j2 to lose its node", || s.state_of(j2) != "RUNNING");
    // What ran there is orphaned with its slurmd gone: end it by hand, as a reboot would
    // (the attempt record says `PID START DB`: the supervisor, whose SIGUSR1 kills its job, and
    // whose parent is the batch job's slurmstepd).
    let run = s.state.join(format!("runs/{j2}.{attempt}"));
    if let Some(p) = std::fs::read_to_string(&run)
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u32>().ok())
        .filter(|&p| p > 0)
    {
        let stepd = std::fs::read_to_string(format!("/proc/{p}/stat"))
            .ok()
            .and_then(|t| {
                t.rsplit(')')
                    .next()?
                    .split_whitespace()
                    .nth(1)?
                    .parse::<u32>()
                    .ok()
            });
        let _ = Command::new("kill")
            .args(["-USR1", &p.to_string()])
            .status();
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
        if let Some(stepd) = stepd.filter(|&pp| pp > 1) {
            let _ = Command::new("kill")
                .args(["-9", &stepd.to_string()])
                .status();
        }
    }
    let st = s.cli(&["status", "--json"]);
    let st: Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st["units"][0]["usable"], 4, "{st}");
    let trail: Vec<String> = s
        .stderr()
        .lines()
        .filter(|l| {
            l.contains("node")
                || l.contains("job=2")
                || l.contains("job\u{1b}[0m\u{1b}[2m=\u{1b}[0m2")
        })
        .map(str::to_string)
        .collect();
    assert_eq!(
        s.job(j2)["preempted_count"],
        2,
        "{}\n{}",
        s.job(j2),
        trail.join("\n")
    );
    let all = s.jobs();
    let lost = all["preemptions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|p| p["victim"] == j2 && p["reason"] == "DEVICE_LOST");
    assert!(lost, "a DEVICE_LOST preemption of j2 is logged: {all}");
    s.stop();

    // `executor.start: srun` (docs/SLURM.md), on the node that is left: a job runs on its
    // exact GPUs, and a job whose `srun` dies is not left holding them: its Slurm job is
    // cancelled and the attempt ends. The fresh serve does not know yet that n1 is down
    // and may place the job there first: that attempt's `srun` waits for n1, and is taken
    // back when the look sees n1 down, so that it cannot start a stale attempt later.
    let srun = config(2).replace("partition: shareq}", "partition: shareq, start: srun}");
    assert_ne!(srun, config(2));
    let mut s = Server::start(&srun);
    let k = s.submit(&["--share", "qs1", "--gpus", "1"], &long);
    s.wait_state(k, "RUNNING", 20);
    assert_pinned(&c, &s, k);
    let at = s.job(k)["attempts"].as_u64().unwrap() as u32;
    for earlier in 1..at {
        wait_for(
            20,
            "an earlier attempt's Slurm job to be taken back",
            || c.live(k, earlier).is_none(),
        );
    }
    // A stop reaches the step's supervisor as SIGTERM at once (as `scancel --full`, used
    // for batch scripts, would not), and the job gets its grace period.
    let polite = s.submit(
        &["--share", "qs1", "--gpus", "1"],
        &[
            "sh",
            "-c",
            "trap 'echo got-TERM; exit 0' TERM; echo up; while true; do sleep 0.2; done",
        ],
    );
    s.wait_state(polite, "RUNNING", 20);
    let pat = s.job(polite)["attempts"].as_u64().unwrap() as u32;
    wait_for(10, "the polite job's output", || {
        s.log(polite, pat).contains("up")
    });
    let t = Instant::now();
    assert!(s.cli(&["cancel", &polite.to_string()]).status.success());
    wait_for(10, "SIGTERM to reach the job", || {
        s.log(polite, pat).contains("got-TERM")
    });
    assert!(
        t.elapsed() < Duration::from_millis(1800),
        "SIGTERM took {:?} (grace 2 s): the supervisor's stop path, not the backstop",
        t.elapsed()
    );
    wait_for(20, "the polite job's Slurm job to end", || {
        c.live(polite, pat).is_none()
    });
    let killed = Command::new("pkill")
        .args([
            "-KILL",
            "-f",
            &format!("srun .*--job-name=shareq-{k}-{at} "),
        ])
        .status()
        .unwrap();
    assert!(killed.success(), "no srun of job {k} attempt {at} to kill");
    // Cancelled at once; Slurm then tears the step down, which may wait for the dead
    // `srun` (MessageTimeout, 10 s) before the job leaves COMPLETING and its GPU is free.
    wait_for(20, "the dead srun's Slurm job to be cancelled", || {
        c.live(k, at)
            .is_none_or(|j| j["job_state"].as_str() != Some("RUNNING"))
    });
    wait_for(60, "the dead srun's Slurm job to be gone", || {
        c.live(k, at).is_none()
    });
    wait_for(20, "the attempt to end", || {
        s.state_of(k) != "RUNNING" || s.job(k)["attempts"].as_u64() != Some(at.into())
    });
    // A user's job started by `srun` is theirs in Slurm too (`srun` runs as them).
    a_users_job_is_theirs_in_slurm_and_writes_nothing_in_the_state_directory(&c, &s);
    // The notice request reaches an `srun` step's supervisor too.
    a_preemption_with_a_notice_reaches_the_job_before_sigterm(&s, &srun, "srun");
    let said = s.stderr();
    assert!(
        said.contains("srun ended") || said.contains("runs no step"),
        "the lost srun is said in the log: {said}"
    );
    s.stop();
}
