//! How well calibrated the start estimates are (SPEC §11, issue 41): the Philly trace at
//! 1/8 of its capacity with seeded users (a Zipf law over 8 users per share, as the
//! fair-share bench draws them: `philly::with_users`) is replayed; every
//! `SHAREQ_FORECAST_EVERY`-th submitted job (default 50) is estimated at its submission as
//! the live forecast would, from the replay's own past (`forecast::replayed`, the code
//! behind `shareq replay --estimates N`), once per predictor: SPEC §11's (the user's own
//! attempts in the share, then the share's), the share's only, and the share's by size
//! class. Of the sampled jobs that then waited at least an hour: how many got a range, the
//! share of those whose true start lies inside it (a p25–p75 range should hold about
//! half), and the median of the range's width over the true wait. Then what the estimates
//! cost a replay (`--estimates 50` against none), and on the runtime side the cost of
//! cloning a live-style scheduler holding the whole trace (82,229 jobs submitted at once)
//! and one estimate of its queue.
//!
//! `cargo bench --bench forecast` (`SHAREQ_FORECAST_JOBS=N`: the first N jobs only;
//! `SHAREQ_FORECAST_COST_ONLY=1`: only what `--estimates 50` costs the replay)

mod philly;

use shareq::forecast::replayed::{Learner, Sampled};
use shareq::forecast::{self, Estimate, Predictor, Runtimes};
use shareq::model::{JobId, UnitCapacity};
use shareq::replay::{Action, Options, Scenario, run, run_observed};
use shareq::sched::{Clock, Event, Sched};
use std::collections::HashMap;
use std::time::Instant;

fn env_num(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const PREDICTORS: [(Predictor, &str); 3] = [
    (Predictor::User, "user, then share (SPEC §11)"),
    (Predictor::Share, "share only"),
    (Predictor::SizeClass, "share by size class"),
];

/// Replay with estimates: each predictor's samples, and every job's first start.
fn replay(sc: &Scenario, every: u64) -> (Vec<Vec<Sampled>>, HashMap<JobId, i64>) {
    let mut learner = Learner::with_predictors(every, PREDICTORS.iter().map(|p| p.0).collect());
    let mut sampled: Vec<Vec<Sampled>> = vec![Vec::new(); PREDICTORS.len()];
    let mut first: HashMap<JobId, i64> = HashMap::new();
    let mut observe = |o: shareq::replay::Observation| {
        for ev in o.events {
            if let Event::Started { job, .. } = ev {
                first.entry(*job).or_insert(o.t);
            }
        }
        for (i, list) in learner.observe(&o).into_iter().enumerate() {
            sampled[i].extend(list);
        }
    };
    run_observed(sc, &mut std::io::sink(), Options::default(), &mut observe).expect("replay");
    (sampled, first)
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

fn report(label: &str, samples: &[Sampled], first: &HashMap<JobId, i64>) {
    let (mut waited, mut ranges, mut inside, mut bounds, mut bounds_held, mut beyond) =
        (0, 0, 0, 0, 0, 0);
    let mut widths = Vec::new();
    let (mut early, mut late) = (0, 0);
    for s in samples {
        let Some(&actual) = first.get(&s.job) else {
            continue;
        };
        let wait = actual - s.at;
        if wait < 3600 {
            continue;
        }
        waited += 1;
        match s.estimate {
            Estimate::Range {
                earliest, latest, ..
            } => {
                ranges += 1;
                if (earliest..=latest).contains(&actual) {
                    inside += 1;
                } else if actual < earliest {
                    early += 1;
                } else {
                    late += 1;
                }
                widths.push((latest - earliest) as f64 / wait as f64);
            }
            Estimate::AtLeast { from, .. } => {
                bounds += 1;
                if actual >= from {
                    bounds_held += 1;
                }
            }
            Estimate::NotWithin(_) => beyond += 1,
            Estimate::NotYet => {}
        }
    }
    println!(
        "{label}: {} sampled, {waited} waited ≥ 1 h: {ranges} ranges, true start inside {:.1} % \
         ({early} started before, {late} after), median width / true wait {:.2}; \
         {bounds} lower bounds ({bounds_held} held), {beyond} beyond 7 days",
        samples.len(),
        100.0 * inside as f64 / ranges.max(1) as f64,
        median(&mut widths),
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let jobs = env_num("SHAREQ_FORECAST_JOBS", usize::MAX);
    let every = env_num("SHAREQ_FORECAST_EVERY", 50).max(1) as u64;
    let tmp = tempfile::tempdir().expect("temp dir");
    let path = philly::write_with_users(tmp.path(), "philly-8-users", None);
    let mut sc = Scenario::load(&path).expect("scenario loads");
    sc.trace.truncate(jobs);
    println!(
        "Philly at 1/8 with seeded users, {} jobs, every {every}th submission estimated",
        sc.trace.len()
    );
    let cost_only = std::env::var_os("SHAREQ_FORECAST_COST_ONLY").is_some();
    if !cost_only {
        let t0 = Instant::now();
        let (sampled, first) = replay(&sc, every);
        println!(
            "replay with {} predictors' estimates: {:.1} s",
            PREDICTORS.len(),
            t0.elapsed().as_secs_f64()
        );
        for ((_, label), samples) in PREDICTORS.iter().zip(&sampled) {
            report(label, samples, &first);
        }
    }

    // What `--estimates 50` costs a replay (SPEC §11's predictor only, as the CLI runs it).
    let plain = Instant::now();
    run(&sc, &mut std::io::sink(), Options::default()).expect("replay");
    let plain = plain.elapsed().as_secs_f64();
    let with = Instant::now();
    let mut learner = Learner::new(50);
    let mut n = 0usize;
    let mut observe = |o: shareq::replay::Observation| {
        n += learner.observe(&o).into_iter().flatten().count();
    };
    run_observed(&sc, &mut std::io::sink(), Options::default(), &mut observe).expect("replay");
    println!(
        "replay cost: {plain:.1} s plain, {:.1} s with --estimates 50 ({n} estimates)",
        with.elapsed().as_secs_f64()
    );
    if cost_only {
        return;
    }

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
    let with_start = est
        .starts
        .iter()
        .filter(|(_, e)| matches!(e, forecast::Start::Range { .. }))
        .count();
    println!(
        "live-style scheduler with {} queued and {} running: clone (on the runtime task) median {:.1} ms (min {:.1}, max {:.1}); \
         one estimate of the whole queue (blocking pool) {est_ms:.0} ms, {with_start} ranges within 7 days",
        s.queue_len(),
        s.jobs().filter(|j| j.is_holding()).count(),
        clones[2],
        clones[0],
        clones[4],
    );
}
