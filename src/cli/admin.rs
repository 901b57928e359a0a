//! `shareq reload` and `shareq audit`: what only admins may do (SPEC §9).

use super::error::CliError;
use super::request;
use crate::server::Request;
use crate::visible::{visible, visible_lines};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct ReloadArgs {
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// How many of the newest entries.
    #[arg(long, short = 'n', default_value_t = 50)]
    pub limit: usize,
    /// Print the entries as JSON.
    #[arg(long)]
    pub json: bool,
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
}

/// Re-read the config directory now. Exit 0 when applied, 1 when refused as invalid,
/// 3 when not allowed.
pub fn reload(args: &ReloadArgs) -> Result<(), CliError> {
    match request(args.state.as_deref(), &Request::Reload) {
        Ok(r) if r.ok => {
            println!("config re-read and applied");
            Ok(())
        }
        Ok(r) => Err(CliError::refused(
            &r,
            format!(
                "shareq reload: {}",
                visible_lines(r.error.as_deref().unwrap_or_default())
            ),
        )),
        Err(e) => Err(CliError::client(&e, format!("shareq reload: {e}"))),
    }
}

/// Every accepted action, newest first: when, who, what.
pub fn audit(args: &AuditArgs) -> Result<(), CliError> {
    let r = match request(args.state.as_deref(), &Request::Audit { limit: args.limit }) {
        Ok(r) if r.ok => r,
        Ok(r) => {
            return Err(CliError::refused(
                &r,
                format!(
                    "shareq audit: {}",
                    visible(r.error.as_deref().unwrap_or_default())
                ),
            ));
        }
        Err(e) => {
            return Err(CliError::client(&e, format!("shareq audit: {e}")));
        }
    };
    let rows = r.audit.unwrap_or_default();
    if args.json {
        return match crate::wire::to_string_pretty(&rows) {
            Ok(s) => {
                println!("{s}");
                Ok(())
            }
            Err(e) => Err(CliError::failed(format!("shareq audit: {e}"))),
        };
    }
    println!(
        "{:<19}  {:<12} {:>6}  {:<8} {:>6}  DETAIL",
        "WHEN (UTC)", "USER", "UID", "ACTION", "JOB"
    );
    for e in &rows {
        let when = chrono::DateTime::from_timestamp_millis(e.at)
            .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
            .unwrap_or_default();
        println!(
            "{when:<19}  {:<12} {:>6}  {:<8} {:>6}  {}",
            visible(&e.user),
            e.uid,
            e.action,
            e.job.map(|j| j.to_string()).unwrap_or_default(),
            visible(&e.detail)
        );
    }
    if rows.is_empty() {
        println!("(no actions recorded yet)");
    }
    Ok(())
}
