//! `shareq cancel ID...`, or `shareq cancel --share S --user U ...`: cancel queued,
//! PENDING or running jobs, by id or by the filters of `jobs` (listed first and
//! confirmed, unless `--yes`).

use super::error::{CliError, ExitKind};
use super::jobs::{FilterArgs, JobFilter};
use super::request;
use crate::model::JobId;
use crate::server::Request;
use crate::visible::visible;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    /// Job ids (or none, with filters): `12`, or `12:3` for child 3 of array 12
    /// (cancelling an array's parent cancels every child not yet ended).
    pub ids: Vec<crate::model::JobRef>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Cancel the jobs the filters match without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
}

/// The queued and running jobs the filters match, listed and confirmed.
fn matching(args: &CancelArgs) -> Result<Vec<JobId>, CliError> {
    let filter = JobFilter::from_args(&args.filter)
        .map_err(|e| CliError::usage(format!("shareq cancel: {e}")))?;
    let jobs = match request(args.state.as_deref(), &Request::jobs(false)) {
        Ok(r) if r.ok => r.jobs.unwrap_or_default(),
        Ok(r) => {
            eprintln!("shareq cancel: {}", r.error.unwrap_or_default());
            return Err(CliError::printed(ExitKind::Failed));
        }
        Err(e) => return Err(CliError::client(&e, format!("shareq cancel: {e}"))),
    };
    // PENDING jobs (SPEC §13) are queued work too: `jobs` lists them, so they match.
    // Filters match only what the caller may cancel (SPEC §9): their own jobs, or every
    // job for an admin; the others' are counted and left out.
    let me = crate::access::Caller::current().uid;
    let (hits, others): (Vec<_>, Vec<_>) = jobs
        .running
        .iter()
        .chain(jobs.queue.iter())
        .chain(jobs.pending.iter())
        .filter(|v| filter.matches(v))
        .partition(|v| jobs.caller_is_admin || v.submitter.as_ref().is_some_and(|s| s.uid == me));
    if !others.is_empty() {
        println!(
            "{} job(s) of other users match too, left out: only admins may cancel them",
            others.len()
        );
    }
    if hits.is_empty() {
        println!("no queued, PENDING or running job of yours matches");
        return Ok(Vec::new());
    }
    for v in &hits {
        let user = v.submitter.as_ref().map_or("-", |s| s.name.as_str());
        println!(
            "{:>6}  {:<20} {:<10} {:<12} {}",
            v.id.0,
            visible(&v.name).chars().take(20).collect::<String>(),
            visible(user),
            v.share,
            v.state.as_str()
        );
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            eprintln!(
                "shareq cancel: {} job(s) match; pass --yes to cancel them without a terminal to ask on",
                hits.len()
            );
            return Err(CliError::printed(ExitKind::Usage));
        }
        print!("cancel these {} job(s)? [y/N] ", hits.len());
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("nothing cancelled");
            return Ok(Vec::new());
        }
    }
    Ok(hits.iter().map(|v| v.id).collect())
}

/// Exit 0 when every id was known, 1 otherwise, 2 for a bad filter or an unconfirmed
/// filter without a terminal, 3 when not allowed (nothing cancelled).
pub fn cancel(args: &CancelArgs) -> Result<(), CliError> {
    let ids: Vec<JobId> = if args.ids.is_empty() {
        if args.filter.is_empty() {
            return Err(CliError::usage(
                "shareq cancel: say which jobs: ids, or filters (--share, --user, --status, --name)",
            ));
        }
        match matching(args)? {
            ids if ids.is_empty() => return Ok(()),
            ids => ids,
        }
    } else if !args.filter.is_empty() {
        return Err(CliError::usage(
            "shareq cancel: give ids or filters, not both",
        ));
    } else {
        args.ids.iter().map(|r| r.id()).collect()
    };
    match request(args.state.as_deref(), &Request::Cancel { ids }) {
        Ok(r) if r.not_allowed => Err(CliError::refused(
            &r,
            format!(
                "shareq cancel: {}",
                crate::visible::visible(r.error.as_deref().unwrap_or_default())
            ),
        )),
        Ok(r) => {
            for o in r.cancelled.unwrap_or_default() {
                match (o.error, o.cancelled) {
                    (Some(e), _) => eprintln!("shareq cancel: {e}"),
                    (None, true) => println!("{}: cancelled", o.id),
                    (None, false) => println!("{}: already finished, nothing to do", o.id),
                }
            }
            if r.ok {
                Ok(())
            } else {
                Err(CliError::printed(ExitKind::Failed))
            }
        }
        Err(e) => Err(CliError::client(&e, format!("shareq cancel: {e}"))),
    }
}
