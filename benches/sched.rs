//! Scheduler benchmarks (issue 2): the Philly trace replay (a), the same trace with
//! arrivals compressed 20× (b), one pass after a single submit in a large state (c), and
//! growth with 4× the jobs (d), and the trace on the Philly cluster's shape, 352 nodes × 8
//! GPUs (e: time, memory, growth, and the fragmentation figures beside the single pool's),
//! and (f) the cost of fair share (SPEC §12): a GPU freed with 100,000 jobs of 50 users
//! queued in one share, with and without `fairShare`, side by side; and (g) arrays (SPEC §13): in the large state, 10,000 queued single jobs against one
//! 10,000-child array, and 10,000 PENDING jobs: the submit, and a pass after one submit.
//! Prints figures; run with `cargo bench --bench sched` (one part: `-- f`).

use shareq::config::{parse_documents, validate};
use shareq::model::JobSpec;
use shareq::model::UnitCapacity;
use shareq::replay::{Options, Scenario, run};
use shareq::sched::{Clock, Event, Sched};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches/data")
        .join(name)
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Load and replay a scenario, discarding the JSON lines (they are formatted all the
/// same). Returns the wall time and the number of lines.
fn replay(path: &Path) -> (Duration, usize) {
    let start = Instant::now();
    let sc = Scenario::load(path).expect("scenario loads");
    let mut counter = LineCounter(0);
    run(&sc, &mut counter, Options::default()).expect("runs");
    (start.elapsed(), counter.0)
}

struct LineCounter(usize);

impl std::io::Write for LineCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.iter().filter(|&&b| b == b'\n').count();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Write a copy of the Philly scenario whose trace has arrivals divided by `div` and keeps
/// the first `keep` rows.
fn scaled_trace(dir: &Path, div: i64, keep: usize) -> PathBuf {
    scaled_trace_on(dir, div, keep, None)
}

/// [`scaled_trace`] on `nodes` nodes of `per` GPUs each instead of one pool (SPEC §10).
fn scaled_trace_on(dir: &Path, div: i64, keep: usize, nodes: Option<(u32, u32)>) -> PathBuf {
    std::fs::create_dir_all(dir).expect("temp dir");
    let csv = std::fs::read_to_string(data("philly.csv")).expect("trace");
    let mut out = String::with_capacity(csv.len());
    for (i, line) in csv.lines().enumerate() {
        if i == 0 {
            out.push_str(line);
        } else if i <= keep {
            let (at, rest) = line.split_once(',').expect("csv row");
            let at: i64 = at.parse().expect("at");
            out.push_str(&format!("{},{rest}", at / div));
        } else {
            break;
        }
        out.push('\n');
    }
    std::fs::write(dir.join("philly.csv"), out).expect("write trace");
    let mut scenario = std::fs::read_to_string(data("philly.yaml")).expect("scenario");
    if let Some((n, per)) = nodes {
        let pool = "    devices:\n      fake: 2816\n";
        assert!(
            scenario.contains(pool),
            "philly.yaml declares one pool of 2816"
        );
        let mut list = String::from("  nodes:\n");
        for i in 0..n {
            list.push_str(&format!(
                "  - {{name: n{i:03}, devices: {{gpu: {{fake: {per}}}}}}}\n"
            ));
        }
        scenario = scenario.replacen(pool, &list, 1);
    }
    let path = dir.join("philly.yaml");
    std::fs::write(&path, scenario).expect("write scenario");
    path
}

fn best_of(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..n).map(|_| f()).min().unwrap_or_default()
}

