//! Unit tests of the accounting and the simplest decisions.

use super::*;
use crate::model::{JobId, JobSpec, JobState, QuotaShare, UnitCapacity};
use serde::Deserialize;

/// The documents of `yaml` as the scheduler receives them: the environment and the shares
/// in name order. (shareq's `config` checks a configuration; the ones here are valid.)
pub(super) fn config(yaml: &str) -> ValidConfig {
    let mut env = None;
    let mut shares: Vec<QuotaShare> = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let mut v = serde_yaml::Value::deserialize(doc).expect("parse");
        let kind = v.as_mapping_mut().and_then(|m| m.remove("kind"));
        match kind.as_ref().and_then(|k| k.as_str()) {
            Some("ServiceEnvironment") => env = Some(serde_yaml::from_value(v).expect("env")),
            Some("QuotaShare") => shares.push(serde_yaml::from_value(v).expect("share")),
            other => panic!("unknown kind {other:?}"),
        }
    }
    shares.sort_by(|a, b| a.quota_share_name.cmp(&b.quota_share_name));
    ValidConfig {
        env: env.expect("a ServiceEnvironment"),
        shares,
    }
}

const THREE: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 3, devices: {fake: 3}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND}
---
kind: QuotaShare
quotaShareName: c
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: RESERVE}
";

fn sched(yaml: &str) -> Sched {
    let c = config(yaml);
    Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Simulated)
}

fn stats<'a>(s: &'a [ShareUnitStats], name: &str) -> &'a ShareUnitStats {
    s.iter().find(|x| x.share == name).expect("share")
}

#[test]
fn borrowing_is_attributed_to_lenders_in_name_order() {
    let mut s = sched(THREE);
    let a1 = s.submit(JobSpec::new("a1", "a", 1, 0), 0).unwrap();
    let a2 = s.submit(JobSpec::new("a2", "a", 1, 0), 0).unwrap();
    s.pass(0);
    let st = s.share_stats();
    assert_eq!(stats(&st, "a").usage, 2);
    assert_eq!(stats(&st, "a").borrowed, 1);
    // c is RESERVE: it never lends, so b lends.
    assert_eq!(stats(&st, "b").lent, 1);
    assert_eq!(stats(&st, "c").lent, 0);
    assert_eq!(stats(&st, "c").idle, 1);
    let edges = s.lending();
    assert_eq!(edges.len(), 1);
    assert_eq!(edges[0].borrower, "a");
    assert_eq!(edges[0].lender.as_deref(), Some("b"));
    assert!(s.job(a1).unwrap().is_holding() && s.job(a2).unwrap().is_holding());
    // A third job of a cannot borrow c's reserved GPU.
    let a3 = s.submit(JobSpec::new("a3", "a", 1, 0), 1).unwrap();
    s.pass(1);
    assert!(s.job(a3).unwrap().is_pending());
    assert!(
        s.reason(a3).contains("no idle capacity to borrow"),
        "{}",
        s.reason(a3)
    );
}

#[test]
fn unassigned_capacity_is_a_pool() {
    let mut s = sched(
        "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 4, devices: {fake: 4}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW, borrowLimit: 200}
",
    );
    s.submit(JobSpec::new("big", "a", 3, 0), 0).unwrap();
    s.pass(0);
    let st = s.share_stats();
    assert_eq!(stats(&st, "a").borrowed, 2);
    let edges = s.lending();
    assert_eq!(edges[0].lender, None);
    assert_eq!(edges[0].gpus, 2);
    // 4 > 1 + 200% of 1: rejected.
    assert!(s.submit(JobSpec::new("huge", "a", 4, 0), 0).is_err());
}

#[test]
fn held_back_counts_a_lenders_queue() {
    let mut s = sched(THREE);
    // b has a queued job it could run: its idle GPU is held back from a.
    let b1 = s.submit(JobSpec::new("b1", "b", 1, 0), 0).unwrap();
    assert_eq!(s.held_back(0, 0), 2); // b's waiting job + c's reserve
    s.pass(0);
    assert!(s.job(b1).unwrap().is_holding());
    assert_eq!(s.held_back(0, 0), 1);
}

