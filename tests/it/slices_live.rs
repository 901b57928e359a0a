//! Units sliced by memory (SPEC §15) run live on fake devices: `check` says what a slice
//! guarantees; jobs asking GiB (`submit --gpu-memory`, which picks the sliced unit) share a
//! device by best fit and see its index and their GiB; a lender takes its GiB back; a
//! restart adopts a slice on its device with its GiB.

use crate::common;

use crate::python_client::{python, run_py};
use common::{BIN, Server, wait_for};
use serde_json::Value;
use std::process::Command;

const SLICED: &str = "kind: ServiceEnvironment\nname: lab\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}\n  - capacityUnit: mem\n    maxCapacity: 160\n    devices: {fake: 2}\n    slicing: {memoryGiB: 80, overuse: STOP}\npreemption:\n  gracePeriodSeconds: 1\n---\n";

/// A share with `gpu` GPUs and `mem` GiB of the sliced unit.
fn share2(name: &str, gpu: u32, mem: u32, strategy: &str) -> String {
    format!(
        "kind: QuotaShare\nquotaShareName: {name}\ncapacityLimits:\n  - {{capacityUnit: gpu, maxCapacity: {gpu}}}\n  - {{capacityUnit: mem, maxCapacity: {mem}}}\nresourceSharingConfiguration: {{strategy: {strategy}}}\n---\n"
    )
}

/// Sleeps after printing what the job was given.
const SHOW: &str = "echo \"dev=$CUDA_VISIBLE_DEVICES gib=$SHAREQ_GPU_MEMORY_GIB\"; exec sleep 300";

fn devices(j: &Value) -> Vec<u64> {
    j["devices"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

fn wait_log(s: &Server, id: u64, what: &str) -> String {
    wait_for(20, what, || s.log(id, 1).contains("dev="));
    s.log(id, 1)
}

#[test]
fn check_says_gib_are_accounted_not_enforced() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.yaml"),
        format!("{SLICED}{}", share2("team", 2, 160, "LEND")),
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("check")
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("unit `mem` is sliced by memory: quantities are GiB (80 GiB per device"),
        "{text}"
    );
    assert!(text.contains("GiB are accounted, not enforced"), "{text}");
    assert!(text.contains("(overuse: STOP)"), "{text}");
    assert!(
        text.contains("fake devices report no memory: overuse cannot be seen"),
        "{text}"
    );
    // The unit's usable capacity is counted in GiB: two devices of 80.
    assert!(text.contains("  mem   fake: 2  160          160"), "{text}");
}

