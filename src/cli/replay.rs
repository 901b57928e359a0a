//! `shareq replay SCENARIO [--check] [--summary [--json]]`: the decisions as JSON lines
//! (SPEC §6); `--summary` a summary for people instead ([`human`]); `--summary --json`
//! the decisions and then the summary as one JSON line.

use super::error::{CliError, ExitKind};
use crate::duration;
use crate::replay::{Options, Scenario, Summary, check, run};
use crate::visible::visible;
use std::io::Write;
use std::path::Path;

/// Exit 0 when the scenario ran (and its expectations hold with `--check`), 1 when a
/// check failed, 2 when the scenario cannot be read. `human`: the summary for people
/// only; `summary`: the decisions and the summary line.
pub fn replay(path: &Path, with_check: bool, human: bool, summary: bool) -> Result<(), CliError> {
    let sc = match Scenario::load(path) {
        Ok(s) => s,
        Err(e) => {
            return Err(CliError::usage(format!("shareq replay: {e}")));
        }
    };
    let stdout = std::io::stdout();
    let mut out: Box<dyn Write> = if human {
        Box::new(std::io::sink())
    } else {
        Box::new(std::io::BufWriter::with_capacity(1 << 16, stdout.lock()))
    };
    let opts = Options {
        summary: summary || human,
        keep_lines: with_check,
    };
    let outcome = match run(&sc, &mut out, opts) {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Err(e) => {
            return Err(CliError::usage(format!(
                "shareq replay: cannot write output: {e}"
            )));
        }
    };
    let _ = out.flush();
    if let (true, Some(s)) = (human, &outcome.summary) {
        print!("{}", self::human(&sc.file, s));
    }
    if with_check {
        let Some(expect) = &sc.expect else {
            return Err(CliError::usage(format!(
                "shareq replay --check: {} has no `expect:` to check",
                sc.file
            )));
        };
        let report = check(expect, &outcome.lines);
        eprint!("{}: {}", sc.file, report.text);
        if !report.ok {
            return Err(CliError::printed(ExitKind::Failed));
        }
    }
    Ok(())
}

/// GPU time as people read it: `41s`, `3m12s`, `2h05m` (GPU-seconds in).
fn gpu_time(gpu_seconds: f64) -> String {
    duration::human((gpu_seconds * 1000.0).round() as i64)
}

/// A wait in seconds as people read it.
fn wait(seconds: f64) -> String {
    duration::human((seconds * 1000.0).round() as i64)
}

/// The summary for people: the run's totals, then a table per share (and per user when
/// the submissions name users), GPU time as durations.
pub fn human(file: &str, s: &Summary) -> String {
    let mut out = format!(
        "{}: {} simulated, {} of GPU time used, utilisation {:.0}%, goodput {:.0}%\n",
        visible(file),
        wait(s.span),
        gpu_time(s.gpu_seconds_used),
        s.utilisation * 100.0,
        s.goodput * 100.0,
    );
    let preemptions: u64 = s.shares.values().map(|g| g.preemptions).sum();
    out.push_str(&format!(
        "preemptions: {preemptions} ({} of GPU time lost, {:.1}% of the use; at most {} of one job)\n",
        gpu_time(s.gpu_seconds_lost_to_preemption),
        s.gpu_seconds_lost_to_preemption_pct,
        s.max_preemptions_of_one_job,
    ));
    if let (Some(idle), Some(rejected)) = (
        s.gpu_seconds_idle_while_fragmented,
        s.jobs_rejected_larger_than_any_node,
    ) {
        out.push_str(&format!(
            "nodes: {} of GPU time idle while a job waited FRAGMENTED; {rejected} submission(s) larger than any node\n",
            gpu_time(idle)
        ));
    }
    for (label, w) in [
        ("within their share's guarantee", &s.waits_within_guarantee),
        ("larger than the guarantee", &s.waits_larger_than_guarantee),
    ] {
        if w.jobs > 0 {
            out.push_str(&format!(
                "first-start waits of {} job(s) {label}: p50 {}, p95 {}, max {}\n",
                w.jobs,
                wait(w.p50),
                wait(w.p95),
                wait(w.max)
            ));
        }
    }
    let width = s
        .shares
        .keys()
        .chain(s.users.keys())
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    out.push_str(&format!(
        "\n{:<width$} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8} {:>7} {:>8}\n",
        "SHARE",
        "USED",
        "BORROWED",
        "LENT",
        "IDLE",
        "DONE/FAIL",
        "WAIT-P50",
        "WAIT-P95",
        "PREEMPT",
        "LOST"
    ));
    for (name, g) in &s.shares {
        out.push_str(&format!(
            "{:<width$} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8} {:>7} {:>8}\n",
            visible(name),
            gpu_time(g.gpu_seconds_used),
            gpu_time(g.gpu_seconds_borrowed),
            gpu_time(g.gpu_seconds_lent),
            gpu_time(g.gpu_seconds_idle),
            format!("{}/{}", g.jobs_finished, g.jobs_failed),
            wait(g.p50_wait),
            wait(g.p95_wait),
            g.preemptions,
            gpu_time(g.gpu_seconds_lost_to_preemption),
        ));
    }
    if !s.users.is_empty() {
        out.push_str(&format!(
            "\n{:<width$} {:>8} {:>9} {:>8} {:>8} {:>8}\n",
            "USER", "USED", "DONE", "WAIT-P50", "WAIT-P95", "LOST"
        ));
        for (name, g) in &s.users {
            out.push_str(&format!(
                "{:<width$} {:>8} {:>9} {:>8} {:>8} {:>8}\n",
                visible(name),
                gpu_time(g.gpu_seconds_used),
                g.jobs_finished,
                wait(g.p50_wait),
                wait(g.p95_wait),
                gpu_time(g.gpu_seconds_lost_to_preemption),
            ));
        }
    }
    out.push_str(
        "\nGPU time as a duration (2 GPUs for 1m = 2m); DONE/FAIL = jobs finished / of them\n\
         failed; WAIT = submission to first start. `--summary --json`: the figures as JSON.\n",
    );
    out
}
