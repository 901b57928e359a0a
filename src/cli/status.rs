//! `shareq status [--json]`: shares, capacity, lending and the config state.

use super::error::CliError;
use super::request;
use crate::server::{Request, Response};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[arg(long)]
    pub json: bool,
    #[arg(long)]
    pub state: Option<PathBuf>,
}

pub fn status(args: &StatusArgs) -> Result<(), CliError> {
    let s = match request(args.state.as_deref(), &Request::Status) {
        Ok(Response {
            ok: true,
            status: Some(s),
            ..
        }) => s,
        Ok(r) => {
            return Err(CliError::failed(format!(
                "shareq status: {}",
                crate::visible::visible(r.error.as_deref().unwrap_or_default())
            )));
        }
        Err(e) => {
            return Err(CliError::failed(format!("shareq status: {e}")));
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&s) {
            Ok(t) => println!("{t}"),
            Err(e) => {
                return Err(CliError::failed(format!("shareq status: {e}")));
            }
        }
        return Ok(());
    }
    let pending = if s.pending > 0 {
        format!(", {} pending", s.pending)
    } else {
        String::new()
    };
    println!(
        "environment {}  ({} running, {} queued{pending})",
        s.env_name, s.running, s.queued
    );
    if let Some(why) = &s.paused {
        println!("PAUSED: {}", crate::visible::visible(why));
    }
    if let Some(disk) = &s.disk {
        println!("DISK: {}", crate::visible::visible(disk));
    }
    match (&s.config.error, s.config.applied_at) {
        (Some(e), _) => println!("config: last edit REJECTED, previous config in force:\n  {e}"),
        (None, Some(_)) => match &s.config.effects {
            Some(e) => println!("config: applied from {} ({e})", s.config.source),
            None => println!("config: applied from {}", s.config.source),
        },
        (None, None) => println!("config: none applied"),
    }
    for u in &s.units {
        println!(
            "unit {}: {} usable, {} in use, {} guaranteed{}",
            u.name,
            u.usable,
            u.used,
            u.guaranteed,
            if u.oversubscribed() {
                "  (OVERSUBSCRIBED)"
            } else {
                ""
            }
        );
        let nodes = u.by_node();
        if nodes.len() > 1 {
            for (node, devs) in nodes {
                let busy = devs.iter().filter(|d| d.job.is_some()).count();
                let free: Vec<String> = devs
                    .iter()
                    .filter(|d| d.job.is_none())
                    .map(|d| d.index.to_string())
                    .collect();
                println!(
                    "  node {node}: {} device(s), {busy} in use, free [{}]",
                    devs.len(),
                    free.join(", ")
                );
            }
        }
    }
    println!(
        "{:<14} {:<6} {:<16} {:>5} {:>5} {:>6} {:>8} {:>5} {:>7} {:>6}",
        "SHARE",
        "UNIT",
        "STRATEGY",
        "LIMIT",
        "USED",
        "IDLE",
        "BORROWED",
        "LENT",
        "RUNNING",
        "QUEUED"
    );
    for sh in &s.shares {
        println!(
            "{:<14} {:<6} {:<16} {:>5} {:>5} {:>6} {:>8} {:>5} {:>7} {:>6}{}",
            sh.share,
            sh.unit,
            sh.strategy.as_str(),
            sh.limit,
            sh.usage,
            sh.idle,
            sh.borrowed,
            sh.lent,
            sh.running,
            sh.queued,
            if !sh.present {
                "  (removed)"
            } else if !sh.enabled {
                "  (DISABLED)"
            } else {
                ""
            }
        );
    }
    for e in &s.lending {
        println!(
            "lending: {} borrows {} GPU(s) of {} from {}",
            e.borrower,
            e.gpus,
            e.unit,
            e.lender.as_deref().unwrap_or("the unassigned pool")
        );
    }
    Ok(())
}
