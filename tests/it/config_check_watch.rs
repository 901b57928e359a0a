//! `shareq check --watch DIR`, driven as an operator would: one line per change, applied
//! or rejected with the errors.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const ENV: &str = "kind: ServiceEnvironment
name: lab
capacityLimits:
  - {capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}
";

fn share(strategy: &str) -> String {
    format!(
        "kind: QuotaShare\nquotaShareName: qs1\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 1}}]\nresourceSharingConfiguration:\n  strategy: {strategy}\n"
    )
}

#[test]
fn check_watch_prints_one_line_per_change() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path();
    std::fs::write(dir.join("env.yaml"), ENV).expect("write");
    std::fs::write(dir.join("qs1.yaml"), share("LEND")).expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_shareq"))
        .args(["check", "--watch"])
        .arg(dir)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("a line within 20 s")
    };
    let run = || -> Result<(), String> {
        let first = next();
        if !first.contains(" applied ") || !first.ends_with("1 share; gpu 1/2 guaranteed") {
            return Err(format!("initial: {first}"));
        }
        std::fs::write(dir.join("qs1.yaml"), share("LEND_AND_BOROW")).expect("write");
        let head = next();
        if !head.ends_with("rejected, the previous config stays in force (1 error):") {
            return Err(format!("rejection: {head}"));
        }
        let err = next();
        if !err.ends_with("qs1.yaml:5:3: resourceSharingConfiguration.strategy: unknown value `LEND_AND_BOROW`: did you mean `LEND_AND_BORROW`? (expected one of `RESERVE`, `LEND`, `LEND_AND_BORROW`)") {
            return Err(format!("error line: {err}"));
        }
        std::fs::write(dir.join("qs1.yaml"), share("LEND_AND_BORROW")).expect("write");
        let fixed = next();
        if !fixed.contains(" applied ")
            || !fixed.ends_with("; qs1 strategy LEND -> LEND_AND_BORROW")
        {
            return Err(format!("fix: {fixed}"));
        }
        Ok(())
    };
    let result = run();
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = result {
        panic!("{e}");
    }
}
