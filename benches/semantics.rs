//! How the scheduling rules serve people on a real trace (issues 9 and 21, SPEC §3, §4.1):
//! the Philly trace replayed at 1/8 of its capacity (every limit and the environment
//! divided by 8), as it is and with random priorities 0–3 plus in-share preemption, each
//! with the rules of round 3 on and each one off, side by side: the victim order's credit
//! per past preemption (`spreadSeconds` 3600 against 0, plain most recent first) and the
//! reservation for big jobs (`reserveAfterSeconds` 86400 against 0, never).
//!
//! Prints per run the replay summary's figures: GPU time lost to preemption (work that
//! restarts from zero, in % of the GPU time used), goodput (useful GPU time ÷ usable GPUs
//! × span), the most preemptions of one job, the p95 of the preemptions per preempted job,
//! and the first-start waits of jobs larger than their share's guarantee and within it.
//!
//! Without priorities, four more runs move one parameter by 1 % each way, which shows how
//! much of a figure (goodput above all: the span ends with the last job to finish) is the
//! trace's tail rather than the rule.
//!
//! `cargo bench --bench semantics` (set SHAREQ_BENCH_OUT=DIR to keep the scenarios, e.g. to
//! replay them with another build of shareq).

mod philly;

use philly::write_variant;
use std::collections::HashMap;
use std::path::PathBuf;

const SPREAD: &[&str] = &["preemption", "spreadSeconds"];
const RESERVE: &[&str] = &["reserveAfterSeconds"];

/// ServiceEnvironment fields to set: (path of keys, value).
type EnvFields = Vec<(&'static [&'static str], u64)>;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let out_dir = std::env::var_os("SHAREQ_BENCH_OUT").map(PathBuf::from);
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = out_dir.unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).expect("out dir");
    let variants: [(&str, EnvFields); 4] = [
        ("all rules", vec![]),
        ("spreadSeconds 0", vec![(SPREAD, 0)]),
        ("reserveAfterSeconds 0", vec![(RESERVE, 0)]),
        ("both off", vec![(SPREAD, 0), (RESERVE, 0)]),
    ];
    // How much of a figure is the rule and how much the trace's tail: every rule on, with
    // one parameter moved by 1 % (the span, and so goodput, ends with whichever job
    // finishes last).
    let nudged: [(&str, EnvFields); 4] = [
        (
            "all rules, reserveAfterSeconds 85536 (-1 %)",
            vec![(RESERVE, 85_536)],
        ),
        (
            "all rules, reserveAfterSeconds 87264 (+1 %)",
            vec![(RESERVE, 87_264)],
        ),
        (
            "all rules, spreadSeconds 3564 (-1 %)",
            vec![(SPREAD, 3_564)],
        ),
        (
            "all rules, spreadSeconds 3636 (+1 %)",
            vec![(SPREAD, 3_636)],
        ),
    ];
    println!(
        "| trace | rules | lost % | goodput | worst job | p95 preempted | larger p50 / p95 / max (d) | within p50 / p95 / max (d) | replay |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (base, priorities) in [("philly-8", false), ("philly-8-prio-inshare", true)] {
        let extra = if priorities {
            &nudged[..0]
        } else {
            &nudged[..]
        };
        for (i, (label, env)) in variants.iter().chain(extra).enumerate() {
            let name = format!("{base}-{i}");
            let path = write_variant(&dir, &name, priorities, env);
            let (text, s, elapsed) = philly::replay_summary(&path);
            // Preemptions per preempted job, from the decision lines.
            let mut per_job: HashMap<&str, u64> = HashMap::new();
            for l in text
                .lines()
                .filter(|l| l.contains("\"event\":\"preempted\""))
            {
                if let Some(job) = l
                    .split("\"job\":\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                {
                    *per_job.entry(job).or_default() += 1;
                }
            }
            let mut counts: Vec<u64> = per_job.into_values().collect();
            counts.sort_unstable();
            let p95 = counts
                .get(((counts.len() as f64 * 0.95).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(0);
            let days = |w: &serde_json::Value, k: &str| w[k].as_f64().unwrap_or(0.0) / 86400.0;
            let class = |k: &str| {
                let w = &s[k];
                format!(
                    "{:.1} / {:.1} / {:.1} ({} jobs)",
                    days(w, "p50"),
                    days(w, "p95"),
                    days(w, "max"),
                    w["jobs"]
                )
            };
            println!(
                "| {base} | {label} | {:.2} | {:.3} | {} | {p95} | {} | {} | {:.2} s |",
                s["gpu_seconds_lost_to_preemption_pct"]
                    .as_f64()
                    .unwrap_or(0.0),
                s["goodput"].as_f64().unwrap_or(0.0),
                s["max_preemptions_of_one_job"],
                class("waits_larger_than_guarantee"),
                class("waits_within_guarantee"),
                elapsed.as_secs_f64(),
            );
        }
    }
    if std::env::var_os("SHAREQ_BENCH_OUT").is_some() {
        println!("scenarios kept in {}", dir.display());
    }
}
