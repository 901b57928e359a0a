//! Multi-node jobs on a real Slurm (SPEC §16): the 2-node × 4-GPU test cluster of
//! tests/slurm/cluster-up.sh, `shareq serve` on sample-configs/slurm-gang. A 2 × 2 gang is
//! one Slurm job on both nodes (one component per node, with its node's GPUs), whose
//! ranks each see their rank, world size 4 and the same main node and port; a cancel ends
//! both ranks; a `kill -9` of one rank's supervisor stops the other and requeues the gang
//! (its retry strategy allows one more attempt); a reclaim preempts a borrowing gang with
//! its share's notice on every rank; `kill -9` of serve and a restart adopt
//! both ranks of a running gang, which a cancel then ends as one.
//!
//! Needs root and Debian's slurmctld, slurmd, slurm-client and munge (`.ci/run` installs
//! them); skips with a message otherwise.

#[path = "slurm/cluster.rs"]
mod cluster;
#[path = "it/common.rs"]
mod common;

use cluster::{Cluster, slurm_indices};
use common::{Server, wait_for};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;

fn config() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-configs/slurm-gang");
    let env = std::fs::read_to_string(dir.join("environment.yaml")).unwrap();
    let env = env.replace("gracePeriodSeconds: 5", "gracePeriodSeconds: 2");
    let shares = std::fs::read_to_string(dir.join("shares.yaml"))
        .unwrap()
        .replace(
            "{inSharePreemption: ENABLED}",
            "{inSharePreemption: ENABLED, notice: {signal: SIGUSR1, seconds: 2}}",
        );
    format!("{env}---\n{shares}")
}

/// Submit a job through the control socket (the API's submission body); its id.
fn submit(s: &Server, job: Value) -> u64 {
    let stream = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
    let mut w = stream.try_clone().unwrap();
    let mut line = serde_json::to_vec(&json!({"op": "submit", "job": job})).unwrap();
    line.push(b'\n');
    w.write_all(&line).unwrap();
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).unwrap();
    let a: Value = serde_json::from_str(&answer).unwrap();
    a["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("submit refused: {a}"))
}

/// A 2 × 2 gang of `train` that prints what its rank was told, then runs `then`.
fn gang(s: &Server, name: &str, then: &str, extra: Value) -> u64 {
    let script = format!(
        "echo rank=$SHAREQ_NODE_RANK nodes=$SHAREQ_NUM_NODES world=$WORLD_SIZE \
         main=$SHAREQ_MAIN_NODE addr=$MASTER_ADDR port=$MASTER_PORT \
         aws=$AWS_BATCH_JOB_NODE_INDEX/$AWS_BATCH_JOB_NUM_NODES/$AWS_BATCH_JOB_MAIN_NODE_INDEX \
         cuda=$CUDA_VISIBLE_DEVICES; {then}"
    );
    let mut job = json!({
        "jobName": name,
        "quotaShareName": "train",
        "quantity": 2,
        "numNodes": 2,
        "command": ["sh", "-c", script],
    });
    if let (Some(j), Some(e)) = (job.as_object_mut(), extra.as_object()) {
        j.extend(e.clone());
    }
    submit(s, job)
}

/// Rank `rank`'s log of an attempt (rank 0's is the attempt's own).
fn rank_log(s: &Server, id: u64, attempt: u32, rank: u32) -> String {
    match rank {
        0 => s.log(id, attempt),
        r => std::fs::read_to_string(s.state.join(format!("logs/{id}/{attempt}.r{r}.log")))
            .unwrap_or_default(),
    }
}

/// A rank's record: its supervisor's pid (on this machine: the test cluster's nodes are
/// all here) and whether its exit status is in.
fn rank_record(s: &Server, id: u64, attempt: u32, rank: u32) -> (Option<u32>, bool) {
    let path = match rank {
        0 => s.state.join(format!("runs/{id}.{attempt}")),
        r => s.state.join(format!("runs/{id}/{attempt}.r{r}")),
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let pid = text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().next()?.parse().ok());
    (pid, text.lines().any(|l| l.starts_with('{')))
}

/// The live components of a gang attempt's Slurm job: one per node.
fn components(c: &Cluster, id: u64, attempt: u32) -> Vec<Value> {
    let name = format!("shareq-{id}-{attempt}");
    c.squeue()
        .into_iter()
        .filter(|j| {
            j["name"] == name.as_str()
                && matches!(
                    j["job_state"].as_str(),
                    Some("PENDING" | "CONFIGURING" | "RUNNING" | "COMPLETING")
                )
        })
        .collect()
}

/// What every rank printed: `(rank, the line)` once both wrote it.
fn told(s: &Server, id: u64, attempt: u32) -> Vec<String> {
    let mut lines = Vec::new();
    wait_for(20, "both ranks' environment lines", || {
        lines = (0..2)
            .filter_map(|r| {
                rank_log(s, id, attempt, r)
                    .lines()
                    .find(|l| l.starts_with("rank="))
                    .map(str::to_string)
            })
            .collect();
        lines.len() == 2
    });
    lines
}

