//! Unit tests of SPEC §15 in the core: a unit sliced by memory counts GiB, each device is
//! a slot whose room is its unassigned GiB (best fit, `FRAGMENTED` in GiB, the device
//! map, a lost device, the reservation's device, reloads that change the GiB, restored
//! jobs sharing a device, replay's `auto` devices), and a request above a device's GiB is
//! refused before any count; a job over its GiB is reported, or with `stop` fails
//! `OVER_MEMORY` without a retry.

use super::tests::{config, restored};
use super::*;
use crate::model::{JobSpec, JobState, UnitCapacity};

/// Two fake devices of 80 GiB, all of it guaranteed to `a`; `b` borrows.
const MEM: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: mem, maxCapacity: 160, devices: {fake: 2}, slicing: {memoryGiB: 80}}]
reserveAfterSeconds: 10
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: mem, maxCapacity: 120}]
resourceSharingConfiguration: {strategy: LEND}
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: mem, maxCapacity: 40}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
";

fn sched(yaml: &str) -> Sched {
    let c = config(yaml);
    Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Simulated)
}

/// The jobs preempted (DEVICE_LOST) since the last look.
fn preempted(s: &mut Sched) -> Vec<JobId> {
    s.take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Preempted {
                job,
                reason: PreemptReason::DeviceLost,
                ..
            } => Some(job),
            _ => None,
        })
        .collect()
}

fn on(s: &Sched, id: JobId) -> Vec<u32> {
    s.job(id).expect("job").devices().to_vec()
}

#[test]
fn gib_go_to_the_device_with_the_least_room_that_fits_and_fragments_say_gib() {
    let mut s = sched(MEM);
    assert_eq!(s.usable("mem"), 160);
    let a1 = s.submit(JobSpec::new("a1", "a", 62, 0), 0).unwrap();
    s.pass(0);
    let a2 = s.submit(JobSpec::new("a2", "a", 38, 0), 1).unwrap();
    s.pass(1);
    // a1: a tie (80 and 80) goes to device 0; a2 does not fit its 18 left: device 1.
    assert_eq!((on(&s, a1), on(&s, a2)), (vec![0], vec![1]));
    let a3 = s.submit(JobSpec::new("a3", "a", 12, 0), 2).unwrap();
    s.pass(2);
    // Best fit: device 0 has 18, device 1 has 42: the least room that fits.
    assert_eq!(on(&s, a3), vec![0]);
    let b1 = s.submit(JobSpec::new("b1", "b", 36, 0), 3).unwrap();
    s.pass(3);
    assert_eq!(on(&s, b1), vec![1]);
    // 12 GiB free in all now: 6 on device 0, 6 on device 1.
    let a4 = s.submit(JobSpec::new("a4", "a", 8, 0), 4).unwrap();
    s.pass(4);
    assert!(s.job(a4).unwrap().is_pending());
    // Within a's guarantee and the counts allow it, but no device has 8 GiB, and no
    // one borrows to reclaim from.
    assert_eq!(
        s.reason(a4),
        "FRAGMENTED: 12 GiB free, at most 6 on one mem device"
    );
    assert_eq!(s.used("mem"), 148);
}

#[test]
fn a_job_that_passes_the_counts_but_fits_no_device_waits_fragmented() {
    let mut s = sched(
        "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: mem, maxCapacity: 160, devices: {fake: 2}, slicing: {memoryGiB: 80}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: mem, maxCapacity: 160}]
resourceSharingConfiguration: {strategy: RESERVE}
",
    );
    let a1 = s.submit(JobSpec::new("a1", "a", 62, 0), 0).unwrap();
    let a2 = s.submit(JobSpec::new("a2", "a", 68, 0), 0).unwrap();
    s.pass(0);
    assert_eq!((on(&s, a1), on(&s, a2)), (vec![0], vec![1]));
    let a3 = s.submit(JobSpec::new("a3", "a", 20, 0), 1).unwrap();
    s.pass(1);
    assert!(s.job(a3).unwrap().is_pending());
    assert_eq!(
        s.reason(a3),
        "FRAGMENTED: 30 GiB free, at most 18 on one mem device"
    );
    assert_eq!(s.fragmented_idle(0), 30);
    // The device map: each device once per job on it.
    let map = s.device_map("mem");
    let jobs: Vec<(u32, Option<JobId>)> = map.iter().map(|x| (x.1, x.2)).collect();
    assert_eq!(jobs, vec![(0, Some(a1)), (1, Some(a2))]);
    // When a1 ends, a3 goes to device 0 (80 free there, 12 on device 1).
    s.job_exited(a1, 0, 2);
    s.pass(2);
    assert_eq!(on(&s, a3), vec![0]);
}

