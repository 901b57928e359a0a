//! `shareq checkpoint [--note TEXT]`, run inside a job: tell the scheduler that this
//! attempt has saved its work (SPEC §14). The job, the attempt, the scheduler's socket and
//! the attempt's token come from the environment every attempt gets (`SHAREQ_JOB_ID`,
//! `SHAREQ_ATTEMPT`, `SHAREQ_SOCKET`, `SHAREQ_ATTEMPT_TOKEN`).

use super::error::CliError;
use crate::exec::state::runfiles::AttemptToken;
use crate::server::{Client, Request};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct CheckpointArgs {
    /// What was saved (the step, the file), at most 200 bytes: shown with the job and
    /// handed to its next attempt as SHAREQ_LAST_CHECKPOINT_NOTE.
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
}

/// What a checkpoint report needs from the job's environment, or which variable is
/// missing or wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromJob {
    pub job: crate::model::JobId,
    pub attempt: u32,
    pub token: Option<AttemptToken>,
    /// The scheduler's state directory (its socket's folder).
    pub state: Option<PathBuf>,
}

impl FromJob {
    /// Read from `var` (the environment).
    pub fn read(var: impl Fn(&str) -> Option<String>) -> Result<FromJob, String> {
        let number = |name: &str| -> Result<u64, String> {
            let v = var(name).filter(|v| !v.is_empty()).ok_or_else(|| {
                format!("{name} is not set: shareq checkpoint runs inside a job of shareq")
            })?;
            v.trim()
                .parse()
                .map_err(|_| format!("{name} is `{}`, not a number", crate::visible::visible(&v)))
        };
        let job = crate::model::JobId(number("SHAREQ_JOB_ID")?);
        let attempt = u32::try_from(number("SHAREQ_ATTEMPT")?)
            .map_err(|_| "SHAREQ_ATTEMPT is out of range".to_string())?;
        let token = var("SHAREQ_ATTEMPT_TOKEN")
            .filter(|t| !t.is_empty())
            .map(AttemptToken);
        let state = var("SHAREQ_SOCKET")
            .filter(|s| !s.is_empty())
            .and_then(|s| Path::new(&s).parent().map(Path::to_path_buf));
        Ok(FromJob {
            job,
            attempt,
            token,
            state,
        })
    }
}

pub fn checkpoint(args: &CheckpointArgs) -> Result<(), CliError> {
    let fail = |e: String| CliError::failed(format!("shareq checkpoint: {e}"));
    let most = crate::sched::Checkpoint::NOTE_MAX;
    if let Some(n) = args.note.as_deref().filter(|n| n.len() > most) {
        return Err(CliError::usage(format!(
            "shareq checkpoint: --note: a checkpoint note may hold at most {most} bytes; this \
             one has {}",
            n.len()
        )));
    }
    let from = FromJob::read(|k| std::env::var(k).ok()).map_err(CliError::usage)?;
    let state = match &from.state {
        Some(s) => crate::exec::StateDir::new(s.clone()),
        None => super::serve::state_dir(None).map_err(|e| fail(e.to_string()))?,
    };
    let req = Request::Checkpoint {
        job: from.job,
        attempt: from.attempt,
        token: from.token,
        note: args.note.clone(),
    };
    let answer = Client::connect(&state)
        .map_err(|e| fail(e.to_string()))
        .and_then(|mut c| c.call(&req).map_err(|e| fail(e.to_string())))?;
    if !answer.ok {
        let why = crate::visible::visible(answer.error.as_deref().unwrap_or_default());
        return Err(CliError::refused(
            &answer,
            format!("shareq checkpoint: {why}"),
        ));
    }
    let at = answer.checkpoint.as_ref().map_or(0, |c| c.at);
    let when = chrono::DateTime::from_timestamp_millis(at)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%H:%M:%S")
                .to_string()
        })
        .unwrap_or_default();
    match &args.note {
        Some(n) => println!(
            "job {} attempt {}: checkpoint at {when} ({})",
            from.job,
            from.attempt,
            crate::visible::visible(n)
        ),
        None => println!(
            "job {} attempt {}: checkpoint at {when}",
            from.job, from.attempt
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn the_job_environment_names_the_attempt_and_its_scheduler() {
        let f = FromJob::read(env(&[
            ("SHAREQ_JOB_ID", "12"),
            ("SHAREQ_ATTEMPT", "2"),
            ("SHAREQ_ATTEMPT_TOKEN", "ab"),
            ("SHAREQ_SOCKET", "/var/lib/shareq/shareq.sock"),
        ]))
        .unwrap();
        assert_eq!(f.job, crate::model::JobId(12));
        assert_eq!(f.attempt, 2);
        assert_eq!(f.token, Some(AttemptToken("ab".into())));
        assert_eq!(f.state.as_deref(), Some(Path::new("/var/lib/shareq")));
        let outside = FromJob::read(env(&[])).unwrap_err();
        assert!(outside.starts_with("SHAREQ_JOB_ID is not set"), "{outside}");
        let bad = FromJob::read(env(&[("SHAREQ_JOB_ID", "x"), ("SHAREQ_ATTEMPT", "1")]));
        assert_eq!(bad.unwrap_err(), "SHAREQ_JOB_ID is `x`, not a number");
    }
}
