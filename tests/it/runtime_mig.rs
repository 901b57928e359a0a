//! MIG instances as a unit (SPEC §15) on fake instances: a job of n gets n instances and
//! is told their `MIG-…` UUIDs; another job gets the others.

use crate::common::{Server, wait_for};

fn mig_server() -> Server {
    Server::start(
        "kind: ServiceEnvironment\nname: test\ncapacityLimits:\n  - capacityUnit: a100-1g\n    maxCapacity: 4\n    devices: {fake: 4, mig: 1g.10gb}\npreemption:\n  gracePeriodSeconds: 1\n---\nkind: QuotaShare\nquotaShareName: team\ncapacityLimits:\n  - {capacityUnit: a100-1g, maxCapacity: 4}\nresourceSharingConfiguration: {strategy: LEND_AND_BORROW}\n",
    )
}

/// The `CUDA_VISIBLE_DEVICES` line of a job's first attempt, once it is written.
fn visible(s: &Server, id: u64) -> String {
    let mut line = String::new();
    wait_for(20, "the job's CUDA_VISIBLE_DEVICES in its log", || {
        line = s
            .log(id, 1)
            .lines()
            .find_map(|l| l.strip_prefix("CUDA_VISIBLE_DEVICES="))
            .unwrap_or_default()
            .to_string();
        !line.is_empty()
    });
    line
}

#[test]
fn a_mig_job_sees_its_instances_uuids_and_another_job_the_others() {
    let s = mig_server();
    let hold = "env; sleep 30";
    let a = s.submit(&["--share", "team", "--gpus", "2"], &[hold]);
    let a_sees = visible(&s, a);
    let b = s.submit(&["--share", "team", "--gpus", "2"], &[hold]);
    let b_sees = visible(&s, b);
    let uuids = |v: &str| -> Vec<String> { v.split(',').map(str::to_string).collect() };
    let (ua, ub) = (uuids(&a_sees), uuids(&b_sees));
    assert_eq!(ua.len(), 2, "{a_sees}");
    assert_eq!(ub.len(), 2, "{b_sees}");
    let mut all: Vec<String> = ua.iter().chain(&ub).cloned().collect();
    all.sort();
    assert_eq!(
        all,
        (0..4)
            .map(|i| format!("MIG-fake-a100-1g-{i}"))
            .collect::<Vec<_>>(),
        "the two jobs hold all four instances, none twice"
    );
    // NVIDIA_VISIBLE_DEVICES names the same instances (as the container toolkit reads them).
    assert!(
        s.log(a, 1)
            .lines()
            .any(|l| l == format!("NVIDIA_VISIBLE_DEVICES={a_sees}")),
        "{}",
        s.log(a, 1)
    );
    // `jobs --json` gives a running MIG job's UUIDs; `shareq gpus` shows the instances.
    let jobs = s.jobs();
    let row = jobs["running"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == a)
        .unwrap_or_else(|| panic!("{jobs}"));
    assert_eq!(row["uuids"], serde_json::json!(ua), "{row}");
    let gpus = String::from_utf8_lossy(&s.cli(&["gpus"]).stdout).into_owned();
    assert!(
        gpus.contains(&format!("local:0 MIG 1g.10gb {}", "MIG-fake-a100-1g-0")),
        "{gpus}"
    );
    // A third waits: the unit has 4 instances.
    let c = s.submit(&["--share", "team", "--gpus", "1"], &["true"]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(s.state_of(c), "RUNNABLE");
    s.cli(&["cancel", &a.to_string()]);
    s.wait_state(c, "SUCCEEDED", 20);
    s.cli(&["cancel", &b.to_string()]);
}
