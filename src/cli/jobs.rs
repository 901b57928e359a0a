//! `shareq jobs [--all] [--since WHEN] [--until WHEN] [--json] [--share S] [--user U]
//! [--status STATE] [--name TEXT]`: the queue (with reasons), running jobs, and with
//! `--all` finished ones; the filters narrow every list (and the JSON) to the jobs that
//! match all of them, and `--since`/`--until` to the jobs queued or running at some
//! instant between the two (they imply `--all`, and so does a `--status` of an ended
//! state). Below 140 columns the table drops COMMAND and fits each row to the width.

use super::error::CliError;
use crate::duration;
use crate::exec::now_ms;
use crate::model::JobState;
use crate::server::runtime::input::Span;
use crate::server::{JobsAnswer, Request};
use crate::snapshot::JobView;
use crate::store::Store;
use crate::visible::visible;
use std::path::PathBuf;
use unicode_width::UnicodeWidthStr;

#[derive(Debug, clap::Args)]
pub struct JobsArgs {
    /// Also list finished jobs.
    #[arg(long)]
    pub all: bool,
    /// Only jobs queued or running at or after this instant (implies --all): an age such
    /// as 30m, 2h, 1d, 1w, or a local date or time (2026-12-01, "2026-12-01 14:00", 14:00)
    /// or RFC 3339.
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Only jobs submitted at or before this instant (same forms as --since; implies --all).
    #[arg(long, value_name = "WHEN")]
    pub until: Option<String>,
    /// Print the answer as JSON (queue, running, pending, arrays, finished, preemptions).
    #[arg(long)]
    pub json: bool,
    /// List every child of an array as a row of its own (`12:3`), instead of one row per
    /// array with its children's counts by state.
    #[arg(long)]
    pub expand: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
}

/// Which jobs a command is about: `jobs` lists them, `cancel` cancels them.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FilterArgs {
    /// Only jobs of these shares (repeat or comma-separate).
    #[arg(long, value_delimiter = ',')]
    pub share: Vec<String>,
    /// Only jobs these users submitted (repeat or comma-separate).
    #[arg(long, value_delimiter = ',')]
    pub user: Vec<String>,
    /// Only jobs in these states: PENDING, RUNNABLE, SCHEDULED, STARTING, RUNNING, SUCCEEDED,
    /// FAILED, or `queued`, `running` (SCHEDULED/STARTING/RUNNING), `finished`. (`--state`
    /// names the state directory, as in every command.)
    #[arg(long, value_delimiter = ',')]
    pub status: Vec<String>,
    /// Only jobs whose name contains this text.
    #[arg(long)]
    pub name: Option<String>,
}

impl FilterArgs {
    /// No filter was given.
    pub fn is_empty(&self) -> bool {
        self.share.is_empty()
            && self.user.is_empty()
            && self.status.is_empty()
            && self.name.is_none()
    }
}

/// The jobs the filters of `jobs` let through.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    shares: Vec<String>,
    users: Vec<String>,
    states: Vec<JobState>,
    name: Option<String>,
}

/// A `--status` that names no job state (what was given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--status {0}: not a job state (one of PENDING, RUNNABLE, SCHEDULED, STARTING, RUNNING, SUCCEEDED, FAILED, or queued, running, finished)"
)]
pub struct NotAState(pub String);

impl JobFilter {
    /// From the command line; an unknown state is an error that lists the known ones.
    pub fn from_args(args: &FilterArgs) -> Result<JobFilter, NotAState> {
        let mut states = Vec::new();
        for s in &args.status {
            match s.to_ascii_lowercase().as_str() {
                "queued" => states.push(JobState::Runnable),
                "running" => {
                    states.extend([JobState::Scheduled, JobState::Starting, JobState::Running])
                }
                "finished" => states.extend([JobState::Succeeded, JobState::Failed]),
                // Any state a listed job can be in (SUBMITTED lasts no longer than a submit).
                other => match JobState::ALL
                    .iter()
                    .filter(|st| **st != JobState::Submitted)
                    .find(|st| st.as_str().eq_ignore_ascii_case(other))
                {
                    Some(st) => states.push(*st),
                    None => return Err(NotAState(s.clone())),
                },
            }
        }
        Ok(JobFilter {
            shares: args.share.clone(),
            users: args.user.clone(),
            states,
            name: args.name.clone(),
        })
    }

    /// Does a `--status` name an ended state (so that the finished jobs are wanted)?
    pub fn wants_finished(&self) -> bool {
        self.states.iter().any(|s| s.is_finished())
    }

