//! The forecast (SPEC §11) against what the real scheduler then does: start estimates,
//! the submit form's prediction and the config dry run, each run on a copy of a
//! live-style scheduler (milliseconds, victims release only when told).

use crate::fixtures::{AWS_CONFIG, Driver, NOW};
use shareq::config::{parse_documents, validate};
use shareq::forecast::{self, Estimate, Runtimes, Verdict};
use shareq::model::{JobSpec, UnitCapacity};
use shareq::sched::{Event, Sched};

const S: i64 = 1000;

fn spec(name: &str, share: &str, gpus: u32, prio: u32, timeout: Option<u64>) -> JobSpec {
    let mut s = JobSpec::new(name, share, gpus, prio);
    s.timeout_seconds = timeout;
    s
}

fn submit(d: &mut Driver, s: JobSpec, at: i64) -> shareq::model::JobId {
    let id = d.sched.submit(s, at).unwrap();
    d.pass(at);
    id
}

/// Drive the real scheduler as the forecast assumed: each listed job exits at its end.
fn started_at(
    d: &mut Driver,
    ends: &[(shareq::model::JobId, i64)],
    job: shareq::model::JobId,
) -> Option<i64> {
    let mut ends = ends.to_vec();
    ends.sort_by_key(|&(_, t)| t);
    for (id, t) in ends {
        d.sched.job_exited(id, 0, t);
        d.sched.pass(t);
        for ev in d.sched.take_events() {
            if let Event::Started { job: j, .. } = ev
                && j == job
            {
                return Some(t);
            }
        }
    }
    None
}

#[test]
fn estimates_follow_timeouts_and_match_what_happens() {
    let mut d = Driver::new(AWS_CONFIG, "aws").unwrap();
    // qs1 takes all 3 GPUs (1 guaranteed, 2 borrowed), ending at 100 s, 200 s, 300 s.
    let a = submit(&mut d, spec("a", "qs1", 1, 0, Some(100)), NOW);
    let b = submit(&mut d, spec("b", "qs1", 1, 0, Some(200)), NOW);
    // qs1's next job waits: qs3 reserves its GPU, qs2 lends it only while idle.
    let c = submit(&mut d, spec("c", "qs1", 1, 0, Some(50)), NOW);
    let e = submit(&mut d, spec("e", "qs1", 2, 0, Some(50)), NOW);
    assert!(d.sched.job(c).unwrap().is_pending());
    let est = forecast::estimate(d.sched.clone(), NOW + S, &Runtimes::default());
    assert_eq!(
        est.of(a),
        Estimate::NotYet,
        "running jobs carry no estimate"
    );
    let ec = est.of(c).start().expect("c gets an estimate");
    let ee = est.of(e).start().expect("e gets an estimate");
    assert_eq!(ec, NOW + 100 * S, "c starts when a times out");
    assert!(ee > ec, "{ee} after {ec}");
    // What really happens when the jobs end as the forecast assumed.
    let ends = [(a, NOW + 100 * S), (b, NOW + 200 * S)];
    assert_eq!(started_at(&mut d, &ends, c), Some(ec));
}

