//! The sample config directories pass `shareq check`, and `check` exits 1 with every
//! error on a broken directory.

use std::process::Command;

fn check(dir: &str) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shareq"))
        .args(["check", dir])
        .output()
        .expect("run shareq");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn aws_example_is_valid() {
    let (code, out, err) = check("sample-configs/aws-example");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("3 quota shares"), "{out}");
    for row in [
        "qs1    LEND_AND_BORROW  1 gpu  unlimited      ENABLED",
        "qs2    LEND             1 gpu  never borrows  DISABLED",
        "qs3    RESERVE          1 gpu  never borrows  DISABLED",
    ] {
        assert!(out.contains(row), "missing `{row}` in\n{out}");
    }
    assert!(!out.contains("warnings"), "{out}");
}

/// The built-in demo's config (`shareq demo`): the AWS example, word for word, and a GPU
/// sliced by memory with its notebooks share (SPEC §15).
#[test]
fn the_demo_config_is_the_aws_example_and_a_sliced_gpu() {
    let (code, out, err) = check("sample-configs/demo");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("4 quota shares"), "{out}");
    for row in [
        "qs1        LEND_AND_BORROW  1 gpu       unlimited      ENABLED",
        "notebooks  LEND             80 gpu-mem  never borrows  DISABLED",
        "unit `gpu-mem` is sliced by memory",
    ] {
        assert!(out.contains(row), "missing `{row}` in\n{out}");
    }
    assert!(!out.contains("warnings"), "{out}");
    let aws = std::fs::read_to_string("sample-configs/aws-example/shares.yaml").unwrap();
    let demo = std::fs::read_to_string("sample-configs/demo/shares.yaml").unwrap();
    assert!(
        demo.starts_with(&aws),
        "the demo's shares begin with the AWS example's"
    );
}

#[test]
fn lab_8gpu_is_valid() {
    let (code, out, err) = check("sample-configs/lab-8gpu");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("4 quota shares"), "{out}");
    assert!(
        out.contains("gpu   fake: 8  8            8       8"),
        "{out}"
    );
    assert!(
        out.contains("vision       LEND_AND_BORROW  3 gpu  +3 gpu (100%)"),
        "{out}"
    );
}

#[test]
fn slurm_2nodes_is_valid_and_says_how_attempts_reach_slurm() {
    let (code, out, err) = check("sample-configs/slurm-2nodes");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("executor: Slurm partition `shareq`, each attempt a batch job (sbatch)"),
        "{out}"
    );
    // `executor.start: srun` is said too; a misspelt one is refused with the choices.
    let dir = tempfile::tempdir().expect("tempdir");
    for f in ["environment.yaml", "shares.yaml"] {
        let text = std::fs::read_to_string(format!("sample-configs/slurm-2nodes/{f}")).unwrap();
        std::fs::write(
            dir.path().join(f),
            text.replace("partition: shareq}", "partition: shareq, start: srun}"),
        )
        .unwrap();
    }
    let (code, out, err) = check(dir.path().to_str().unwrap());
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("each attempt a job step with its own allocation (srun"),
        "{out}"
    );
    let env = dir.path().join("environment.yaml");
    let text = std::fs::read_to_string(&env).unwrap();
    std::fs::write(&env, text.replace("start: srun", "start: sbtach")).unwrap();
    let (code, out, err) = check(dir.path().to_str().unwrap());
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("executor.start") && err.contains("sbatch"),
        "{err}"
    );
}

#[test]
fn slurm_gang_is_valid_on_two_nodes_with_slurm() {
    // The two-node config of multi-node jobs (SPEC §16, docs/SLURM.md).
    let (code, out, err) = check("sample-configs/slurm-gang");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("executor: Slurm partition `shareq`"), "{out}");
    assert!(out.contains("n1 [0, 1, 2, 3]; n2 [0, 1, 2, 3]"), "{out}");
    assert!(!out.contains("warnings"), "{out}");
}

#[test]
fn broken_directory_exits_1_with_every_error() {
    let (code, out, err) = check("tests/invalid_configs/many-errors-at-once");
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("invalid (6 errors)"), "{err}");
    assert!(err.contains("a.yaml:7:3: resourceSharingConfiguration.strategy: unknown value `LEND_AND_BOROW`: did you mean `LEND_AND_BORROW`?"), "{err}");
}

#[test]
fn warnings_are_shown() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("c.yaml"),
        "kind: ServiceEnvironment
