//! `shareq replay SCENARIO [--check] [--summary]`.

use super::error::{CliError, ExitKind};
use crate::replay::{Options, Scenario, check, run};
use std::io::Write;
use std::path::Path;

/// Exit 0 when the scenario ran (and its expectations hold with `--check`), 1 when a
/// check failed, 2 when the scenario cannot be read.
pub fn replay(path: &Path, with_check: bool, summary: bool) -> Result<(), CliError> {
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
