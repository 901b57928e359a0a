//! `shareq replay SCENARIO [--check] [--summary]`.

use crate::replay::{Options, Scenario, check, run};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Exit 0 when the scenario ran (and its expectations hold with `--check`), 1 when a
/// check failed, 2 when the scenario cannot be read.
pub fn replay(path: &Path, with_check: bool, summary: bool) -> ExitCode {
    let sc = match Scenario::load(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shareq replay: {e}");
            return ExitCode::from(2);
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
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shareq replay: cannot write output: {e}");
            return ExitCode::from(2);
        }
    };
    let _ = out.flush();
    if with_check {
        let Some(expect) = &sc.expect else {
            eprintln!(
                "shareq replay --check: {} has no `expect:` to check",
                sc.file
            );
            return ExitCode::from(2);
        };
        let report = check(expect, &outcome.lines);
        eprint!("{}: {}", sc.file, report.text);
        if !report.ok {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
