//! Unit tests of SPEC §14 in the core: an exit during a preemption stop is the preemption
//! (both orders of exit report and release), the victim order by effective last save,
//! the lost work reported with the end of a preemption, and the stop's notice and grace.

use super::tests::{config, restored};
use super::*;
use crate::model::{JobSpec, JobState, UnitCapacity};

/// `own` lends 1 GPU that `bor` borrows; `bor` warns 60 s ahead and has a 20 s grace.
const LEND: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 3, devices: {fake: 3}}]
preemption: {gracePeriodSeconds: 30, spreadSeconds: 0}
---
kind: QuotaShare
quotaShareName: bor
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
preemptionConfiguration: {gracePeriodSeconds: 20, notice: {signal: SIGUSR1, seconds: 60}}
---
kind: QuotaShare
quotaShareName: own
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND}
";

fn wall(yaml: &str) -> Sched {
    let c = config(yaml);
    Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall)
}

/// Three borrowers running on a live clock, and a job of `own` that reclaims one GPU.
fn reclaim(s: &mut Sched, retries: Option<u32>) -> (JobId, JobId) {
    let mut spec = JobSpec::new("b", "bor", 1, 0);
    spec.preemption_retries_before_termination = retries;
    let k = s.submit(JobSpec::new("k", "bor", 1, 0), 0).unwrap();
    s.pass(0);
    let b1 = s.submit(spec, 10).unwrap();
    s.pass(10);
    let b2 = s.submit(JobSpec::new("b2", "bor", 1, 0), 20).unwrap();
    s.pass(20);
    assert!([k, b1, b2].iter().all(|&j| s.job(j).unwrap().is_holding()));
    // b1 saved last (at 30): it is the victim, though b2 started later.
    assert!(s.checkpoint(b1, 1, 30));
    let o = s.submit(JobSpec::new("o", "own", 2, 0), 40).unwrap();
    s.take_events();
    s.pass(40);
    let ev = s.take_events();
    let victims: Vec<JobId> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Preempted { job, .. } => Some(*job),
            _ => None,
        })
        .collect();
    assert_eq!(victims, vec![b1, b2], "the latest last save first");
    (b1, o)
}

fn lost_of(ev: &[Event], id: JobId) -> Option<Lost> {
    ev.iter().find_map(|e| match e {
        Event::Requeued { job, lost } | Event::Failed { job, lost, .. } if *job == id => *lost,
        _ => None,
    })
}

#[test]
fn exit_then_release_during_a_preemption_is_the_preemption() {
    for code in [0, 143, 1] {
        let mut s = wall(LEND);
        let (b1, _) = reclaim(&mut s, None);
        s.job_exited(b1, code, 50);
        s.gpus_released(b1, 51);
        let j = s.job(b1).unwrap();
        assert_eq!(j.state, JobState::Runnable, "exit {code} is requeued");
        assert_eq!((j.preempted_count, j.failed_attempts), (1, 0));
        let ev = s.take_events();
        assert!(!ev.iter().any(|e| matches!(e, Event::Succeeded { .. })));
        let lost = lost_of(&ev, b1).expect("lost reported");
        assert_eq!((lost.since, lost.until, lost.gpu_ticks()), (30, 50, 20));
        assert!(lost.checkpointed && lost.noticed);
        let requeues = ev
            .iter()
            .filter(|e| matches!(e, Event::Requeued { job, .. } if *job == b1))
            .count();
        assert_eq!(requeues, 1, "the release after the exit is ignored");
    }
}

#[test]
fn release_then_exit_during_a_preemption_is_the_preemption() {
    for code in [0, 143] {
        let mut s = wall(LEND);
        let (b1, _) = reclaim(&mut s, None);
        s.gpus_released(b1, 55);
        s.job_exited(b1, code, 56);
        let j = s.job(b1).unwrap();
        assert_eq!(j.state, JobState::Runnable);
        assert_eq!((j.preempted_count, j.failed_attempts), (1, 0));
        let ev = s.take_events();
        assert_eq!(lost_of(&ev, b1).map(|l| l.gpu_ticks()), Some(25));
        assert!(!ev.iter().any(|e| matches!(e, Event::Succeeded { .. })));
    }
}

