//! Fair share among a share's users (issue 22, SPEC §12) on a real trace: the Philly
//! trace at 1/8 of its capacity (as `semantics` builds it) with a user per job drawn from
//! a Zipf law over 8 users per share (`philly::with_users`: the trace has none), replayed
//! without and with `fairShare` (half-life 7 days) on every share, side by side.
//!
//! Prints per run: the first-start waits (p50 / p95) of the jobs of the lightest half of
//! each share's users (by demand: Σ GPUs × duration they submit) and of each share's
//! heaviest user; Jain's fairness index of the users' GPU time relative to their demand
//! (1 = every user got the same fraction of what they asked for); and the run's goodput
//! and GPU time lost to preemption (fair share must not cost the machine).
//!
//! `cargo bench --bench fairshare` (SHAREQ_BENCH_OUT=DIR keeps the scenarios).

mod philly;

use std::collections::HashMap;
use std::path::PathBuf;

fn pct(v: &mut [i64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i] as f64
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let out_dir = std::env::var_os("SHAREQ_BENCH_OUT").map(PathBuf::from);
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = out_dir.unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).expect("out dir");
    println!(
        "| run | light half p50 / p95 (h) | heaviest p50 / p95 (h) | Jain (GPU time / demand) | goodput | lost % | replay |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (label, half_life) in [
        ("first come, first served", None),
        ("fairShare 7d", Some(604_800)),
    ] {
        let name = format!("philly-8-users-{}", half_life.unwrap_or(0));
        let path = philly::write_with_users(&dir, &name, half_life);
        // Each job's user and demand, from the trace (jobs are named job-<row>).
        let csv = std::fs::read_to_string(dir.join(format!("{name}.csv"))).expect("trace");
        let mut user_of: HashMap<String, String> = HashMap::new();
        let mut demand: HashMap<String, f64> = HashMap::new();
        let mut share_of: HashMap<String, String> = HashMap::new();
        for (n, line) in csv.lines().skip(1).enumerate() {
            let f: Vec<&str> = line.split(',').collect();
            let (duration, quantity, share, user) = (f[1], f[2], f[3], f[f.len() - 1]);
            let d: f64 =
                duration.parse::<f64>().unwrap_or(0.0) * quantity.parse::<f64>().unwrap_or(0.0);
            *demand.entry(user.to_string()).or_default() += d;
            share_of.insert(user.to_string(), share.to_string());
            user_of.insert(format!("job-{}", n + 1), user.to_string());
        }
        let (text, summary, elapsed) = philly::replay_summary(&path);
        // First-start waits per user, from the decision lines.
        let mut submitted: HashMap<String, i64> = HashMap::new();
        let mut waits: HashMap<String, Vec<i64>> = HashMap::new();
        for l in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
                continue;
            };
            let (Some(t), Some(job)) = (v["t"].as_i64(), v["job"].as_str()) else {
                continue;
            };
            match v["event"].as_str() {
                Some("submitted") => {
                    submitted.insert(job.to_string(), t);
                }
                Some("started") => {
                    if let Some(s) = submitted.remove(job)
                        && let Some(u) = user_of.get(job)
                    {
                        waits.entry(u.clone()).or_default().push(t - s);
                    }
                }
                _ => {}
            }
        }
        // Per share: users by demand, the lightest half and the heaviest.
        let mut by_share: HashMap<&str, Vec<(&str, f64)>> = HashMap::new();
        for (u, d) in &demand {
            by_share
                .entry(share_of[u].as_str())
                .or_default()
                .push((u.as_str(), *d));
        }
        let (mut light, mut heavy) = (Vec::new(), Vec::new());
        for users in by_share.values_mut() {
            users.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)));
            let half = users.len() / 2;
            for (i, (u, _)) in users.iter().enumerate() {
                let w = waits.get(*u).cloned().unwrap_or_default();
                if i < half {
                    light.extend(w);
                } else if i + 1 == users.len() {
                    heavy.extend(w);
                }
            }
        }
        // Jain's index of GPU time used relative to demand, over every user.
        let xs: Vec<f64> = demand
            .iter()
            .filter(|(_, d)| **d > 0.0)
            .map(|(u, d)| {
                summary["users"][u]["gpu_seconds_used"]
                    .as_f64()
                    .unwrap_or(0.0)
                    / d
            })
            .collect();
        let (sum, sq): (f64, f64) = (xs.iter().sum(), xs.iter().map(|x| x * x).sum());
        let jain = if sq > 0.0 {
            sum * sum / (xs.len() as f64 * sq)
        } else {
            0.0
        };
        let h = |s: f64| s / 3600.0;
        println!(
            "| {label} | {:.1} / {:.1} | {:.1} / {:.1} | {jain:.3} | {:.3} | {:.2} | {:.1} s |",
            h(pct(&mut light, 0.5)),
            h(pct(&mut light, 0.95)),
            h(pct(&mut heavy, 0.5)),
            h(pct(&mut heavy, 0.95)),
            summary["goodput"].as_f64().unwrap_or(0.0),
            summary["gpu_seconds_lost_to_preemption_pct"]
                .as_f64()
                .unwrap_or(0.0),
            elapsed.as_secs_f64(),
        );
    }
}
