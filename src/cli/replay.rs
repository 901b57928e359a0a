//! `shareq replay SCENARIO [--check] [--summary [--json|--text]] [--estimates N]`: the
//! decisions as JSON lines (SPEC §6), with a last summary line (`--summary` to a pipe, or
//! `--json`) or a summary for people instead ([`human`]: at a terminal, or `--text`), and
//! with `--estimates N` every N-th submitted job's start estimate (SPEC §11).

use super::error::{CliError, ExitKind};
use crate::duration;
use crate::replay::{Options, Scenario, Summary, check, run, run_observed};
use crate::visible::visible;
use std::cell::RefCell;
use std::io::Write;
use std::path::Path;

/// Exit 0 when the scenario ran (and its expectations hold with `--check`), 1 when a
/// check failed, 2 when the scenario cannot be read. `human`: the summary for people
/// only; `summary`: the decisions and the summary line. With `estimates: Some(n)`, every
/// n-th submitted job also gets an `estimated` line at its submission (SPEC §11).
pub fn replay(
    path: &Path,
    with_check: bool,
    human: bool,
    summary: bool,
    estimates: Option<u64>,
) -> Result<(), CliError> {
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
    let ran = match estimates {
        None => run(&sc, &mut out, opts),
        Some(n) => run_estimating(&sc, &mut out, opts, n),
    };
    let outcome = match ran {
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

/// One writer shared by the replay and its observer (which writes the `estimated` lines).
struct Shared<'a, W: Write>(&'a RefCell<W>);

impl<W: Write> Write for Shared<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

/// Run the scenario, estimating every `every`-th submitted job as the live forecast would
/// from the replay's own past (`forecast::replayed`); each `estimated` line follows the
/// lines of its submission instant.
fn run_estimating<W: Write>(
    sc: &Scenario,
    out: &mut W,
    opts: Options,
    every: u64,
) -> std::io::Result<crate::replay::Outcome> {
    let cell = RefCell::new(out);
    let mut learner = crate::forecast::replayed::Learner::new(every);
    let mut pending: Vec<String> = Vec::new();
    let mut failed: Option<std::io::Error> = None;
    let write_pending = |pending: &mut Vec<String>, failed: &mut Option<std::io::Error>| {
        for line in pending.drain(..) {
            if failed.is_none()
                && let Err(e) = writeln!(cell.borrow_mut(), "{line}")
            {
                *failed = Some(e);
            }
        }
    };
    let outcome = {
        let mut observe = |o: crate::replay::Observation| {
            // The lines of the instant before are written by now.
            write_pending(&mut pending, &mut failed);
            for s in learner.observe(&o).into_iter().flatten() {
                pending.push(s.line(o.sched));
            }
        };
        run_observed(sc, &mut Shared(&cell), opts, &mut observe)?
    };
    write_pending(&mut pending, &mut failed);
    match failed {
        Some(e) => Err(e),
        None => Ok(outcome),
    }
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
    // SPEC §15: a sliced unit's GiB are never added to the GPU time.
    if s.gib_seconds_used > 0.0 {
        let per_share: Vec<String> = s
            .shares
            .iter()
            .filter(|(_, g)| g.gib_seconds_used > 0.0)
            .map(|(name, g)| format!("{} {}", visible(name), gpu_time(g.gib_seconds_used)))
            .collect();
        out.push_str(&format!(
            "sliced units: {} of GiB time used (GiB of GPU memory, not in the GPU time): {}\n",
            gpu_time(s.gib_seconds_used),
            per_share.join(", ")
        ));
    }
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
