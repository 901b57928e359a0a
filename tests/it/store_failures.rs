//! Failures of the state directory: a corrupt or damaged database, a newer schema, another
//! program's database, a read-only directory. Each is a clear error and nothing stored is
//! changed.

use shareq::config::{parse_documents, validate};
use shareq::model::JobSpec;
use shareq::model::UnitCapacity;
use shareq::sched::{Clock, Sched};
use shareq::store::{DB_FILE, SCHEMA_VERSION, Store, StoreError};
use std::path::Path;

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

fn live_sched() -> Sched {
    let c = validate(parse_documents(CONFIG, None).expect("parse")).expect("valid");
    Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall)
}

fn spec(name: &str, share: &str, prio: u32) -> JobSpec {
    JobSpec::new(name, share, 1, prio)
}

/// Submit, pass and record, as the runtime does.
fn step(store: &mut Store, sched: &mut Sched, now: i64, input: impl FnOnce(&mut Sched)) {
    input(sched);
    sched.pass(now);
    let events = sched.take_events();
    store.record_events(now, &events, sched).expect("record");
}

fn file_bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn a_newer_schema_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    let db = dir.path().join(DB_FILE);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 7)
        .unwrap();
    conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(conn);
    let before = file_bytes(&db);
    let err = Store::open(dir.path()).unwrap_err();
    assert!(
        matches!(err, StoreError::TooNew { found, known, .. } if found == SCHEMA_VERSION + 7 && known == SCHEMA_VERSION),
        "{err}"
    );
    assert!(err.to_string().contains("newer shareq"), "{err}");
    assert_eq!(file_bytes(&db), before);
}

#[test]
fn a_corrupt_file_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(DB_FILE);
    let garbage: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&db, &garbage).unwrap();
    let err = Store::open(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("left untouched"), "{err}");
    assert_eq!(file_bytes(&db), garbage);
}

#[test]
fn a_damaged_database_gives_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut store = Store::open(dir.path()).unwrap();
        let mut s = live_sched();
        for i in 0..300 {
            step(&mut store, &mut s, i, |s| {
                let mut sp = spec(&format!("job-{i}-{}", "x".repeat(64)), "a", 0);
                sp.env.insert("K".into(), "v".repeat(100));
                s.submit(sp, i).unwrap();
            });
        }
    }
    let db = dir.path().join(DB_FILE);
    // Checkpointed on close: scribble over every page but the first (the header).
    let mut bytes = file_bytes(&db);
    assert!(bytes.len() > 8192, "{}", bytes.len());
    for (i, b) in bytes.iter_mut().enumerate().skip(4096) {
        *b = (i % 251) as u8;
    }
    std::fs::write(&db, &bytes).unwrap();
    let result = Store::open(dir.path()).and_then(|s| s.load().map(|_| s));
    match result {
        Err(StoreError::Corrupt { .. }) => {}
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("a scribbled database loaded"),
    }
    assert_eq!(file_bytes(&db), bytes);
}

#[test]
fn another_programs_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(DB_FILE);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('mine');")
        .unwrap();
    drop(conn);
    let before = file_bytes(&db);
    let err = Store::open(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("another program"), "{err}");
    assert_eq!(file_bytes(&db), before);
}

const RO_ENV: &str = "SHAREQ_TEST_READ_ONLY_ROOT";

/// The checks, run by a user to whom the directories are read-only.
fn check_read_only(root: &Path) {
    let empty = root.join("empty");
    let err = Store::open(&empty).unwrap_err();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err}");
    assert!(err.to_string().contains("read-only"), "{err}");
    assert!(!empty.join(DB_FILE).exists());
    let err = Store::open(&empty.join("sub")).unwrap_err();
    assert!(matches!(err, StoreError::StateDir { .. }), "{err}");
    let full = root.join("full");
    let before = file_bytes(&full.join(DB_FILE));
    let err = Store::open(&full).unwrap_err();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err}");
    assert_eq!(file_bytes(&full.join(DB_FILE)), before);
}

#[test]
#[ignore = "helper: run as an unprivileged child by a_read_only_state_directory_is_a_clear_error"]
fn read_only_child() {
    if let Some(root) = std::env::var_os(RO_ENV) {
        check_read_only(Path::new(&root));
    }
}

#[test]
fn a_read_only_state_directory_is_a_clear_error() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::process::CommandExt;
    let chmod = |p: &Path, mode| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    chmod(root, 0o755);
    let (empty, full) = (root.join("empty"), root.join("full"));
    std::fs::create_dir(&empty).unwrap();
    {
        let mut store = Store::open(&full).unwrap();
        let mut s = live_sched();
        step(&mut store, &mut s, 1, |s| {
            s.submit(spec("kept", "a", 0), 1).unwrap();
        });
    }
    // The file itself stays writable: only the directory is read-only.
    chmod(&full.join(DB_FILE), 0o666);
    chmod(&empty, 0o555);
    chmod(&full, 0o555);
    // Root writes anywhere: run the checks as an unprivileged user then.
    let root_user = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    if root_user {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "store_failures::read_only_child",
                "--ignored",
                "--nocapture",
            ])
            .env(RO_ENV, root)
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
    } else {
        check_read_only(root);
    }
    chmod(&empty, 0o755);
    chmod(&full, 0o755);
    // And the data is all there once the directory is writable again.
    let store = Store::open(&full).unwrap();
    assert_eq!(store.load().unwrap().jobs.len(), 1);
}
