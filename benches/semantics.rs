//! How the scheduling rules spread the cost of preemption (issue 9, SPEC §3/§4.1): the
//! Philly trace replayed at 1/8 of its capacity (every limit and the environment divided by
//! 8), as it is and with random priorities 0–3 plus in-share preemption. Prints the replay
//! summary's preemption figures: the most preemptions of one job, the GPU-seconds lost to
//! preemption (work that restarts from zero) and the jobs started and preempted at the same
//! instant.
//!
//! `cargo bench --bench semantics` (set SHAREQ_BENCH_OUT=DIR to keep the scenarios, e.g. to
//! replay them with another build of shareq).

mod philly;

use philly::write_scenario;
use shareq::replay::{Options, Scenario, run};
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let out_dir = std::env::var_os("SHAREQ_BENCH_OUT").map(PathBuf::from);
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = out_dir.unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).expect("out dir");
    for (name, priorities) in [("philly-8", false), ("philly-8-prio-inshare", true)] {
        let path = write_scenario(&dir, name, priorities);
        let sc = Scenario::load(&path).expect("scenario loads");
        let start = Instant::now();
        let mut out = Vec::new();
        run(
            &sc,
            &mut out,
            Options {
                summary: true,
                keep_lines: false,
            },
        )
        .expect("runs");
        let elapsed = start.elapsed();
        let text = String::from_utf8(out).expect("utf-8");
        let rejected = text.lines().filter(|l| l.contains("\"rejected\"")).count();
        let summary: serde_json::Value =
            serde_json::from_str(text.lines().last().expect("summary")).expect("json");
        let used = summary["gpu_seconds_used"].as_f64().unwrap_or(0.0);
        let lost = summary["gpu_seconds_lost_to_preemption"]
            .as_f64()
            .unwrap_or(0.0);
        let preemptions: u64 = summary["shares"]
            .as_object()
            .map(|m| m.values().filter_map(|s| s["preemptions"].as_u64()).sum())
            .unwrap_or(0);
        println!(
            "{name}: {:.1} s, {rejected} rejected, {preemptions} preemptions, worst job preempted {} times, \
             {lost:.0} GPU-s lost to preemption ({:.1} % of {used:.0} GPU-s used), \
             {} started and preempted at the same instant, utilisation {:.3}",
            elapsed.as_secs_f64(),
            summary["max_preemptions_of_one_job"],
            if used > 0.0 { 100.0 * lost / used } else { 0.0 },
            summary["started_and_preempted_same_instant"],
            summary["utilisation"].as_f64().unwrap_or(0.0),
        );
    }
    if std::env::var_os("SHAREQ_BENCH_OUT").is_some() {
        println!("scenarios kept in {}", dir.display());
    }
}
