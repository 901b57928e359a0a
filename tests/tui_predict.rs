//! The submit form's forecast against snapshots of the real scheduler.

use shareq::tui::fixtures::{self, AWS_CONFIG, Driver, NOW};
use shareq::tui::predict::{Verdict, predict};

#[test]
fn empty_machine_starts_now_then_borrows_then_waits() {
    let mut d = Driver::new(AWS_CONFIG, "aws").unwrap();
    let snap = d.snapshot(NOW, NOW);
    assert_eq!(predict(&snap, "qs1", None, 1, 0).verdict, Verdict::StartNow);
    d.submit("a", "qs1", 1, 0, NOW);
    let snap = d.snapshot(NOW, NOW);
    let p = predict(&snap, "qs1", None, 1, 0);
    assert_eq!(p.verdict, Verdict::Borrow, "{p:?}");
    assert!(p.why.contains("qs2"), "names the lender: {}", p.why);
    d.submit("b", "qs1", 1, 0, NOW);
    let snap = d.snapshot(NOW, NOW);
    let p = predict(&snap, "qs1", None, 1, 0);
    assert_eq!(p.verdict, Verdict::Wait);
    assert!(p.why.contains("qs3 reserves 1"), "{}", p.why);
    // qs2 within its guarantee, its GPU lent out: a reclaim.
    let p = predict(&snap, "qs2", None, 1, 0);
    assert_eq!(p.verdict, Verdict::Preempt);
    assert!(
        p.why.contains("CROSS_SHARE_RECLAIM") && p.why.contains("qs1"),
        "{}",
        p.why
    );
    // LEND cannot borrow beyond its limit.
    let p = predict(&snap, "qs3", None, 1, 0);
    assert_eq!(p.verdict, Verdict::StartNow);
}

#[test]
fn in_share_priority_and_impossible_requests() {
    let snap = fixtures::aws();
    // qs1 holds j3 (prio 3) on its guarantee; prio 9 preempts inside qs1.
    let p = predict(&snap, "qs1", None, 1, 9);
    assert_eq!(p.verdict, Verdict::Preempt, "{p:?}");
    assert!(p.why.contains("IN_SHARE_PRIORITY"));
    let p = predict(&snap, "qs1", None, 3, 0);
    assert_eq!(p.verdict, Verdict::Reject);
    assert_eq!(
        p.why,
        "QUOTA_MANAGEMENT_LIMIT_EXCEEDED: needs 3, qs1 may hold at most 2"
    );
    let p = predict(&snap, "qs3", None, 2, 0);
    assert_eq!(p.verdict, Verdict::Reject);
    assert_eq!(predict(&snap, "nope", None, 1, 0).verdict, Verdict::Reject);
    assert_eq!(predict(&snap, "qs1", None, 0, 0).verdict, Verdict::Reject);
}
