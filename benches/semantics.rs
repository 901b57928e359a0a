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
//! A last table measures SPEC §14 (issue 40) on the 1/8 trace with every rule on: as it
//! is, with every job longer than an hour saving every 30 minutes, and the same with a
//! 120 s notice on every share. Its lost % is computed from the decision lines: a
//! `requeued` or `failed` line that ends a preemption carries `"lost"` where the job
//! saves or had a notice, and otherwise the attempt lost everything since its `started`.
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
    // `cargo bench --bench semantics -- checkpoints`: only SPEC §14's table.
    if std::env::args().skip(1).any(|a| a == "checkpoints") {
        checkpoints(&dir);
        return;
    }
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
            let p95 = preemptions_p95(&text);
            let class = |k: &str| wait_class(&s, k);
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
    checkpoints(&dir);
    if std::env::var_os("SHAREQ_BENCH_OUT").is_some() {
        println!("scenarios kept in {}", dir.display());
    }
}

/// GPU-seconds lost to preemption, from the decision lines (SPEC §14): the `"lost"` of the
/// line that ends a preemption, or, where it has none, the GPUs × the time since the
/// attempt's `started`.
fn lost_from_lines(text: &str) -> f64 {
    let mut started: HashMap<String, (i64, i64)> = HashMap::new();
    let mut stopping: std::collections::HashSet<String> = Default::default();
    let mut lost = 0f64;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(ev), Some(job)) = (v["event"].as_str(), v["job"].as_str()) else {
            continue;
        };
        let t = v["t"].as_i64().unwrap_or(0);
        match ev {
            "started" => {
                started.insert(job.to_string(), (t, v["quantity"].as_i64().unwrap_or(0)));
            }
            "preempted" => {
                stopping.insert(job.to_string());
            }
            "requeued" | "failed" if stopping.remove(job) => {
                lost += match v["lost"].as_f64() {
                    Some(l) => l,
                    None => started
                        .get(job)
                        .map_or(0.0, |&(t0, q)| (q * (t - t0)) as f64),
                };
            }
            "succeeded" | "failed" | "cancelled" => {
                stopping.remove(job);
            }
            _ => {}
        }
    }
    lost
}

/// A checkpoint run: its label, (longer than, save every) in seconds, the notice's seconds.
type CheckpointRun = (&'static str, Option<(i64, u64)>, Option<u32>);

/// SPEC §14 on the 1/8 trace: checkpoints and notices against today.
fn checkpoints(dir: &std::path::Path) {
    let runs: [CheckpointRun; 3] = [
        ("today: no checkpoints, no notice", None, None),
        ("jobs > 1 h save every 30 min", Some((3600, 1800)), None),
        (
            "jobs > 1 h save every 30 min, 120 s notice on every share",
            Some((3600, 1800)),
            Some(120),
        ),
    ];
    println!();
    println!(
        "| checkpoints (1/8, all rules) | lost % (lines) | lost % (summary) | goodput | worst job | p95 preempted | larger p50 / p95 / max (d) | within p50 / p95 / max (d) | replay |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (i, (label, every, notice)) in runs.iter().enumerate() {
        let name = format!("philly-8-ckpt-{i}");
        let path = philly::write_checkpoint_variant(dir, &name, *every, *notice);
        let (text, s, elapsed) = philly::replay_summary(&path);
        let used = s["gpu_seconds_used"].as_f64().unwrap_or(0.0);
        let lines_pct = if used > 0.0 {
            100.0 * lost_from_lines(&text) / used
        } else {
            0.0
        };
        let p95 = preemptions_p95(&text);
        let class = |k: &str| wait_class(&s, k);
        println!(
            "| {label} | {lines_pct:.2} | {:.2} | {:.3} | {} | {p95} | {} | {} | {:.2} s |",
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

/// The 95th percentile of preemptions per preempted job, from the decision lines.
fn preemptions_p95(text: &str) -> u64 {
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
    counts
        .get(((counts.len() as f64 * 0.95).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0)
}

/// A size class's waits from the summary, `p50 / p95 / max (N jobs)` in days.
fn wait_class(s: &serde_json::Value, k: &str) -> String {
    let days = |w: &serde_json::Value, k: &str| w[k].as_f64().unwrap_or(0.0) / 86400.0;
    let w = &s[k];
    format!(
        "{:.1} / {:.1} / {:.1} ({} jobs)",
        days(w, "p50"),
        days(w, "p95"),
        days(w, "max"),
        w["jobs"]
    )
}