#[test]
fn an_exit_during_a_preemption_with_no_retries_left_fails_with_lost() {
    for exit_first in [true, false] {
        let mut s = wall(LEND);
        let (b1, _) = reclaim(&mut s, Some(0));
        if exit_first {
            s.job_exited(b1, 0, 70);
            s.gpus_released(b1, 71);
        } else {
            s.gpus_released(b1, 70);
            s.job_exited(b1, 0, 71);
        }
        let j = s.job(b1).unwrap();
        assert_eq!(j.state, JobState::Failed);
        assert_eq!(j.fail_reason, Some(FailReason::PreemptionRetriesExhausted));
        let ev = s.take_events();
        assert_eq!(lost_of(&ev, b1).map(|l| l.gpu_ticks()), Some(40));
    }
}

#[test]
fn exits_outside_a_preemption_keep_their_meaning() {
    let mut s = wall(LEND);
    let a = s.submit(JobSpec::new("a", "bor", 1, 0), 0).unwrap();
    let b = s.submit(JobSpec::new("b", "bor", 1, 0), 0).unwrap();
    s.pass(0);
    s.job_exited(a, 0, 5);
    assert_eq!(s.job(a).unwrap().state, JobState::Succeeded);
    s.timeout(b, 6);
    s.job_exited(b, 0, 7);
    assert_eq!(s.job(b).unwrap().state, JobState::Failed);
    assert_eq!(s.job(b).unwrap().fail_reason, Some(FailReason::Timeout));
}

#[test]
fn a_stop_keeps_the_plan_it_began_with() {
    let mut s = wall(LEND);
    let (b1, _) = reclaim(&mut s, None);
    let plan = s.stop_plan(b1).unwrap();
    assert_eq!(
        (plan.notice_seconds(), plan.grace, plan.longest()),
        (60, 20, 80)
    );
    // A reload that drops the notice and the grace changes only later stops.
    let later = LEND.replace(
        "preemptionConfiguration: {gracePeriodSeconds: 20, notice: {signal: SIGUSR1, seconds: 60}}",
        "",
    );
    let c = config(&later);
    s.apply_config(&c, &UnitCapacity::simulated(&c), 45);
    assert_eq!(s.stop_plan(b1).unwrap().longest(), 80);
    let k = s.jobs().find(|j| j.name() == "k").unwrap().id;
    assert_eq!(
        s.stop_plan(k).unwrap(),
        StopPlan {
            notice: None,
            grace: 30
        }
    );
}

#[test]
fn cancels_and_device_losses_get_no_notice() {
    let mut s = wall(LEND);
    let a = s.submit(JobSpec::new("a", "bor", 1, 0), 0).unwrap();
    s.pass(0);
    s.cancel(a, "t", 5);
    let plan = s.stop_plan(a).unwrap();
    assert_eq!((plan.notice, plan.grace), (None, 20));
}

#[test]
fn a_checkpoint_of_another_attempt_or_an_older_one_is_not_taken() {
    let mut s = wall(LEND);
    let a = s.submit(JobSpec::new("a", "bor", 1, 0), 0).unwrap();
    s.pass(0);
    assert!(!s.checkpoint(a, 2, 5), "no such attempt");
    assert!(s.checkpoint(a, 1, 5));
    assert!(!s.checkpoint(a, 1, 4), "older than the last save");
    assert_eq!(s.job(a).unwrap().last_save, Some(5));
    let q = s.submit(JobSpec::new("q", "bor", 1, 0), 0).unwrap();
    assert!(!s.checkpoint(q, 0, 5), "not running");
}

#[test]
fn a_job_that_never_saves_is_ordered_by_its_start() {
    let mut s = wall(LEND);
    let b1 = s.submit(JobSpec::new("b1", "bor", 1, 0), 0).unwrap();
    s.pass(0);
    let b2 = s.submit(JobSpec::new("b2", "bor", 1, 0), 10).unwrap();
    s.pass(10);
    let b3 = s.submit(JobSpec::new("b3", "bor", 1, 0), 20).unwrap();
    s.pass(20);
    // b1 saved at 15: later than b2's start, earlier than b3's.
    assert!(s.checkpoint(b1, 1, 15));
    s.submit(JobSpec::new("o", "own", 1, 0), 30).unwrap();
    s.take_events();
    s.pass(30);
    let first = s.take_events().into_iter().find_map(|e| match e {
        Event::Preempted { job, .. } => Some(job),
        _ => None,
    });
    assert_eq!(first, Some(b3));
    let _ = b2;
}