name: w
capacityLimits:
  - {capacityUnit: gpu, maxCapacity: 4, devices: {fake: 2}}
  - {capacityUnit: a100, maxCapacity: 2, devices: [0, 1]}
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 3}]
resourceSharingConfiguration: {strategy: LEND}
members: []
",
    )
    .expect("write");
    let (code, out, err) = check(&dir.path().display().to_string());
    assert_eq!(code, 0, "{out}{err}");
    for w in [
        "unit `gpu`: maxCapacity is 4 but only 2 devices are listed, so 2 are usable",
        "unit `gpu` is oversubscribed: the shares are guaranteed 3 GPUs, only 2 usable",
        "unit `a100` is used by no share",
        "share `a`: `members: []`, so no one can submit to it",
        "share `a`: maxCapacity 3 for `gpu` is more than the 2 usable GPUs",
    ] {
        assert!(out.contains(w), "missing warning `{w}` in\n{out}");
    }
}

/// `admins`, `members` and `fairShare.weights` naming users or groups this machine does
/// not know are warned about (issue 25 item 5, issue 46 item 6); `root` and the `root`
/// group exist everywhere.
#[test]
fn check_warns_about_admins_and_members_the_machine_does_not_know() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("c.yaml"),
        "kind: ServiceEnvironment
name: t
admins: [root, nosuch-admin-25]
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND}
members: [\"@root\", \"@nosuch-group-25\", nosuch-user-25]
fairShare: {weights: {root: 2, nosuch-weighed-46: 3}}
",
    )
    .expect("write");
    let (code, out, err) = check(&dir.path().display().to_string());
    assert_eq!(code, 0, "{out}{err}");
    for w in [
        "admins: there is no user named `nosuch-admin-25` on this machine",
        "share `a`: members: there is no group named `nosuch-group-25` on this machine",
        "share `a`: members: there is no user named `nosuch-user-25` on this machine",
        "share `a`: fairShare.weights: there is no user named `nosuch-weighed-46` on this machine",
    ] {
        assert!(out.contains(w), "missing warning `{w}` in\n{out}");
    }
    assert!(!out.contains("`root`"), "root exists:\n{out}");
}

/// The lending-with-checkpoints sample (docs/CHECKPOINTS.md): valid, and `check` says how
/// long a reclaim of the lender's GPUs may take (the borrower's notice + its grace).
#[test]
fn checkpoints_sample_is_valid_and_says_how_long_a_reclaim_takes() {
    let (code, out, err) = check("sample-configs/checkpoints");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 quota shares"), "{out}");
    assert!(
        out.contains(
            "share `research` lends its idle GPUs: taking them back may take up to 180 s \
             (background's notice 120 s (SIGUSR1) + gracePeriodSeconds 60)"
        ),
        "{out}"
    );
}

#[test]
fn mig_a100_is_valid_and_says_why_a_profile_finds_no_instance() {
    let (code, out, err) = check("sample-configs/mig-a100");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("a100-1g  mig: 1g.10gb  7"), "{out}");
    // Without a MIG GPU here, the unit's 0 usable capacity is said with its reason.
    if out.contains("a100-1g` has 0 usable capacity") {
        assert!(out.contains("no 1g.10gb MIG instance: "), "{out}");
    }
    // The fake form: seven instances on any machine, nothing to warn about.
    let dir = tempfile::tempdir().expect("tempdir");
    for f in ["environment.yaml", "shares.yaml"] {
        let text = std::fs::read_to_string(format!("sample-configs/mig-a100/{f}")).unwrap();
        let text = text.replace(
            "devices: {mig: \"1g.10gb\"}",
            "devices: {fake: 7, mig: \"1g.10gb\"}",
        );
        std::fs::write(dir.path().join(f), text).unwrap();
    }
    let (code, out, err) = check(dir.path().to_str().unwrap());
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("a100-1g  fake: 7, mig: 1g.10gb  7            7 "),
        "{out}"
    );
    assert!(!out.contains("0 usable capacity"), "{out}");
}

/// The slices sample (docs/CONFIG.md, SPEC §15): one whole unit and one sliced unit;
/// `check` counts the sliced one in GiB and says what a slice guarantees.
#[test]
fn slices_sample_is_valid_and_counts_the_sliced_unit_in_gib() {
    let (code, out, err) = check("sample-configs/slices");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 quota shares"), "{out}");
    assert!(
        out.contains("unit `a100-mem` is sliced by memory: quantities are GiB (80 GiB per device"),
        "{out}"
    );
    assert!(out.contains("GiB are accounted, not enforced"), "{out}");
}