#[test]
fn cancel_and_priority_on_finished_jobs_are_ignored() {
    let mut s = sched(THREE);
    let a = s.submit(JobSpec::new("a", "a", 1, 0), 0).unwrap();
    assert!(s.cancel(a, "me", 0));
    assert!(!s.cancel(a, "me", 0));
    assert_eq!(s.set_priority(a, 5, 0), Ok(false));
    assert!(s.set_priority(a, 10_000, 0).is_err());
}

#[test]
fn rejections_say_why() {
    let mut s = sched(THREE);
    let e = s.submit(JobSpec::new("x", "nosuch", 1, 0), 0).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    let e = s.submit(JobSpec::new("x", "c", 2, 0), 0).unwrap_err();
    assert!(
        e.to_string().contains("QUOTA_MANAGEMENT_LIMIT_EXCEEDED"),
        "{e}"
    );
    let e = s.submit(JobSpec::new("x", "a", 0, 0), 0).unwrap_err();
    assert!(e.to_string().contains("quantity"), "{e}");
    let e = s.submit(JobSpec::new("x", "a", 1, 10_000), 0).unwrap_err();
    assert!(e.to_string().contains("schedulingPriority"), "{e}");
}

/// A job as the store gives it back after a restart: `spec` on unit `gpu`, submitted at
/// `submitted`, queued (`running: None`) or running its first attempt on `devices` since
/// `started_at`, with nothing else to its name; a test sets the rest with `..`.
pub(super) fn restored(
    id: u64,
    spec: JobSpec,
    submitted: Time,
    running: Option<(Vec<u32>, Time)>,
) -> RestoredJob {
    RestoredJob {
        id: JobId(id),
        spec,
        unit: "gpu".into(),
        submitted,
        priority: 0,
        preempted_count: 0,
        failed_attempts: 0,
        attempts_started: u32::from(running.is_some()),
        fail_reason: None,
        deps: Vec::new(),
        array: None,
        lost_ticks: 0,
        checkpoint: None,
        holding: running.map(|(devices, started_at)| RestoredHolding {
            node: None,
            devices,
            more: Vec::new(),
            started_at,
            state: JobState::Running,
            stopping: None,
        }),
    }
}

#[test]
fn restored_jobs_keep_their_devices_order_and_ids() {
    let c = config(THREE);
    let mut s = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall);
    let held = RestoredJob {
        preempted_count: 1,
        attempts_started: 2,
        lost_ticks: 5_000,
        ..restored(4, JobSpec::new("held", "a", 1, 0), 10, Some((vec![0], 20)))
    };
    s.restore_job(held, 100).unwrap();
    // What its earlier preemptions lost is kept (SPEC §14).
    assert_eq!(s.job(JobId(4)).map(|j| j.lost_ticks), Some(5_000));
    for (id, name) in [(5, "q1"), (7, "q2")] {
        let r = restored(id, JobSpec::new(name, "b", 1, 0), id as i64, None);
        s.restore_job(r, 100).unwrap();
    }
    // A job restored twice, or onto a held device, is refused.
    let dup = restored(9, JobSpec::new("dup", "a", 1, 0), 9, Some((vec![0], 20)));
    assert!(s.restore_job(dup, 100).is_err());
    assert_eq!(s.queue(), vec![JobId(5), JobId(7)]);
    s.pass(100);
    let ev = s.take_events();
    // b's guarantee is 1: q1 starts on the lowest free device; q2 may not borrow (b is LEND).
    assert_eq!(
        ev,
        vec![Event::Started {
            job: JobId(5),
            node: None,
            devices: vec![1],
            borrowed: 0,
            more: Vec::new(),
        }]
    );
    assert_eq!(s.next_job_id(), JobId(8));
    let id = s.submit(JobSpec::new("new", "a", 1, 0), 101).unwrap();
    assert!(id.0 > 7, "ids continue after the restored ones");
}

