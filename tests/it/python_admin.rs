//! The Python client's admin side against a real `shareq serve`: shares created and
//! updated programmatically (`put_config`: validated as the watcher validates, written,
//! reloaded; refused to non-admins by name), and the notebook-style example
//! `clients/python/examples/quota_shares.py` run from start to end.

use crate::common::{Server, config, share};
use crate::python_client::{
    TestUser, client_src, last_json, multi_user_skip, public_copy, python, python_for, run_py,
};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

macro_rules! needs_python {
    () => {
        match python() {
            Ok(p) => p,
            Err(why) => {
                eprintln!("skipping {}: {why}", module_path!());
                return;
            }
        }
    };
}

#[test]
fn an_admin_creates_and_updates_shares_and_an_invalid_file_changes_nothing() {
    let py = needs_python!();
    let s = Server::start(&config(4, 1, &share("qs0", 1, "RESERVE", false)));
    let r = run_py(
        &py,
        &s,
        r#"
import json, shareq
c = shareq.Client()
out = {"admin": c.hello()["admin"]}
three = [
    shareq.quota_share("qs1", gpus=1, strategy="LEND_AND_BORROW", in_share_preemption=True),
    shareq.quota_share("qs2", gpus=1, strategy="LEND"),
    shareq.quota_share("qs3", gpus=1, strategy="RESERVE"),
]
out["dry"] = c.put_config("shares.yaml", three, dry_run=True)
out["dry_shares"] = sorted(s["name"] for s in c.status()["shares"] if s["present"])
out["put"] = c.put_config("shares.yaml", three)
out["shares"] = sorted(s["name"] for s in c.status()["shares"] if s["present"])
# borrowLimit on a LEND share: refused with its file, line and column; nothing changes.
bad = three[:1] + [shareq.quota_share("qs2", gpus=1, strategy="LEND", borrow_limit=50)] + three[2:]
try:
    c.put_config("shares.yaml", bad)
    out["bad"] = None
except shareq.Rejected as e:
    out["bad"] = [e.code, e.message]
# An update: qs1 gets two GPUs.
three[0] = shareq.quota_share("qs1", gpus=2, strategy="LEND_AND_BORROW")
out["update"] = c.put_config("shares.yaml", three)
out["qs1"] = [s["limit"] for s in c.status()["shares"] if s["name"] == "qs1"]
try:
    c.put_config("../escape.yaml", three)
except shareq.Rejected as e:
    out["name"] = e.message
print(json.dumps(out))
"#,
    );
    assert_eq!(r["admin"], true, "{r}");
    assert_eq!(r["dry"]["written"], false, "{r}");
    assert_eq!(r["dry_shares"], serde_json::json!(["qs0"]), "{r}");
    assert_eq!(r["put"]["written"], true, "{r}");
    assert_eq!(
        r["shares"],
        serde_json::json!(["qs0", "qs1", "qs2", "qs3"]),
        "{r}"
    );
    let file = s.config.join("shares.yaml");
    assert_eq!(r["put"]["path"], file.display().to_string().as_str(), "{r}");
    assert_eq!(r["bad"][0], "rejected", "{r}");
    let words = r["bad"][1].as_str().unwrap_or_default();
    let at = format!("{}:", file.display());
    assert!(
        words.starts_with("config rejected:")
            && words.contains(&at)
            && words.contains("borrowLimit"),
        "the error names file:line:col and the field: {words}"
    );
    assert_eq!(r["update"]["written"], true, "{r}");
    assert_eq!(r["qs1"], serde_json::json!([2]), "{r}");
    assert!(
        r["name"]
            .as_str()
            .unwrap_or_default()
            .contains("not a config file name"),
        "{r}"
    );
    assert!(!s.config.join("../escape.yaml").exists());
    // Written with the directory's owner, readable, never writable by others; no
    // temporaries left behind.
    let m = std::fs::metadata(&file).unwrap();
    let dir = std::fs::metadata(&s.config).unwrap();
    assert_eq!(
        (m.uid(), m.mode() & 0o022),
        (dir.uid(), 0),
        "{:o}",
        m.mode()
    );
    let names: Vec<String> = std::fs::read_dir(&s.config)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // What the scheduler applied is what the file says (the watcher agrees with it).
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\"maxCapacity\": 2"), "{text}");
    // The writes are in the audit trail (written behind the answers).
    crate::common::wait_for(10, "put_config in the audit trail", || {
        let audit = s.cli(&["audit", "--json"]);
        String::from_utf8_lossy(&audit.stdout).contains("put_config")
    });
}

#[test]
fn a_user_who_is_not_an_admin_is_refused_by_name() {
    let py = needs_python!();
    if let Some(why) = multi_user_skip() {
        eprintln!(
            "skipping {}: {why} (a second real user is needed)",
            module_path!()
        );
        return;
    }
    let bob = TestUser::create();
    let Some(bob_py) = python_for(&bob.0, &py) else {
        eprintln!("skipping: no python3 that user {} may run", bob.0);
        return;
    };
    let s = Server::start(&config(2, 1, &share("qs1", 2, "RESERVE", false)));
    std::fs::set_permissions(s.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let lib = s.dir.path().join("py");
    public_copy(&lib);
    let script = format!(
        r#"
import json, shareq
c = shareq.Client(state={state:?})
try:
    c.put_config("shares.yaml", [shareq.quota_share("mine", gpus=2)])
    out = None
except shareq.NotAllowed as e:
    out = [e.code, e.message]
print(json.dumps(out))
"#,
        state = s.state.display().to_string()
    );
    let out = Command::new("runuser")
        .args(["-u", &bob.0, "--", &bob_py, "-c", &script])
        .env("PYTHONPATH", &lib)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .expect("runuser");
    let r = last_json(&out, &s.stderr());
    assert_eq!(r[0], "not_allowed", "{r}");
    let words = r[1].as_str().unwrap_or_default();
    assert!(
        words.starts_with(&format!(
            "{} may not write the config: only admins may",
            bob.0
        )),
        "{words}"
    );
    assert!(!s.config.join("shares.yaml").exists());
}

/// The example sets up the AWS example's three shares (the same shares as
/// sample-configs/aws-example) on a scheduler that has only its environment, and runs a
/// small training job to the end.
#[test]
fn the_quota_shares_example_runs_against_a_real_scheduler() {
    let py = needs_python!();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sample = root.join("sample-configs/aws-example");
    let env = std::fs::read_to_string(sample.join("environment.yaml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("environment.yaml"), &env).unwrap();
    let s = Server::start_dir(dir, cfg.clone(), &["--stop-jobs-on-exit"]);
    let out = Command::new(&py)
        .arg(root.join("clients/python/examples/quota_shares.py"))
        .args([
            "--state",
            &s.state.display().to_string(),
            "--timeout",
            "120",
        ])
        .env("PYTHONPATH", client_src())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("SHAREQ_STATE")
        .stdin(Stdio::null())
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the example failed: {stdout}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        s.stderr()
    );
    assert!(stdout.contains("SUCCEEDED"), "{stdout}");
    assert!(stdout.contains("epoch 5 loss"), "{stdout}");
    assert!(stdout.contains("device 0"), "{stdout}");
    // The shares it wrote are the sample's, field for field.
    let written = shareq::config::load_dir(&cfg).expect("the written config loads");
    let sample_cfg = shareq::config::load_dir(&sample).expect("the sample loads");
    assert_eq!(written.config.shares, sample_cfg.config.shares);
}
