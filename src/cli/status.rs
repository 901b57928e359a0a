//! `shareq status [--json]`: shares, capacity, lending and the config state.

use super::error::CliError;
use super::request;
use crate::server::{Request, Response};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// One JSON object instead of the text.
    #[arg(long)]
    pub json: bool,
    #[arg(long, help = super::STATE_HELP)]
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
            return Err(CliError::client(&e, format!("shareq status: {e}")));
        }
    };
    if args.json {
        match crate::wire::to_string_pretty(&s) {
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
        // A sliced unit's quantities are GiB (SPEC §15).
        println!(
            "unit {}: {} usable, {} in use, {} guaranteed{}",
            u.name,
            u.amount(u.usable),
            u.amount(u.used),
            u.amount(u.guaranteed),
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
    for line in share_table(&s.shares) {
        println!("{line}");
    }
    for e in &s.lending {
        let sliced = s
            .units
            .iter()
            .any(|u| u.name == e.unit && u.memory_gib.is_some());
        println!(
            "lending: {} borrows {} of {} from {}",
            e.borrower,
            if sliced {
                format!("{} GiB", e.gpus)
            } else {
                format!("{} GPU(s)", e.gpus)
            },
            e.unit,
            e.lender.as_deref().unwrap_or("the unassigned pool")
        );
    }
    Ok(())
}

/// The shares table, one row per share and unit, in 80 columns for share and unit names
/// of up to 11 and 4 characters (the columns are as wide as the longest name, and a
/// removed or disabled share says so at the row's end).
fn share_table(shares: &[crate::sched::ShareUnitStats]) -> Vec<String> {
    let share_w = shares
        .iter()
        .map(|s| s.share.len())
        .max()
        .unwrap_or(0)
        .max(5);
    let unit_w = shares
        .iter()
        .map(|s| s.unit.len())
        .max()
        .unwrap_or(0)
        .max(4);
    let row = |cells: [&str; 10], flag: &str| {
        format!(
            "{:<share_w$} {:<unit_w$} {:<15} {:>5} {:>4} {:>4} {:>6} {:>4} {:>3} {:>6}{flag}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            cells[4],
            cells[5],
            cells[6],
            cells[7],
            cells[8],
            cells[9],
        )
    };
    let mut out = vec![row(
        [
            "SHARE", "UNIT", "STRATEGY", "LIMIT", "USED", "IDLE", "BORROW", "LENT", "RUN", "QUEUED",
        ],
        "",
    )];
    for sh in shares {
        let n = [
            sh.limit.to_string(),
            sh.usage.to_string(),
            sh.idle.to_string(),
            sh.borrowed.to_string(),
            sh.lent.to_string(),
            sh.running.to_string(),
            sh.queued.to_string(),
        ];
        let flag = if !sh.present {
            " removed"
        } else if !sh.enabled {
            " DISABLED"
        } else {
            ""
        };
        out.push(row(
            [
                &crate::visible::visible(&sh.share),
                &sh.unit,
                sh.strategy.as_str(),
                &n[0],
                &n[1],
                &n[2],
                &n[3],
                &n[4],
                &n[5],
                &n[6],
            ],
            flag,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::model::Strategy;
    use crate::sched::ShareUnitStats;

    fn share(name: &str, strategy: Strategy) -> ShareUnitStats {
        ShareUnitStats {
            share: name.into(),
            unit: "a100".into(),
            strategy,
            present: true,
            enabled: true,
            in_share: false,
            limit: 12,
            cap: None,
            usage: 140,
            borrowed: 128,
            lent: 0,
            idle: 0,
            running: 130,
            queued: 99_999,
            oldest_queued: None,
            fair_share: false,
            user_limit: None,
        }
    }

    /// issue 46: the table fits 80 columns, a disabled share's mark included, and its
    /// figures stay under their headings.
    #[test]
    fn the_share_table_fits_80_columns() {
        let mut off = share("interactive", Strategy::LendAndBorrow);
        off.enabled = false;
        let mut gone = share("students", Strategy::Lend);
        gone.present = false;
        let lines = super::share_table(&[share("vision", Strategy::LendAndBorrow), off, gone]);
        for l in &lines {
            assert!(
                l.chars().count() <= 80,
                "{} columns: {l}",
                l.chars().count()
            );
        }
        assert!(
            lines[0].starts_with("SHARE       UNIT STRATEGY"),
            "{}",
            lines[0]
        );
        assert!(lines[2].ends_with(" 99999 DISABLED"), "{}", lines[2]);
        assert!(lines[3].ends_with(" removed"), "{}", lines[3]);
        let end = |l: &str, word: &str| l.find(word).map(|i| i + word.len());
        assert_eq!(end(&lines[0], "BORROW"), end(&lines[1], " 128"));
    }
}