#[test]
fn history_gives_ranges_and_unknown_ends_give_lower_bounds() {
    let mut d = Driver::new(AWS_CONFIG, "aws").unwrap();
    let a = submit(&mut d, spec("a", "qs3", 1, 0, None), NOW);
    let w = submit(&mut d, spec("w", "qs3", 1, 0, None), NOW);
    // No history and no timeout: a's end is unknown, so w's start is only a lower bound,
    // naming a; never `>7d` for that reason alone (SPEC §11).
    let none = forecast::estimate(d.sched.clone(), NOW, &Runtimes::default());
    let Estimate::AtLeast { from, why } = none.of(w) else {
        panic!("a lower bound: {:?}", none.of(w));
    };
    assert_eq!(from, NOW + 1, "not before a could end");
    assert_eq!(why, format!("job {a} (qs3) has no run-time history"));
    assert!(none.of(w).label(NOW, NOW, 0).starts_with("≥ "));
    assert_eq!(
        none.of(w).kind(NOW),
        Some(forecast::EstimateKind::LowerBound)
    );
    // qs3's attempts ran 30 s to 120 s: a (started at NOW) ends between its p25 and p75.
    let r = Runtimes::from_samples([30, 60, 90, 100, 120].map(|s| ("qs3".to_string(), s * 1000)));
    let est = forecast::estimate(d.sched.clone(), NOW + 10 * S, &r);
    assert_eq!(
        est.of(w),
        Estimate::Range {
            earliest: NOW + 60 * S,
            start: NOW + 90 * S,
            latest: NOW + 100 * S
        }
    );
    // Having outlived 30 s and 60 s, a is predicted from the three that ran longer.
    let est = forecast::estimate(d.sched.clone(), NOW + 70 * S, &r);
    assert_eq!(
        est.of(w),
        Estimate::Range {
            earliest: NOW + 90 * S,
            start: NOW + 100 * S,
            latest: NOW + 120 * S
        }
    );
    // Past all but one of them: no source but the timeout, and a has none: a lower bound.
    let est = forecast::estimate(d.sched.clone(), NOW + 110 * S, &r);
    assert!(
        matches!(est.of(w), Estimate::AtLeast { .. }),
        "{:?}",
        est.of(w)
    );
    // A declared runtime comes first, while the job has run less.
    let mut e = d.sched.clone();
    let x = e.submit(
        JobSpec {
            expected_runtime_seconds: Some(40),
            ..spec("x", "qs3", 1, 0, None)
        },
        NOW + 10 * S,
    );
    let x = x.unwrap();
    let est = forecast::estimate(e, NOW + 10 * S, &r);
    // w starts when a ends (60–100 s), then x after w: w's own prediction is the share's.
    let Estimate::Range { earliest, .. } = est.of(x) else {
        panic!("{:?}", est.of(x));
    };
    assert_eq!(
        earliest,
        NOW + 120 * S,
        "a's p25 end (60 s) + w's p25 run (60 s)"
    );
}

#[test]
fn a_declared_runtime_predicts_the_running_job_until_it_has_run_that_long() {
    let mut d = Driver::new(AWS_CONFIG, "aws").unwrap();
    let a = JobSpec {
        expected_runtime_seconds: Some(40),
        ..spec("a", "qs3", 1, 0, Some(300))
    };
    submit(&mut d, a, NOW);
    let w = submit(&mut d, spec("w", "qs3", 1, 0, None), NOW);
    let est = forecast::estimate(d.sched.clone(), NOW + 10 * S, &Runtimes::default());
    let at = NOW + 40 * S;
    assert_eq!(
        est.of(w),
        Estimate::Range {
            earliest: at,
            start: at,
            latest: at
        }
    );
    // Run past it: the timeout (the only other source) says when.
    let est = forecast::estimate(d.sched.clone(), NOW + 50 * S, &Runtimes::default());
    assert_eq!(est.of(w).start(), Some(NOW + 300 * S));
}

/// Predict, then submit the same job to the real scheduler and check what happened.
fn predict_then_submit(d: &mut Driver, s: JobSpec) -> forecast::Prediction {
    let p = forecast::predict(d.sched.clone(), s.clone(), NOW, &Runtimes::default());
    let before = d.sched.next_job_id();
    let r = d.sched.submit(s, NOW);
    d.sched.pass(NOW);
    let events = d.sched.take_events();
    match p.verdict {
        Verdict::Reject => assert_eq!(r.unwrap_err().to_string(), p.why),
        _ => {
            let id = r.unwrap();
            assert_eq!(id, before);
            let started = events.iter().find_map(|e| match e {
                Event::Started { job, borrowed, .. } if *job == id => Some(*borrowed),
                _ => None,
            });
            let preempted = events
                .iter()
                .any(|e| matches!(e, Event::Preempted { by: Some(b), .. } if *b == id));
            match p.verdict {
                Verdict::StartNow => assert_eq!(started, Some(0), "{p:?}"),
                Verdict::Borrow => assert!(started.is_some_and(|b| b > 0), "{p:?}"),
                Verdict::Preempt => assert!(preempted && started.is_none(), "{p:?}"),
                Verdict::Wait => {
                    assert!(started.is_none() && !preempted, "{p:?}");
                    assert_eq!(d.sched.reason(id), p.why);
                }
                Verdict::Reject => unreachable!(),
            }
        }
    }
    // Carry the decisions out as the runtime would: victims stop at once.
    for e in events {
        if let Event::Preempted { job, .. } = e {
            d.sched.gpus_released(job, NOW);
        }
    }
    d.pass(NOW);
    p
}