#[test]
fn two_slices_share_a_device_and_a_bigger_one_goes_to_the_other() {
    let s = Server::start(&format!("{SLICED}{}", share2("team", 2, 160, "LEND")));
    let a = s.submit(
        &["--share", "team", "--unit", "mem", "--gpu-memory", "20G"],
        &[SHOW],
    );
    let b = s.submit(
        &["--share", "team", "--unit", "mem", "--gpu-memory", "20GiB"],
        &[SHOW],
    );
    let (ja, jb) = (
        s.wait_state(a, "RUNNING", 20),
        s.wait_state(b, "RUNNING", 20),
    );
    // Best fit: the second 20 GiB goes where the first left the least room that fits.
    assert_eq!(devices(&ja), vec![0], "{ja}");
    assert_eq!(devices(&jb), vec![0], "{jb}");
    assert_eq!(ja["quantity"], 20, "{ja}");
    for id in [a, b] {
        let log = wait_log(&s, id, "the slice's log");
        assert!(log.contains("dev=0 gib=20"), "{log}");
    }
    // `jobs` reads a slice's quantity as GiB; its JSON says which units are sliced.
    let out = s.cli(&["jobs"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains(" 20 GiB  RUNNING"), "{table}");
    let json = s.jobs_json(&[]);
    assert_eq!(json["slicedUnits"], serde_json::json!(["mem"]), "{json}");
    // `status` counts the sliced unit in GiB, the whole one in GPUs.
    let st = s.cli(&["status"]);
    let st = String::from_utf8_lossy(&st.stdout);
    assert!(
        st.contains("unit mem: 160 GiB usable, 40 GiB in use, 160 GiB guaranteed"),
        "{st}"
    );
    assert!(
        st.contains("unit gpu: 2 usable, 0 in use, 2 guaranteed"),
        "{st}"
    );
    // `shareq gpus`: the device with each job's GiB, and that overuse cannot be seen here.
    let out = Command::new(BIN)
        .args(["gpus", "--config"])
        .arg(&s.config)
        .arg("--state")
        .arg(&s.state)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("unit mem: 160 GiB usable, 40 GiB in use"),
        "{text}"
    );
    assert!(
        text.contains("local:0  40/80 GiB: team: echo 20 GiB, team: echo 20 GiB"),
        "{text}"
    );
    assert!(text.contains("local:1  free"), "{text}");
    assert!(
        text.contains("fake devices report no memory: overuse cannot be seen"),
        "{text}"
    );
    // 70 GiB no longer fit device 0 (40 left): device 1.
    let c = s.submit(
        &["--share", "team", "--unit", "mem", "--gpu-memory", "70"],
        &[SHOW],
    );
    let jc = s.wait_state(c, "RUNNING", 20);
    assert_eq!(devices(&jc), vec![1], "{jc}");
    let log = wait_log(&s, c, "the 70 GiB job's log");
    assert!(log.contains("dev=1 gib=70"), "{log}");
    // A whole-GPU job of the other unit sees no GiB.
    let g = s.submit(&["--share", "team", "--unit", "gpu"], &[SHOW]);
    s.wait_state(g, "RUNNING", 20);
    let log = wait_log(&s, g, "the whole GPU's log");
    assert!(log.contains("gib=\n") || log.ends_with("gib="), "{log}");
}

