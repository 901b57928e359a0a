//! `shareq __supervise SPEC`: the hidden mode that runs one attempt of a job.

use super::error::CliError;
use crate::exec::supervisor::supervise as run;
use std::path::Path;

/// Exit 0 once the exit status is recorded; 1 when it could not be.
pub fn supervise(spec: &Path) -> Result<(), CliError> {
    match run(spec) {
        Ok(_) => Ok(()),
        Err(e) => Err(CliError::failed(format!("shareq supervisor: {e}"))),
    }
}
