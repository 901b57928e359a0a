//! `shareq history [--window hour|day|week] [--unit U] [--json]`: who used the GPUs over
//! the last hour, day or week — per share the average GPUs held within its limit (own),
//! beyond it (borrowed) and lent, the highest use, the queued GPUs, the longest wait and
//! the jobs started with their mean wait; the same figures as the console's `h` view.
//! The GiB of units sliced by memory (SPEC §15) are averaged in a table of their own,
//! never with GPUs. With `--json`, the bucketed history itself
//! (`snapshot::usage::UsageHistory`). When no scheduler runs, the database is read
//! directly.

use super::error::CliError;
use crate::duration;
use crate::exec::now_ms;
use crate::server::Request;
use crate::snapshot::usage::{KEEP_DAYS, UsageHistory, Window};
use crate::store::usage;
use crate::tui::history::{self, HistoryState};
use crate::tui::text::pad;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// How far back: hour, day or week.
    #[arg(long, default_value = "day", value_parser = parse_window)]
    pub window: Window,
    /// Only this capacity unit (default: every unit, summed per share).
    #[arg(long)]
    pub unit: Option<String>,
    /// Print the bucketed history as JSON.
    #[arg(long)]
    pub json: bool,
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
}

/// A `--window` that is none of hour, day or week (what was given).
#[derive(Debug, thiserror::Error)]
#[error("`{0}`: give hour, day or week")]
struct NotAWindow(String);

fn parse_window(s: &str) -> Result<Window, NotAWindow> {
    Window::parse(s).ok_or_else(|| NotAWindow(s.to_string()))
}

pub fn history(args: &HistoryArgs) -> Result<(), CliError> {
    let req = Request::History {
        window: args.window,
    };
    let read = |state: &std::path::Path| {
        usage::read_file(&state.join(crate::store::DB_FILE), args.window, now_ms())
    };
    let h: UsageHistory = super::ask_or_read(
        "history",
        args.state.as_deref(),
        &req,
        "history",
        |r| r.history,
        read,
    )?;
    if args.json {
        return match crate::wire::to_string_pretty(&h) {
            Ok(s) => {
                println!("{s}");
                Ok(())
            }
            Err(e) => Err(CliError::failed(format!("shareq history: {e}"))),
        };
    }
    if h.is_empty() {
        println!(
            "no utilisation samples in the last {} (the scheduler writes one every {} while \
             it runs and keeps them {} days)",
            args.window.label(),
            duration::short(h.interval_ms()),
            KEEP_DAYS
        );
        return Ok(());
    }
    let up: u32 = h.samples.iter().filter(|&&n| n > 0).count() as u32;
    let sampled = format!(
        "last {} ({} of {} buckets of {} sampled)",
        args.window.label(),
        up,
        h.samples.len(),
        duration::short(h.bucket_ms)
    );
    let bucket = duration::short(h.bucket_ms);
    let st = HistoryState {
        window: args.window,
        unit: args.unit.clone(),
        data: Some(Ok(h)),
        ..HistoryState::default()
    };
    print!("{}", tables(&sampled, &st.lines()));
    println!(
        "\nPEAK AVG: the busiest {} bucket's mean held (own + borrowed), not a single \
         instant's count",
        bucket
    );
    Ok(())
}

/// The figures per share: GPUs, then the GiB of sliced units in a table of their own
/// (SPEC §15), each under a line that says which. `lines` come GPU lines first.
fn tables(sampled: &str, lines: &[history::ShareLine]) -> String {
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let first_of_kind = lines.get(i.wrapping_sub(1)).is_none_or(|p| p.gib != l.gib);
        if first_of_kind {
            if i > 0 {
                out.push('\n');
            }
            let what = if l.gib {
                "sliced units, averages in GiB of GPU memory (not GPUs)"
            } else {
                "averages in GPUs"
            };
            out.push_str(&format!(
                "{sampled}, {what}:\n{}{}\n",
                pad("SHARE", 16),
                history::headings(true)
            ));
        }
        out.push_str(&format!(
            "{}{}\n",
            pad(&l.share, 16),
            history::figures(&l.totals, true)
        ));
    }
    if lines.is_empty() {
        out.push_str(&format!(
            "{sampled}, averages in GPUs:\n{}{}\n",
            pad("SHARE", 16),
            history::headings(true)
        ));
    }
    out
}
