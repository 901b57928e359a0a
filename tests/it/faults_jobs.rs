//! Faults around running jobs (SPEC §7), with the real binary: a supervisor killed with
//! `kill -9` leaves no process of its attempt behind and its GPU is not handed out while
//! one runs; a fake GPU made to fail preempts its job with DEVICE_LOST; a chatty job's
//! log is cut at its cap or at the free-space reserve while the job runs on; pruned
//! history takes its run files and logs along.

use crate::common;

use common::{Server, alive, config, share, wait_for};
use std::time::Duration;

fn read_pid(path: &std::path::Path) -> Option<i32> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn a_killed_supervisor_leaves_nothing_running_on_its_gpu() {
    let s = Server::start(&config(1, 1, &share("a", 1, "LEND", false)));
    let d = s.dir.path().display().to_string();
    // The job leaves a background process, and records both pids.
    let a = s.submit(
        &["--share", "a"],
        &[&format!(
            "sleep 300 & echo $! > {d}/bg.pid; echo $$ > {d}/sh.pid; wait"
        )],
    );
    let b = s.submit(&["--share", "a"], &[&format!("touch {d}/b.ran; sleep 300")]);
    s.wait_state(a, "RUNNING", 20);
    wait_for(10, "the job's pids", || {
        s.path("bg.pid").exists() && s.path("sh.pid").exists()
    });
    let pids = [
        read_pid(&s.path("bg.pid")).unwrap(),
        read_pid(&s.path("sh.pid")).unwrap(),
    ];
    let sup = read_pid(&s.state.join(format!("runs/{a}/1.pid"))).unwrap();
    assert!(pids.iter().all(|&p| alive(p)));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(sup),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // B gets the GPU only once nothing of A runs.
    wait_for(20, "job B to start", || s.path("b.ran").exists());
    for p in pids {
        assert!(!alive(p), "process {p} of the killed attempt still runs");
    }
    assert_eq!(s.state_of(a), "FAILED");
    assert_eq!(s.state_of(b), "RUNNING");
}

#[test]
fn a_fake_gpu_made_to_fail_preempts_its_job_with_device_lost() {
    let s = Server::start(&config(2, 1, &share("a", 2, "LEND", false)));
    let a = s.submit(
        &["--share", "a"],
        &["echo dev=$CUDA_VISIBLE_DEVICES; sleep 300"],
    );
    let j = s.wait_state(a, "RUNNING", 20);
    let dev = j["devices"][0].as_u64().unwrap();
    std::fs::write(
        s.state.join("fake-gpu-faults"),
        format!("# drill\ngpu {dev}\n"),
    )
    .unwrap();
    // Preempted (DEVICE_LOST), requeued, and started again on the other GPU.
    wait_for(20, "attempt 2 on the other GPU", || {
        s.job(a)["attempts"] == 2 && s.state_of(a) == "RUNNING"
    });
    let j = s.job(a);
    assert_ne!(j["devices"][0].as_u64().unwrap(), dev, "{j}");
    let jobs = s.jobs();
    let p = &jobs["preemptions"][0];
    assert_eq!(p["reason"], "DEVICE_LOST", "{jobs}");
    assert!(s.log(a, 2).contains(&format!("dev={}", 1 - dev)));
    // The lost GPU is not handed out again: a second job waits.
    let b = s.submit(&["--share", "a"], &["sleep 300"]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(s.state_of(b), "RUNNABLE");
}

fn logs_config(cap_mib: u32, free_mib: u32) -> String {
    config(1, 1, &share("a", 1, "LEND", false)).replacen(
        "preemption:",
        &format!("logs: {{maxMiBPerAttempt: {cap_mib}, minFreeMiB: {free_mib}}}\npreemption:"),
        1,
    )
}

#[test]
fn a_chatty_job_is_cut_at_its_log_cap_and_keeps_running() {
    let s = Server::start(&logs_config(1, 0));
    let a = s.submit(&["--share", "a"], &["yes"]);
    s.wait_state(a, "RUNNING", 20);
    let path = s.state.join(format!("logs/{a}/1.log"));
    wait_for(20, "the cut", || {
        std::fs::read(&path).is_ok_and(|b| b.windows(12).any(|w| w == b"log cut here"))
    });
    std::thread::sleep(Duration::from_millis(300));
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len <= (1 << 20) + 1024, "log is {len} bytes");
    let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
    assert!(
        text.contains("logs.maxMiBPerAttempt"),
        "{}",
        &text[text.len() - 300..]
    );
    assert_eq!(s.state_of(a), "RUNNING");
}

/// Mount a small tmpfs (root only): `None`, with a message, otherwise.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &std::path::Path, mib: u32) -> Option<Tmpfs> {
        if !nix::unistd::Uid::effective().is_root() {
            eprintln!("skipped: mounting a tmpfs needs root");
            return None;
        }
        std::fs::create_dir_all(at).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: cannot mount a tmpfs here");
            return None;
        }
        // A fresh tmpfs is mode 1777; the scheduler refuses a state directory others
        // may write to.
        std::fs::set_permissions(
            at,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
        )
        .unwrap();
        Some(Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        common::kill_supervisors_of(&self.0);
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn a_chatty_job_never_fills_the_state_disk() {
    let dir = tempfile::tempdir().unwrap();
    let Some(_fs) = Tmpfs::mount(&dir.path().join("state"), 24) else {
        return;
    };
    let cfgdir = dir.path().join("config");
    std::fs::create_dir_all(&cfgdir).unwrap();
    std::fs::write(cfgdir.join("c.yaml"), logs_config(1024, 8)).unwrap();
    let s = Server::start_dir(dir, cfgdir, &["--stop-jobs-on-exit"]);
    let a = s.submit(&["--share", "a"], &["yes"]);
    let path = s.state.join(format!("logs/{a}/1.log"));
    wait_for(30, "the cut", || {
        std::fs::read(&path).is_ok_and(|b| b.windows(12).any(|w| w == b"log cut here"))
    });
    let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
    assert!(
        text.contains("below the reserve"),
        "{}",
        &text[text.len().saturating_sub(300)..]
    );
    // The job runs on, and the scheduler can still write.
    assert_eq!(s.state_of(a), "RUNNING");
    let b = s.submit(&["--share", "a"], &["true"]);
    s.cli(&["cancel", &a.to_string()]);
    s.wait_state(b, "SUCCEEDED", 20);
    let free = nix::sys::statvfs::statvfs(&s.state).unwrap();
    assert!(free.blocks_available() as u64 * free.fragment_size() as u64 >= 4 << 20);
}

#[test]
fn pruned_history_takes_its_run_files_and_logs_along() {
    let cfg = config(1, 1, &share("a", 1, "LEND", false)).replacen(
        "preemption:",
        "history: {retainDays: 0}\npreemption:",
        1,
    );
    let mut s = Server::start(&cfg);
    let a = s.submit(&["--share", "a"], &["echo hi"]);
    s.wait_state(a, "SUCCEEDED", 20);
    assert!(s.state.join(format!("runs/{a}")).exists());
    assert!(s.state.join(format!("logs/{a}")).exists());
    std::thread::sleep(Duration::from_millis(20));
    s.restart(&[]);
    assert!(!s.state.join(format!("runs/{a}")).exists());
    assert!(!s.state.join(format!("logs/{a}")).exists());
}
