//! Restart recovery with real processes: run files and liveness (pid + start time), the
//! classification of jobs that held GPUs, and the state-directory lock across processes.

use shareq::config::{parse_documents, validate};
use shareq::exec::ExitStatus;
use shareq::exec::containment::session::start_time as process_start_time;
use shareq::exec::state::runfiles::{
    self, Owner, SupervisorStatus, claim_pid, record_path as pid_file, runs_dir, write_exit,
};
use shareq::model::UnitCapacity;
use shareq::model::{JobId, JobSpec, JobState};
use shareq::sched::{Clock, Sched};
use shareq::store::recovery::{self, Adopted};
use shareq::store::{LockHolder, Observed, StateLock, Store, StoreError};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const CONFIG: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 5, devices: {fake: 5}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 5}]
resourceSharingConfiguration: {strategy: LEND}
";

fn live_sched() -> Sched {
    let c = validate(parse_documents(CONFIG, None).expect("parse")).expect("valid");
    Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall)
}

fn owner() -> Owner {
    Owner {
        db: "0123456789abcdef".into(),
        legacy_below: 0,
    }
}

fn probe(state: &std::path::Path, job: JobId, attempt: u32) -> SupervisorStatus {
    runfiles::probe(state, job, attempt, &owner())
}

/// What the supervisor does first: claim the attempt for `pid`.
fn write_pid_file(state: &std::path::Path, job: JobId, attempt: u32, pid: u32, db: &str) {
    assert!(claim_pid(&pid_file(state, job, attempt), pid, db).unwrap());
}

/// What the supervisor does last: record the exit status.
fn write_exit_file(state: &std::path::Path, job: JobId, attempt: u32, code: i32, db: &str) {
    let st = ExitStatus {
        code,
        finished_at: 1,
        ..ExitStatus::default()
    };
    write_exit(state, job, attempt, db, st).unwrap();
}

fn exited(code: i32) -> SupervisorStatus {
    SupervisorStatus::Exited(ExitStatus {
        code,
        finished_at: 1,
        ..ExitStatus::default()
    })
}

const GONE: SupervisorStatus = SupervisorStatus::Vanished { session: None };

fn sleeper() -> Child {
    Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep")
}

#[test]
fn a_live_supervisor_is_alive_and_a_dead_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let (job, attempt) = (JobId(7), 2);
    assert_eq!(probe(dir.path(), job, attempt), GONE);
    let mut child = sleeper();
    write_pid_file(dir.path(), job, attempt, child.id(), &owner().db);
    let text = std::fs::read_to_string(pid_file(dir.path(), job, attempt)).unwrap();
    let start = process_start_time(child.id()).unwrap();
    assert_eq!(text, format!("{} {start} {}\n", child.id(), owner().db));
    assert_eq!(
        probe(dir.path(), job, attempt),
        SupervisorStatus::Alive { pid: child.id() }
    );
    // Killed but not reaped: a zombie is not alive.
    child.kill().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let dead = SupervisorStatus::Vanished {
        session: Some(child.id()),
    };
    assert_eq!(probe(dir.path(), job, attempt), dead);
    child.wait().unwrap();
    assert_eq!(probe(dir.path(), job, attempt), dead);
    // Its exit status, once written, is what counts; one of another database does not.
    write_exit_file(dir.path(), job, attempt, 137, "another");
    assert_eq!(probe(dir.path(), job, attempt), dead);
    write_exit_file(dir.path(), job, attempt, 137, &owner().db);
    assert_eq!(probe(dir.path(), job, attempt), exited(137));
}

