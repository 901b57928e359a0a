//! The state database on real SQLite files: migrations, a round trip of every scheduler
//! event, the order and durability of a batch, history and pruning.

use shareq::config::{parse_documents, validate};
use shareq::model::UnitCapacity;
use shareq::model::{JobId, JobSpec, JobState, RetryStrategy};
use shareq::sched::{Clock, Event, Sched};
use shareq::store::{DB_FILE, Observed, SCHEMA_VERSION, Store};

const CONFIG: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 4, devices: {fake: 4}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
preemptionConfiguration: {inSharePreemption: ENABLED}
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND}
";

fn live_sched() -> Sched {
    let c = validate(parse_documents(CONFIG, None).expect("parse")).expect("valid");
    Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall)
}

fn spec(name: &str, share: &str, prio: u32) -> JobSpec {
    JobSpec::new(name, share, 1, prio)
}

/// One runtime step: feed inputs, run a pass, record the batch, return its events.
fn step(
    store: &mut Store,
    sched: &mut Sched,
    now: i64,
    observed: &[Observed],
    input: impl FnOnce(&mut Sched),
) -> Vec<Event> {
    for o in observed {
        o.apply(sched, now);
    }
    input(sched);
    sched.pass(now);
    let events = sched.take_events();
    store.record(now, observed, &events, sched).expect("record");
    events
}

fn id(sched: &Sched, name: &str) -> JobId {
    sched.jobs().find(|j| j.name() == name).expect("job").id
}

#[test]
fn migrates_an_empty_directory_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("nested/state");
    let store = Store::open(&state).expect("open");
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(state.join(DB_FILE).exists());
    let r = store.load().unwrap();
    assert!(r.jobs.is_empty() && r.preemptions.is_empty() && r.history.is_empty());
    assert_eq!(r.max_job_id, JobId(0));
    drop(store);
    let conn = rusqlite::Connection::open(state.join(DB_FILE)).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(conn);
    let store = Store::open(&state).expect("reopen");
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    store.integrity_check().unwrap();
}

