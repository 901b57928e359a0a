//! `shareq reload` and `shareq audit`: what only admins may do (SPEC §9).

use super::request;
use crate::server::Request;
use crate::visible::visible;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ReloadArgs {
    #[arg(long)]
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
    #[arg(long)]
    pub state: Option<PathBuf>,
}

/// Re-read the config directory now. Exit 0 when applied, 1 when refused as invalid,
/// 3 when not allowed.
pub fn reload(args: &ReloadArgs) -> ExitCode {
    match request(args.state.as_deref(), &Request::Reload) {
        Ok(r) if r.ok => {
            println!("config re-read and applied");
            ExitCode::SUCCESS
        }
        Ok(r) => {
            eprintln!(
                "shareq reload: {}",
                visible(r.error.as_deref().unwrap_or_default())
            );
            super::refused(&r)
        }
        Err(e) => {
            eprintln!("shareq reload: {e}");
            ExitCode::from(1)
        }
    }
}

/// Every accepted action, newest first: when, who, what.
pub fn audit(args: &AuditArgs) -> ExitCode {
    let r = match request(args.state.as_deref(), &Request::Audit { limit: args.limit }) {
        Ok(r) if r.ok => r,
        Ok(r) => {
            eprintln!(
                "shareq audit: {}",
                visible(r.error.as_deref().unwrap_or_default())
            );
            return super::refused(&r);
        }
        Err(e) => {
            eprintln!("shareq audit: {e}");
            return ExitCode::from(1);
        }
    };
    let rows = r.audit.unwrap_or_default();
    if args.json {
        return match serde_json::to_string_pretty(&rows) {
            Ok(s) => {
                println!("{s}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("shareq audit: {e}");
                ExitCode::from(1)
            }
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
    ExitCode::SUCCESS
}
