//! `shareq priority ID P`: change a job's schedulingPriority.

use super::error::CliError;
use super::request;
use crate::server::Request;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct PriorityArgs {
    /// The job: `12`, or `12:3` for child 3 of array 12 (an array's parent: every child
    /// not yet ended).
    pub id: crate::model::JobRef,
    /// The new priority, 0..9999.
    pub priority: u32,
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
}

pub fn priority(args: &PriorityArgs) -> Result<(), CliError> {
    let req = Request::Priority {
        id: args.id.id(),
        priority: args.priority,
    };
    match request(args.state.as_deref(), &req) {
        Ok(r) if r.ok => {
            if r.changed == Some(false) {
                println!("{}: already finished, nothing to do", args.id);
            } else {
                println!("{}: priority {}", args.id, args.priority);
            }
            Ok(())
        }
        Ok(r) => Err(CliError::refused(
            &r,
            format!(
                "shareq priority: {}",
                crate::visible::visible(r.error.as_deref().unwrap_or_default())
            ),
        )),
        Err(e) => Err(CliError::client(&e, format!("shareq priority: {e}"))),
    }
}