#[test]
fn a_live_report_keeps_its_note_and_comes_back_with_a_restore() {
    let mut s = wall(LEND);
    let (b, _) = reclaim_free(&mut s);
    assert!(!s.report_checkpoint(b, 2, 5, None), "not its attempt");
    assert!(s.report_checkpoint(b, 1, 5, Some("step7".into())));
    assert_eq!(s.job(b).unwrap().last_save, Some(5));
    // Two at one instant: the second's note stays, the last save does not move.
    assert!(s.report_checkpoint(b, 1, 5, Some("step8".into())));
    let cp = s.job(b).unwrap().checkpoint.clone().unwrap();
    assert_eq!(
        (cp.at, cp.attempt, cp.note.as_deref()),
        (5, 1, Some("step8"))
    );
    // A report while a stop is under way is taken; ended, the job's checkpoint stays.
    s.cancel(b, "t", 6);
    assert!(s.report_checkpoint(b, 1, 6, Some("late".into())));
    s.gpus_released(b, 7);
    let kept = s.job(b).and_then(|j| j.checkpoint.clone()).unwrap();
    assert_eq!((kept.at, kept.note.as_deref()), (6, Some("late")));
    assert!(!s.report_checkpoint(b, 1, 8, None), "its GPUs are released");
    let q = s.submit(JobSpec::new("q", "bor", 1, 0), 8).unwrap();
    assert!(
        !s.report_checkpoint(q, 0, 9, None),
        "queued: nothing to report for"
    );

    // Restored holding: an adopted attempt that reported keeps its last save.
    let c = super::tests::config(LEND);
    let mut r = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall);
    let restored = RestoredJob {
        attempts_started: 2,
        checkpoint: Some(Checkpoint {
            at: 50,
            attempt: 2,
            note: Some("x".into()),
        }),
        ..restored(3, JobSpec::new("a", "bor", 1, 0), 0, Some((vec![0], 40)))
    };
    r.restore_job(restored.clone(), 60).unwrap();
    assert_eq!(r.job(JobId(3)).unwrap().last_save, Some(50));
    // A checkpoint of an earlier attempt is the job's, not the adopted attempt's save.
    let mut r2 = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall);
    let earlier = RestoredJob {
        checkpoint: Some(Checkpoint {
            at: 30,
            attempt: 1,
            note: None,
        }),
        ..restored
    };
    r2.restore_job(earlier, 60).unwrap();
    let j = r2.job(JobId(3)).unwrap();
    assert_eq!(
        (j.last_save, j.checkpoint.as_ref().map(|c| c.at)),
        (None, Some(30))
    );
}

/// A borrower running on the lender's GPU, nothing else (the job and the time).
fn reclaim_free(s: &mut Sched) -> (JobId, Time) {
    let b = s.submit(JobSpec::new("b", "bor", 1, 0), 0).unwrap();
    s.pass(0);
    assert!(s.job(b).unwrap().is_holding());
    (b, 0)
}

#[test]
fn a_restored_stop_is_planned_again_by_its_cause() {
    let mut s = wall(LEND);
    let restored = |id: u64, device: u32, cause: StopCause| {
        let mut r = restored(
            id,
            JobSpec::new("r", "bor", 1, 0),
            0,
            Some((vec![device], 5)),
        );
        if let Some(h) = r.holding.as_mut() {
            h.stopping = Some(cause);
        }
        r
    };
    let reclaim = StopCause::Preempt {
        by: None,
        reason: PreemptReason::CrossShareReclaim,
    };
    s.restore_job(restored(1, 0, reclaim), 100).unwrap();
    s.restore_job(restored(2, 1, StopCause::Cancel), 100)
        .unwrap();
    // A reclaim under way when the scheduler stopped goes on with its share's notice (the
    // supervisor keeps its own times); a cancel has none.
    let plan = s.stop_plan(JobId(1)).unwrap();
    assert_eq!((plan.notice_seconds(), plan.grace), (60, 20));
    assert_eq!(s.job(JobId(1)).unwrap().stopping_since(), Some(100));
    let plan = s.stop_plan(JobId(2)).unwrap();
    assert_eq!((plan.notice, plan.grace), (None, 20));
}