#[test]
fn a_removed_share_keeps_its_queue_with_a_reason() {
    let c = config(THREE);
    let mut s = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Simulated);
    let run = s.submit(JobSpec::new("run", "c", 1, 0), 0).unwrap();
    let wait = s.submit(JobSpec::new("wait", "c", 1, 0), 0).unwrap();
    s.pass(0);
    let without_c: String = THREE.split("---").take(3).collect::<Vec<_>>().join("---");
    let c2 = config(&without_c);
    s.apply_config(&c2, &UnitCapacity::simulated(&c2), 1);
    s.pass(1);
    assert!(
        s.job(run).unwrap().is_holding(),
        "a removed share's running job keeps running"
    );
    assert_eq!(s.reason(wait), "quota share removed");
    let st = s.share_stats();
    let c_stats = stats(&st, "c");
    assert!(!c_stats.present);
    assert_eq!(c_stats.borrowed, 1, "all its GPUs count as borrowed");
    assert!(s.submit(JobSpec::new("x", "c", 1, 0), 2).is_err());
}

#[test]
fn reasons_name_an_unlisted_unit_and_an_oversubscribed_one() {
    // Two LEND shares of 2 on 3 GPUs: oversubscribed.
    let over = "
kind: ServiceEnvironment
name: t
capacityLimits:
- {capacityUnit: gpu, maxCapacity: 3, devices: {fake: 3}}
- {capacityUnit: h100, maxCapacity: 1, devices: {fake: 1}}
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}, {capacityUnit: h100, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND}
";
    let mut s = sched(over);
    assert!(s.oversubscribed("gpu") && !s.oversubscribed("h100"));
    let mut h100 = JobSpec::new("h", "a", 1, 0);
    h100.capacity_unit = Some("h100".into());
    let busy = s.submit(h100.clone(), 0).unwrap();
    let queued = s.submit(h100, 0).unwrap();
    let gpu = |name: &str, share: &str| {
        let mut j = JobSpec::new(name, share, 2, 0);
        j.capacity_unit = Some("gpu".into());
        j
    };
    let a = s.submit(gpu("a", "a"), 0).unwrap();
    let b = s.submit(gpu("b", "b"), 0).unwrap();
    s.pass(0);
    assert!(s.job(busy).unwrap().is_holding());
    assert!(
        s.job(a).unwrap().is_holding(),
        "first in global order starts"
    );
    let why = s.reason(b);
    assert!(
        why.contains("gpu is oversubscribed (guarantees 4 > 3 usable GPUs)"),
        "{why}"
    );
    // A reload takes h100 away from a (borrowLimit -1): its queued h100 job waits, even
    // when the h100 GPU is free, and says why.
    let without = over.replace(
        "[{capacityUnit: gpu, maxCapacity: 2}, {capacityUnit: h100, maxCapacity: 1}]",
        "[{capacityUnit: gpu, maxCapacity: 2}]",
    );
    let c = config(&without);
    s.apply_config(&c, &UnitCapacity::simulated(&c), 1);
    s.job_exited(busy, 0, 2);
    s.pass(2);
    assert!(s.job(queued).unwrap().is_pending());
    assert_eq!(
        s.reason(queued),
        "a no longer lists h100: its jobs of that unit wait until a config lists it again"
    );
}

#[test]
fn a_minimum_runtime_protects_and_the_reason_says_until_when() {
    let yaml = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}]
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
preemptionConfiguration: {minRuntimeSeconds: 30}
---
kind: QuotaShare
quotaShareName: l
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND}
";
    // The live clock: milliseconds.
    let c = config(yaml);
    let mut s = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall);
    let _b1 = s.submit(JobSpec::new("b1", "b", 1, 0), 0).unwrap();
    let b2 = s.submit(JobSpec::new("b2", "b", 1, 0), 0).unwrap();
    s.pass(0);
    assert_eq!(s.protected_until(b2), Some(30_000));
    let l1 = s.submit(JobSpec::new("l1", "l", 1, 0), 10_000).unwrap();
    s.pass(10_000);
    assert!(s.job(l1).unwrap().is_pending());
    assert_eq!(
        s.reason(l1),
        format!("waiting for job {b2} (b) to reach its minimum runtime (20s left)")
    );
    assert_eq!(s.next_protection_end(10_000), Some(30_000));
    // At the end of the protection, the pass reclaims the most recently started borrower.
    s.take_events();
    s.pass(30_000);
    assert!(s.take_events().iter().any(|e| matches!(
        e,
        Event::Preempted { job, by: Some(by), .. } if *job == b2 && *by == l1
    )));
}

