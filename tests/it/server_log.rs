//! `shareq serve`'s log reads as words (issue 25 item 10): no Rust debug forms
//! (`Ok(JobId(2))`, `Some(7)`), no raw epoch milliseconds, and SIGHUP re-reads the config
//! with a line saying so (the scheduler keeps running).

use crate::common;

use common::{Server, config, share};
use std::time::{Duration, Instant};

#[test]
fn the_log_speaks_words_and_sighup_rereads_the_config() {
    let shares = format!(
        "{}---\n{}",
        share("alpha", 1, "LEND_AND_BORROW", true),
        share("beta", 1, "LEND", false)
    );
    let mut s = Server::start(&config(2, 1, &shares));
    let a = s.submit(&["--share", "alpha"], &["sleep", "300"]);
    s.wait_state(a, "RUNNING", 20);
    let refused = s.cli(&["submit", "--share", "nosuch", "--", "true"]);
    assert!(!refused.status.success());
    assert!(s.cli(&["priority", &a.to_string(), "7"]).status.success());
    hang_up(&mut s);
    assert!(s.cli(&["cancel", &a.to_string()]).status.success());
    s.wait_state(a, "FAILED", 20);
    assert!(
        s.child().unwrap().try_wait().unwrap().is_none(),
        "SIGHUP does not stop the scheduler"
    );
    // The decision stream says who cancelled.
    let events = s.cli(&["events", "--json", "--since", "1h"]);
    let events = String::from_utf8_lossy(&events.stdout);
    let me = common::me();
    let cancelled = events
        .lines()
        .find(|l| l.contains("\"event\":\"cancelled\""))
        .unwrap_or_else(|| panic!("no cancelled line:\n{events}"));
    assert!(
        cancelled.contains(&format!("\"cancelled_by\":\"{}\"", me)),
        "{cancelled}"
    );
    let reprioritized = events
        .lines()
        .find(|l| l.contains("\"event\":\"reprioritized\""))
        .unwrap_or_else(|| panic!("no reprioritized line:\n{events}"));
    assert!(
        reprioritized.contains(&format!("\"reprioritized_by\":\"{me}\"")),
        "{reprioritized}"
    );
    let log = s.stderr();
    for want in [
        &format!("job={a}") as &str,
        "submit accepted",
        "submit refused: ",
        &format!("priority set job={a} priority=7 by={me}"),
        "SIGHUP: re-reading the config in ",
        "devices=local:[0]",
        // The start names its executor (issue 46 item 6).
        "scheduler listening socket=",
        "executor=local",
    ] {
        assert!(log.contains(want), "{want:?} missing:\n{log}");
    }
    assert!(
        !log.contains('\u{1b}'),
        "no colour codes off a terminal:\n{log}"
    );
    for debug_form in ["Ok(", "Err(", "Some(", "None", "JobId("] {
        assert!(!log.contains(debug_form), "{debug_form:?} in:\n{log}");
    }
    // No raw epoch milliseconds (13 digits from 2001 on) anywhere.
    let raw_ms = log
        .split(|c: char| !c.is_ascii_digit())
        .find(|w| w.len() == 13 && w.starts_with('1'));
    assert!(raw_ms.is_none(), "{raw_ms:?} in:\n{log}");
}

/// A SIGHUP the moment the socket is there (serve still finishing its start) is a reload,
/// not the end of the scheduler: its handler is in place before the socket opens.
#[test]
fn a_sighup_as_soon_as_the_socket_opens_does_not_stop_the_scheduler() {
    let shares = share("alpha", 1, "LEND", false);
    for _ in 0..3 {
        let mut s = Server::start(&config(1, 1, &shares));
        hang_up(&mut s);
    }
}

/// Send serve a SIGHUP and wait for the log to say the config was re-read; serve must
/// stay up meanwhile.
fn hang_up(s: &mut Server) {
    let pid = s.child().expect("serve runs").id() as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    let t = Instant::now();
    while !s.stderr().contains("SIGHUP: config re-read") {
        assert!(
            s.child().unwrap().try_wait().unwrap().is_none(),
            "a SIGHUP stopped the scheduler:\n{}",
            s.stderr()
        );
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no SIGHUP line:\n{}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// docs/DEPLOY.md's rotation of `shareq.log` (issue 46 item 6): logrotate's
/// `copytruncate` copies the file and empties it in place; `serve` goes on writing at the
/// file's new end (it appends), with no hole of zeros where the old lines were.
#[test]
fn shareq_log_rotates_by_copy_and_truncate() {
    let s = Server::start(&common::config(1, 1, &common::share("a", 1, "LEND", false)));
    let log = s.state.join("shareq.log");
    common::wait_for(10, "the start in shareq.log", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("scheduler listening"))
    });
    // What logrotate's copytruncate does.
    let rotated = s.path("shareq.log.1");
    std::fs::copy(&log, &rotated).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    let id = s.submit(&["--share", "a", "--name", "after-rotation"], &["true"]);
    common::wait_for(10, "a line after the rotation", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains(&format!("job={id}")))
    });
    let bytes = std::fs::read(&log).unwrap();
    assert!(!bytes.contains(&0), "a hole where the old lines were");
    let text = String::from_utf8(bytes).unwrap();
    assert!(!text.contains("scheduler listening"), "{text}");
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(
        old.contains("scheduler listening") && old.contains("executor=local"),
        "{old}"
    );
}