/// Every event kind, recorded batch by batch as a runtime would, read back and compared
/// with the scheduler, and restored into a fresh scheduler.
#[test]
fn round_trip_of_every_event_kind() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut s = live_sched();
    let mut seen = Vec::new();

    seen.extend(step(&mut store, &mut s, 1000, &[], |s| {
        s.submit(spec("a1", "a", 0), 1000).unwrap();
        let mut a2 = spec("a2", "a", 0);
        a2.retry_strategy = Some(RetryStrategy { attempts: 2 });
        s.submit(a2, 1000).unwrap();
        let mut a3 = spec("a3", "a", 0);
        a3.preemption_retries_before_termination = Some(0);
        s.submit(a3, 1000).unwrap();
        assert!(s.submit(spec("x", "nope", 0), 1000).is_err());
    }));
    let (a1, a2, a3) = (id(&s, "a1"), id(&s, "a2"), id(&s, "a3"));
    // b reclaims the GPU that a3 borrows.
    seen.extend(step(&mut store, &mut s, 2000, &[], |s| {
        s.submit(JobSpec::new("b1", "b", 2, 0), 2000).unwrap();
    }));
    let b1 = id(&s, "b1");
    seen.extend(step(
        &mut store,
        &mut s,
        3000,
        &[Observed::Released {
            job: a3,
            code: Some(143),
        }],
        |_| {},
    ));
    seen.extend(step(
        &mut store,
        &mut s,
        4000,
        &[
            Observed::Exited { job: a1, code: 0 },
            Observed::Exited { job: a2, code: 3 },
        ],
        |_| {},
    ));
    seen.extend(step(&mut store, &mut s, 5000, &[], |s| {
        s.set_priority(a2, 1, 5000).unwrap();
        let mut a5 = spec("a5", "a", 5);
        a5.timeout_seconds = Some(1);
        s.submit(a5, 5000).unwrap();
    }));
    seen.extend(step(&mut store, &mut s, 5500, &[], |s| {
        s.submit(spec("a6", "a", 0), 5500).unwrap();
        s.submit(spec("a7", "a", 9), 5500).unwrap();
    }));
    let (a5, a6, a7) = (id(&s, "a5"), id(&s, "a6"), id(&s, "a7"));
    seen.extend(step(&mut store, &mut s, 6000, &[], |s| {
        assert!(s.cancel(a6, "alice", 6000));
        s.timeout(a5, 6000);
        assert!(s.cancel(b1, "alice", 6000));
    }));
    let released: Vec<Observed> = [a2, b1, a5]
        .into_iter()
        .filter(|&j| s.job(j).unwrap().is_stopping())
        .map(|job| Observed::Released { job, code: None })
        .collect();
    seen.extend(step(&mut store, &mut s, 7000, &released, |_| {}));
    seen.extend(step(&mut store, &mut s, 8000, &[], |s| {
        let c = validate(parse_documents(CONFIG, None).unwrap()).unwrap();
        s.apply_config(&c, &UnitCapacity::simulated(&c), 8000);
        s.config_rejected("bad.yaml:1:1: nope".into(), 8000);
    }));
    store
        .record_config("abc123", "/etc/shareq", None, 8000)
        .unwrap();

    // Every kind was exercised.
    let kinds: std::collections::BTreeSet<&str> =
        seen.iter().map(shareq::replay::event_name).collect();
    assert_eq!(kinds.len(), 12, "{kinds:?}");

    // Job rows agree with the scheduler.
    for j in s.jobs() {
        let r = store.job(j.id).unwrap().expect("stored");
        assert_eq!(
            (
                r.state,
                r.priority,
                r.preempted_count,
                r.attempts,
                r.name.as_str()
            ),
            (
                j.state,
                j.priority,
                j.preempted_count,
                j.attempts_started,
                j.name()
            ),
            "job {}",
            j.id
        );
        assert_eq!(r.finished_at, j.finished_at);
        let attempts = store.attempts(j.id).unwrap();
        assert_eq!(attempts.len() as u32, j.attempts_started, "job {}", j.id);
        let open: Vec<_> = attempts.iter().filter(|a| a.ended_at.is_none()).collect();
        if j.is_holding() {
            assert_eq!(open.len(), 1);
            assert_eq!(open[0].devices, j.devices());
            assert_eq!(open[0].attempt, j.attempts_started);
        } else {
            assert!(open.is_empty(), "job {} has an open attempt", j.id);
        }
    }
    assert_eq!(
        store.job(b1).unwrap().unwrap().fail_reason.as_deref(),
        Some("CANCELLED: by alice")
    );
    assert_eq!(
        store.job(a5).unwrap().unwrap().fail_reason.as_deref(),
        Some("TIMEOUT")
    );
    assert_eq!(store.job(a6).unwrap().unwrap().state, JobState::Failed);
    assert!(store.attempts(a6).unwrap().is_empty());
    let a2_attempts = store.attempts(a2).unwrap();
    assert_eq!(a2_attempts[0].exit_code, Some(3));
    assert_eq!(a2_attempts[0].outcome.as_deref(), Some("NON_ZERO_EXIT"));
    assert_eq!(a2_attempts[1].stop.as_deref(), Some("IN_SHARE_PRIORITY"));
    assert_eq!(
        store.attempts(a1).unwrap()[0].outcome.as_deref(),
        Some("SUCCEEDED")
    );
    assert_eq!(
        store.attempts(b1).unwrap()[0].outcome.as_deref(),
        Some("CANCELLED")
    );
    assert_eq!(
        store.attempts(a5).unwrap()[0].outcome.as_deref(),
        Some("TIMEOUT")
    );
    assert_eq!(store.attempts(a3).unwrap()[0].exit_code, Some(143));

    let r = store.load().unwrap();
    // The preemption log, newest first, with outcomes.
    assert_eq!(r.preemptions.len(), 2);
    let p = &r.preemptions[0];
    assert_eq!(
        (
            p.victim,
            p.by,
            p.reason.as_str(),
            p.outcome.as_deref(),
            p.at
        ),
        (a2, Some(a7), "IN_SHARE_PRIORITY", Some("requeued"), 5500)
    );
    let p = &r.preemptions[1];
    assert_eq!(
        (p.victim, p.by, p.reason.as_str(), p.gpus, p.ran_for),
        (a3, Some(b1), "CROSS_SHARE_RECLAIM", 1, 1000)
    );
    assert_eq!(p.victim_share, "a");
    assert_eq!(p.by_share.as_deref(), Some("b"));
    assert_eq!(
        p.outcome.as_deref(),
        Some("failed (PREEMPTION_RETRIES_EXHAUSTED)")
    );
    assert_eq!(r.config.as_ref().map(|c| c.hash.as_str()), Some("abc123"));
    assert_eq!(r.max_job_id, a7);
    // History: finished jobs, newest first.
    let finished: Vec<JobId> = r.history.iter().map(|h| h.id).collect();
    let mut expect: Vec<_> = s
        .jobs()
        .filter(|j| j.state.is_finished())
        .map(|j| (std::cmp::Reverse((j.finished_at, j.id)), j.id))
        .collect();
    expect.sort();
    assert_eq!(
        finished,
        expect.into_iter().map(|e| e.1).collect::<Vec<_>>()
    );

    // Restored into a fresh scheduler, the live jobs are as they were.
    let active: Vec<JobId> = s
        .jobs()
        .filter(|j| !j.state.is_finished())
        .map(|j| j.id)
        .collect();
    assert_eq!(r.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), active);
    let mut fresh = live_sched();
    fresh.reserve_ids_below(JobId(r.max_job_id.0 + 1));
    for j in &r.jobs {
        fresh.restore_job(j.restored(true), 9000).unwrap();
    }
    for id in active {
        let (x, y) = (s.job(id).unwrap(), fresh.job(id).unwrap());
        assert_eq!(
            (
                x.state,
                x.priority,
                x.submitted,
                x.devices(),
                x.stop_cause()
            ),
            (
                y.state,
                y.priority,
                y.submitted,
                y.devices(),
                y.stop_cause()
            ),
            "job {id}"
        );
        assert_eq!(
            (x.preempted_count, x.failed_attempts, x.attempts_started),
            (y.preempted_count, y.failed_attempts, y.attempts_started)
        );
    }
    assert_eq!(fresh.queue(), s.queue());
    assert_eq!(fresh.next_job_id(), s.next_job_id());
}