/// [`wait_for`], saying the scheduler's log when it times out.
fn wait(s: &Server, secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !f() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(secs),
            "timed out waiting for {what}\n{}",
            s.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The job ended by its cancel.
fn cancelled(s: &Server, id: u64) -> bool {
    let j = s.job(id);
    j["state"] == "FAILED"
        && j["reason"]
            .as_str()
            .is_some_and(|r| r.contains("CANCELLED"))
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or("")
}

/// What is left of an attempt on the nodes after its supervisor was killed (its job's
/// processes, orphaned): ended by hand, by the attempt's own environment.
fn end_leftovers(id: u64, attempt: u32) {
    let want = [
        format!("SHAREQ_JOB_ID={id}"),
        format!("SHAREQ_ATTEMPT={attempt}"),
    ];
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
        if want.iter().all(|w| vars.contains(&w.as_bytes())) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

#[test]
fn a_gang_is_one_slurm_job_on_both_nodes_and_ends_stops_and_restarts_as_one() {
    let Some(c) = Cluster::up() else { return };
    let mut s = Server::start_with(&config(), &[]);

    // A plain job takes GPU 0 of one node first, so that the gang's nodes have different
    // GPUs free: each node's own GPUs are pinned, not one GRES for every node.
    let plain = submit(
        &s,
        json!({"jobName": "one", "quotaShareName": "interactive", "quantity": 1,
               "command": ["sleep", "600"]}),
    );
    s.wait_state(plain, "RUNNING", 30);

    // One Slurm job on both nodes, each component with its node's GPUs as shareq chose.
    let g = gang(
        &s,
        "allreduce",
        "trap 'echo TERM-$SHAREQ_NODE_RANK; exit 0' TERM; while true; do sleep 0.2; done",
        json!({}),
    );
    s.wait_state(g, "RUNNING", 30);
    let parts = components(&c, g, 1);
    assert_eq!(parts.len(), 2, "one component per node: {parts:?}");
    let leaders: Vec<&Value> = parts.iter().map(|p| &p["het_job_id"]).collect();
    assert_eq!(leaders[0], leaders[1], "one Slurm job: {parts:?}");
    let mut nodes: Vec<&str> = parts.iter().filter_map(|p| p["nodes"].as_str()).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, ["n1", "n2"]);
    for p in &parts {
        assert_eq!(slurm_indices(p).len(), 2, "2 GPUs on each node: {p}");
    }
    // Each rank was told its rank, world size 4 and the same main node and port, and
    // its own node's GPUs (as Slurm pinned them).
    let lines = told(&s, g, 1);
    let (r0, r1) = (&lines[0], &lines[1]);
    assert_eq!(field(r0, "rank"), "0", "{r0}");
    assert_eq!(field(r1, "rank"), "1", "{r1}");
    for l in [r0, r1] {
        assert_eq!(field(l, "nodes"), "2", "{l}");
        assert_eq!(field(l, "world"), "4", "{l}");
        assert!(!field(l, "main").is_empty(), "{l}");
        assert_eq!(field(l, "addr"), field(l, "main"), "{l}");
        assert!(field(l, "port").parse::<u16>().is_ok_and(|p| p > 0), "{l}");
        assert_eq!(field(l, "cuda").split(',').count(), 2, "{l}");
    }
    assert_eq!(field(r0, "main"), field(r1, "main"));
    assert_eq!(field(r0, "port"), field(r1, "port"));
    // `shareq log --rank R` prints that node's own log, through the scheduler.
    let by_rank = |r: &str| {
        let out = s.cli(&["log", &g.to_string(), "--attempt", "1", "--rank", r]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (l0, l1) = (by_rank("0"), by_rank("1"));
    assert!(l0.contains("rank=0 ") && !l0.contains("rank=1 "), "{l0}");
    assert!(l1.contains("rank=1 ") && !l1.contains("rank=0 "), "{l1}");
    assert_eq!(field(r0, "aws"), "0/2/0");
    assert_eq!(field(r1, "aws"), "1/2/0");
    // The components are in rank order: each rank runs on its component's GPUs.
    for p in &parts {
        let rank = p["het_job_offset"].as_u64().unwrap_or(9) as usize;
        let line = lines
            .get(rank)
            .unwrap_or_else(|| panic!("no rank {rank}: {lines:?}"));
        let slurm: Vec<String> = slurm_indices(p).iter().map(u64::to_string).collect();
        assert_eq!(field(line, "cuda"), slurm.join(","), "rank {rank}: {p}");
    }
    assert_ne!(
        field(r0, "cuda"),
        field(r1, "cuda"),
        "different GPUs on the two nodes: {lines:?}"
    );

    // A cancel reaches both ranks (their stop path, SIGTERM) and ends the gang as one.
    assert!(s.cli(&["cancel", &g.to_string()]).status.success());
    wait(&s, 20, "both ranks to get SIGTERM", || {
        rank_log(&s, g, 1, 0).contains("TERM-0") && rank_log(&s, g, 1, 1).contains("TERM-1")
    });
    wait(&s, 20, "the gang's Slurm job to end", || {
        components(&c, g, 1).is_empty()
    });
    wait(&s, 10, "the cancelled gang", || cancelled(&s, g));
    assert!(rank_record(&s, g, 1, 0).1 && rank_record(&s, g, 1, 1).1);

    // `kill -9` of one rank's supervisor: the other rank is stopped and the gang is
    // requeued (one retry left), then runs again on both nodes.
    let k = gang(
        &s,
        "lost-rank",
        "exec sleep 600",
        json!({"retryStrategy": {"attempts": 2}}),
    );
    s.wait_state(k, "RUNNING", 30);
    let (pid, _) = rank_record(&s, k, 1, 1);
    let pid = pid.expect("rank 1's supervisor recorded itself");
    let killed = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success(), "rank 1's supervisor {pid} was killed");
    wait(&s, 40, "the gang to start again", || {
        let j = s.job(k);
        j["attempts"] == 2 && j["state"] == "RUNNING"
    });
    end_leftovers(k, 1);
    wait(&s, 20, "the first attempt's Slurm job to be gone", || {
        components(&c, k, 1).is_empty()
    });
    assert_eq!(components(&c, k, 2).len(), 2);
    assert!(rank_record(&s, k, 1, 0).1, "rank 0 was stopped and ended");
    let said = s.stderr();
    assert!(
        said.contains("a gang rank's supervisor is gone without its exit status: lost"),
        "the lost rank is said: {said}"
    );
    assert!(s.cli(&["cancel", &k.to_string()]).status.success());
    wait(&s, 30, "the requeued gang to end", || {
        components(&c, k, 2).is_empty() && cancelled(&s, k)
    });

    // A reclaim preempts a borrowing gang whole: every rank gets its share's notice
    // (SIGUSR1) through its own supervisor, and the gang is requeued.
    assert!(s.cli(&["cancel", &plain.to_string()]).status.success());
    wait(&s, 20, "the plain job to end", || cancelled(&s, plain));
    let traps = "trap 'echo USR1-$SHAREQ_NODE_RANK' USR1; \
                 trap 'echo TERM-$SHAREQ_NODE_RANK; exit 0' TERM; \
                 while true; do sleep 0.2; done";
    let own = gang(&s, "own", traps, json!({}));
    s.wait_state(own, "RUNNING", 30);
    let lent = gang(&s, "borrowing", traps, json!({}));
    s.wait_state(lent, "RUNNING", 30);
    told(&s, own, 1);
    told(&s, lent, 1);
    let back = submit(
        &s,
        json!({"jobName": "back", "quotaShareName": "interactive", "quantity": 2,
               "command": ["sleep", "600"]}),
    );
    s.wait_state(back, "RUNNING", 40);
    let victim = [own, lent]
        .into_iter()
        .find(|&v| s.job(v)["preemptedCount"] == 1)
        .unwrap_or_else(|| panic!("no gang was preempted: {}", s.jobs()));
    for r in 0..2 {
        let log = rank_log(&s, victim, 1, r);
        let (notice, term) = (format!("USR1-{r}"), format!("TERM-{r}"));
        assert!(
            log.contains(&notice) && log.contains(&term),
            "rank {r}: {log}"
        );
        assert!(
            log.find(&notice) < log.find(&term),
            "the notice first: {log}"
        );
    }
    for j in [own, lent, back] {
        assert!(s.cli(&["cancel", &j.to_string()]).status.success());
    }
    wait(&s, 30, "the three jobs to end", || {
        [own, lent, back].iter().all(|&j| cancelled(&s, j))
    });

    // kill -9 of serve and a restart: both ranks are adopted (not started again), and a
    // cancel then ends both.
    let a = gang(
        &s,
        "adopted",
        "trap 'echo TERM-$SHAREQ_NODE_RANK; exit 0' TERM; while true; do sleep 0.2; done",
        json!({}),
    );
    s.wait_state(a, "RUNNING", 30);
    told(&s, a, 1);
    if let Some(child) = s.child() {
        child.kill().unwrap();
        let _ = child.wait();
    }
    assert_eq!(components(&c, a, 1).len(), 2, "the gang outlives shareq");
    s.restart(&["--stop-jobs-on-exit"]);
    let v = s.wait_state(a, "RUNNING", 20);
    assert_eq!(v["attempts"], 1, "adopted, not started again: {v}");
    let said = s.stderr();
    assert!(
        said.contains("adopted a gang's ranks"),
        "the adoption names the gang's nodes: {said}"
    );
    // Both supervisors speak to the new scheduler (they beat every 15 s): the gang stays.
    std::thread::sleep(std::time::Duration::from_secs(20));
    assert_eq!(s.state_of(a), "RUNNING", "{}", s.stderr());
    assert!(s.cli(&["cancel", &a.to_string()]).status.success());
    wait(&s, 20, "both adopted ranks to get SIGTERM", || {
        rank_log(&s, a, 1, 0).contains("TERM-0") && rank_log(&s, a, 1, 1).contains("TERM-1")
    });
    wait(&s, 20, "the adopted gang to end", || {
        components(&c, a, 1).is_empty() && cancelled(&s, a)
    });
    s.stop();
}
