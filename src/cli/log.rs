//! `shareq log ID [--attempt N] [--follow]`: print a job's output log.

use super::error::CliError;
use super::request;
use crate::exec::StateDir;
use crate::model::JobId;
use crate::server::Request;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct LogArgs {
    pub id: u64,
    /// Which attempt (default: the latest).
    #[arg(long)]
    pub attempt: Option<u32>,
    /// Keep printing new output until the job has finished.
    #[arg(long, short)]
    pub follow: bool,
    #[arg(long)]
    pub state: Option<PathBuf>,
}

pub fn log(args: &LogArgs) -> Result<(), CliError> {
    let state = match super::serve::state_dir(args.state.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            return Err(CliError::failed(format!("shareq log: {e}")));
        }
    };
    let job = JobId(args.id);
    // Logs belong to their job's submitter (SPEC §9): whoever cannot read the files asks
    // the scheduler, which answers the owner and admins.
    if std::fs::read_dir(state.job_logs(job))
        .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
    {
        return via_scheduler(args, &state, job);
    }
    let mut attempt = match args.attempt.or_else(|| state.latest_attempt(job)) {
        Some(a) => a,
        None if args.follow => 0,
        None => {
            return Err(CliError::failed(format!(
                "shareq log: job {job} has no log in {} (it has not started yet, or the id is wrong)",
                state.root().display()
            )));
        }
    };
    let mut pos = 0u64;
    let stdout = std::io::stdout();
    loop {
        if attempt > 0 {
            pos = match copy_from(&state, job, attempt, pos, &mut stdout.lock()) {
                Ok(p) => p,
                Err(e) => {
                    return Err(CliError::failed(format!("shareq log: {e}")));
                }
            };
        }
        if !args.follow {
            return Ok(());
        }
        let ended =
            attempt > 0 && crate::exec::runfiles::exit_path(state.root(), job, attempt).exists();
        if ended || attempt == 0 {
            // A newer attempt takes over; otherwise stop once the job is finished.
            match state.latest_attempt(job) {
                Some(a) if a > attempt && args.attempt.is_none() => {
                    attempt = a;
                    pos = 0;
                    continue;
                }
                _ => {}
            }
            if ended && job_finished(&state, job) {
                let _ = copy_from(&state, job, attempt, pos, &mut stdout.lock());
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Is the job finished (or is there no scheduler left to run it again)?
fn job_finished(state: &StateDir, job: JobId) -> bool {
    match request(Some(state.root()), &Request::jobs(false)) {
        Ok(r) => r
            .jobs
            .is_none_or(|j| !j.queue.iter().chain(&j.running).any(|v| v.id == job)),
        Err(_) => true,
    }
}

fn copy_from(
    state: &StateDir,
    job: JobId,
    attempt: u32,
    pos: u64,
    out: &mut impl Write,
) -> std::io::Result<u64> {
    let path = state.attempt_log(job, attempt);
    let mut f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(pos),
        Err(e) => return Err(e),
    };
    f.seek(SeekFrom::Start(pos))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    out.write_all(&buf)?;
    out.flush()?;
    Ok(pos + buf.len() as u64)
}

/// `shareq log` through the control socket, for logs this user cannot open.
fn via_scheduler(args: &LogArgs, state: &StateDir, job: JobId) -> Result<(), CliError> {
    let mut attempt = args.attempt;
    let mut offset = 0u64;
    let stdout = std::io::stdout();
    loop {
        let req = Request::Log {
            id: job,
            attempt,
            offset,
        };
        let chunk = match request(Some(state.root()), &req) {
            Ok(r) if r.ok => match r.log {
                Some(c) => c,
                None => {
                    return Err(CliError::failed("shareq log: the scheduler sent no log"));
                }
            },
            Ok(r) => {
                return Err(CliError::refused(
                    &r,
                    format!(
                        "shareq log: {}",
                        crate::visible::visible(r.error.as_deref().unwrap_or_default())
                    ),
                ));
            }
            Err(e) => {
                return Err(CliError::failed(format!("shareq log: {e}")));
            }
        };
        attempt = Some(chunk.attempt);
        let mut out = stdout.lock();
        let _ = out.write_all(chunk.data.as_bytes());
        let _ = out.flush();
        let more = chunk.next > offset;
        offset = chunk.next;
        if more {
            continue;
        }
        if !args.follow || (chunk.ended && job_finished(state, job)) {
            return Ok(());
        }
        if chunk.ended && args.attempt.is_none() {
            // A newer attempt may have begun: ask for the latest next time.
            let latest = request(
                Some(state.root()),
                &Request::Log {
                    id: job,
                    attempt: None,
                    offset: 0,
                },
            );
            if let Ok(r) = latest
                && let Some(c) = r.log
                && c.attempt > chunk.attempt
            {
                attempt = Some(c.attempt);
                offset = 0;
                continue;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
