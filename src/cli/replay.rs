//! `shareq replay SCENARIO [--check] [--summary] [--estimates N]`.

use super::error::{CliError, ExitKind};
use crate::replay::{Options, Scenario, check, run, run_observed};
use std::cell::RefCell;
use std::io::Write;
use std::path::Path;

/// Exit 0 when the scenario ran (and its expectations hold with `--check`), 1 when a
/// check failed, 2 when the scenario cannot be read. With `estimates: Some(n)`, every n-th
/// submitted job also gets an `estimated` line at its submission (SPEC §11).
pub fn replay(
    path: &Path,
    with_check: bool,
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
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let opts = Options {
        summary,
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
