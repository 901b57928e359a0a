//! Unit tests of the accounting and the simplest decisions.

use super::*;
use crate::config::{parse_documents, validate};
use crate::model::JobSpec;

fn config(yaml: &str) -> ValidConfig {
    validate(parse_documents(yaml, None).expect("parse")).expect("valid")
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
    Sched::new(&c, &UnitCapacity::simulated(&c), true)
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
    assert!(e.0.contains("does not exist"), "{e}");
    let e = s.submit(JobSpec::new("x", "c", 2, 0), 0).unwrap_err();
    assert!(e.0.contains("QUOTA_MANAGEMENT_LIMIT_EXCEEDED"), "{e}");
    let e = s.submit(JobSpec::new("x", "a", 0, 0), 0).unwrap_err();
    assert!(e.0.contains("quantity"), "{e}");
    let e = s.submit(JobSpec::new("x", "a", 1, 10_000), 0).unwrap_err();
    assert!(e.0.contains("schedulingPriority"), "{e}");
}