#[test]
fn a_borrowing_share_knows_which_running_jobs_a_reclaim_takes_first() {
    // a (limit 1, LEND_AND_BORROW) runs three 1-GPU jobs on 3 GPUs: 2 are borrowed, and a
    // reclaim takes the most recently started first (equal priorities, no preemptions).
    let mut s = sched(
        THREE
            .replace("strategy: RESERVE", "strategy: LEND")
            .as_str(),
    );
    let a1 = s.submit(JobSpec::new("a1", "a", 1, 0), 0).unwrap();
    let a2 = s.submit(JobSpec::new("a2", "a", 1, 0), 1).unwrap();
    let a3 = s.submit(JobSpec::new("a3", "a", 1, 0), 2).unwrap();
    s.pass(2);
    assert!(s.job(a3).unwrap().is_holding());
    assert!(!s.reclaimed_first(a1));
    assert!(s.reclaimed_first(a2) && s.reclaimed_first(a3));
    // A higher priority moves a job to the back of the victim order.
    s.set_priority(a3, 5, 3).unwrap();
    assert!(s.reclaimed_first(a1) && s.reclaimed_first(a2) && !s.reclaimed_first(a3));
}

const TWO_NODES: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 8}]
nodes:
- {name: n1, devices: {gpu: {fake: 4}}}
- {name: n2, devices: {gpu: {fake: 4}}}
---
kind: QuotaShare
quotaShareName: r
capacityLimits: [{capacityUnit: gpu, maxCapacity: 3}]
resourceSharingConfiguration: {strategy: RESERVE}
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: gpu, maxCapacity: 5}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
";

#[test]
fn a_job_that_passes_the_counts_but_fits_no_node_waits_fragmented() {
    let mut s = sched(TWO_NODES);
    s.submit(JobSpec::new("b1", "b", 3, 0), 0).unwrap();
    s.pass(0);
    s.submit(JobSpec::new("b2", "b", 2, 0), 1).unwrap();
    s.pass(1);
    let r1 = s.submit(JobSpec::new("r1", "r", 3, 0), 2).unwrap();
    s.pass(2);
    assert!(s.job(r1).unwrap().is_pending());
    assert_eq!(
        s.reason(r1),
        "FRAGMENTED: 3 gpu free, at most 2 on one node"
    );
    assert!(s.fragmented_idle(0) == 3);
    // Larger than any node: refused at the door with the node's size.
    let err = s.submit(JobSpec::new("big", "b", 5, 0), 3).unwrap_err();
    assert_eq!(
        err.to_string(),
        "needs 5 gpu on one node; the largest node has 4"
    );
}

#[test]
fn a_queued_job_that_a_reload_makes_larger_than_any_node_says_so() {
    let mut s = sched(TWO_NODES);
    let b = s.submit(JobSpec::new("b1", "b", 4, 0), 0).unwrap();
    let r = s.submit(JobSpec::new("r1", "r", 3, 0), 0).unwrap();
    s.pass(0);
    let w = s.submit(JobSpec::new("w", "b", 4, 0), 1).unwrap();
    s.pass(1);
    assert!(s.job(b).unwrap().is_holding() && s.job(r).unwrap().is_holding());
    // Nodes of 2: the queued 4-GPU job can no longer fit anywhere.
    let smaller = TWO_NODES.replace(
        "- {name: n1, devices: {gpu: {fake: 4}}}\n- {name: n2, devices: {gpu: {fake: 4}}}",
        "- {name: n1, devices: {gpu: {fake: 2}}}\n- {name: n2, devices: {gpu: {fake: 2}}}\n- {name: n3, devices: {gpu: {fake: 2}}}\n- {name: n4, devices: {gpu: {fake: 2}}}",
    );
    let c = config(&smaller);
    s.apply_config(&c, &UnitCapacity::simulated(&c), 2);
    s.pass(2);
    assert_eq!(
        s.reason(w),
        "needs 4 gpu on one node; the largest node has 2"
    );
    // The running jobs lost their devices (indices 2 and 3 are gone on both nodes).
    assert!(s.job(b).unwrap().is_stopping() || !s.job(b).unwrap().is_holding());
}