    pub fn matches(&self, v: &JobView) -> bool {
        (self.shares.is_empty() || self.shares.contains(&v.share))
            && (self.users.is_empty()
                || v.submitter
                    .as_ref()
                    .is_some_and(|s| self.users.contains(&s.name)))
            && (self.states.is_empty() || self.states.contains(&v.state))
            && self
                .name
                .as_ref()
                .is_none_or(|n| v.name.contains(n.as_str()))
    }

    /// Keep only the matching jobs (and the preemptions whose victim matches).
    pub fn apply(&self, j: &mut JobsAnswer) {
        j.queue.retain(|v| self.matches(v));
        j.running.retain(|v| self.matches(v));
        j.pending.retain(|v| self.matches(v));
        j.arrays.retain(|v| self.matches(v));
        j.finished.retain(|v| self.matches(v));
        if !self.shares.is_empty() {
            j.preemptions.retain(|p| {
                self.shares.contains(&p.victim_share)
                    || p.by_share.as_ref().is_some_and(|b| self.shares.contains(b))
            });
        }
    }
}

pub fn jobs(args: &JobsArgs) -> Result<(), CliError> {
    let filter = match JobFilter::from_args(&args.filter) {
        Ok(f) => f,
        Err(e) => {
            return Err(CliError::usage(format!("shareq jobs: {e}")));
        }
    };
    let now = now_ms();
    let parse = |flag: &str, v: &Option<String>| match v {
        Some(t) => super::when::parse_instant(t, now)
            .map(Some)
            .map_err(|e| format!("{flag}: {e}")),
        None => Ok(None),
    };
    let span = match (parse("--since", &args.since), parse("--until", &args.until)) {
        (Ok(since), Ok(until)) => Span { since, until },
        (Err(e), _) | (_, Err(e)) => {
            return Err(CliError::usage(format!("shareq jobs: {e}")));
        }
    };
    // A status filter on ended jobs lists them without --all.
    let all = args.all || span != Span::default() || filter.wants_finished();
    let req = Request::Jobs {
        all,
        since: span.since,
        until: span.until,
    };
    let read = |state: &std::path::Path| from_database(state, all, span);
    let mut j = super::ask_or_read(
        "jobs",
        args.state.as_deref(),
        &req,
        "job list",
        |r| r.jobs,
        read,
    )?;
    filter.apply(&mut j);
    if !args.expand {
        fold_arrays(&mut j);
    }
    if args.json {
        match crate::wire::to_string_pretty(&j) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                return Err(CliError::failed(format!("shareq jobs: {e}")));
            }
        }
        return Ok(());
    }
    let mut table = Table::for_terminal();
    table.sliced = j.sliced_units.clone();
    table.header();
    for v in &j.running {
        // A gang's every node, in rank order (SPEC §16).
        let devices = v.places_text(crate::snapshot::PlaceStyle::Listed);
        // The console's words: which of a borrowing share's jobs a reclaim would take.
        let detail = match &v.stopping {
            Some((what, _)) => match v.stop {
                Some(stop) => format!("{what}; {}; devices {devices}", stop.text(now)),
                None => format!("{what}; devices {devices}"),
            },
            None if v.reclaimed_first => {
                format!("reclaim next ({} borrows); devices {devices}", v.share)
            }
            None if v.on_borrowed => format!("kept ({} borrows); devices {devices}", v.share),
            None => format!("devices {devices}"),
        };
        // Its saves (SPEC §14): `saved 4m ago`; marked `!` first when it has not reported
        // for twice its --checkpoint-every.
        let detail = match crate::snapshot::saves_text(v, now) {
            Some(s) if s.overdue => format!("! {}; {detail}", s.text),
            Some(s) => format!("{detail}; {}", s.text),
            None => detail,
        };
        table.row(v, now - v.started.unwrap_or(now), "", &detail);
    }
    for v in &j.queue {
        // A lower bound says which job of unknown end it rests on (SPEC §11).
        let detail = match (v.estimate_kind, &v.estimate_note) {
            (Some(crate::forecast::EstimateKind::LowerBound), Some(why)) => {
                format!("{} (start: {why})", v.reason)
            }
            _ => v.reason.to_string(),
        };
        table.row(v, now - v.submitted, &estimate_cell(v, now), &detail);
    }
    for v in &j.pending {
        table.row(v, now - v.submitted, "after", &v.reason);
    }
    for v in &j.arrays {
        table.row(v, now - v.submitted, "", &array_detail(v));
    }
    for v in &j.finished {
        if v.array.is_some() {
            table.row(v, now - v.submitted, "", &array_detail(v));
            continue;
        }
        let ran = v.finished.unwrap_or(now) - v.started.unwrap_or(v.submitted);
        let detail = if v.state == crate::model::JobState::Succeeded {
            format!("after {} attempt(s)", v.attempts)
        } else {
            // The AWS state stays FAILED; who cancelled is said beside it.
            match v.reason.strip_prefix("CANCELLED: by ") {
                Some(by) => format!("CANCELLED by {by}"),
                None => v.reason.to_string(),
            }
        };
        table.row(v, ran, "", &detail);
    }
    if j.running.is_empty()
        && j.queue.is_empty()
        && j.pending.is_empty()
        && j.arrays.is_empty()
        && j.finished.is_empty()
    {
        println!("(no jobs)");
    }
    Ok(())
}

