//! How good the start estimates are (SPEC §11, issue 17): the Philly trace at 1/8 of its
//! capacity (first `SHAREQ_FORECAST_JOBS` jobs, default 4,000) is replayed; at every
//! `SHAREQ_FORECAST_EVERY`-th submission instant (default 5) the jobs just submitted that
//! did not start at once get an estimate — the forecast run on a copy of the replay's
//! scheduler at that instant, with typical runtimes learned from the jobs finished so far
//! (as live) — and the estimate is compared with when the job really started. A second
//! run gives the forecast each job's true run time (as `timeoutSeconds`), which leaves only
//! the error of not knowing future arrivals.
//!
//! Then the cost on the runtime side: cloning a live-style scheduler holding the whole
//! trace (82,229 jobs submitted at once) and running one estimate of its queue.
//!
//! `cargo bench --bench forecast`

mod philly;

use shareq::forecast::{self, Estimate, Runtimes};
use shareq::model::{JobId, UnitCapacity};
use shareq::replay::{Action, Options, Scenario, run_observed};
use shareq::sched::{Clock, Event, Sched};
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

fn env_num(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Default)]
struct Tally {
    /// (estimate made at, estimated start or None, job)
    estimates: Vec<(i64, Estimate, JobId)>,
    first_start: HashMap<JobId, i64>,
}

fn replay(sc: &Scenario, every: usize, learn: bool) -> Tally {
    let mut tally = Tally::default();
    let mut started_at: HashMap<JobId, i64> = HashMap::new();
    let mut samples: VecDeque<(String, i64)> = VecDeque::new();
    let mut fresh: Vec<JobId> = Vec::new();
    let mut pass_at: Option<i64> = None;
    let mut instants = 0usize;
    let mut observe = |o: shareq::replay::Observation| {
        if o.before_pass {
            pass_at = Some(o.t);
            return;
        }
        for ev in o.events {
            match ev {
                Event::Submitted { job } => fresh.push(*job),
                Event::Started { job, .. } => {
                    started_at.insert(*job, o.t);
                    tally.first_start.entry(*job).or_insert(o.t);
                }
                Event::Succeeded { job } => {
                    if let (Some(t0), Some(j)) = (started_at.get(job), o.sched.job(*job)) {
                        let share = o.sched.share_name(j.share).to_string();
                        samples.push_front((share, (o.t - t0) * 1000));
                        samples.truncate(forecast::runtimes::LEARNED_FROM);
                    }
                }
                _ => {}
            }
        }
        if pass_at != Some(o.t) {
            return;
        }
        // The batch after the pass: the state the instant leaves.
        pass_at = None;
        let waiting: Vec<JobId> = fresh
            .drain(..)
            .filter(|id| o.sched.job(*id).is_some_and(|j| j.is_pending()))
            .collect();
        if waiting.is_empty() {
            return;
        }
        instants += 1;
        if !instants.is_multiple_of(every) {
            return;
        }
        // Without learning, the forecast knows each job's timeout only (the second run
        // sets it to the true run time): a history would cut it to the typical one.
        let runtimes = if learn {
            Runtimes::from_samples(samples.iter().cloned())
        } else {
            Runtimes::default()
        };
        let est = forecast::estimate(o.sched.clone(), o.t, &runtimes);
        for id in waiting {
            tally.estimates.push((o.t, est.of(id), id));
        }
    };
    run_observed(sc, &mut std::io::sink(), Options::default(), &mut observe).expect("replay");
    tally
}

fn pct(v: &mut [i64], q: f64) -> i64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = ((v.len() as f64) * q).ceil() as usize;
    v[i.clamp(1, v.len()) - 1]
}