#[test]
fn a_big_job_first_long_enough_reserves_its_unit_and_says_so() {
    let mut s = sched(
        "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 3, devices: {fake: 3}}]
reserveAfterSeconds: 60
---
kind: QuotaShare
quotaShareName: v
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: w
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
",
    );
    let w1 = s.submit(JobSpec::new("w1", "w", 2, 0), 0).unwrap();
    s.pass(0);
    let big = s.submit(JobSpec::new("big", "v", 2, 0), 10).unwrap();
    s.pass(10);
    assert_eq!(
        s.next_wakeup(10),
        Some(70),
        "the qualifying moment makes an instant"
    );
    assert!(s.reservation(0).is_none());
    s.pass(70);
    let r = s.reservation(0).expect("reserved");
    assert_eq!((r.job, r.since), (big, 70));
    assert_eq!(
        s.reason(big),
        "holds the gpu reservation: no other job borrows gpu until it starts (needs 2, 1 idle)"
    );
    // w's next borrower is held back, though a GPU is free.
    let w2 = s.submit(JobSpec::new("w2", "w", 1, 0), 80).unwrap();
    s.pass(80);
    assert!(s.job(w2).unwrap().is_pending());
    assert_eq!(
        s.reason(w2),
        format!("gpu is reserved for job {} (v) since t=70", big.0)
    );
    // A guaranteed start goes on.
    let v1 = s.submit(JobSpec::new("v1", "v", 1, 0), 90).unwrap();
    s.pass(90);
    assert!(s.job(v1).unwrap().is_holding());
    // Cancelling the big job ends the reservation: w2 borrows at once.
    s.cancel(big, "t", 100);
    s.pass(100);
    assert!(s.reservation(0).is_none());
    assert!(
        s.job(w2).unwrap().is_pending(),
        "no GPU is free: w1 and v1 hold all"
    );
    s.job_exited(v1, 0, 110);
    s.pass(110);
    assert!(s.job(w2).unwrap().is_holding());
    assert!(s.job(w1).unwrap().is_holding());
}

#[test]
fn a_reclaimed_reservation_start_takes_the_reservation_back_before_later_claimants() {
    // v, y and z may each hold 1 GPU and borrow; l lends 3 and reclaims them.
    let mut s = sched(
        "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 6, devices: {fake: 6}}]
reserveAfterSeconds: 60
---
kind: QuotaShare
quotaShareName: l
capacityLimits: [{capacityUnit: gpu, maxCapacity: 3}]
resourceSharingConfiguration: {strategy: LEND}
---
kind: QuotaShare
quotaShareName: v
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: y
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: z
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
",
    );
    // Every GPU taken within the guarantees: l0 (3), one job of v, y and z each.
    let l0 = s.submit(JobSpec::new("l0", "l", 3, 0), 0).unwrap();
    for share in ["v", "y", "z"] {
        s.submit(JobSpec::new("g", share, 1, 0), 0).unwrap();
    }
    s.pass(0);
    let big = s.submit(JobSpec::new("big", "v", 2, 0), 10).unwrap();
    s.pass(10);
    s.pass(70);
    assert_eq!(s.reservation(0).map(|r| r.job), Some(big));
    // l0 ends: big starts on its reservation (borrowing 1), which ends.
    s.job_exited(l0, 0, 100);
    s.pass(100);
    assert!(s.job(big).unwrap().is_holding());
    assert!(s.reservation(0).is_none());
    // y's and z's big jobs qualify while big runs; y's takes the reservation.
    let by = s.submit(JobSpec::new("by", "y", 2, 0), 110).unwrap();
    let bz = s.submit(JobSpec::new("bz", "z", 2, 0), 120).unwrap();
    s.pass(110);
    s.pass(120);
    s.pass(170);
    s.pass(180);
    assert_eq!(s.reservation(0).map(|r| r.job), Some(by));
    // l reclaims its GPUs: big is preempted and requeued, and waits while by holds the
    // reservation.
    let l1 = s.submit(JobSpec::new("l1", "l", 3, 0), 200).unwrap();
    s.pass(200);
    assert!(s.job(l1).unwrap().is_holding());
    assert!(s.job(big).unwrap().is_pending());
    assert_eq!(s.job(big).unwrap().preempted_count, 1);
    assert_eq!(s.reservation(0).map(|r| r.job), Some(by));
    // by gives it up: big takes it back at once, before bz, which qualified at 180.
    s.cancel(by, "t", 210);
    s.pass(210);
    let r = s.reservation(0).expect("reserved");
    assert_eq!((r.job, r.since), (big, 210));
    assert!(s.job(bz).unwrap().is_pending());
}