/// A recorded batch is on disk when `record` returns: another connection (another
/// process, in real life) sees it, before anything is carried out.
#[test]
fn a_batch_is_durable_and_visible_when_record_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut s = live_sched();
    let events = step(&mut store, &mut s, 10, &[], |s| {
        s.submit(spec("w", "a", 0), 10).unwrap();
    });
    assert!(matches!(events[1], Event::Started { .. }));
    let other = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    let (state, attempts): (String, i64) = other
        .query_row(
            "SELECT state, (SELECT count(*) FROM attempts WHERE job = jobs.id) FROM jobs",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((state.as_str(), attempts), ("SCHEDULED", 1));
}

#[test]
fn history_pages_and_pruning_keeps_recent_and_live_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut s = live_sched();
    const DAY: i64 = 86_400_000;
    // Ten jobs that finish on days 0..10, and one that stays queued from day 0.
    for d in 0..10 {
        let t = d * DAY;
        step(&mut store, &mut s, t, &[], |s| {
            s.submit(spec(&format!("j{d}"), "b", 0), t).unwrap();
        });
        let job = id(&s, &format!("j{d}"));
        step(
            &mut store,
            &mut s,
            t + 1,
            &[Observed::Exited { job, code: 0 }],
            |_| {},
        );
    }
    let queued = {
        // b may hold at most 4 (2 + lent... no: b never borrows): fill it, then queue one.
        step(&mut store, &mut s, 0, &[], |s| {
            s.submit(JobSpec::new("big1", "b", 2, 0), 0).unwrap();
            s.submit(JobSpec::new("big2", "b", 2, 0), 0).unwrap();
        });
        id(&s, "big2")
    };
    assert_eq!(s.job(queued).unwrap().state, JobState::Runnable);
    let page: Vec<String> = store
        .history(3, 2)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(page, ["j7", "j6", "j5"]);
    // Retain 3 days at day 10: jobs that finished before day 7 go.
    let pruned = store.prune(3, 10 * DAY).unwrap();
    assert_eq!(pruned, 7);
    let names: Vec<String> = store
        .history(100, 0)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["j9", "j8", "j7"]);
    assert!(store.job(queued).unwrap().is_some());
    assert!(store.attempts(id(&s, "j0")).unwrap().is_empty());
    store.integrity_check().unwrap();
    // Ids are never reused, even when the newest jobs are pruned.
    let max = store.load().unwrap().max_job_id;
    store.prune(0, 100 * DAY).unwrap();
    assert_eq!(store.load().unwrap().max_job_id, max);
}

