//! `shareq log ID [--attempt N] [--rank R] [--follow] [--raw]`: print a job's output log
//! (a gang's: one node's, by its rank). The
//! scheduler serves it (logs belong to the scheduler, SPEC §7); the files are read
//! directly only when no scheduler runs. The output goes out as it is to the job's owner
//! or with `--raw`; to anyone else, on a terminal or into a pipe, its control characters
//! are made visible (SPEC §9).

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
    /// The job: `12`, or `12:3` for child 3 of array 12.
    pub id: crate::model::JobRef,
    /// Which attempt (default: the latest).
    #[arg(long)]
    pub attempt: Option<u32>,
    /// A multi-node job's rank: that node's output (default 0, the first node's).
    #[arg(long, default_value_t = 0)]
    pub rank: u32,
    /// Keep printing new output until the job has finished.
    #[arg(long, short)]
    pub follow: bool,
    /// Print the output as it is, control characters and all, even for someone else's
    /// job.
    #[arg(long)]
    pub raw: bool,
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
}

/// Does the output go out as it is? To the job's owner, or with `--raw`. Anyone else —
/// an admin reading a hostile log — gets its control characters made visible, into a
/// pipe too (`| less -R`, `| tail` on a terminal would still run them); so does whoever
/// reads the files directly while no scheduler runs (who owns the job is not known then).
fn as_is(raw: bool, owner: Option<u32>) -> bool {
    raw || owner.is_some_and(|o| o == nix::unistd::geteuid().as_raw())
}

/// Write a piece of output, made visible unless it goes out as it is.
fn emit(out: &mut impl Write, bytes: &[u8], as_is: bool) -> std::io::Result<()> {
    if as_is {
        out.write_all(bytes)?;
    } else {
        // Line by line, so that newlines stay newlines.
        let text = String::from_utf8_lossy(bytes);
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                out.write_all(b"\n")?;
            }
            out.write_all(crate::visible::visible(line).as_bytes())?;
        }
    }
    out.flush()
}

pub fn log(args: &LogArgs) -> Result<(), CliError> {
    let state = match super::serve::state_dir(args.state.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            return Err(CliError::failed(format!("shareq log: {e}")));
        }
    };
    let job = args.id.id();
    // The scheduler answers the owner and admins; without one, whoever can read the files.
    if let Some(done) = via_scheduler(args, &state, job) {
        return done;
    }
    let as_is = as_is(args.raw, None);
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
    // The log of `attempt` (of the asked rank) from byte `pos` on, to stdout.
    let copy = |attempt: u32, pos: u64| {
        copy_from(
            &state,
            (job, args.rank),
            attempt,
            pos,
            &mut stdout.lock(),
            as_is,
        )
    };
    loop {
        if attempt > 0 {
            pos = match copy(attempt, pos) {
                Ok(p) => p,
                Err(e) => {
                    return Err(CliError::failed(format!("shareq log: {e}")));
                }
            };
        }
        if !args.follow {
            return Ok(());
        }
        let ended = attempt > 0
            && crate::exec::state::runfiles::AttemptRecord::of(state.root(), job, attempt).ended();
        if ended || attempt == 0 {
            // Whether the job is finished is asked first, then whether a newer attempt
            // began: an attempt that started (and ended) before the job finished is then
            // always seen and printed before the follow stops.
            let finished = ended && job_finished(&state, job);
            match state.latest_attempt(job) {
                Some(a) if a > attempt && args.attempt.is_none() => {
                    let _ = copy(attempt, pos);
                    attempt = a;
                    pos = 0;
                    continue;
                }
                _ => {}
            }
            if finished {
                let _ = copy(attempt, pos);
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Is the job finished (or unknown, or is there no scheduler left to run it again)?
/// Asked as one job (`job`), not by listing them all: at 100,000 queued the listing is
/// 40 MB, and a follow asks every 200 ms while a preempted job waits for its next attempt.
fn job_finished(state: &StateDir, job: JobId) -> bool {
    match request(Some(state.root()), &Request::Job { id: job }) {
        Ok(r) => r.job.is_none_or(|j| j.state.is_finished()),
        Err(_) => true,
    }
}

fn copy_from(
    state: &StateDir,
    (job, rank): (JobId, u32),
    attempt: u32,
    pos: u64,
    out: &mut impl Write,
    as_is: bool,
) -> std::io::Result<u64> {
    let path = state.rank_log(job, attempt, rank);
    let mut f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(pos),
        Err(e) => return Err(e),
    };
    f.seek(SeekFrom::Start(pos))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    emit(out, &buf, as_is)?;
    Ok(pos + buf.len() as u64)
}

/// `shareq log` through the control socket; `None` when no scheduler runs there.
fn via_scheduler(args: &LogArgs, state: &StateDir, job: JobId) -> Option<Result<(), CliError>> {
    let mut attempt = args.attempt;
    let mut offset = 0u64;
    let stdout = std::io::stdout();
    let mut first = true;
    Some(loop {
        let req = Request::Log {
            id: job,
            attempt,
            offset,
            rank: (args.rank > 0).then_some(args.rank),
        };
        let chunk = match request(Some(state.root()), &req) {
            Ok(r) if r.ok => match r.log {
                Some(c) => c,
                None => {
                    break Err(CliError::failed("shareq log: the scheduler sent no log"));
                }
            },
            // Followed before its first attempt began: wait for it while the job is queued.
            Ok(r) if first && args.follow && !r.not_allowed && !job_finished(state, job) => {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            Ok(r) => {
                break Err(CliError::refused(
                    &r,
                    format!(
                        "shareq log: {}",
                        crate::visible::visible(r.error.as_deref().unwrap_or_default())
                    ),
                ));
            }
            Err(e)
                if first
                    && matches!(
                        e.downcast_ref::<crate::server::ClientError>(),
                        Some(crate::server::ClientError::NotRunning { .. })
                    ) =>
            {
                return None;
            }
            Err(e) => {
                break Err(CliError::failed(format!("shareq log: {e}")));
            }
        };
        first = false;
        attempt = Some(chunk.attempt);
        let as_is = as_is(args.raw, chunk.owner_uid);
        let _ = emit(&mut stdout.lock(), chunk.data.as_bytes(), as_is);
        let more = chunk.next > offset;
        offset = chunk.next;
        if more {
            continue;
        }
        if !args.follow {
            break Ok(());
        }
        // As in the file path: finished first, then a newer attempt, so that one which
        // began before the job finished is printed before the follow stops.
        let finished = chunk.ended && job_finished(state, job);
        if chunk.ended && args.attempt.is_none() {
            // A newer attempt may have begun: ask for the latest next time.
            let latest = request(
                Some(state.root()),
                &Request::Log {
                    id: job,
                    attempt: None,
                    offset: 0,
                    rank: None,
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
        if finished {
            break Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    })
}
