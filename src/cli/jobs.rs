//! `shareq jobs [--all] [--json]`: the queue (with reasons), running jobs, and with
//! `--all` finished ones.

use super::request;
use crate::exec::now_ms;
use crate::server::Request;
use crate::snapshot::JobView;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct JobsArgs {
    /// Also list finished jobs.
    #[arg(long)]
    pub all: bool,
    /// Print the answer as JSON (queue, running, finished, preemptions).
    #[arg(long)]
    pub json: bool,
    #[arg(long)]
    pub state: Option<PathBuf>,
}

pub fn jobs(args: &JobsArgs) -> ExitCode {
    let r = match request(args.state.as_deref(), &Request::Jobs { all: args.all }) {
        Ok(r) if r.ok => r,
        Ok(r) => {
            eprintln!("shareq jobs: {}", r.error.unwrap_or_default());
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("shareq jobs: {e}");
            return ExitCode::from(1);
        }
    };
    let Some(j) = r.jobs else {
        eprintln!("shareq jobs: the scheduler sent no job list");
        return ExitCode::from(1);
    };
    if args.json {
        match serde_json::to_string_pretty(&j) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("shareq jobs: {e}");
                return ExitCode::from(1);
            }
        }
        return ExitCode::SUCCESS;
    }
    let now = now_ms();
    println!(
        "{:>6}  {:<20} {:<12} {:>4} {:>4}  {:<10} {:>8}  DETAIL",
        "ID", "NAME", "SHARE", "PRIO", "GPUS", "STATE", "FOR"
    );
    for v in &j.running {
        let detail = match &v.stopping {
            Some((what, _)) => format!("{what}; devices {:?}", v.devices),
            None if v.on_borrowed => format!("devices {:?} (borrowed)", v.devices),
            None => format!("devices {:?}", v.devices),
        };
        row(v, now - v.started.unwrap_or(now), &detail);
    }
    for v in &j.queue {
        row(v, now - v.submitted, &v.reason);
    }
    for v in &j.finished {
        let ran = v.finished.unwrap_or(now) - v.started.unwrap_or(v.submitted);
        let detail = if v.state == crate::model::JobState::Succeeded {
            format!("after {} attempt(s)", v.attempts)
        } else {
            v.reason.to_string()
        };
        row(v, ran, &detail);
    }
    if j.running.is_empty() && j.queue.is_empty() && j.finished.is_empty() {
        println!("(no jobs)");
    }
    ExitCode::SUCCESS
}

fn row(v: &JobView, ms: i64, detail: &str) {
    let name: String = v.name.chars().take(20).collect();
    println!(
        "{:>6}  {:<20} {:<12} {:>4} {:>4}  {:<10} {:>8}  {}",
        v.id.0,
        name,
        v.share,
        v.priority,
        v.quantity,
        v.state.as_str(),
        duration(ms),
        detail
    );
}

/// A short human duration: 45s, 12m03s, 3h05m.
pub fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}