#[test]
fn a_recycled_pid_is_not_mistaken_for_the_supervisor() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = sleeper();
    let start = process_start_time(child.id()).unwrap();
    let path = pid_file(dir.path(), JobId(1), 1);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // The same pid, started at another time: another process that got the pid.
    let db = owner().db;
    for other in [start + 1, start.saturating_sub(1)] {
        std::fs::write(&path, format!("{} {other} {db}\n", child.id())).unwrap();
        assert_eq!(
            probe(dir.path(), JobId(1), 1),
            SupervisorStatus::Vanished {
                session: Some(child.id())
            }
        );
    }
    // A garbled pid file is no proof of life either, nor one of another database.
    std::fs::write(&path, "not a pid\n").unwrap();
    assert_eq!(probe(dir.path(), JobId(1), 1), GONE);
    std::fs::write(&path, format!("{} {start} other\n", child.id())).unwrap();
    assert_eq!(probe(dir.path(), JobId(1), 1), GONE);
    std::fs::write(&path, format!("{} {start} {db}\n", child.id())).unwrap();
    assert_eq!(
        probe(dir.path(), JobId(1), 1),
        SupervisorStatus::Alive { pid: child.id() }
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Five jobs hold GPUs when the scheduler dies: one supervisor still runs, one finished,
/// one vanished, one was being cancelled and is gone, one pid now belongs to someone
/// else. A restart adopts, records, requeues as it should.
#[test]
fn recovery_adopts_finishes_and_requeues() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path();
    let mut s = live_sched();
    {
        let mut store = Store::open(state).unwrap();
        for i in 1..=5 {
            s.submit(JobSpec::new(&format!("j{i}"), "a", 1, 0), 0)
                .unwrap();
        }
        s.submit(JobSpec::new("q", "a", 1, 0), 0).unwrap();
        s.pass(0);
        store.record_events(0, &s.take_events(), &s).unwrap();
        assert!(s.cancel(JobId(4), "ops", 500));
        s.pass(500);
        store.record_events(500, &s.take_events(), &s).unwrap();
        // The scheduler dies here.
    }
    let mut store = Store::open(state).unwrap();
    let db = store.identity().unwrap().db;
    let mut alive = sleeper();
    write_pid_file(state, JobId(1), 1, alive.id(), &db);
    write_exit_file(state, JobId(2), 1, 0, &db);
    let me = std::process::id();
    let my_start = process_start_time(me).unwrap();
    std::fs::create_dir_all(runs_dir(state)).unwrap();
    std::fs::write(
        pid_file(state, JobId(5), 1),
        format!("{me} {} {db}\n", my_start + 10),
    )
    .unwrap();

    let rec = store.load().unwrap();
    let plan = recovery::plan(state, &rec);
    assert_eq!(
        plan.adopted,
        [Adopted {
            job: JobId(1),
            attempt: 1,
            pid: alive.id()
        }]
    );
    assert_eq!(
        plan.observed,
        [
            Observed::Exited {
                job: JobId(2),
                code: 0
            },
            Observed::Released {
                job: JobId(4),
                code: None
            },
        ]
    );
    assert_eq!(plan.lost, [JobId(3), JobId(5)]);
    assert_eq!(
        plan.restore.iter().map(|r| r.id.0).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(plan.next_job_id, JobId(7));

    let mut fresh = live_sched();
    let events = plan.apply(&mut store, &mut fresh, 10_000).unwrap();
    assert!(!events.is_empty());
    // Adopted: still on its device, not restarted.
    let j1 = fresh.job(JobId(1)).unwrap();
    assert_eq!((j1.devices(), j1.attempts_started), (&[0u32][..], 1));
    assert_eq!(store.attempts(JobId(1)).unwrap().len(), 1);
    // Finished while nobody watched.
    assert_eq!(
        store.job(JobId(2)).unwrap().unwrap().state,
        JobState::Succeeded
    );
    assert_eq!(store.attempts(JobId(2)).unwrap()[0].exit_code, Some(0));
    // Being cancelled, and gone: cancelled, with who cancelled it.
    let j4 = store.job(JobId(4)).unwrap().unwrap();
    assert_eq!(
        (j4.state, j4.fail_reason.as_deref()),
        (JobState::Failed, Some("CANCELLED: by ops"))
    );
    assert_eq!(
        store.attempts(JobId(4)).unwrap()[0].outcome.as_deref(),
        Some("CANCELLED")
    );
    // Lost: the attempt says so, and the job runs again (attempt 2), in id order.
    for lost in [JobId(3), JobId(5)] {
        let a = store.attempts(lost).unwrap();
        assert_eq!(
            a[0].outcome.as_deref(),
            Some("LOST_ON_RESTART"),
            "job {lost}"
        );
        assert_eq!(a.len(), 2, "job {lost}");
        assert!(fresh.job(lost).unwrap().is_holding());
        assert_eq!(fresh.job(lost).unwrap().attempts_started, 2);
    }
    assert!(fresh.job(JobId(6)).unwrap().is_holding());
    // No device is held twice, and the store agrees with the scheduler.
    let mut devices: Vec<u32> = fresh.jobs().flat_map(|j| j.devices().to_vec()).collect();
    devices.sort_unstable();
    let n = devices.len();
    devices.dedup();
    assert_eq!(devices.len(), n);
    for j in fresh.jobs() {
        assert_eq!(
            store.job(j.id).unwrap().unwrap().state,
            j.state,
            "job {}",
            j.id
        );
    }
    assert_eq!(fresh.next_job_id(), JobId(7));
    store.integrity_check().unwrap();
    alive.kill().unwrap();
    alive.wait().unwrap();
}

#[test]
fn a_second_lock_names_the_holder_and_is_free_after_drop() {
    let dir = tempfile::tempdir().unwrap();
    let lock = StateLock::acquire(dir.path()).unwrap();
    assert_eq!(StateLock::holder(dir.path()), Some(std::process::id()));
    let err = StateLock::acquire(dir.path()).unwrap_err();
    match &err {
        StoreError::Locked { holder, .. } => {
            assert_eq!(*holder, LockHolder(Some(std::process::id())))
        }
        other => panic!("wrong error: {other}"),
    }
    assert!(
        err.to_string()
            .contains(&format!("pid {}", std::process::id())),
        "{err}"
    );
    drop(lock);
    let _again = StateLock::acquire(dir.path()).unwrap();
}

const CHILD_ENV: &str = "SHAREQ_TEST_LOCK_DIR";

/// Run by `a_killed_holder_releases_the_lock` in a child process.
#[test]
#[ignore = "helper: run as a child process by a_killed_holder_releases_the_lock"]
fn lock_holder_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let _lock = StateLock::acquire(std::path::Path::new(&dir)).expect("child lock");
    println!("locked");
    std::thread::sleep(std::time::Duration::from_secs(60));
}

#[test]
fn a_killed_holder_releases_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "store_recovery::lock_holder_child",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(
        lines.any(|l| l.is_ok_and(|l| l.trim() == "locked")),
        "the child never took the lock"
    );
    match StateLock::acquire(dir.path()) {
        Err(StoreError::Locked { holder, .. }) => assert_eq!(holder, LockHolder(Some(child.id()))),
        other => panic!("expected the child's lock, got {other:?}"),
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let lock = StateLock::acquire(dir.path()).expect("free after kill -9");
    assert_eq!(StateLock::holder(dir.path()), Some(std::process::id()));
    drop(lock);
}
