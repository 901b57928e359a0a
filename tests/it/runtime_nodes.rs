//! `nodes` on the live scheduler (SPEC §10): one listed node with the local executor runs
//! jobs pinned to that node's devices and says so; configs `serve` cannot carry out
//! (several nodes on the local executor, the Slurm executor with no Slurm answering) are
//! refused with the reason, at start and on reload, while `check` accepts them.

use crate::common;

use common::{BIN, Server, share};
use std::process::Command;

const ONE_NODE: &str = "kind: ServiceEnvironment\nname: one\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 4}\nnodes:\n  - {name: box1, devices: {gpu: {fake: 4}}}\n---\n";

const TWO_NODES: &str = "kind: ServiceEnvironment\nname: two\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 8}\nnodes:\n  - {name: n1, devices: {gpu: {fake: 4}}}\n  - {name: n2, devices: {gpu: {fake: 4}}}\n---\n";

const SLURM: &str = "kind: ServiceEnvironment\nname: cluster\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 8}\nexecutor: {kind: slurm, partition: shareq}\nnodes:\n  - {name: n1, devices: {gpu: [0, 1, 2, 3]}}\n  - {name: n2, devices: {gpu: [0, 1, 2, 3]}}\n---\n";

#[test]
fn one_listed_node_runs_jobs_on_its_devices_and_names_it() {
    let s = Server::start(&format!("{ONE_NODE}{}", share("team", 4, "LEND", false)));
    let id = s.submit(
        &["--share", "team", "--gpus", "3"],
        &["sh", "-c", "echo CUDA=$CUDA_VISIBLE_DEVICES; sleep 30"],
    );
    s.wait_state(id, "RUNNING", 20);
    let job = s.job(id);
    assert_eq!(job["node"], "box1", "{job}");
    assert_eq!(job["devices"], serde_json::json!([0, 1, 2]), "{job}");
    let out = s.cli(&["jobs"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("devices box1:[0, 1, 2]"), "{text}");
    // Larger than any node: refused at the door, with the node's size.
    let out = s.cli(&["submit", "--share", "team", "--gpus", "5", "--", "true"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("QUOTA_MANAGEMENT_LIMIT_EXCEEDED") || err.contains("on one node"),
        "{err}"
    );
    let out = s.cli(&["cancel", &id.to_string()]);
    assert!(out.status.success());
}

pub(crate) fn serve_refuses(config: &str, expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("c.yaml"), config).unwrap();
    let check = Command::new(BIN).arg("check").arg(&cfg).output().unwrap();
    assert!(
        check.status.success(),
        "check accepts it: {}",
        String::from_utf8_lossy(&check.stdout)
    );
    // No Slurm answers here, whatever this machine has (an empty slurm.conf fails at
    // once; a missing one makes the Slurm commands look for a cluster for a minute).
    let no_slurm = dir.path().join("no-slurm.conf");
    std::fs::write(&no_slurm, "").unwrap();
    let out = Command::new(BIN)
        .env("SLURM_CONF", &no_slurm)
        .args(["serve", "--config"])
        .arg(&cfg)
        .arg("--state")
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(expect), "{err}");
}

#[test]
fn serve_refuses_what_it_cannot_carry_out_and_says_why() {
    serve_refuses(
        &format!("{TWO_NODES}{}", share("team", 8, "LEND", false)),
        "2 nodes, and the local executor runs jobs on this machine only",
    );
    serve_refuses(
        &format!("{SLURM}{}", share("team", 8, "LEND", false)),
        "Slurm does not answer",
    );
}

#[test]
fn a_reload_to_several_nodes_is_rejected_and_the_old_config_stays() {
    let s = Server::start(&format!("{ONE_NODE}{}", share("team", 4, "LEND", false)));
    std::fs::write(
        s.config.join("config.yaml"),
        format!("{TWO_NODES}{}", share("team", 8, "LEND", false)),
    )
    .unwrap();
    let out = s.cli(&["reload"]);
    assert!(!out.status.success());
    let err = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(err.contains("local executor"), "{err}");
    let st = s.cli(&["status", "--json"]);
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st["units"][0]["usable"], 4, "{st}");
}
