//! The live scheduler's config and machine edges: reloads (applied and refused), a unit
//! with `devices: auto` on a machine without GPUs, `shareq gpus`, and
//! `--stop-jobs-on-exit`.

use crate::common;

use common::{BIN, Server, alive, config, share, wait_for};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

fn request(s: &Server, line: &str) -> Value {
    let stream = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
    let mut w = stream.try_clone().unwrap();
    w.write_all(line.as_bytes()).unwrap();
    w.write_all(b"\n").unwrap();
    let mut a = String::new();
    BufReader::new(stream).read_line(&mut a).unwrap();
    serde_json::from_str(&a).unwrap()
}

fn status(s: &Server) -> Value {
    let out = s.cli(&["status", "--json"]);
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn reload_applies_a_valid_config_and_keeps_the_old_one_on_errors() {
    let s = Server::start(&config(2, 1, &share("team", 1, "LEND", false)));
    let file = s.config.join("config.yaml");
    std::fs::write(&file, config(2, 1, &share("team", 2, "LEND", false))).unwrap();
    let a = request(&s, r#"{"op":"reload"}"#);
    assert_eq!(a["ok"], true, "{a}");
    assert_eq!(status(&s)["shares"][0]["limit"], 2);

    std::fs::write(&file, "kind: QuotaShare\nquotaShareName: [oops\n").unwrap();
    let a = request(&s, r#"{"op":"reload"}"#);
    assert_eq!(a["ok"], false);
    assert!(a["error"].as_str().unwrap().contains("config.yaml"), "{a}");
    let st = status(&s);
    assert_eq!(
        st["shares"][0]["limit"], 2,
        "the previous config stays in force"
    );
    assert!(
        st["config"]["error"]
            .as_str()
            .unwrap()
            .contains("config.yaml")
    );
    // And jobs still run on it.
    let id = s.submit(&["--share", "team", "--gpus", "2"], &["true"]);
    s.wait_state(id, "SUCCEEDED", 20);
}

#[test]
fn auto_devices_without_a_gpu_give_no_capacity_and_say_why() {
    let env = "kind: ServiceEnvironment\nname: nogpu\ncapacityLimits:\n  - capacityUnit: gpu\n    maxCapacity: 2\n    devices: auto\n---\n";
    let s = Server::start(&format!("{env}{}", share("team", 1, "LEND", false)));
    let found = std::process::Command::new(BIN)
        .arg("gpus")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&found.stdout).to_string();
    assert!(found.status.success());
    if text.starts_with("No GPU found") {
        assert!(
            text.contains("NVML:") && text.contains("nvidia-smi:"),
            "{text}"
        );
        assert_eq!(status(&s)["units"][0]["usable"], 0);
        let out = s.cli(&["submit", "--share", "team", "--", "true"]);
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("may hold at most 0"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            s.stderr().contains("only 0 usable device"),
            "{}",
            s.stderr()
        );
    } else {
        // On a machine with GPUs, they are listed with how they were found.
        assert!(
            text.contains("through NVML") || text.contains("through nvidia-smi"),
            "{text}"
        );
    }
}

#[test]
fn stop_jobs_on_exit_stops_running_jobs() {
    let mut s = Server::start(&config(1, 1, &share("team", 1, "LEND", false)));
    let pid_file = s.path("job.pid");
    let id = s.submit(
        &["--share", "team"],
        &[&format!(
            "echo $$ > {}; exec sleep 1000",
            pid_file.display()
        )],
    );
    s.wait_state(id, "RUNNING", 20);
    let mut pid = 0;
    wait_for(10, "pid file", || {
        pid = std::fs::read_to_string(&pid_file)
            .unwrap_or_default()
            .trim()
            .parse()
            .unwrap_or(0);
        pid > 0
    });
    assert!(alive(pid));
    s.stop();
    assert!(!alive(pid), "the job outlived --stop-jobs-on-exit");
    assert_eq!(s.exit_code(id, 1), Some(143));
}

#[test]
fn log_follow_prints_output_until_the_job_ends() {
    let s = Server::start(&config(1, 1, &share("team", 1, "LEND", false)));
    let id = s.submit(
        &["--share", "team"],
        &["echo one; sleep 0.5; echo two; sleep 0.5; echo three"],
    );
    let out = s.cli(&["log", &id.to_string(), "--follow"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one\ntwo\nthree\n");
    assert_eq!(s.state_of(id), "SUCCEEDED");
    let missing = s.cli(&["log", "999"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no log"));
}

#[test]
fn editing_the_config_directory_applies_live() {
    let s = Server::start(&config(2, 1, &share("team", 1, "LEND", false)));
    std::fs::write(
        s.config.join("config.yaml"),
        config(2, 1, &share("team", 2, "LEND", false)),
    )
    .unwrap();
    wait_for(20, "the edit to apply", || {
        status(&s)["shares"][0]["limit"] == 2
    });
    std::fs::write(s.config.join("broken.yaml"), "kind: Nope\n").unwrap();
    wait_for(20, "the broken edit to be reported", || {
        status(&s)["config"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("broken.yaml"))
    });
    assert_eq!(
        status(&s)["shares"][0]["limit"],
        2,
        "previous config in force"
    );
}

/// `log --follow` follows a preempted job into its next attempt and stops when the job
/// has finished, asking the scheduler about that one job (not listing them all).
#[test]
fn log_follow_carries_on_across_a_preemption_until_the_job_ends() {
    let s = Server::start(&config(1, 1, &share("team", 1, "LEND", true)));
    let a = s.submit(
        &["--share", "team", "--priority", "0"],
        &["echo a$SHAREQ_ATTEMPT; if [ $SHAREQ_ATTEMPT = 1 ]; then sleep 300; fi; echo done"],
    );
    s.wait_state(a, "RUNNING", 20);
    let follow = std::process::Command::new(BIN)
        .args(["log", "--state"])
        .arg(&s.state)
        .args([&a.to_string(), "--follow"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("follow");
    std::thread::sleep(std::time::Duration::from_millis(500));
    // A higher-priority job of the same share preempts it; it runs again afterwards.
    let b = s.submit(&["--share", "team", "--priority", "5"], &["true"]);
    s.wait_state(b, "SUCCEEDED", 30);
    s.wait_state(a, "SUCCEEDED", 30);
    let out = follow.wait_with_output().expect("follow ends");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a1\na2\ndone\n");
}

/// A file an explicit `reload` refused, then removed: the directory is back to the config
/// in force, and the error is no longer reported.
#[test]
fn a_file_a_reload_refused_is_forgotten_once_removed() {
    let s = Server::start(&config(2, 1, &share("team", 1, "LEND", false)));
    let bad = s.config.join("bad.yaml");
    std::fs::write(&bad, "kind: QuotaShare\nquotaShareName: [oops\n").unwrap();
    let a = request(&s, r#"{"op":"reload"}"#);
    assert_eq!(a["ok"], false, "{a}");
    assert!(status(&s)["config"]["error"].as_str().is_some());
    std::fs::remove_file(&bad).unwrap();
    wait_for(10, "the error forgotten", || {
        status(&s)["config"]["error"].is_null()
    });
}
