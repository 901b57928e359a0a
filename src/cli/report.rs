//! `shareq report [--since T] [--until T] [--users] [--json|--csv]`: usage per share (and
//! per user, for admins) over a window of the history, in GPU-hours, or GPU-minutes when
//! the window used less than a GPU-hour (so that a short window does not read `0.0`; the
//! JSON keeps the replay summary's GPU-seconds and field names).

use super::error::CliError;
use super::request;
use crate::replay::GroupSummary;
use crate::report::{Report, parse_time};
use crate::server::Request;
use crate::visible::visible;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Start of the window: a span back (7d, 12h, 2w), a UTC date (2026-11-01) or date and
    /// time (2026-11-01T08:00).
    #[arg(long, default_value = "30d", value_name = "T")]
    pub since: String,
    /// End of the window (same forms, or `now`).
    #[arg(long, default_value = "now", value_name = "T")]
    pub until: String,
    /// Per-user figures too (admins only; admins get them without asking).
    #[arg(long)]
    pub users: bool,
    /// The figures as JSON (GPU-seconds and seconds; keys in camelCase, docs/API.md).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// One CSV row per share (and user), in GPU-hours (GiB-hours of sliced units in
    /// `gib_hours_used`) and seconds.
    #[arg(long)]
    pub csv: bool,
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
}

/// Exit 0 with the report, 1 when it cannot be read, 2 on a bad time, 3 when not allowed.
pub fn report(args: &ReportArgs) -> Result<(), CliError> {
    let now = crate::exec::now_ms();
    let (since, until) = match (parse_time(&args.since, now), parse_time(&args.until, now)) {
        (Ok(s), Ok(u)) => (s, u),
        (Err(e), _) => {
            return Err(CliError::usage(format!("shareq report: --since: {e}")));
        }
        (_, Err(e)) => {
            return Err(CliError::usage(format!("shareq report: --until: {e}")));
        }
    };
    let req = Request::Report {
        since,
        until: until.min(now),
        users: args.users.then_some(true),
    };
    let r = match request(args.state.as_deref(), &req) {
        Ok(r) if r.ok => r,
        Ok(r) => {
            return Err(CliError::refused(
                &r,
                format!(
                    "shareq report: {}",
                    visible(r.error.as_deref().unwrap_or_default())
                ),
            ));
        }
        Err(e) => {
            return Err(CliError::client(&e, format!("shareq report: {e}")));
        }
    };
    let Some(rep) = r.report else {
        return Err(CliError::failed(
            "shareq report: the scheduler sent no report",
        ));
    };
    if args.json {
        return match crate::wire::to_string_pretty(&rep) {
            Ok(s) => {
                println!("{s}");
                Ok(())
            }
            Err(e) => Err(CliError::failed(format!("shareq report: {e}"))),
        };
    }
    if args.csv {
        print!("{}", csv(&rep));
    } else {
        print!("{}", table(&rep));
    }
    Ok(())
}

fn hours(gpu_seconds: f64) -> f64 {
    gpu_seconds / 3600.0
}

const CSV_HEADER: &str = "kind,name,gpu_hours_used,gpu_hours_within_limit,gpu_hours_borrowed,gpu_hours_lent,gpu_hours_idle_guaranteed,jobs_finished,jobs_succeeded,jobs_failed,wait_p50_seconds,wait_p95_seconds,preemptions,gpu_hours_lost_to_preemption,gib_hours_used";

