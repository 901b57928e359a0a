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

/// SPEC §15: a sample of a sliced unit carries its `memoryGiB` (its figures are GiB); a
/// sample of whole GPUs carries none.
#[test]
fn a_sample_of_a_sliced_unit_says_its_gib() {
    let yaml = "kind: ServiceEnvironment\nname: lab\ncapacityLimits:\n- {capacityUnit: a100, maxCapacity: 2, devices: {fake: 2}}\n- {capacityUnit: a100-mem, maxCapacity: 160, devices: {fake: 2}, slicing: {memoryGiB: 80}}\n---\nkind: QuotaShare\nquotaShareName: vision\ncapacityLimits: [{capacityUnit: a100, maxCapacity: 2}, {capacityUnit: a100-mem, maxCapacity: 80}]\nresourceSharingConfiguration: {strategy: LEND_AND_BORROW}\n";
    let mut d = fixtures::Driver::new(yaml, "sliced").unwrap();
    let at = fixtures::NOW;
    for (unit, q) in [("a100", 1), ("a100-mem", 30)] {
        let mut spec = shareq::model::JobSpec::new("j", "vision", q, 1);
        spec.capacity_unit = Some(unit.to_string());
        spec.command = Some(shareq::model::Command::Argv(vec!["run".into()]));
        d.sched.submit(spec, at - 1_000).unwrap();
        d.pass(at - 1_000);
    }
    let snap = d.snapshot(at, at);
    let rows = samples(&snap, at - 60_000, at);
    let of = |unit: &str| rows.iter().find(|r| r.unit == unit).unwrap();
    assert_eq!((of("a100").own, of("a100").slice_gib), (1, None));
    assert_eq!(
        (of("a100-mem").own, of("a100-mem").slice_gib),
        (30, Some(80))
    );
    assert_eq!(of("a100-mem").limit, 80);
}