#[test]
fn more_gib_than_a_device_has_is_refused_before_any_count() {
    let mut s = sched(MEM);
    // b may hold at most 40 + unlimited borrowing; a at most 120: 81 is over a device.
    let err = s.submit(JobSpec::new("big", "a", 81, 0), 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "needs 81 GiB of mem on one device; each mem device has 80 GiB"
    );
    // Even where the share's limit would refuse it too, the device's GiB are named.
    let mut small = sched(&MEM.replace("maxCapacity: 120", "maxCapacity: 30"));
    let err = small
        .submit(JobSpec::new("big", "a", 90, 0), 0)
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("needs 90 GiB of mem on one device")
    );
}

#[test]
fn a_lost_device_preempts_every_job_on_it_and_takes_its_gib() {
    let mut s = sched(MEM);
    let a1 = s.submit(JobSpec::new("a1", "a", 30, 0), 0).unwrap();
    let a2 = s.submit(JobSpec::new("a2", "a", 40, 0), 0).unwrap();
    let a3 = s.submit(JobSpec::new("a3", "a", 50, 0), 0).unwrap();
    s.pass(0);
    assert_eq!(
        (on(&s, a1), on(&s, a2), on(&s, a3)),
        (vec![0], vec![0], vec![1])
    );
    s.take_events();
    s.device_lost(None, "mem", 0, 1);
    assert_eq!(s.usable("mem"), 80);
    assert_eq!(preempted(&mut s), vec![a1, a2]);
    assert!(s.job(a3).unwrap().is_holding());
}

#[test]
fn a_sliced_reservation_holds_the_device_with_the_most_gib_free() {
    let mut s = sched(MEM);
    let a1 = s.submit(JobSpec::new("a1", "a", 70, 0), 0).unwrap();
    let a2 = s.submit(JobSpec::new("a2", "a", 20, 0), 0).unwrap();
    s.pass(0);
    assert_eq!((on(&s, a1), on(&s, a2)), (vec![0], vec![1]));
    // b asks 70, more than its 40: it can only borrow, and a3 (within a's guarantee)
    // takes device 1's GiB first: 45 free, b waits.
    let b = s.submit(JobSpec::new("b", "b", 70, 0), 1).unwrap();
    let a3 = s.submit(JobSpec::new("a3", "a", 25, 0), 1).unwrap();
    s.pass(1);
    assert!(s.job(b).unwrap().is_pending());
    assert!(s.job(a3).unwrap().is_holding());
    s.pass(11);
    let r = s.reservation_of("mem").expect("b reserves mem after 10 s");
    assert_eq!(r.job, b);
    // Device 0 has 10 free, device 1 has 35: the reservation is on device 1.
    let slot = r.node.expect("a sliced reservation is on one device");
    assert_eq!(s.slot_name(0, slot), "device 1");
}

#[test]
fn a_reload_that_stops_slicing_a_unit_takes_its_jobs_off_their_gib() {
    let mut s = sched(MEM);
    let a1 = s.submit(JobSpec::new("a1", "a", 30, 0), 0).unwrap();
    s.pass(0);
    let whole = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: mem, maxCapacity: 2, devices: {fake: 2}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: mem, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND}
";
    let c = config(whole);
    s.take_events();
    s.apply_config(&c, &UnitCapacity::simulated(&c), 1);
    assert_eq!(preempted(&mut s), vec![a1]);
    assert_eq!(s.usable("mem"), 2);
}