/// Decisions that follow each other inside one batch (a preemption, the victim's release
/// and requeue, the start on its GPU) are stored in that order, in one commit.
#[test]
fn a_batch_keeps_the_order_of_its_decisions() {
    const SIM: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}]
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
";
    let c = validate(parse_documents(SIM, None).unwrap()).unwrap();
    // Simulated: a victim with no stop delay releases its GPUs inside the pass.
    let mut s = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Simulated);
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    step(&mut store, &mut s, 0, &[], |s| {
        s.submit(spec("a1", "a", 0), 0).unwrap();
        s.submit(spec("a2", "a", 0), 0).unwrap();
    });
    let a2 = id(&s, "a2");
    let events = step(&mut store, &mut s, 10, &[], |s| {
        s.submit(spec("b1", "b", 0), 10).unwrap();
    });
    let b1 = id(&s, "b1");
    assert_eq!(
        events,
        [
            Event::Submitted { job: b1 },
            Event::Preempted {
                job: a2,
                by: Some(b1),
                reason: shareq::sched::PreemptReason::CrossShareReclaim
            },
            // Started at 0, released at once at 10: all of it lost (SPEC §14).
            Event::Requeued {
                job: a2,
                lost: Some(shareq::sched::Lost {
                    gpus: 1,
                    since: 0,
                    until: 10,
                    checkpointed: false,
                    noticed: false,
                })
            },
            Event::Started {
                node: None,
                job: b1,
                devices: vec![1],
                borrowed: 0,
                more: Vec::new(),
            },
        ]
    );
    let a = store.attempts(a2).unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(
        (a[0].stop.as_deref(), a[0].ended_at, a[0].outcome.as_deref()),
        (
            Some("CROSS_SHARE_RECLAIM"),
            Some(10),
            Some("CROSS_SHARE_RECLAIM")
        )
    );
    let b = store.attempts(b1).unwrap();
    assert_eq!(
        (b[0].devices.as_slice(), b[0].ended_at),
        (&[1u32][..], None)
    );
    let log = store.preemptions(10).unwrap();
    assert_eq!(
        (log[0].ran_for, log[0].outcome.as_deref()),
        (10, Some("requeued"))
    );
    assert_eq!(store.job(a2).unwrap().unwrap().state, JobState::Runnable);
    assert_eq!(store.job(a2).unwrap().unwrap().preempted_count, 1);
}

#[test]
fn a_cancel_under_way_keeps_who_cancelled_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).expect("open");
    let mut sched = live_sched();
    step(&mut store, &mut sched, 1, &[], |s| {
        s.submit(spec("victim", "a", 0), 1).unwrap();
    });
    let v = id(&sched, "victim");
    step(&mut store, &mut sched, 2, &[], |s| {
        assert!(s.cancel(v, "alice", 2));
    });
    assert!(sched.job(v).unwrap().is_stopping());
    // The scheduler goes away while the job's processes are still stopping.
    let recovered = store.load().expect("load");
    let stored = recovered
        .jobs
        .iter()
        .find(|j| j.id == v)
        .expect("active job");
    let mut again = live_sched();
    again
        .restore_job(stored.restored(true), 3)
        .expect("restore");
    again.gpus_released(v, 4);
    let job = again.job(v).expect("job");
    assert_eq!(job.state, shareq::model::JobState::Failed);
    assert_eq!(again.reason(v), "CANCELLED: by alice");
}