fn report(label: &str, t: &Tally, took: f64) {
    let (mut abs, mut rel, mut signed) = (Vec::new(), Vec::new(), Vec::new());
    let (mut beyond_right, mut beyond_wrong, mut never) = (0, 0, 0);
    for &(at, e, id) in &t.estimates {
        let actual = t.first_start.get(&id).copied();
        match (e, actual) {
            (Estimate::At(s), Some(a)) => {
                abs.push((a - s).abs());
                signed.push(a - s);
                // Relative to the real wait (at least a minute).
                rel.push(((a - s).abs() * 100) / (a - at).max(60));
            }
            (Estimate::At(_), None) => never += 1,
            (Estimate::NotWithin(end), Some(a)) if a > end => beyond_right += 1,
            (Estimate::NotWithin(_), None) => beyond_right += 1,
            (Estimate::NotWithin(_), Some(_)) => beyond_wrong += 1,
            (Estimate::NotYet, _) => {}
        }
    }
    let h = |s: i64| shareq::duration::human(s * 1000);
    let n = abs.len();
    let within = |p: i64| rel.iter().filter(|&&r| r <= p).count() * 100 / n.max(1);
    println!(
        "{label}: {} estimates in {took:.1} s; {n} with a start: |error| p50 {} p90 {} p99 {}, \
         median signed error (actual - estimate) {}; relative to the real wait: p50 {} %, \
         within 10 %: {} %, within 50 %: {} %; 'not within 7d': {beyond_right} right, {beyond_wrong} wrong; \
         {never} estimated but never started in the window",
        t.estimates.len(),
        h(pct(&mut abs.clone(), 0.5)),
        h(pct(&mut abs.clone(), 0.9)),
        h(pct(&mut abs, 0.99)),
        {
            let m = pct(&mut signed, 0.5);
            if m < 0 { format!("-{}", h(-m)) } else { h(m) }
        },
        pct(&mut rel.clone(), 0.5),
        within(10),
        within(50),
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let jobs = env_num("SHAREQ_FORECAST_JOBS", 4000);
    let every = env_num("SHAREQ_FORECAST_EVERY", 5).max(1);
    let tmp = tempfile::tempdir().expect("temp dir");
    let path = philly::write_scenario(tmp.path(), "philly-8", false);
    let mut sc = Scenario::load(&path).expect("scenario loads");
    sc.trace.truncate(jobs);
    println!(
        "Philly at 1/8, first {} jobs, estimates at every {every}th submission instant with a job left waiting",
        sc.trace.len()
    );
    let t0 = Instant::now();
    let typical = replay(&sc, every, true);
    report(
        "typical runtimes from history",
        &typical,
        t0.elapsed().as_secs_f64(),
    );
    for a in &mut sc.trace {
        if let Action::Submit(s) = &mut a.action {
            s.timeout_seconds = s.duration.map(|d| d as u64);
        }
    }
    let t0 = Instant::now();
    let known = replay(&sc, every, false);
    report(
        "true run times (no arrivals known)",
        &known,
        t0.elapsed().as_secs_f64(),
    );

    // The runtime side: a live-style scheduler (ms) with the whole trace submitted.
    let full = Scenario::load(&philly::data("philly.yaml")).expect("philly loads");
    let mut s = Sched::new(
        &full.config,
        &UnitCapacity::simulated(&full.config),
        Clock::Wall,
    );
    let mut samples = Vec::new();
    for a in &full.trace {
        if let Action::Submit(sub) = &a.action {
            let _ = s.submit(sub.job_spec(), 0);
            samples.push((
                sub.quota_share_name.clone(),
                sub.duration.unwrap_or(0) * 1000,
            ));
        }
    }
    s.pass(0);
    let _ = s.take_events();
    let runtimes =
        Runtimes::from_samples(samples.into_iter().take(forecast::runtimes::LEARNED_FROM));
    let mut clones = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let c = s.clone();
        clones.push(t.elapsed().as_secs_f64() * 1000.0);
        drop(c);
    }
    clones.sort_by(f64::total_cmp);
    let t = Instant::now();
    let est = forecast::estimate(s.clone(), 0, &runtimes);
    let est_ms = t.elapsed().as_secs_f64() * 1000.0;
    let with_start = est.starts.iter().filter(|(_, e)| e.is_some()).count();
    println!(
        "live-style scheduler with {} queued and {} running: clone (on the runtime task) median {:.1} ms (min {:.1}, max {:.1}); \
         one estimate of the whole queue (blocking pool) {est_ms:.0} ms, {with_start} starts within 7 days",
        s.queue_len(),
        s.jobs().filter(|j| j.is_holding()).count(),
        clones[2],
        clones[0],
        clones[4],
    );
}
