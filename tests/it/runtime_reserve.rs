//! A real `shareq serve`: a big job first in its queue long enough takes its unit's
//! reservation at that moment (a live timer makes the pass), holds a borrower back, and
//! both reasons reach `shareq jobs --json` (SPEC §3).

use crate::common;
use common::*;

#[test]
fn a_reservation_holds_a_borrower_back_and_says_why() {
    let shares = format!(
        "{}---\n{}",
        share("v", 1, "LEND_AND_BORROW", false),
        share("w", 1, "LEND_AND_BORROW", false)
    );
    let cfg =
        config(3, 1, &shares).replace("preemption:\n", "reserveAfterSeconds: 2\npreemption:\n");
    let s = Server::start(&cfg);
    let w0 = s.submit(
        &["--share", "w", "--name", "w0", "--gpus", "2"],
        &["sleep", "300"],
    );
    s.wait_state(w0, "RUNNING", 20);
    let big = s.submit(
        &["--share", "v", "--name", "big", "--gpus", "2"],
        &["sleep", "300"],
    );
    // No input arrives: the moment big qualifies makes the pass that gives it the unit.
    let holds =
        "holds the gpu reservation: no other job borrows gpu until it starts (needs 2, 1 idle)";
    let t = std::time::Instant::now();
    loop {
        let j = s.job(big);
        if j["reason"].as_str() == Some(holds) {
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "big did not take the reservation: {j}\nw0: {}\nserve's log:\n{}",
            s.job(w0),
            s.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let w1 = s.submit(&["--share", "w", "--name", "w1"], &["sleep", "300"]);
    // Give the scheduler a few passes: w1 would borrow the free GPU but must not.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let w = s.job(w1);
    assert_eq!(w["state"], "RUNNABLE", "{w}");
    let why = w["reason"].as_str().unwrap_or_default();
    assert!(
        why.starts_with(&format!("gpu is reserved for job {big} (v) since ")),
        "{w}"
    );
    // HH:MM, the local time the reservation was taken.
    let at = why.rsplit(' ').next().unwrap_or_default();
    assert!(
        at.len() == 5 && at.as_bytes()[2] == b':',
        "{why}: the time reads HH:MM"
    );
    // Cancelling big ends the reservation, and w1 borrows the free GPU.
    let out = s.cli(&["cancel", &big.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.wait_state(w1, "RUNNING", 20);
}
