//! The utilisation sampler's rows (`server::runtime::usage::samples`) against a known snapshot: each
//! share's own, borrowed and lent GPUs and its queue, as the snapshot carries them.

use crate::fixtures;
use shareq::server::runtime::usage::samples;

#[test]
fn a_sample_carries_the_shares_standing_and_its_queue() {
    let snap = fixtures::lab();
    let at = snap.at;
    let rows = samples(&snap, at - 60_000, at);
    assert_eq!(rows.len(), snap.shares.len());
    for (r, s) in rows.iter().zip(&snap.shares) {
        assert_eq!(r.own + r.borrowed, s.usage, "{}", s.share);
        assert_eq!(r.lent, s.lent);
        assert_eq!(r.queued_jobs as usize, s.queued);
        let gpus: u32 = snap
            .queue
            .iter()
            .filter(|j| j.share == s.share && j.unit == s.unit)
            .map(|j| j.quantity)
            .sum();
        assert_eq!(r.queued_gpus, gpus);
        assert_eq!(r.wait_max_ms > 0, s.queued > 0);
    }
    assert!(
        rows.iter().any(|r| r.borrowed > 0),
        "the lab fixture borrows"
    );
}