#[test]
fn a_reservation_start_that_failed_waits_anew() {
    let mut s = sched(
        "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 3, devices: {fake: 3}}]
reserveAfterSeconds: 60
---
kind: QuotaShare
quotaShareName: v
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: w
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: x
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND}
",
    );
    let w1 = s.submit(JobSpec::new("w1", "w", 2, 0), 0).unwrap();
    s.pass(0);
    let mut spec = JobSpec::new("big", "v", 2, 0);
    spec.retry_strategy = Some(crate::model::RetryStrategy { attempts: 2 });
    let big = s.submit(spec, 10).unwrap();
    s.pass(10);
    s.pass(70);
    assert_eq!(s.reservation(0).map(|r| r.job), Some(big));
    s.job_exited(w1, 0, 100);
    s.pass(100);
    assert!(s.job(big).unwrap().is_holding());
    // Its attempt fails and is retried while two guaranteed jobs take two GPUs: a failed
    // attempt keeps no place, so big waits reserveAfterSeconds anew.
    s.job_exited(big, 1, 150);
    s.submit(JobSpec::new("w2", "w", 1, 0), 150).unwrap();
    s.submit(JobSpec::new("x1", "x", 1, 0), 150).unwrap();
    s.pass(150);
    assert!(s.job(big).unwrap().is_pending());
    assert!(s.reservation(0).is_none());
    assert_eq!(s.next_wakeup(150), Some(210));
    s.pass(210);
    assert_eq!(s.reservation(0).map(|r| (r.job, r.since)), Some((big, 210)));
}

const FAIR: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}]
---
kind: QuotaShare
quotaShareName: v
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: RESERVE}
fairShare: {halfLifeSeconds: 3600, weights: {alice: 2}}
userLimit: 1
";

fn by(user: &str, name: &str) -> JobSpec {
    let mut s = JobSpec::new(name, "v", 1, 0);
    s.submitter = Some(std::sync::Arc::new(crate::model::Submitter {
        name: user.into(),
        uid: 1000,
    }));
    s
}

#[test]
fn a_user_at_the_user_limit_waits_with_the_reason_and_the_standing_counts_usage() {
    let mut s = sched(FAIR);
    let a1 = s.submit(by("alice", "a1"), 0).unwrap();
    let a2 = s.submit(by("alice", "a2"), 0).unwrap();
    s.pass(0);
    assert_eq!(s.job(a1).unwrap().state, JobState::Running);
    assert_eq!(s.reason(a2), "alice holds 1/1 of v's gpu (userLimit)");
    // Her job counts in no `waiting`: the share's idle GPU is not held back for it.
    assert_eq!(stats(&s.share_stats(), "v").queued, 1);
    s.job_exited(a1, 0, 1000);
    s.pass(1000);
    // 1000 GPU-s at a 3600 s half-life, weight 2, on a share of 2 GPUs.
    let st = s.user_standings(1000);
    let alice = st.iter().find(|u| u.user == "alice").unwrap();
    let used = 3600.0 / std::f64::consts::LN_2 * (1.0 - (-1000.0f64 / 3600.0).exp2());
    assert!((alice.usage_gpu_seconds - used).abs() < 1e-6, "{alice:?}");
    assert!((alice.delay_seconds - used / 4.0).abs() < 1e-6, "{alice:?}");
    assert_eq!(alice.weight, 2.0);
    assert!(alice.fair);
    assert_eq!(s.job(a2).unwrap().state, JobState::Running);
}

#[test]
fn usage_restored_after_a_restart_decays_from_its_instant() {
    let mut s = sched(FAIR);
    s.restore_usage(
        &[SavedUsage {
            share: "v".into(),
            user: "bob".into(),
            usage_gpu_seconds: 1000.0,
            at: 0,
        }],
        3600,
    );
    let st = s.user_standings(3600);
    let bob = st.iter().find(|u| u.user == "bob").unwrap();
    assert!((bob.usage_gpu_seconds - 500.0).abs() < 1e-6, "{bob:?}");
}