/// The report as CSV: a header, then one row per share and per user. The GiB-hours of
/// sliced units (SPEC §15, the table's GIB-HOURS) are a column of their own, last, never
/// in the GPU-hours.
pub fn csv(rep: &Report) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    let rows = rep
        .summary
        .shares
        .iter()
        .map(|r| ("share", r))
        .chain(rep.summary.users.iter().map(|r| ("user", r)));
    for (kind, (name, g)) in rows {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        let _ = w.write_record([
            kind.to_string(),
            name.clone(),
            fmt_h(g.gpu_seconds_used),
            fmt_h(g.gpu_seconds_within_limit),
            fmt_h(g.gpu_seconds_borrowed),
            fmt_h(g.gpu_seconds_lent),
            fmt_h(g.gpu_seconds_idle),
            g.jobs_finished.to_string(),
            g.jobs_succeeded.to_string(),
            g.jobs_failed.to_string(),
            format!("{:.3}", g.p50_wait),
            format!("{:.3}", g.p95_wait),
            g.preemptions.to_string(),
            fmt_h(g.gpu_seconds_lost_to_preemption),
            fmt_h(g.gib_seconds_used),
        ]);
        if let Ok(bytes) = w.into_inner() {
            out.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    out
}

/// Usage against weight in each fair-share share (SPEC §12): a user's part of the share's
/// decayed usage beside the part their weight entitles them to, and the delay it adds.
pub fn fair_share_table(users: &[crate::sched::UserStanding]) -> String {
    let mut out = format!(
        "{:<16} {:<12} {:>10} {:>6} {:>8} {:>7} {:>9}\n",
        "FAIR SHARE", "USER", "USAGE", "WEIGHT", "ENTITLED", "ACTUAL", "DELAY"
    );
    let mut shares: Vec<&str> = users.iter().map(|u| u.share.as_str()).collect();
    shares.dedup();
    for share in shares {
        let of: Vec<&crate::sched::UserStanding> =
            users.iter().filter(|u| u.share == share).collect();
        let weights: f64 = of.iter().map(|u| u.weight).sum();
        let usage: f64 = of.iter().map(|u| u.usage_gpu_seconds).sum();
        for u in of {
            let pct = |a: f64, b: f64| {
                if b > 0.0 {
                    format!("{:.0}%", 100.0 * a / b)
                } else {
                    "-".into()
                }
            };
            out.push_str(&format!(
                "{:<16} {:<12} {:>10} {:>6} {:>8} {:>7} {:>9}\n",
                visible(share),
                visible(&u.user),
                crate::duration::human((u.usage_gpu_seconds * 1000.0) as i64),
                u.weight,
                pct(u.weight, weights),
                pct(u.usage_gpu_seconds, usage),
                format!(
                    "+{}",
                    crate::duration::short((u.delay_seconds * 1000.0) as i64)
                ),
            ));
        }
    }
    out.push_str("USAGE = decayed GPU time; ENTITLED = the user's part of the weights of the share's users with usage; ACTUAL = their part of its usage.\n");
    out
}

/// The GiB-hours of the groups that used a sliced unit (SPEC §15), as a table of their own
/// so that GiB and GPUs never add up; nothing when none did.
fn gib_table(head: &str, groups: &std::collections::BTreeMap<String, GroupSummary>) -> String {
    let rows: Vec<_> = groups
        .iter()
        .filter(|(_, g)| g.gib_seconds_used > 0.0)
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n{head:<16} {:>9}  (sliced units: GiB of GPU memory, not GPUs)\n",
        "GIB-HOURS"
    );
    for (name, g) in rows {
        out.push_str(&format!(
            "{:<16} {:>9.1}\n",
            visible(name),
            g.gib_seconds_used / 3600.0
        ));
    }
    out
}

/// The unit the table counts GPU time in.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Scale {
    seconds: f64,
    name: &'static str,
}

impl Scale {
    /// GPU-hours, or GPU-minutes when less than a GPU-hour was used.
    fn of(used_gpu_seconds: f64) -> Scale {
        if used_gpu_seconds < 3600.0 {
            Scale {
                seconds: 60.0,
                name: "GPU-minutes",
            }
        } else {
            Scale {
                seconds: 3600.0,
                name: "GPU-hours",
            }
        }
    }

    fn of_seconds(&self, gpu_seconds: f64) -> f64 {
        gpu_seconds / self.seconds
    }
}

