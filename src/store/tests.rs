//! Unit tests that need the store's connection: a full disk in the middle of a batch.

use super::*;
use crate::config::{parse_documents, validate};
use crate::model::{JobSpec, UnitCapacity};
use crate::sched::{Clock, Sched};

const CONFIG: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND}
";

fn sched() -> Sched {
    let c = validate(parse_documents(CONFIG, None).expect("parse")).expect("valid");
    Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall)
}

fn count(store: &Store, sql: &str) -> i64 {
    store
        .conn()
        .query_row(sql, [], |r| r.get(0))
        .expect("count")
}

#[test]
fn a_full_disk_fails_the_whole_batch_and_keeps_what_was_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open(dir.path()).expect("open");
    let mut s = sched();
    s.submit(JobSpec::new("first", "a", 1, 0), 1)
        .expect("submit");
    s.pass(1);
    store
        .record_events(1, &s.take_events(), &s)
        .expect("record");
    let pages: i64 = count(&store, "PRAGMA page_count");
    // SQLite reports SQLITE_FULL once the file may not grow: as a full disk would.
    store
        .conn()
        .pragma_update(None, "max_page_count", pages)
        .expect("limit");
    for i in 0..200 {
        let mut spec = JobSpec::new(&format!("big-{i}"), "a", 1, 0);
        spec.env.insert("PAYLOAD".into(), "x".repeat(2000));
        s.submit(spec, 2).expect("submit");
    }
    s.pass(2);
    let events = s.take_events();
    let err = store.record_events(2, &events, &s).unwrap_err();
    assert!(matches!(err, StoreError::DiskFull { .. }), "{err}");
    assert!(err.to_string().contains("disk is full"), "{err}");
    // Nothing of the failed batch, everything of the one before.
    assert_eq!(count(&store, "SELECT count(*) FROM jobs"), 1);
    assert_eq!(count(&store, "SELECT count(*) FROM attempts"), 1);
    // Room again: the same batch goes through.
    store
        .conn()
        .pragma_update(None, "max_page_count", 1_000_000)
        .expect("unlimit");
    store.record_events(2, &events, &s).expect("record after");
    assert_eq!(count(&store, "SELECT count(*) FROM jobs"), 201);
    store.integrity_check().expect("consistent");
}

#[test]
fn the_store_and_the_lock_can_move_to_a_blocking_thread() {
    fn send<T: Send + 'static>() {}
    send::<Store>();
    send::<StateLock>();
    send::<recovery::RecoveryPlan>();
}

#[test]
fn a_batch_of_state_labels_is_stored_without_fsync_and_the_next_batch_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open(dir.path()).expect("open");
    let sync = |store: &Store| count(store, "PRAGMA synchronous");
    assert_eq!(sync(&store), 2, "FULL by default");
    let mut s = sched();
    let job = s
        .submit(JobSpec::new("first", "a", 1, 0), 1)
        .expect("submit");
    s.pass(1);
    store
        .record_events(1, &s.take_events(), &s)
        .expect("record");
    // STARTING, then RUNNING: labels only.
    s.set_running_state(job, crate::model::JobState::Running);
    store
        .record(2, &[Observed::StateChanged { job }], &[], &s)
        .expect("record the label");
    assert_eq!(
        count(&store, "SELECT count(*) FROM jobs WHERE state = 'RUNNING'"),
        1
    );
    // Every other commit is fsynced again.
    assert_eq!(sync(&store), 2);
    // A store opened NORMAL stays NORMAL.
    drop(store);
    let mut normal = Store::open_with(dir.path(), Durability::Normal).expect("open normal");
    normal
        .record(3, &[Observed::StateChanged { job }], &[], &s)
        .expect("record");
    assert_eq!(sync(&normal), 1);
}