#[test]
fn more_gib_than_a_device_has_is_refused_by_name() {
    let s = Server::start(&format!("{SLICED}{}", share2("team", 2, 160, "LEND")));
    let out = s.cli(&[
        "submit",
        "--share",
        "team",
        "--unit",
        "mem",
        "--gpu-memory",
        "81G",
        "--",
        "true",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("80 GiB"), "{err}");
    let bad = s.cli(&[
        "submit",
        "--share",
        "team",
        "--gpu-memory",
        "20MB",
        "--",
        "true",
    ]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("expected whole GiB"), "{err}");
    // GiB of a whole-GPU unit: refused before anything is queued.
    let whole = s.cli(&[
        "submit",
        "--share",
        "team",
        "--unit",
        "gpu",
        "--gpu-memory",
        "20",
        "--",
        "true",
    ]);
    assert!(!whole.status.success());
    let err = String::from_utf8_lossy(&whole.stderr);
    assert!(
        err.contains("unit `gpu` counts whole GPUs (use --gpus); sliced: mem"),
        "{err}"
    );
    assert_eq!(s.jobs()["queue"].as_array().map(Vec::len), Some(0));
    // Without --unit, --gpu-memory goes to the only sliced unit.
    let id = s.submit(&["--share", "team", "--gpu-memory", "30G"], &[SHOW]);
    let j = s.wait_state(id, "RUNNING", 20);
    assert_eq!(
        (j["unit"].as_str(), j["quantity"].as_u64()),
        (Some("mem"), Some(30)),
        "{j}"
    );
}

#[test]
fn a_lender_takes_its_gib_back_from_a_borrowed_slice() {
    let s = Server::start(&format!(
        "{SLICED}{}{}",
        share2("lend", 1, 80, "LEND"),
        share2("bor", 1, 80, "LEND_AND_BORROW")
    ));
    let b1 = s.submit(
        &["--share", "bor", "--unit", "mem", "--gpu-memory", "70"],
        &[SHOW],
    );
    s.wait_state(b1, "RUNNING", 20);
    // Beyond bor's 80: borrowed from lend, on the other device.
    let b2 = s.submit(
        &["--share", "bor", "--unit", "mem", "--gpu-memory", "70"],
        &[SHOW],
    );
    let j2 = s.wait_state(b2, "RUNNING", 20);
    assert_eq!(j2["on_borrowed"], true, "{j2}");
    let victim_device = devices(&j2);
    // lend asks 20 GiB of its own: no device has 20 free, so b2 is reclaimed.
    let l = s.submit(
        &["--share", "lend", "--unit", "mem", "--gpu-memory", "20"],
        &[SHOW],
    );
    let jl = s.wait_state(l, "RUNNING", 30);
    assert_eq!(devices(&jl), victim_device, "{jl}");
    let log = wait_log(&s, l, "the lender's log");
    assert!(log.contains("gib=20"), "{log}");
    let j2 = s.job(b2);
    assert_ne!(j2["state"], "RUNNING", "{j2}");
    assert_eq!(s.state_of(b1), "RUNNING");
}

#[test]
fn a_restart_adopts_a_slice_on_its_device_with_its_gib() {
    let mut s = Server::start_with(&format!("{SLICED}{}", share2("team", 2, 160, "LEND")), &[]);
    let a = s.submit(
        &["--share", "team", "--unit", "mem", "--gpu-memory", "50"],
        &[SHOW],
    );
    let b = s.submit(
        &["--share", "team", "--unit", "mem", "--gpu-memory", "60"],
        &[SHOW],
    );
    let (ja, jb) = (
        s.wait_state(a, "RUNNING", 20),
        s.wait_state(b, "RUNNING", 20),
    );
    assert_eq!((devices(&ja), devices(&jb)), (vec![0], vec![1]));
    s.restart(&["--stop-jobs-on-exit"]);
    let (ja, jb) = (
        s.wait_state(a, "RUNNING", 20),
        s.wait_state(b, "RUNNING", 20),
    );
    assert_eq!(
        (devices(&ja), devices(&jb)),
        (vec![0], vec![1]),
        "{ja} {jb}"
    );
    // The adopted GiB still count: 25 fits only device 0 (30 left there, 20 on device 1).
    let c = s.submit(
        &["--share", "team", "--unit", "mem", "--gpu-memory", "25"],
        &[SHOW],
    );
    let jc = s.wait_state(c, "RUNNING", 20);
    assert_eq!(devices(&jc), vec![0], "{jc}");
    // 25 more fit nowhere now (5 and 20 left): it waits.
    let d = s.submit(
        &["--share", "team", "--unit", "mem", "--gpu-memory", "25"],
        &[SHOW],
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_ne!(s.state_of(d), "RUNNING");
}

#[test]
fn the_python_client_asks_gib_with_gpu_memory() {
    let py = match python() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("skipping {}: {why}", module_path!());
            return;
        }
    };
    let s = Server::start(&format!("{SLICED}{}", share2("team", 2, 160, "LEND")));
    let r = run_py(
        &py,
        &s,
        r#"
import json, shareq
c = shareq.Client()
job = c.submit(share="team", unit="mem", gpu_memory="30G",
               command=["sh", "-c", "echo gib=$SHAREQ_GPU_MEMORY_GIB"])
done = c.wait(job.id, timeout=60)
try:
    c.submit(share="team", unit="mem", gpu_memory="30MB", command=["true"])
    bad = None
except ValueError as e:
    bad = str(e)
try:
    c.submit(share="team", unit="gpu", gpu_memory=20, command=["true"])
    whole = None
except ValueError as e:
    whole = str(e)
# Without unit=: the only sliced unit.
picked = c.submit(share="team", gpu_memory=10, command=["true"])
print(json.dumps({"gpus": done.gpus, "state": done.state, "log": c.log(job.id), "bad": bad,
                  "whole": whole, "picked": [picked.unit, picked.gpus]}))
"#,
    );
    assert_eq!(r["state"], "SUCCEEDED", "{r}");
    assert_eq!(r["gpus"], 30, "{r}");
    assert!(r["log"].as_str().unwrap_or("").contains("gib=30"), "{r}");
    assert!(
        r["bad"]
            .as_str()
            .unwrap_or("")
            .contains("expected whole GiB"),
        "{r}"
    );
    assert!(
        r["whole"]
            .as_str()
            .unwrap_or("")
            .contains("unit 'gpu' counts whole GPUs"),
        "{r}"
    );
    assert_eq!(r["picked"], serde_json::json!(["mem", 10]), "{r}");
}