/// A state with `pending` queued and as many running jobs as `gpus` allows (1-GPU jobs),
/// over 100 shares: 20 RESERVE, 30 LEND, 50 LEND_AND_BORROW (half with in-share
/// preemption). Share `s000` (LEND) has its 8 GPUs lent out, so a submit to it reclaims.
fn big_state(gpus: u32, pending: usize) -> Sched {
    let shares = 100u32;
    let per = (gpus - 24) / shares;
    let mut y = format!(
        "kind: ServiceEnvironment\nname: bench\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: {gpus}, devices: {{fake: {gpus}}}}}]\n"
    );
    for i in 0..shares {
        let (strategy, borrow) = match i % 10 {
            0 | 1 => ("RESERVE", ""),
            2..=4 => ("LEND", ""),
            _ => ("LEND_AND_BORROW", ", borrowLimit: 200"),
        };
        let strategy = if i == 0 { "LEND" } else { strategy };
        let ins = if i % 2 == 0 { "ENABLED" } else { "DISABLED" };
        y.push_str(&format!(
            "---\nkind: QuotaShare\nquotaShareName: s{i:03}\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: {per}}}]\nresourceSharingConfiguration: {{strategy: {strategy}{borrow}}}\npreemptionConfiguration: {{inSharePreemption: {ins}}}\n"
        ));
    }
    let cfg = validate(parse_documents(&y, None).expect("parses")).expect("valid");
    let mut s = Sched::new(&cfg, &UnitCapacity::simulated(&cfg), Clock::Wall);
    let mut now = 0i64;
    // Fill every share but s000 up to its limit, then let borrowers take the rest.
    for i in 1..shares {
        for k in 0..per {
            let spec = JobSpec::new(&format!("r{i}-{k}"), &format!("s{i:03}"), 1, k % 7);
            let _ = s.submit(spec, now);
        }
    }
    s.pass(now);
    let mut i = 5u32;
    while s.used("gpu") < s.usable("gpu") {
        now += 1;
        let spec = JobSpec::new(&format!("b{now}"), &format!("s{i:03}"), 1, 0);
        let _ = s.submit(spec, now);
        s.pass(now);
        i = if i + 10 >= shares { 5 } else { i + 10 };
    }
    // The queue: jobs of every share, mixed sizes and priorities, none of which can start.
    let mut k = 0usize;
    while s.queue_len() < pending {
        now += 1;
        let share = 1 + (k as u32 * 7919) % (shares - 1);
        let q = 1 + (k as u32 % 3);
        let spec = JobSpec::new(
            &format!("p{k}"),
            &format!("s{share:03}"),
            q,
            (k % 10) as u32,
        );
        let _ = s.submit(spec, now);
        k += 1;
    }
    s.pass(now);
    s.take_events();
    s
}

/// One share `team` (LEND_AND_BORROW, limit 4) and a lender `other` (LEND, limit 4) on 8
/// GPUs: `team` holds all 8 (1-GPU jobs), `pending` jobs of 50 users wait in it (sizes
/// 1–3, priorities 0–9, the users round-robin in bursts). `policy` is added to `team`.
fn fair_state(policy: &str, pending: usize) -> (Sched, Vec<shareq::model::JobId>) {
    let y = format!(
        "kind: ServiceEnvironment\nname: bench\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 8, devices: {{fake: 8}}}}]\n\
         ---\nkind: QuotaShare\nquotaShareName: team\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 4}}]\n\
         resourceSharingConfiguration: {{strategy: LEND_AND_BORROW}}\n{policy}\n\
         ---\nkind: QuotaShare\nquotaShareName: other\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 4}}]\n\
         resourceSharingConfiguration: {{strategy: LEND}}\n"
    );
    let cfg = validate(parse_documents(&y, None).expect("parses")).expect("valid");
    let mut s = Sched::new(&cfg, &UnitCapacity::simulated(&cfg), Clock::Wall);
    let by = |name: &str, user: usize, q: u32, prio: u32| {
        let mut spec = JobSpec::new(name, "team", q, prio);
        spec.submitter = Some(std::sync::Arc::new(shareq::model::Submitter {
            name: format!("user{user:02}"),
            uid: 1000 + user as u32,
        }));
        spec
    };
    let mut holders = Vec::new();
    for k in 0..8 {
        holders.push(
            s.submit(by(&format!("h{k}"), k, 1, 9), k as i64)
                .expect("ok"),
        );
    }
    s.pass(8);
    let mut now = 1_000i64;
    for k in 0..pending {
        now += 1;
        let user = (k / 7) % 50;
        let spec = by(&format!("p{k}"), user, 1 + (k as u32 % 3), (k % 10) as u32);
        let _ = s.submit(spec, now);
    }
    s.pass(now);
    s.take_events();
    (s, holders)
}

/// A GPU freed (one holder ends) and the pass that follows, on a copy of `base` each time:
/// median and p99, and the decisions of one.
fn free_timings(
    base: &Sched,
    holders: &[shareq::model::JobId],
    samples: usize,
) -> (Duration, Duration, usize) {
    let mut times = Vec::with_capacity(samples);
    let mut decisions = 0;
    for i in 0..samples {
        let mut s = base.clone();
        let t = 200_000 + i as i64;
        let start = Instant::now();
        s.job_exited(holders[i % holders.len()], 0, t);
        s.pass(t);
        times.push(start.elapsed());
        decisions = s.take_events().len();
    }
    times.sort();
    (times[samples / 2], times[samples * 99 / 100], decisions)
}

fn pass_timings(base: &Sched, spec: &JobSpec, samples: usize) -> (Duration, Duration, usize) {
    let mut times = Vec::with_capacity(samples);
    let mut decisions = 0;
    for _ in 0..samples {
        let mut s = base.clone();
        let start = Instant::now();
        let _ = s.submit(spec.clone(), 10_000_000);
        s.pass(10_000_000);
        times.push(start.elapsed());
        decisions = s
            .take_events()
            .iter()
            .filter(|e| !matches!(e, Event::Submitted { .. }))
            .count();
    }
    times.sort();
    (times[samples / 2], times[samples * 99 / 100], decisions)
}

