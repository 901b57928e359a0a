//! Submitting a multi-node job (a gang, SPEC §16) with the real CLI to a real `serve`:
//! what cannot be meant (`--gpus` against `--nodes` × `--gpus-per-node`, `--nodes 1`,
//! `--gpus-per-node` alone) is refused before anything is sent; what is sent reaches the
//! scheduler as `numNodes`, whose refusals name the cause: no `nodes` in the environment,
//! or more nodes than it has.

use crate::common;

use common::{Server, config, share};

fn refused(s: &Server, args: &[&str]) -> (i32, String) {
    let mut all = vec!["submit", "--share", "team"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", "true"]);
    let out = s.cli(&all);
    assert!(!out.status.success(), "{args:?} was accepted");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn contradictions_are_refused_before_sending_and_the_scheduler_names_its_refusals() {
    let s = Server::start(&config(4, 1, &share("team", 4, "LEND", false)));
    // The command line's own contradictions: exit 2, nothing queued.
    for (args, says) in [
        (
            &["--nodes", "2", "--gpus", "6", "--gpus-per-node", "4"][..],
            "--gpus 6 counts the job's GPUs in all, and --nodes 2 × --gpus-per-node 4 is 8",
        ),
        (
            &["--nodes", "2", "--gpus", "3"][..],
            "3 does not split evenly over --nodes 2",
        ),
        (
            &["--gpus-per-node", "2"][..],
            "--gpus-per-node 2 is for a multi-node job: add --nodes N",
        ),
        (
            &["--nodes", "1"][..],
            "a job on one node leaves out --nodes and asks with --gpus",
        ),
        (&["--nodes", "65"][..], "at most 64 nodes"),
    ] {
        let (code, err) = refused(&s, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let jobs = s.jobs();
    assert_eq!(jobs["queue"], serde_json::json!([]), "{jobs}");
    assert_eq!(jobs["finished"], serde_json::json!([]), "{jobs}");
    // A gang that reaches this scheduler (one machine, no `nodes`) is rejected by name.
    let (_, err) = refused(&s, &["--nodes", "2", "--gpus-per-node", "1"]);
    assert!(
        err.contains("rejected") && err.contains("--nodes needs an environment with nodes"),
        "{err}"
    );
    // --predict asks the same scheduler and submits nothing.
    let out = s.cli(&[
        "submit",
        "--share",
        "team",
        "--nodes",
        "2",
        "--gpus",
        "2",
        "--predict",
        "--json",
        "--",
        "true",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("--nodes needs an environment with nodes"),
        "{text}"
    );
    assert_eq!(s.jobs()["queue"], serde_json::json!([]));
}

/// An environment that lists one node (the local executor's only kind with `nodes`) can
/// never place a gang of two: refused at the door, naming the nodes it has.
#[test]
fn a_gang_larger_than_the_environment_is_refused_at_the_door() {
    let one_node = "kind: ServiceEnvironment\nname: one\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 4}\nnodes:\n  - {name: box1, devices: {gpu: {fake: 4}}}\n---\n";
    let s = Server::start(&format!("{one_node}{}", share("team", 4, "LEND", false)));
    let (code, err) = refused(&s, &["--nodes", "2", "--gpus-per-node", "2"]);
    assert_ne!(
        code, 2,
        "the scheduler refused it, not the command line: {err}"
    );
    assert!(err.contains("rejected") && err.contains("nodes"), "{err}");
    assert_eq!(s.jobs()["queue"], serde_json::json!([]));
}
