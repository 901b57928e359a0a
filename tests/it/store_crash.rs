//! Crash safety: a writer process that submits, starts and finishes jobs as a runtime
//! would is killed with SIGKILL at random moments, 20 times; after each kill every
//! acknowledged submit is stored exactly once and the database is consistent, and the
//! next writer recovers from it.

use shareq::config::{parse_documents, validate};
use shareq::model::UnitCapacity;
use shareq::model::{JobId, JobSpec};
use shareq::sched::{Clock, Sched};
use shareq::store::recovery;
use shareq::store::{DB_FILE, Observed, StateLock, Store};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const CONFIG: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 4, devices: {fake: 4}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
";

const DIR_ENV: &str = "SHAREQ_TEST_CRASH_DIR";
const ROUND_ENV: &str = "SHAREQ_TEST_CRASH_ROUND";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The writer: recover, then submit and finish jobs until killed, acknowledging each
/// submit on stdout once its batch is recorded.
#[test]
#[ignore = "helper: run as a child process by acknowledged_submits_survive_kill_9"]
fn crash_writer_child() {
    let (Some(dir), Some(round)) = (std::env::var_os(DIR_ENV), std::env::var_os(ROUND_ENV)) else {
        return;
    };
    let dir = Path::new(&dir);
    let round = round.to_string_lossy().to_string();
    let _lock = StateLock::acquire(dir).expect("lock");
    let mut store = Store::open(dir).expect("open");
    let c = validate(parse_documents(CONFIG, None).unwrap()).unwrap();
    let mut sched = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Wall);
    let rec = store.load().expect("load");
    let plan = recovery::plan(dir, &rec);
    plan.apply(&mut store, &mut sched, now_ms())
        .expect("recover");
    println!("ready");
    let mut rng = Rng((std::process::id() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut out = std::io::stdout().lock();
    for n in 0.. {
        let now = now_ms();
        let mut observed = Vec::new();
        if rng.below(3) == 0 {
            let holding: Vec<JobId> = sched
                .jobs()
                .filter(|j| j.is_holding())
                .map(|j| j.id)
                .collect();
            if !holding.is_empty() {
                let job = holding[rng.below(holding.len() as u64) as usize];
                let code = (rng.below(4) == 0) as i32;
                observed.push(Observed::Exited { job, code });
            }
        }
        for o in &observed {
            o.apply(&mut sched, now);
        }
        // One to three submits per batch, as concurrent clients would give.
        let mut names = Vec::new();
        for k in 0..=rng.below(3) {
            let name = format!("r{round}-{n}-{k}");
            let share = if rng.below(2) == 0 { "a" } else { "b" };
            sched
                .submit(JobSpec::new(&name, share, 1, rng.below(3) as u32), now)
                .unwrap();
            names.push(name);
        }
        sched.pass(now);
        let events = sched.take_events();
        store
            .record(now, &observed, &events, &sched)
            .expect("record");
        for name in names {
            writeln!(out, "ack {name}").unwrap();
        }
        out.flush().unwrap();
    }
}

#[test]
fn acknowledged_submits_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let seed = (now_ms() as u64) | 1;
    let mut rng = Rng(seed);
    let mut acked: Vec<String> = Vec::new();
    let mut finished: BTreeMap<String, String> = BTreeMap::new();
    for round in 0..20 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "store_crash::crash_writer_child",
                "--ignored",
                "--nocapture",
            ])
            .env(DIR_ENV, dir.path())
            .env(ROUND_ENV, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut acks = Vec::new();
            let mut ready = false;
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            // Only whole lines count: a kill may cut the last one.
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                if let Some(name) = line.strip_suffix('\n') {
                    if let Some(n) = name.strip_prefix("ack ") {
                        acks.push(n.to_string());
                    }
                    ready |= name == "ready";
                }
                line.clear();
            }
            (ready, acks)
        });
        // Kill at a random moment: during start-up and recovery, or amid the writes.
        let at = Duration::from_millis(20 + rng.below(400));
        let t0 = Instant::now();
        while t0.elapsed() < at {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("round {round} (seed {seed}): the writer died by itself: {status}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let (_ready, acks) = reader.join().unwrap();
        acked.extend(acks);
        check(dir.path(), &acked, &mut finished, round, seed);
    }
    eprintln!(
        "{} submits acknowledged over 20 kills (seed {seed})",
        acked.len()
    );
    assert!(
        acked.len() >= 40,
        "only {} submits acknowledged in 20 rounds",
        acked.len()
    );
}

fn check(
    dir: &Path,
    acked: &[String],
    finished: &mut BTreeMap<String, String>,
    round: u32,
    seed: u64,
) {
    let ctx = format!("round {round} (seed {seed})");
    let store = Store::open(dir).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    store
        .integrity_check()
        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let rec = store.load().unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let conn = rusqlite::Connection::open(dir.join(DB_FILE)).unwrap();
    let mut stmt = conn.prepare("SELECT name, state FROM jobs").unwrap();
    let rows: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut seen = HashSet::new();
    for (name, _) in &rows {
        assert!(seen.insert(name.as_str()), "{ctx}: job {name} stored twice");
    }
    for name in acked {
        assert!(
            seen.contains(name.as_str()),
            "{ctx}: acknowledged job {name} was lost"
        );
    }
    // Finished jobs keep their status.
    let states: BTreeMap<&str, &str> = rows.iter().map(|(n, s)| (n.as_str(), s.as_str())).collect();
    for (name, state) in finished.iter() {
        assert_eq!(
            states.get(name.as_str()).copied(),
            Some(state.as_str()),
            "{ctx}: {name}"
        );
    }
    for (name, state) in &rows {
        if state == "SUCCEEDED" || state == "FAILED" {
            finished.insert(name.clone(), state.clone());
        }
    }
    // No GPU held by two jobs; each holding job has exactly one open attempt.
    let mut devices = HashSet::new();
    for j in rec
        .jobs
        .iter()
        .filter_map(|j| j.holding.as_ref().map(|h| (j.id, h)))
    {
        for d in &j.1.devices {
            assert!(devices.insert(*d), "{ctx}: device {d} held twice");
        }
        let open: i64 = conn
            .query_row(
                "SELECT count(*) FROM attempts WHERE job = ?1 AND ended_at IS NULL",
                [j.0.0 as i64],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(open, 1, "{ctx}: job {} has {open} open attempts", j.0);
    }
    let stray: i64 = conn
        .query_row(
            "SELECT count(*) FROM attempts JOIN jobs ON jobs.id = attempts.job
             WHERE attempts.ended_at IS NULL AND jobs.state NOT IN ('SCHEDULED','STARTING','RUNNING')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stray, 0, "{ctx}: open attempts of jobs not holding GPUs");
}