fn fmt_h(gpu_seconds: f64) -> String {
    format!("{:.4}", hours(gpu_seconds))
}

/// The report as a table.
pub fn table(rep: &Report) -> String {
    let when = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default()
    };
    let s = &rep.summary;
    let scale = Scale::of(s.gpu_seconds_used);
    let unit = scale.name;
    let mut out = format!(
        "usage {} .. {} UTC: {:.1} {unit} used, utilisation {:.0}%, {} preemptions ({:.1} {unit} of work lost)\n\n",
        when(rep.since),
        when(rep.until),
        scale.of_seconds(s.gpu_seconds_used),
        s.utilisation * 100.0,
        s.shares.values().map(|g| g.preemptions).sum::<u64>(),
        scale.of_seconds(s.gpu_seconds_lost_to_preemption),
    );
    let head = format!(
        "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>8} {:>8} {:>7} {:>9}\n",
        "",
        "USED",
        "IN-LIMIT",
        "BORROWED",
        "LENT",
        "IDLE-GUAR",
        "DONE",
        "WAIT-P50",
        "WAIT-P95",
        "PREEMPT",
        "LOST"
    );
    let row = |name: &str, g: &GroupSummary, share: bool| {
        let dash = |v: f64| {
            if share {
                format!("{:.1}", scale.of_seconds(v))
            } else {
                "-".to_string()
            }
        };
        format!(
            "{:<16} {:>9.1} {:>9} {:>9} {:>9} {:>9} {:>6} {:>8} {:>8} {:>7} {:>9.1}\n",
            visible(name),
            scale.of_seconds(g.gpu_seconds_used),
            dash(g.gpu_seconds_within_limit),
            dash(g.gpu_seconds_borrowed),
            dash(g.gpu_seconds_lent),
            dash(g.gpu_seconds_idle),
            g.jobs_finished,
            crate::duration::short((g.p50_wait * 1000.0) as i64),
            crate::duration::short((g.p95_wait * 1000.0) as i64),
            g.preemptions,
            scale.of_seconds(g.gpu_seconds_lost_to_preemption),
        )
    };
    out.push_str(&format!("SHARE{}", &head[5..]));
    for (name, g) in &s.shares {
        out.push_str(&row(name, g, true));
    }
    if s.shares.is_empty() {
        out.push_str("(no usage recorded in this window)\n");
    }
    out.push_str(&gib_table("SHARE", &s.shares));
    if rep.users_shown {
        out.push('\n');
        out.push_str(&format!("USER{}", &head[4..]));
        for (name, g) in &s.users {
            out.push_str(&row(name, g, false));
        }
        out.push_str(&gib_table("USER", &s.users));
        if !rep.fair_share.is_empty() {
            out.push('\n');
            out.push_str(&fair_share_table(&rep.fair_share));
        }
    }
    out.push_str(&format!("\n{unit}; WAIT = submission to first start; LOST = {unit} of work preempted attempts lost (their GPUs × the time from their last checkpoint, or their start, to their release).\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(used: f64) -> GroupSummary {
        serde_json::from_value(serde_json::json!({
            "gpu_seconds_within_limit": used, "gpu_seconds_borrowed": 0.0,
            "gpu_seconds_lent": 0.0, "gpu_seconds_idle": 30.0, "gpu_seconds_used": used,
            "jobs_finished": 2, "jobs_succeeded": 2, "jobs_failed": 0, "mean_wait": 0.0,
            "p50_wait": 0.0, "p95_wait": 0.0, "preemptions": 0,
            "max_preemptions_of_one_job": 0, "gpu_seconds_lost_to_preemption": 0.0,
            "started_and_preempted_same_instant": 0,
        }))
        .unwrap()
    }

    fn report(used: f64) -> Report {
        let mut summary = crate::replay::Stats::new(1000).summary();
        summary.gpu_seconds_used = used;
        summary.shares.insert("vision".into(), group(used));
        summary.users.insert("alice".into(), group(used));
        Report {
            since: 0,
            until: 3_600_000,
            users_shown: true,
            fair_share: Vec::new(),
            summary,
        }
    }

    /// issue 46: a window that used minutes of GPU time reads in GPU-minutes, not `0.0`
    /// GPU-hours; hours from a GPU-hour on.
    #[test]
    fn minutes_of_use_read_as_minutes() {
        let t = table(&report(180.0));
        assert!(t.contains(": 3.0 GPU-minutes used"), "{t}");
        let row = t.lines().find(|l| l.starts_with("vision")).unwrap();
        assert_eq!(row.split_whitespace().nth(1), Some("3.0"), "{t}");
        assert!(t.contains("\nGPU-minutes; WAIT"), "{t}");
        let t = table(&report(7200.0));
        assert!(t.contains(": 2.0 GPU-hours used"), "{t}");
    }

    /// SPEC §15: a share's GiB-hours of a sliced unit print in a table of their own,
    /// labelled GiB, and never in the GPU columns; a report without them has no such table.
    #[test]
    fn gib_hours_of_sliced_units_print_apart() {
        let plain = table(&report(7200.0));
        assert!(!plain.contains("GIB-HOURS"), "{plain}");
        let mut rep = report(7200.0);
        if let Some(g) = rep.summary.shares.get_mut("vision") {
            g.gib_seconds_used = 40.0 * 3600.0;
        }
        let t = table(&rep);
        let row = t.lines().find(|l| l.starts_with("vision")).unwrap();
        assert_eq!(row.split_whitespace().nth(1), Some("2.0"), "{t}");
        let head = t.lines().position(|l| l.contains("GIB-HOURS")).unwrap();
        assert!(t.lines().nth(head).unwrap().starts_with("SHARE"), "{t}");
        assert!(
            t.lines()
                .nth(head)
                .unwrap()
                .contains("GiB of GPU memory, not GPUs"),
            "{t}"
        );
        let gib = t.lines().nth(head + 1).unwrap();
        assert_eq!(
            gib.split_whitespace().collect::<Vec<_>>(),
            ["vision", "40.0"],
            "{t}"
        );
        assert!(t.contains(": 2.0 GPU-hours used"), "{t}");
        // The CSV has the same GiB-hours in a column of their own, last.
        let c = csv(&rep);
        let head: Vec<&str> = c.lines().next().unwrap().split(',').collect();
        assert_eq!(head.last(), Some(&"gib_hours_used"), "{c}");
        let row = c.lines().find(|l| l.starts_with("share,vision,")).unwrap();
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), head.len(), "{c}");
        assert_eq!(
            (cells[2], cells[cells.len() - 1]),
            ("2.0000", "40.0000"),
            "{c}"
        );
        let plain = csv(&report(7200.0));
        assert!(
            plain.lines().nth(1).unwrap().ends_with(",0.0000"),
            "{plain}"
        );
    }

    /// The fair-share table's usage is a GPU time that reads at every size.
    #[test]
    fn fair_share_usage_reads_at_every_size() {
        let standing = |user: &str, usage: f64| crate::sched::UserStanding {
            share: "team".into(),
            user: user.into(),
            fair: true,
            usage_gpu_seconds: usage,
            at: 0,
            weight: 1.0,
            delay_seconds: usage / 2.0,
            holding: 0,
        };
        let t = fair_share_table(&[standing("alice", 3.0), standing("bob", 7500.0)]);
        let alice = t.lines().find(|l| l.contains("alice")).unwrap();
        assert_eq!(alice.split_whitespace().nth(2), Some("3s"), "{t}");
        let bob = t.lines().find(|l| l.contains("bob")).unwrap();
        assert_eq!(bob.split_whitespace().nth(2), Some("2h05m"), "{t}");
    }
}