/// One row per array (SPEC §13): the children leave every list; their parent's row (in
/// `arrays`, or among the finished) counts them.
pub fn fold_arrays(j: &mut JobsAnswer) {
    let child = |v: &JobView| v.parent.is_some();
    j.queue.retain(|v| !child(v));
    j.running.retain(|v| !child(v));
    j.pending.retain(|v| !child(v));
    j.finished.retain(|v| !child(v));
}

/// `array 50: 8 running, 30 queued, 12 succeeded`.
fn array_detail(v: &JobView) -> String {
    match &v.array {
        Some(a) => format!("array {}: {}", a.size, a.counts_text()),
        None => v.reason.to_string(),
    }
}

/// The text table: all columns when the terminal is wide (or output goes to a file or a
/// pipe), and below [`WIDE`] columns a narrower set (no COMMAND, the estimate inside
/// DETAIL) where a DETAIL that does not fit goes on a line of its own, indented, cut to
/// the width: no line wraps.
struct Table {
    width: Option<usize>,
    /// Units sliced by memory (SPEC §15): their jobs' GPUS cell reads `20 GiB`.
    sliced: Vec<String>,
}

/// The width the full table needs to show a useful DETAIL.
const WIDE: usize = 140;

impl Table {
    /// `$COLUMNS` when set, else the terminal's width when stdout is one, else unlimited.
    fn for_terminal() -> Table {
        use std::io::IsTerminal;
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse().ok())
            .or_else(|| {
                std::io::stdout()
                    .is_terminal()
                    .then(|| crossterm::terminal::size().ok().map(|(w, _)| w as usize))
                    .flatten()
            });
        Table {
            width,
            sliced: Vec::new(),
        }
    }

    /// The GPUS cell: `2`, a gang's `2×4` (nodes × GPUs on each, SPEC §16), or `20 GiB`
    /// (`20G` in the narrow table) on a sliced unit.
    fn amount(&self, v: &JobView) -> String {
        v.amount(match (self.sliced.contains(&v.unit), self.narrow()) {
            (false, _) => None,
            (true, false) => Some(" GiB"),
            (true, true) => Some("G"),
        })
    }

    /// The wide table's GPUS column: wider when a job may read `20 GiB`.
    fn gpus_width(&self) -> usize {
        if self.sliced.is_empty() { 4 } else { 7 }
    }

    fn narrow(&self) -> bool {
        self.width.is_some_and(|w| w < WIDE)
    }

    fn header(&self) {
        if self.narrow() {
            let line = format!(
                "{:>5} {:<15} {:<8} {:<8} {:>4} {:>3} {:<9} {:>7} DETAIL",
                "ID", "NAME", "USER", "SHARE", "PRIO", "GPU", "STATE", "FOR"
            );
            println!("{}", self.cut(&line));
        } else {
            println!(
                "{:>6}  {:<20} {:<10} {:<12} {:>4} {:>gw$}  {:<10} {:>8}  {:<11} {:<24}  DETAIL",
                "ID",
                "NAME",
                "USER",
                "SHARE",
                "PRIO",
                "GPUS",
                "STATE",
                "FOR",
                "START(EST)",
                "COMMAND",
                gw = self.gpus_width()
            );
        }
    }

    fn cut(&self, line: &str) -> String {
        match self.width {
            Some(w) => crate::tui::text::fit(line, w),
            None => line.to_string(),
        }
    }

    fn row(&self, v: &JobView, ms: i64, estimate: &str, detail: &str) {
        // User-controlled text is printed with its control characters made visible (SPEC §9).
        let user = v.submitter.as_ref().map_or("-", |s| s.name.as_str());
        // In a fair-share share, the delay the user's usage adds (SPEC §12) opens the
        // detail (`fair-share delay +12m; ...`): the USER column holds the user alone.
        let detail = match v.fair_share_delay_seconds {
            Some(d) => format!(
                "fair-share delay +{}; {detail}",
                crate::duration::short(d.saturating_mul(1000))
            ),
            None => detail.to_string(),
        };
        let detail = detail.as_str();
        if self.narrow() {
            use crate::tui::text::pad;
            let detail = if estimate.is_empty() {
                visible(detail).to_string()
            } else {
                format!("start {estimate}; {}", visible(detail))
            };
            let line = format!(
                "{:>5} {} {} {} {:>4} {:>3} {:<9} {:>7}",
                v.label(),
                pad(&visible(&v.name), 15),
                pad(&visible(user), 8),
                pad(&v.share, 8),
                v.priority,
                self.amount(v),
                v.state.as_str(),
                duration::human(ms),
            );
            let room = self.width.unwrap_or(WIDE).saturating_sub(line.width() + 1);
            if detail.width() <= room {
                println!("{line} {detail}");
            } else {
                println!("{}", self.cut(&line));
                println!("{}", self.cut(&format!("      {detail}")));
            }
            return;
        }
        let name: String = visible(&v.name).chars().take(20).collect();
        // Another user's command is not shown (SPEC §9): the scheduler sends it empty.
        let shown = if v.command.is_empty() {
            "(not yours)"
        } else {
            v.command.as_str()
        };
        let command = crate::tui::text::pad(shown, 24);
        println!(
            "{:>6}  {:<20} {:<10} {:<12} {:>4} {:>gw$}  {:<10} {:>8}  {:<11} {}  {}",
            v.label(),
            name,
            visible(user),
            v.share,
            v.priority,
            self.amount(v),
            v.state.as_str(),
            duration::human(ms),
            estimate,
            command,
            visible(detail),
            gw = self.gpus_width()
        );
    }
}

