//! `shareq __supervise SPEC`: the hidden mode that runs one attempt of a job.

use crate::exec::supervisor::supervise as run;
use std::path::Path;
use std::process::ExitCode;

/// Exit 0 once the exit status is recorded; 1 when it could not be.
pub fn supervise(spec: &Path) -> ExitCode {
    match run(spec) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shareq supervisor: {e}");
            ExitCode::from(1)
        }
    }
}