/// SPEC §13 on forgotten jobs: the live runtime drops ended jobs from the scheduler, and a
/// dependency on one is still judged by how it ended; an unknown id, a missing child and
/// too many dependencies are refused; `12:3` names child 3.
#[test]
fn dependencies_on_forgotten_jobs_children_and_limits() {
    use crate::model::{ArrayProperties, Dependency, JobRef};
    let c = config(THREE);
    let mut s = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Simulated);
    let after = |name: &str, deps: &[JobRef]| {
        let mut spec = JobSpec::new(name, "a", 1, 0);
        spec.depends_on = deps.iter().map(|&r| Dependency::on(r)).collect();
        spec
    };
    let ok = s.submit(JobSpec::new("ok", "a", 1, 0), 0).unwrap();
    let bad = s.submit(JobSpec::new("bad", "b", 1, 0), 0).unwrap();
    s.pass(0);
    s.job_exited(ok, 0, 5);
    s.job_exited(bad, 1, 5);
    s.forget(ok);
    s.forget(bad);
    assert!(s.job(ok).is_none() && s.job(bad).is_none());
    let met = s.submit(after("met", &[JobRef::job(ok.0)]), 6).unwrap();
    assert_eq!(s.job(met).unwrap().state, JobState::Runnable);
    let lost = s.submit(after("lost", &[JobRef::job(bad.0)]), 6).unwrap();
    let j = s.job(lost).unwrap();
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(
        j.fail_reason.as_ref().unwrap().to_string(),
        format!("DEPENDENCY_FAILED: job {bad} FAILED")
    );
    let e = s.submit(after("x", &[JobRef::job(999)]), 6).unwrap_err();
    assert_eq!(e.to_string(), "job 999 does not exist");
    let mut arr = JobSpec::new("arr", "c", 1, 0);
    arr.array_properties = Some(ArrayProperties { size: 4 });
    let p = s.submit(arr, 7).unwrap();
    let third = JobRef {
        job: p,
        index: Some(3),
    };
    let w = s.submit(after("w", &[third]), 7).unwrap();
    assert_eq!(s.job(w).unwrap().deps.to_vec(), vec![third.id()]);
    assert_eq!(s.label(third.id()), format!("{p}:3"));
    let e = s
        .submit(
            after(
                "y",
                &[JobRef {
                    job: p,
                    index: Some(4),
                }],
            ),
            7,
        )
        .unwrap_err();
    assert!(e.to_string().contains("no child 4"), "{e}");
    let many = vec![JobRef::job(ok.0); 21];
    let e = s.submit(after("z", &many), 7).unwrap_err();
    assert!(e.to_string().contains("at most 20"), "{e}");
    let mut one = JobSpec::new("one", "a", 1, 0);
    one.array_properties = Some(ArrayProperties { size: 1 });
    assert!(
        s.submit(one, 7)
            .unwrap_err()
            .to_string()
            .contains("2..10000")
    );
}

const ONE_GPU: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1, devices: {fake: 1}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND}
";

#[test]
fn a_withheld_gpu_makes_jobs_wait_with_why_and_comes_back() {
    let mut s = sched(ONE_GPU);
    s.device_withheld(
        None,
        "gpu",
        0,
        "a process of an earlier scheduler holds it",
        0,
    );
    // Not refused ("may hold at most 0"): it waits, saying for what.
    let j = s.submit(JobSpec::new("j", "a", 1, 0), 0).unwrap();
    s.pass(0);
    assert_eq!(s.job(j).unwrap().state, JobState::Runnable);
    assert_eq!(
        s.reason(j),
        "waits for gpu GPU 0: a process of an earlier scheduler holds it"
    );
    // More than the unit has, withheld devices included, is still refused.
    let e = s.submit(JobSpec::new("k", "a", 2, 0), 0).unwrap_err();
    assert!(e.to_string().contains("at most 1"), "{e}");
    assert!(s.device_returned("gpu", 0, 10));
    assert!(!s.device_returned("gpu", 0, 10));
    s.pass(10);
    assert_eq!(s.job(j).unwrap().state, JobState::Running);
    assert_eq!(s.job(j).unwrap().devices(), &[0]);
}
