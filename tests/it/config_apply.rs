//! From an edit on disk to the scheduler: the real watcher feeds `Sched::apply_config`,
//! and the apply rules of SPEC §5 hold (a removed share's queued job waits with its
//! reason and its running job keeps running; a DISABLED share refuses submissions; a
//! rejected edit leaves the scheduler's config as it was).

use shareq::config::{ConfigUpdate, Watcher};
use shareq::model::UnitCapacity;
use shareq::model::{JobId, JobSpec, JobState};
use shareq::sched::{Clock, Sched};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ENV: &str = "kind: ServiceEnvironment
name: lab
capacityLimits:
  - {capacityUnit: gpu, maxCapacity: 3, devices: {fake: 3}}
";

fn share(name: &str, state: &str) -> String {
    format!(
        "kind: QuotaShare
quotaShareName: {name}
capacityLimits: [{{capacityUnit: gpu, maxCapacity: 1}}]
resourceSharingConfiguration: {{strategy: LEND}}
state: {state}
"
    )
}

#[derive(Default)]
struct Live {
    sched: Option<Sched>,
    applied: usize,
    rejected: usize,
    now: i64,
}

type Shared = Arc<Mutex<Live>>;

fn with<T>(live: &Shared, f: impl FnOnce(&mut Live) -> T) -> T {
    let mut g = live.lock().expect("lock");
    f(&mut g)
}

fn sched<T>(live: &Shared, f: impl FnOnce(&mut Sched, i64) -> T) -> T {
    with(live, |l| {
        l.now += 1;
        let now = l.now;
        let s = l.sched.as_mut().expect("a config was applied");
        let out = f(s, now);
        s.pass(now);
        out
    })
}

fn wait(live: &Shared, what: &str, pred: impl Fn(&mut Live) -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if with(live, &pred) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting for {what}");
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write");
}

fn state(live: &Shared, id: JobId) -> JobState {
    sched(live, |s, _| s.job(id).expect("job").state)
}

#[test]
fn edits_on_disk_are_applied_to_the_scheduler() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().to_path_buf();
    write(&dir, "env.yaml", ENV);
    write(&dir, "qs1.yaml", &share("qs1", "ENABLED"));
    write(&dir, "qs2.yaml", &share("qs2", "ENABLED"));
    let live: Shared = Arc::default();
    let sink = live.clone();
    let _w = Watcher::start(
        dir.clone(),
        Box::new(move |u| {
            let mut l = sink.lock().expect("lock");
            l.now += 1;
            let now = l.now;
            match u {
                ConfigUpdate::Applied(c) => {
                    let cap = UnitCapacity::simulated(&c.config);
                    match l.sched.as_mut() {
                        None => l.sched = Some(Sched::new(&c.config, &cap, Clock::Simulated)),
                        Some(s) => {
                            s.apply_config(&c.config, &cap, now);
                            s.pass(now);
                        }
                    }
                    l.applied += 1;
                }
                ConfigUpdate::Rejected(_) => l.rejected += 1,
            }
        }),
    )
    .expect("watcher");
    let r = sched(&live, |s, t| s.submit(JobSpec::new("r", "qs2", 1, 0), t)).expect("r");
    let q = sched(&live, |s, t| s.submit(JobSpec::new("q", "qs2", 1, 0), t)).expect("q");
    assert_eq!(state(&live, r), JobState::Running);
    assert_eq!(state(&live, q), JobState::Runnable);

    // Remove qs2's file: its jobs stay, the queued one says why it waits.
    std::fs::remove_file(dir.join("qs2.yaml")).expect("rm");
    wait(&live, "qs2 removed", |l| l.applied == 2);
    assert_eq!(sched(&live, |s, _| s.reason(q)), "quota share removed");
    assert_eq!(state(&live, r), JobState::Running);

    // Disable qs1: submissions refused, with the share's state in the message.
    write(&dir, "qs1.yaml", &share("qs1", "DISABLED"));
    wait(&live, "qs1 disabled", |l| l.applied == 3);
    let err =
        sched(&live, |s, t| s.submit(JobSpec::new("x", "qs1", 1, 0), t)).expect_err("refused");
    assert!(
        matches!(&err, shareq::sched::Rejection::ShareDisabled { share } if share == "qs1"),
        "{err}"
    );
    assert!(err.to_string().contains("DISABLED"), "{err}");

    // A broken edit is rejected and changes nothing: qs1 stays DISABLED.
    write(
        &dir,
        "qs1.yaml",
        &share("qs1", "ENABLED").replace("LEND", "LEND_AND_BOROW"),
    );
    wait(&live, "the rejection", |l| l.rejected == 1);
    assert!(sched(&live, |s, t| s.submit(JobSpec::new("y", "qs1", 1, 0), t)).is_err());

    // Put qs2 back: its queued job runs on its guarantee again.
    write(&dir, "qs1.yaml", &share("qs1", "ENABLED"));
    write(&dir, "qs2.yaml", &share("qs2", "ENABLED"));
    wait(&live, "both shares back", |l| {
        l.applied >= 4
            && l.sched
                .as_ref()
                .is_some_and(|s| s.reason(q) != "quota share removed")
    });
    let z = sched(&live, |s, t| s.submit(JobSpec::new("z", "qs1", 1, 0), t)).expect("z");
    assert_eq!(state(&live, z), JobState::Running);
    assert_eq!(state(&live, r), JobState::Running);
    assert_eq!(
        state(&live, q),
        JobState::Runnable,
        "qs2 is at its limit of 1"
    );
}