/// SPEC §13: the end of a dependency, and what it does to the jobs after it (a release,
/// or `DEPENDENCY_FAILED` down the chain), are one batch: one transaction. A restart from
/// that database has the dependents RUNNABLE or FAILED, never waiting for an end that
/// already happened; an array is one batch too, its rows and counts read back.
#[test]
fn a_dependency_s_end_and_its_dependents_are_one_batch() {
    use shareq::model::{ArrayProperties, Dependency, JobRef};
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut sched = live_sched();
    let after = |name: &str, id: JobId| {
        let mut s = spec(name, "a", 0);
        s.depends_on = vec![Dependency::on(JobRef::job(id.0))];
        s
    };
    step(&mut store, &mut sched, 1, &[], |s| {
        let ok = s.submit(spec("ok", "a", 0), 1).unwrap();
        let bad = s.submit(spec("bad", "b", 0), 1).unwrap();
        let next = s.submit(after("next", ok), 1).unwrap();
        let chain = s.submit(after("chain", bad), 1).unwrap();
        s.submit(after("chain2", chain), 1).unwrap();
        let mut arr = after("arr", next);
        arr.array_properties = Some(ArrayProperties { size: 3 });
        s.submit(arr, 1).unwrap();
    });
    let state = |id: u64| -> (String, Option<String>) {
        let db = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
        db.query_row(
            "SELECT state, fail_reason FROM jobs WHERE id = ?1",
            [id as i64],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    assert_eq!(state(3).0, "PENDING");
    assert_eq!(state(6).0, "PENDING", "the array's parent");
    assert_eq!(state(9).0, "PENDING", "its last child");
    // One batch: ok succeeds, bad fails.
    let events = step(
        &mut store,
        &mut sched,
        2,
        &[
            Observed::Exited {
                job: JobId(1),
                code: 0,
            },
            Observed::Exited {
                job: JobId(2),
                code: 1,
            },
        ],
        |_| {},
    );
    assert!(
        events.contains(&Event::Released { job: JobId(3) }),
        "{events:?}"
    );
    assert_eq!(state(1).0, "SUCCEEDED");
    // Released in the batch of ok's end, and started by that batch's pass.
    assert_eq!(state(3).0, "SCHEDULED");
    assert_eq!(
        state(4),
        (
            "FAILED".into(),
            Some("DEPENDENCY_FAILED: job 2 FAILED".into())
        )
    );
    assert_eq!(
        state(5),
        (
            "FAILED".into(),
            Some("DEPENDENCY_FAILED: job 4 FAILED".into())
        )
    );
    // A restart from the database has the same picture.
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    let rec = store.load().unwrap();
    assert!(rec.succeeded.contains(&JobId(1)), "{:?}", rec.succeeded);
    assert_eq!(rec.arrays, vec![(JobId(6), 3)]);
    let parent = rec.jobs.iter().find(|j| j.id == JobId(6)).unwrap();
    assert_eq!(
        parent.array,
        Some(shareq::sched::ArrayLink::Parent {
            size: 3,
            left: 3,
            failed: 0
        })
    );
    let child = rec.jobs.iter().find(|j| j.id == JobId(8)).unwrap();
    assert_eq!(child.deps, vec![JobId(3)]);
    assert_eq!(
        child.array,
        Some(shareq::sched::ArrayLink::Child {
            parent: JobId(6),
            index: 1
        })
    );
}

#[test]
fn a_gangs_every_node_and_its_devices_come_back_after_a_restart() {
    // SPEC §16: the attempt keeps each rank's node and devices (schema 14), so that a
    // restarted scheduler adopts every rank.
    let config = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 4}]
nodes:
  - {name: n1, devices: {gpu: {fake: 2}}}
  - {name: n2, devices: {gpu: {fake: 2}}}
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 4}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
";
    let c = validate(parse_documents(config, None).expect("parse")).expect("valid");
    let mut sched = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall);
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut gang = JobSpec::new("ring", "a", 2, 1);
    gang.num_nodes = Some(2);
    gang.command = Some(shareq::model::Command::Argv(vec!["true".into()]));
    let events = step(&mut store, &mut sched, 1_000, &[], |s| {
        s.submit(gang, 1_000).expect("a gang fits two nodes");
    });
    let (node, devices, more) = events
        .iter()
        .find_map(|e| match e {
            Event::Started {
                node,
                devices,
                more,
                ..
            } => Some((node.clone(), devices.clone(), more.clone())),
            _ => None,
        })
        .expect("the gang started");
    assert_eq!(more.len(), 1, "{events:?}");
    let r = store.load().unwrap();
    let h = r.jobs[0].holding.as_ref().expect("holding");
    assert_eq!((&h.node, &h.devices, &h.more), (&node, &devices, &more));
    let restored = r.jobs[0].restored(true).holding.expect("kept");
    assert_eq!(restored.more, more);
}