#[test]
fn predictions_are_what_the_scheduler_then_does() {
    let mut d = Driver::new(AWS_CONFIG, "aws").unwrap();
    let p = predict_then_submit(&mut d, spec("a", "qs1", 1, 0, Some(100)));
    assert_eq!(p.verdict, Verdict::StartNow);
    let p = predict_then_submit(&mut d, spec("b", "qs1", 1, 0, Some(100)));
    assert_eq!(p.verdict, Verdict::Borrow);
    assert!(p.why.contains("qs2"), "names the lender: {}", p.why);
    let p = predict_then_submit(&mut d, spec("c", "qs1", 1, 0, Some(100)));
    assert_eq!(p.verdict, Verdict::Wait, "{p:?}");
    assert_eq!(p.start, Some(NOW + 100 * S), "estimated: when a or b ends");
    // qs2 within its guarantee, its GPU lent out: a reclaim of b.
    let p = predict_then_submit(&mut d, spec("r", "qs2", 1, 0, Some(10)));
    assert_eq!(p.verdict, Verdict::Preempt, "{p:?}");
    assert!(
        p.why.contains("CROSS_SHARE_RECLAIM") && p.why.contains("b (qs1)"),
        "{}",
        p.why
    );
    // In-share priority.
    let p = predict_then_submit(&mut d, spec("hi", "qs1", 1, 9, Some(10)));
    assert_eq!(p.verdict, Verdict::Preempt, "{p:?}");
    assert!(p.why.contains("IN_SHARE_PRIORITY"), "{}", p.why);
    // Refused by the core's own check, with its words.
    let p = predict_then_submit(&mut d, spec("big", "qs1", 3, 0, None));
    assert_eq!(p.verdict, Verdict::Reject);
    assert_eq!(
        p.why,
        "QUOTA_MANAGEMENT_LIMIT_EXCEEDED: needs 3, qs1 may hold at most 2"
    );
    let p = predict_then_submit(&mut d, spec("x", "nope", 1, 0, None));
    assert_eq!(p.verdict, Verdict::Reject);
}

#[test]
fn oversubscribed_unit_predictions_follow_the_core() {
    // Two shares guaranteed 2 each on 3 GPUs (oversubscribed): the old form's arithmetic
    // lacked SPEC §3's oversubscribed rule; the copy of the core has it.
    let cfg = "\
kind: ServiceEnvironment
name: o
capacityLimits:
- {capacityUnit: gpu, maxCapacity: 3, devices: {fake: 3}}
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND}
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: RESERVE}
";
    let mut d = Driver::new(cfg, "o").unwrap();
    for (name, share) in [("a1", "a"), ("b1", "b")] {
        let p = predict_then_submit(&mut d, spec(name, share, 1, 0, None));
        assert_eq!(p.verdict, Verdict::StartNow, "{name}: {p:?}");
    }
    // One GPU free, b's idle guarantee has no work waiting: a's guaranteed start goes
    // ahead (holding back b's whole idle guarantee said "waits").
    let p = predict_then_submit(&mut d, spec("a2", "a", 1, 0, None));
    assert_eq!(p.verdict, Verdict::StartNow, "{p:?}");
    let p = predict_then_submit(&mut d, spec("b2", "b", 1, 0, None));
    assert_eq!(p.verdict, Verdict::Wait, "{p:?}");
}

fn config(yaml: &str) -> shareq::model::ValidConfig {
    validate(parse_documents(yaml, Some("new")).unwrap()).unwrap()
}

