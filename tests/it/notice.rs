//! The live notice phase (SPEC §14) with real processes: a victim of a share with a
//! `notice` gets the notice signal at once and SIGTERM `seconds` later, from its
//! supervisor's clock (also across a restart of `serve`); its environment says so; an
//! exit after the notice is the preemption; a cancel and a timeout send no notice.

use crate::common;

use common::{Server, config, wait_for};
use std::path::Path;

const NOTICE_SECONDS: u32 = 3;

/// One share of `gpus` GPUs with in-share preemption, a notice of [`NOTICE_SECONDS`]
/// (SIGUSR1) and a grace of 5 s; the environment's grace is 60 s.
fn notice_config(gpus: u32) -> String {
    let share = format!(
        "kind: QuotaShare\nquotaShareName: bg\ncapacityLimits:\n  - {{capacityUnit: gpu, maxCapacity: {gpus}}}\nresourceSharingConfiguration: {{strategy: LEND_AND_BORROW}}\npreemptionConfiguration: {{inSharePreemption: ENABLED, gracePeriodSeconds: 5, notice: {{signal: SIGUSR1, seconds: {NOTICE_SECONDS}}}}}\n"
    );
    config(gpus, 60, &share)
}

/// A job that records when it gets SIGUSR1 and SIGTERM (`<stem>.usr1`, `<stem>.term`,
/// seconds since the epoch), prints its stop variables, and exits 0 on SIGTERM. Its
/// second attempt exits 0 at once.
fn trapping(stem: &Path) -> String {
    let f = stem.display();
    format!(
        "[ \"$SHAREQ_ATTEMPT\" = 2 ] && exit 0; \
         echo \"vars $SHAREQ_NOTICE_SIGNAL $SHAREQ_NOTICE_SECONDS $SHAREQ_GRACE_SECONDS\"; \
         trap 'date +%s.%N > {f}.usr1' USR1; \
         trap 'date +%s.%N > {f}.term; exit 0' TERM; \
         echo up; while true; do sleep 0.05; done"
    )
}

fn instant(path: &Path) -> Option<f64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn with_ext(stem: &Path, ext: &str) -> std::path::PathBuf {
    stem.with_extension(ext)
}

/// Seconds from the notice to SIGTERM, once both came.
fn notice_lead(stem: &Path) -> f64 {
    wait_for(20, "SIGTERM after the notice", || {
        instant(&with_ext(stem, "term")).is_some()
    });
    let usr1 = instant(&with_ext(stem, "usr1")).expect("the notice came");
    instant(&with_ext(stem, "term")).unwrap() - usr1
}

fn assert_lead(lead: f64) {
    let want = f64::from(NOTICE_SECONDS);
    assert!(
        (lead - want).abs() <= 0.5,
        "the notice led SIGTERM by {lead:.3} s, not {want} s"
    );
}

#[test]
fn a_victim_gets_the_notice_then_sigterm_and_its_exit_is_the_preemption() {
    let s = Server::start(&notice_config(1));
    let stem = s.path("victim");
    let victim = s.submit(&["--share", "bg", "--priority", "1"], &[&trapping(&stem)]);
    wait_for(20, "the victim runs", || s.log(victim, 1).contains("up"));
    // Every attempt of the share is told how it will be stopped.
    assert!(
        s.log(victim, 1)
            .contains(&format!("vars SIGUSR1 {NOTICE_SECONDS} 5")),
        "{}",
        s.log(victim, 1)
    );
    let high = s.submit(&["--share", "bg", "--priority", "5"], &["sleep 0.5"]);
    wait_for(10, "the notice", || {
        instant(&with_ext(&stem, "usr1")).is_some()
    });
    // During the notice: its phase, in `jobs --json` and in the table.
    let j = s.job(victim);
    assert_eq!(j["stop"]["phase"], "notice", "{j}");
    let term_at = j["stop"]["termAt"].as_i64().unwrap();
    assert_eq!(j["stop"]["nextSignalAt"].as_i64(), Some(term_at), "{j}");
    assert_eq!(
        j["stop"]["killAt"].as_i64(),
        Some(term_at + 5000),
        "the grace follows SIGTERM: {j}"
    );
    let table = String::from_utf8_lossy(&s.cli(&["jobs"]).stdout).to_string();
    assert!(table.contains("notice: SIGTERM in"), "{table}");
    assert_lead(notice_lead(&stem));
    // It exited 0 after SIGTERM: requeued, not SUCCEEDED; the preemptor runs.
    s.wait_state(high, "SUCCEEDED", 20);
    assert_eq!(s.exit_code(victim, 1), Some(0));
    let done = s.wait_state(victim, "SUCCEEDED", 20);
    assert_eq!(done["attempts"], 2, "{done}");
    assert_eq!(done["preempted_count"], 1, "{done}");
    let p = &s.jobs()["preemptions"][0];
    assert_eq!(p["victim"], victim);
    assert_eq!(p["outcome"], "requeued", "{p}");
    assert!(
        s.log(victim, 1).contains("preempted: SIGUSR1 now (notice)"),
        "{}",
        s.log(victim, 1)
    );
}

