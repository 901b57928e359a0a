//! End to end in a real terminal: the `console` example (the console over a simulated
//! runtime fed by the demo generator) driven in tmux with send-keys / capture-pane.
//! Submit through the form, cancel it, resize, quit by detaching, and check that the
//! terminal settings are restored. Needs tmux; says so and passes vacuously without it.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn capture(session: &str) -> String {
    tmux(&["capture-pane", "-p", "-t", session])
}

fn wait_for(session: &str, needle: &str) -> String {
    let start = Instant::now();
    loop {
        let screen = capture(session);
        if screen.contains(needle) {
            return screen;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{needle:?} never appeared:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn keys(session: &str, keys: &[&str]) {
    for k in keys {
        tmux(&["send-keys", "-t", session, k]);
        std::thread::sleep(Duration::from_millis(60));
    }
}

fn example_binary() -> PathBuf {
    // target/debug/deps/tui_tmux-HASH → target/debug/examples/console
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("console")
}

#[test]
fn submit_cancel_resize_and_detach_in_tmux() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("tmux is not installed: skipping the terminal end-to-end test");
        return;
    }
    let bin = example_binary();
    if !bin.exists() {
        // `cargo test` builds examples; `cargo test --test tui_tmux` alone does not.
        let ok = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--example", "console"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok && bin.exists(), "cannot build {}", bin.display());
    }
    let dir = std::env::temp_dir().join(format!("shareq-tmux-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (before, after, exit) = (dir.join("before"), dir.join("after"), dir.join("exit"));
    let session = format!("shareq-e2e-{}", std::process::id());
    let script = format!(
        "stty -a > {b}; {bin} 5; echo $? > {e}; stty -a > {a}; sleep 60",
        b = before.display(),
        a = after.display(),
        e = exit.display(),
        bin = bin.display()
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "160",
        "-y",
        "48",
        &script,
    ]);
    let _cleanup = Cleanup(session.clone());
    wait_for(&session, "Queue (");
    // Submit through the form.
    keys(&session, &["s", "Tab", "Tab", "Tab"]);
    tmux(&["send-keys", "-t", &session, "-l", "e2e-probe"]);
    keys(&session, &["Tab"]);
    tmux(&["send-keys", "-t", &session, "-l", "sleep 300"]);
    wait_for(&session, "⇒");
    keys(&session, &["Enter"]);
    wait_for(&session, "submitted e2e-probe to qs1");
    // Cancel it, wherever it is by now (queued, or started on borrowed capacity): filter
    // to it, and move to Running if the queue does not have it.
    keys(&session, &["/"]);
    tmux(&["send-keys", "-t", &session, "-l", "e2e-probe"]);
    keys(&session, &["Enter"]);
    std::thread::sleep(Duration::from_millis(300));
    if !capture(&session).contains("Queue (1 of") {
        keys(&session, &["Tab"]);
    }
    keys(&session, &["c"]);
    let screen = wait_for(&session, "? y/n");
    assert!(
        screen.contains("e2e-probe (qs1, "),
        "the question names the job:\n{screen}"
    );
    keys(&session, &["y"]);
    wait_for(&session, "cancelling job");
    // Resize to the smallest supported screen: still a full console.
    tmux(&["resize-window", "-t", &session, "-x", "80", "-y", "24"]);
    // Poll: a capture may catch the redraw half done.
    let start = Instant::now();
    loop {
        let screen = capture(&session);
        let first = screen.lines().next().unwrap_or("").to_string();
        if first.starts_with(" shareq")
            && first.chars().count() <= 80
            && screen.contains("Preemptions")
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no 80×24 console:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Quit: jobs run, so it asks; detach.
    keys(&session, &["q"]);
    wait_for(&session, "Leave how?");
    keys(&session, &["d"]);
    let start = Instant::now();
    while !after.exists() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let code = std::fs::read_to_string(&exit).unwrap_or_default();
    assert_eq!(code.trim(), "0", "the console exits cleanly");
    // Same terminal modes as before (the size line differs: the window was resized).
    let strip = |p: &PathBuf| -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.contains("rows"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(strip(&before), strip(&after), "terminal modes restored");
    assert!(!strip(&after).is_empty());
    std::fs::remove_dir_all(&dir).ok();
}

struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        tmux(&["kill-session", "-t", &self.0]);
    }
}