#[test]
fn dry_run_says_what_a_config_would_do_now() {
    let mut d = Driver::new(AWS_CONFIG, "aws").unwrap();
    let a = submit(&mut d, spec("a", "qs1", 1, 0, None), NOW);
    let b = submit(&mut d, spec("b", "qs1", 1, 0, None), NOW);
    let c = submit(&mut d, spec("c", "qs1", 1, 0, None), NOW);
    let r = submit(&mut d, spec("r", "qs3", 1, 0, None), NOW);
    let w = submit(&mut d, spec("w", "qs3", 1, 0, None), NOW);
    let big = submit(&mut d, spec("big", "qs1", 2, 0, None), NOW);
    assert!(d.sched.job(c).unwrap().is_pending() && d.sched.job(w).unwrap().is_pending());
    // qs2 goes, qs3 (RESERVE) grows to 2 and qs1 may no longer borrow: b (on qs2's lent
    // GPU) is reclaimed for w at once, the 2-GPU job becomes impossible, c waits for a
    // new reason.
    let new = config(
        "\
kind: ServiceEnvironment
name: aws-example
capacityLimits:
- {capacityUnit: gpu, maxCapacity: 3, devices: {fake: 3}}
preemption: {gracePeriodSeconds: 30}
---
kind: QuotaShare
quotaShareName: qs1
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW, borrowLimit: 0}
preemptionConfiguration: {inSharePreemption: ENABLED}
---
kind: QuotaShare
quotaShareName: qs3
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: RESERVE}
",
    );
    let cap = UnitCapacity::simulated(&new);
    let before: Vec<_> = d.sched.jobs().map(|j| (j.id, j.state)).collect();
    let dr = forecast::dry_run(d.sched.clone(), &new, &cap, NOW + S);
    // The copy changed, the scheduler did not.
    assert_eq!(
        before,
        d.sched.jobs().map(|j| (j.id, j.state)).collect::<Vec<_>>()
    );
    let ids = |l: &[forecast::dry_run::Affected]| l.iter().map(|x| x.id).collect::<Vec<_>>();
    assert_eq!(ids(&dr.preempted), vec![b], "{dr:?}");
    assert!(
        dr.preempted[0]
            .detail
            .contains("CROSS_SHARE_RECLAIM for w (qs3)"),
        "{dr:?}"
    );
    assert_eq!(ids(&dr.start), vec![w], "{dr:?}");
    assert_eq!(ids(&dr.impossible), vec![big], "{dr:?}");
    assert!(
        dr.impossible[0]
            .detail
            .starts_with("QUOTA_MANAGEMENT_LIMIT_EXCEEDED"),
        "{dr:?}"
    );
    assert_eq!(ids(&dr.new_reason), vec![c], "{dr:?}");
    assert!(dr.new_reason[0].detail.contains("borrow cap"), "{dr:?}");
    let _ = (a, r);
    let text = dr.text();
    assert!(
        text.contains("would be preempted at once") && text.contains("would start"),
        "{text}"
    );
    // Applying the same config again changes nothing.
    let same = config(AWS_CONFIG);
    let dr = forecast::dry_run(
        d.sched.clone(),
        &same,
        &UnitCapacity::simulated(&same),
        NOW + S,
    );
    assert!(dr.is_empty(), "{dr:?}");
    let _ = Sched::clone;
}

/// A victim being stopped with a notice (SPEC §14) holds its GPUs until its notice and
/// its share's grace have run out: the preemptor's estimate counts both, not only the
/// environment's grace.
#[test]
fn a_victims_notice_and_share_grace_delay_its_preemptors_estimate() {
    let yaml = "\
kind: ServiceEnvironment
name: n
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}]
preemption: {gracePeriodSeconds: 30}
---
kind: QuotaShare
quotaShareName: own
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND}
---
kind: QuotaShare
quotaShareName: bg
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
preemptionConfiguration: {gracePeriodSeconds: 60, notice: {signal: SIGUSR1, seconds: 120}}
";
    let mut d = Driver::new(yaml, "n").unwrap();
    let victim = submit(&mut d, spec("b", "bg", 2, 0, None), NOW);
    assert!(d.sched.job(victim).unwrap().is_holding());
    let mine = submit(&mut d, spec("m", "own", 1, 0, Some(60)), NOW + S);
    assert!(d.sched.job(victim).unwrap().is_stopping(), "reclaimed");
    let est = forecast::estimate(d.sched.clone(), NOW + 2 * S, &Runtimes::default());
    assert_eq!(
        est.of(mine).start(),
        Some(NOW + S + 180 * S),
        "the reclaim ends notice (120 s) + grace (60 s) after it began: {:?}",
        est.of(mine)
    );
}