/// A queued job's estimated start as the table shows it (SPEC §11, the one formatter of
/// `forecast::Estimate`): `14:32–18:10`, `14:32`, `≥ 14:32` (waits on an unknown end),
/// `overdue`, `>7d` (not within the forecast's horizon), `?` (not estimated yet).
fn estimate_cell(v: &JobView, now: i64) -> String {
    use crate::forecast::{Estimate, EstimateKind};
    let e = match (
        v.estimate_kind,
        v.estimated_start_earliest,
        v.estimated_start,
        v.estimated_start_latest,
    ) {
        (Some(EstimateKind::LowerBound), Some(from), ..) => Estimate::AtLeast {
            from,
            why: v.estimate_note.clone().unwrap_or_default(),
        },
        (Some(EstimateKind::BeyondHorizon), ..) => {
            let n = v.estimate_note.as_deref().unwrap_or("not within 7d");
            return format!(">{}", n.trim_start_matches("not within "));
        }
        (Some(_), Some(earliest), Some(start), Some(latest)) => Estimate::Range {
            earliest,
            start,
            latest,
        },
        _ => Estimate::NotYet,
    };
    e.label(now, now, crate::forecast::local_utc_offset())
}

/// The jobs as the database of `state` holds them (no scheduler running).
fn from_database(
    state: &std::path::Path,
    all: bool,
    span: Span,
) -> Result<JobsAnswer, crate::store::StoreError> {
    let store = Store::open_read_only(state)?;
    let mut queue = Vec::new();
    let mut running = Vec::new();
    for job in store.active_jobs()? {
        let Some(rec) = store.job(job.id)? else {
            continue;
        };
        let mut view = JobView::from(&rec);
        if !span.contains(&view) {
            continue;
        }
        if matches!(
            job.state,
            JobState::Scheduled | JobState::Starting | JobState::Running
        ) {
            running.push(view);
        } else {
            view.reason = std::sync::Arc::from("queued (no scheduler running)");
            queue.push(view);
        }
    }
    let finished = if all {
        store
            .history_in(
                crate::server::runtime::HISTORY_LISTED,
                span.since,
                span.until,
            )?
            .iter()
            .map(JobView::from)
            .collect()
    } else {
        Vec::new()
    };
    let preemptions = store.preemptions(1000)?;
    Ok(JobsAnswer {
        queue,
        running,
        pending: Vec::new(),
        arrays: Vec::new(),
        finished,
        preemptions,
        // Read without a scheduler: no one to ask who may do what.
        caller_is_admin: false,
        // Nor which units are sliced: quantities read as numbers.
        sliced_units: Vec::new(),
    })
}