#[test]
fn a_cancel_and_a_timeout_send_no_notice() {
    let s = Server::start(&notice_config(2));
    let (a, b) = (s.path("cancelled"), s.path("timed"));
    let cancelled = s.submit(&["--share", "bg"], &[&trapping(&a)]);
    let timed = s.submit(&["--share", "bg", "--timeout", "2"], &[&trapping(&b)]);
    wait_for(20, "both run", || {
        s.log(cancelled, 1).contains("up") && s.log(timed, 1).contains("up")
    });
    assert!(s.cli(&["cancel", &cancelled.to_string()]).status.success());
    s.wait_state(cancelled, "FAILED", 20);
    let t = s.wait_state(timed, "FAILED", 20);
    assert!(t["reason"].as_str().unwrap().contains("TIMEOUT"), "{t}");
    for stem in [&a, &b] {
        assert!(instant(&with_ext(stem, "term")).is_some(), "SIGTERM came");
        assert!(
            instant(&with_ext(stem, "usr1")).is_none(),
            "{} got a notice",
            stem.display()
        );
    }
}

/// A cancel during a notice cuts it short: SIGTERM comes at once, not when the notice
/// would have ended, and the job ends CANCELLED (not requeued); `jobs` says `stopping`.
#[test]
fn a_cancel_during_a_notice_sends_sigterm_at_once() {
    let share = "kind: QuotaShare\nquotaShareName: bg\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 1}\nresourceSharingConfiguration: {strategy: LEND_AND_BORROW}\npreemptionConfiguration: {inSharePreemption: ENABLED, gracePeriodSeconds: 5, notice: {signal: SIGUSR1, seconds: 60}}\n";
    let s = Server::start(&config(1, 60, share));
    let stem = s.path("cut");
    let victim = s.submit(&["--share", "bg", "--priority", "1"], &[&trapping(&stem)]);
    wait_for(20, "the victim runs", || s.log(victim, 1).contains("up"));
    let high = s.submit(&["--share", "bg", "--priority", "5"], &["sleep 0.5"]);
    wait_for(10, "the notice", || {
        instant(&with_ext(&stem, "usr1")).is_some()
    });
    assert_eq!(s.job(victim)["stop"]["phase"], "notice");
    let cancelled_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(s.cli(&["cancel", &victim.to_string()]).status.success());
    wait_for(10, "SIGTERM after the cancel", || {
        instant(&with_ext(&stem, "term")).is_some()
    });
    let term = instant(&with_ext(&stem, "term")).unwrap();
    assert!(
        term - cancelled_at < 5.0,
        "SIGTERM came {:.3} s after the cancel, not at once",
        term - cancelled_at
    );
    let v = s.wait_state(victim, "FAILED", 20);
    assert!(v["reason"].as_str().unwrap().contains("CANCELLED"), "{v}");
    s.wait_state(high, "SUCCEEDED", 20);
}

#[test]
fn the_supervisor_keeps_the_notices_times_across_a_restart() {
    // Without --stop-jobs-on-exit: the job outlives `serve`, whose successor adopts it.
    let mut s = Server::start_with(&notice_config(1), &[]);
    let stem = s.path("victim");
    let victim = s.submit(&["--share", "bg", "--priority", "1"], &[&trapping(&stem)]);
    wait_for(20, "the victim runs", || s.log(victim, 1).contains("up"));
    let high = s.submit(&["--share", "bg", "--priority", "5"], &["sleep 0.5"]);
    wait_for(10, "the notice", || {
        instant(&with_ext(&stem, "usr1")).is_some()
    });
    s.restart(&[]);
    // The adopted attempt is asked for its stop again; its supervisor keeps its times.
    assert_lead(notice_lead(&stem));
    s.wait_state(high, "SUCCEEDED", 30);
    let done = s.wait_state(victim, "SUCCEEDED", 30);
    assert_eq!(done["preempted_count"], 1, "{done}");
}
