//! `shareq cancel ID...`: cancel queued or running jobs.

use super::request;
use crate::model::JobId;
use crate::server::Request;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    /// Job ids.
    #[arg(required = true, num_args = 1..)]
    pub ids: Vec<u64>,
    #[arg(long)]
    pub state: Option<PathBuf>,
}

/// Exit 0 when every id was known, 1 otherwise, 3 when not allowed (nothing cancelled).
pub fn cancel(args: &CancelArgs) -> ExitCode {
    let ids = args.ids.iter().map(|&i| JobId(i)).collect();
    match request(args.state.as_deref(), &Request::Cancel { ids }) {
        Ok(r) if r.not_allowed => {
            eprintln!(
                "shareq cancel: {}",
                crate::visible::visible(r.error.as_deref().unwrap_or_default())
            );
            super::refused(&r)
        }
        Ok(r) => {
            for o in r.cancelled.unwrap_or_default() {
                match (o.error, o.cancelled) {
                    (Some(e), _) => eprintln!("shareq cancel: {e}"),
                    (None, true) => println!("{}: cancelled", o.id),
                    (None, false) => println!("{}: already finished, nothing to do", o.id),
                }
            }
            if r.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("shareq cancel: {e}");
            ExitCode::from(1)
        }
    }
}