fn main() {
    // cargo bench passes `--bench`; any other argument is a filter on the bench name.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let want = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let tmp = std::env::temp_dir().join(format!("shareq-bench-{}", std::process::id()));

    if want("a") {
        let (first, lines) = replay(&data("philly.yaml"));
        let rss = peak_rss_mb();
        let best = best_of(3, || replay(&data("philly.yaml")).0).min(first);
        println!(
            "a. philly replay (82,229 jobs, 11 shares, 2,816 GPUs): best {:.3} s of 4, {lines} lines, peak RSS {rss:.1} MB",
            best.as_secs_f64()
        );
    }
    if want("b") {
        let p = scaled_trace(&tmp.join("b"), 20, usize::MAX);
        let (t, lines) = replay(&p);
        println!(
            "b. philly replay, arrivals / 20: {:.3} s, {lines} lines, peak RSS {:.1} MB",
            t.as_secs_f64(),
            peak_rss_mb()
        );
    }
    if want("c") {
        for (gpus, label) in [(1024u32, "1,024 GPUs"), (2048, "2,048 GPUs")] {
            let base = big_state(gpus, 10_000);
            let running = base.jobs().filter(|j| j.is_holding()).count();
            let waits = JobSpec::new("new", "s017", 1, 3);
            let reclaim = JobSpec::new("new", "s000", 2, 3);
            let (m, p99, d) = pass_timings(&base, &waits, 301);
            println!(
                "c. one pass after a submit, {label}, {running} running, {} queued, 100 shares — job waits: median {:.1} µs, p99 {:.1} µs ({d} decisions)",
                base.queue_len(),
                m.as_secs_f64() * 1e6,
                p99.as_secs_f64() * 1e6
            );
            let (m, p99, d) = pass_timings(&base, &reclaim, 301);
            println!(
                "c. one pass after a submit, {label} — job reclaims lent GPUs: median {:.1} µs, p99 {:.1} µs ({d} decisions)",
                m.as_secs_f64() * 1e6,
                p99.as_secs_f64() * 1e6
            );
        }
    }
    if want("d") {
        let total = 82_229usize;
        for (div, label) in [(1i64, "original arrivals"), (20, "arrivals / 20")] {
            let quarter = scaled_trace(&tmp.join(format!("d{div}q")), div, total / 4);
            let full = scaled_trace(&tmp.join(format!("d{div}f")), div, total);
            let tq = best_of(3, || replay(&quarter).0);
            let tf = best_of(3, || replay(&full).0);
            println!(
                "d. growth, {label}: {} jobs {:.3} s, {} jobs {:.3} s, ratio {:.2}× for 4× the jobs",
                total / 4,
                tq.as_secs_f64(),
                total,
                tf.as_secs_f64(),
                tf.as_secs_f64() / tq.as_secs_f64()
            );
        }
    }
    if want("e") {
        let total = 82_229usize;
        let nodes = Some((352, 8));
        let full = scaled_trace_on(&tmp.join("ef"), 1, total, nodes);
        let (first, lines) = replay(&full);
        let rss = peak_rss_mb();
        let best = best_of(2, || replay(&full).0).min(first);
        println!(
            "e. philly replay on 352 nodes × 8 GPUs: best {:.3} s of 3, {lines} lines, peak RSS {rss:.1} MB",
            best.as_secs_f64()
        );
        let quarter = scaled_trace_on(&tmp.join("eq"), 1, total / 4, nodes);
        let tq = best_of(3, || replay(&quarter).0);
        println!(
            "e. growth on nodes: {} jobs {:.3} s, {total} jobs {:.3} s, ratio {:.2}× for 4× the jobs",
            total / 4,
            tq.as_secs_f64(),
            best.as_secs_f64(),
            best.as_secs_f64() / tq.as_secs_f64()
        );
        let pool = scaled_trace(&tmp.join("ep"), 1, total);
        let pool8 = scaled_trace(&tmp.join("ep8"), 8, total);
        let full8 = scaled_trace_on(&tmp.join("ef8"), 8, total, nodes);
        let t8 = best_of(2, || replay(&full8).0);
        println!(
            "e. philly, arrivals / 8, on 352 nodes × 8 GPUs: best {:.3} s of 2, peak RSS so far {:.1} MB",
            t8.as_secs_f64(),
            peak_rss_mb()
        );
        for (label, p) in [
            ("one pool", &pool),
            ("352 × 8", &full),
            ("arrivals / 8, one pool", &pool8),
            ("arrivals / 8, 352 × 8", &full8),
        ] {
            let s = summary_of(p);
            let get = |k: &str| s.get(k).cloned().unwrap_or(serde_json::Value::Null);
            let waits: Vec<f64> = s["shares"]
                .as_object()
                .map(|m| m.values().filter_map(|v| v["mean_wait"].as_f64()).collect())
                .unwrap_or_default();
            let mean_wait = waits.iter().sum::<f64>() / waits.len().max(1) as f64;
            println!(
                "e. {label}: utilisation {:.4}, GPU-s lost to preemption {}, GPU-s idle while FRAGMENTED {}, rejected as larger than any node {}, mean of share mean waits {mean_wait:.0} s",
                get("utilisation").as_f64().unwrap_or(0.0),
                get("gpu_seconds_lost_to_preemption"),
                get("gpu_seconds_idle_while_fragmented"),
                get("jobs_rejected_larger_than_any_node"),
            );
        }
    }
    if want("f") {
        let pending = 100_000;
        let mut medians = Vec::new();
        for (label, policy) in [
            ("first come, first served", ""),
            ("fairShare", "fairShare: {halfLifeSeconds: 3600}"),
            (
                "fairShare + userLimit 6",
                "fairShare: {halfLifeSeconds: 3600}\nuserLimit: 6",
            ),
        ] {
            let (base, holders) = fair_state(policy, pending);
            let (m, p99, d) = free_timings(&base, &holders, 201);
            medians.push(m.as_secs_f64());
            println!(
                "f. a GPU freed, {} queued of 50 users in one share, {label}: median {:.1} µs, p99 {:.1} µs ({d} decisions), {:.2}× the first",
                base.queue_len(),
                m.as_secs_f64() * 1e6,
                p99.as_secs_f64() * 1e6,
                m.as_secs_f64() / medians[0]
            );
        }
    }
    if want("g") {
        arrays();
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// g: what an array costs the core against the same number of single jobs (SPEC §13).
fn arrays() {
    use shareq::model::{ArrayProperties, Dependency, JobRef};
    const N: u32 = 10_000;
    let base = big_state(1024, 0);
    let probe = JobSpec::new("probe", "s000", 1, 9);
    let (p50, p99, _) = pass_timings(&base, &probe, 21);
    println!(
        "g. empty queue: a pass after one submit p50 {:.3} ms, p99 {:.3} ms",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    let mut singles = base.clone();
    let t = Instant::now();
    for i in 0..N {
        let _ = singles.submit(JobSpec::new(&format!("q{i}"), "s005", 1, 0), 1_000);
    }
    let submit_singles = t.elapsed();
    singles.pass(1_000);
    singles.take_events();
    let mut array = base.clone();
    let mut spec = JobSpec::new("sweep", "s005", 1, 0);
    spec.array_properties = Some(ArrayProperties { size: N });
    let t = Instant::now();
    let parent = array.submit(spec, 1_000).expect("array accepted");
    let submit_array = t.elapsed();
    array.pass(1_000);
    array.take_events();
    // The same array, every child PENDING (after a job that runs): in no queue at all.
    let mut pending = base.clone();
    let blocker = pending
        .jobs()
        .find(|j| j.is_holding())
        .map(|j| j.id)
        .expect("a running job");
    let mut spec = JobSpec::new("after", "s005", 1, 0);
    spec.array_properties = Some(ArrayProperties { size: N });
    spec.depends_on = vec![Dependency::on(JobRef::job(blocker.0))];
    pending.submit(spec, 1_000).expect("accepted");
    pending.pass(1_000);
    pending.take_events();
    assert_eq!(array.queue_len(), singles.queue_len());
    // Each state twice, in turn: a sample clones the state (its job slab then grows by
    // one), and what the allocator does for that depends on what ran before it.
    for (label, s, submit) in [
        ("10,000 single jobs queued", &singles, Some(submit_singles)),
        ("one 10,000-child array queued", &array, Some(submit_array)),
        ("one 10,000-child array PENDING", &pending, None),
        ("10,000 single jobs queued, again", &singles, None),
        ("one 10,000-child array queued, again", &array, None),
    ] {
        let (p50, p99, _) = pass_timings(s, &probe, 21);
        let submit = submit.map_or(String::new(), |d| {
            format!("submit {:.1} ms; ", d.as_secs_f64() * 1e3)
        });
        println!(
            "g. {label}: {submit}a pass after one submit p50 {:.3} ms, p99 {:.3} ms",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
    let counts = array.array_counts(parent);
    println!(
        "g. the array's counts (O(children), for the parent's row): {}",
        shareq::sched::counts_text(&counts)
    );
}

/// The `--summary` line of a replay, parsed.
fn summary_of(path: &Path) -> serde_json::Value {
    let sc = Scenario::load(path).expect("scenario loads");
    let mut out = Vec::new();
    run(
        &sc,
        &mut out,
        Options {
            summary: true,
            ..Options::default()
        },
    )
    .expect("runs");
    let text = String::from_utf8_lossy(&out);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or(serde_json::Value::Null)
}