#[test]
fn fewer_gib_per_device_keep_the_jobs_that_still_fit_whichever_gib_they_held() {
    let one = |gib: u32| {
        format!(
            "
kind: ServiceEnvironment
name: t
capacityLimits: [{{capacityUnit: mem, maxCapacity: {gib}, devices: {{fake: 1}}, slicing: {{memoryGiB: {gib}}}}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{{capacityUnit: mem, maxCapacity: {gib}}}]
resourceSharingConfiguration: {{strategy: LEND}}
"
        )
    };
    let mut s = sched(&one(80));
    let a1 = s.submit(JobSpec::new("a1", "a", 30, 0), 0).unwrap();
    let a2 = s.submit(JobSpec::new("a2", "a", 40, 0), 0).unwrap();
    s.pass(0);
    // a2 holds the GiB after a1's; a1 ends, and the device shrinks to 40 GiB.
    s.job_exited(a1, 0, 1);
    s.pass(1);
    let c = config(&one(40));
    s.take_events();
    s.apply_config(&c, &UnitCapacity::simulated(&c), 2);
    assert_eq!(preempted(&mut s), Vec::<JobId>::new());
    assert!(s.job(a2).unwrap().is_holding());
    assert_eq!(s.used("mem"), 40);
    // Nothing is left: a 1 GiB job waits; at 30 GiB a2 no longer fits and goes.
    let a3 = s.submit(JobSpec::new("a3", "a", 1, 0), 3).unwrap();
    s.pass(3);
    assert!(s.job(a3).unwrap().is_pending());
    let c = config(&one(30));
    s.apply_config(&c, &UnitCapacity::simulated(&c), 4);
    assert_eq!(preempted(&mut s), vec![a2]);
}

#[test]
fn auto_devices_of_a_sliced_unit_in_replay_are_ceil_of_its_gib() {
    let c = config(&MEM.replace("maxCapacity: 160, devices: {fake: 2}", "maxCapacity: 170"));
    let caps = UnitCapacity::simulated(&c);
    assert_eq!(caps[0].devices, vec![0, 1, 2]);
    let s = Sched::new(&c, &caps, Clock::Simulated);
    assert_eq!(s.usable("mem"), 170);
}

#[test]
fn jobs_restored_on_one_sliced_device_share_it_by_their_gib() {
    let c = config(MEM);
    let mut s = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall);
    for (id, gib) in [(1u64, 50u32), (2, 30)] {
        let r = RestoredJob {
            unit: "mem".into(),
            ..restored(
                id,
                JobSpec::new("held", "a", gib, 0),
                10,
                Some((vec![1], 20)),
            )
        };
        s.restore_job(r, 100).unwrap();
    }
    assert_eq!(s.used("mem"), 80);
    assert_eq!(on(&s, JobId(1)), vec![1]);
    // Device 1 is full: a new job goes to device 0.
    let a3 = s.submit(JobSpec::new("a3", "a", 10, 0), 100).unwrap();
    s.pass(100);
    assert_eq!(on(&s, a3), vec![0]);
}

/// A job with three attempts, so that a retry would show.
fn retried(name: &str, gib: u32) -> JobSpec {
    let mut j = JobSpec::new(name, "a", gib, 0);
    j.retry_strategy = Some(crate::model::RetryStrategy { attempts: 3 });
    j
}

#[test]
fn over_memory_with_stop_fails_the_job_without_a_retry() {
    for release_first in [true, false] {
        let mut s = sched(MEM);
        let a = s.submit(retried("a", 20), 0).unwrap();
        s.pass(0);
        s.take_events();
        s.over_memory(a, 27, 20, true, 5);
        let ev = s.take_events();
        assert!(ev.contains(&Event::OverMemory {
            job: a,
            held_gib: 27,
            of_gib: 20,
            stop: true
        }));
        assert!(s.job(a).unwrap().is_stopping());
        // A second report while it stops changes nothing.
        s.over_memory(a, 28, 20, true, 6);
        assert!(s.take_events().is_empty());
        if release_first {
            s.gpus_released(a, 7);
            s.job_exited(a, 137, 8);
        } else {
            s.job_exited(a, 137, 7);
            s.gpus_released(a, 8);
        }
        let j = s.job(a).unwrap();
        assert_eq!(j.state, JobState::Failed);
        assert_eq!(j.fail_reason, Some(FailReason::OverMemory));
        assert_eq!(FailReason::OverMemory.code(), "OVER_MEMORY");
        let ev = s.take_events();
        assert!(ev.contains(&Event::Failed {
            job: a,
            reason: FailReason::OverMemory,
            lost: None
        }));
        assert!(!ev.iter().any(|e| matches!(e, Event::Requeued { .. })));
    }
}

#[test]
fn over_memory_without_stop_only_reports() {
    let mut s = sched(MEM);
    let a = s.submit(retried("a", 20), 0).unwrap();
    s.pass(0);
    s.take_events();
    s.over_memory(a, 27, 20, false, 5);
    assert_eq!(
        s.take_events(),
        vec![Event::OverMemory {
            job: a,
            held_gib: 27,
            of_gib: 20,
            stop: false
        }]
    );
    let j = s.job(a).unwrap();
    assert!(j.is_holding() && !j.is_stopping());
    s.job_exited(a, 0, 9);
    assert_eq!(s.job(a).unwrap().state, JobState::Succeeded);
    s.take_events();
    // A job that holds nothing is not reported.
    s.over_memory(a, 27, 20, false, 10);
    assert!(s.take_events().is_empty());
}

#[test]
fn a_sliced_unit_stops_overuse_only_when_it_says_stop() {
    let s = sched(MEM);
    let mem = s.unit_indexes().find(|&u| s.unit_name(u) == "mem").unwrap();
    assert!(!s.overuse_stops(mem));
    let s = sched(&MEM.replace("memoryGiB: 80}", "memoryGiB: 80, overuse: STOP}"));
    assert!(s.overuse_stops(mem));
}
