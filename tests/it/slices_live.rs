//! Units sliced by memory (SPEC §15) outside replay: `check` accepts them and says what a
//! slice guarantees; `serve` refuses them by name at start and on reload (running a slice
//! comes with issue 42's item 3), and a refused reload leaves the old config in force.

use crate::common;
use crate::runtime_nodes::serve_refuses;

use common::{BIN, Server, share};
use std::process::Command;

const SLICED: &str = "kind: ServiceEnvironment\nname: lab\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}\n  - capacityUnit: mem\n    maxCapacity: 160\n    devices: {fake: 2}\n    slicing: {memoryGiB: 80, overuse: STOP}\n---\n";

const WHOLE: &str = "kind: ServiceEnvironment\nname: lab\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}\n---\n";

const REFUSAL: &str =
    "unit `mem`: sliced units run in replay; live slices come with issue 42's item 3";

#[test]
fn check_says_gib_are_accounted_not_enforced() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.yaml"),
        format!("{SLICED}{}", share("team", 2, "LEND", false)),
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
    // The unit's usable capacity is counted in GiB: two devices of 80.
    assert!(text.contains("  mem   fake: 2  160          160"), "{text}");
}

#[test]
fn serve_refuses_a_sliced_unit_by_name() {
    serve_refuses(
        &format!("{SLICED}{}", share("team", 2, "LEND", false)),
        REFUSAL,
    );
}

#[test]
fn a_reload_to_a_sliced_unit_is_rejected_and_the_old_config_stays() {
    let s = Server::start(&format!("{WHOLE}{}", share("team", 2, "LEND", false)));
    std::fs::write(
        s.config.join("config.yaml"),
        format!("{SLICED}{}", share("team", 2, "LEND", false)),
    )
    .unwrap();
    let out = s.cli(&["reload"]);
    assert!(!out.status.success());
    let err = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(err.contains(REFUSAL), "{err}");
    let st = s.cli(&["status", "--json"]);
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st["units"].as_array().map(Vec::len), Some(1), "{st}");
}
