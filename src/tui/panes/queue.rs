//! Queue: pending jobs in scheduling order (or the `o` sort), each with why it waits.
//! Only the visible window's rows are built, so 100,000 queued jobs cost a screenful.
//! The `est.start` column is the background forecast's estimate (SPEC §11): `~3m12s`
//! from now (the tilde marks an estimate), `>7d` beyond its horizon, `?` not yet.
//! An array's queued children fold behind one parent row (`▸`, enter or space unfolds
//! it, `▾`) that counts them by state; PENDING jobs follow the queue, estimated `after`
//! (SPEC §13).

use super::{USER_W, block, header_line, position, row_style, user, window};
use crate::duration;
use crate::tui::app::{App, Pane};
use crate::tui::text::{fit, pad, rpad};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub fn render(f: &mut Frame, area: Rect, app: &App) {
    let n = app.queue_rows.len();
    let total = app.snap.queue.len();
    let count = if n == total {
        format!("{total}")
    } else {
        format!("{n} of {total}")
    };
    let filter = if app.filter.is_empty() {
        "none".to_string()
    } else {
        app.filter.raw().to_string()
    };
    let mut title = format!(
        " Queue ({count}) ─ sorted: {} ─ filter: {filter} ",
        app.sort.label()
    );
    if app.focus == Pane::Queue {
        title.push_str(&position(app.sel[Pane::Queue.index()], n));
    }
    let blk = block(app, Pane::Queue, Line::from(title));
    let inner = blk.inner(area);
    f.render_widget(blk, area);
    if inner.height == 0 {
        return;
    }
    let w = inner.width as usize;
    let id_w = app.id_width;
    let name_w = if w >= 120 { 20 } else { 14 };
    let share_w = 8;
    // Fair-share shares (SPEC §12): the delay the user's usage adds, beside the user.
    let fair = app.snap.shares.iter().any(|s| s.fair_share);
    let user_w = if fair { USER_W + 7 } else { USER_W };
    let est_w = 11;
    let fixed =
        id_w + 1 + name_w + 1 + user_w + 1 + share_w + 1 + 4 + 1 + 4 + 1 + 7 + 1 + est_w + 2;
    let reason_w = w.saturating_sub(fixed);
    let head = format!(
        "{} {} {} {} {} {} {} {}  {}",
        rpad("id", id_w),
        pad("name", name_w),
        pad("user", user_w),
        pad("share", share_w),
        rpad("prio", 4),
        rpad("gpus", 4),
        rpad("waiting", 7),
        rpad("est.start", est_w),
        "why",
    );
    let rows = inner.height.saturating_sub(1);
    let off = window(app, Pane::Queue, rows);
    let t = &app.theme;
    let mut lines = Vec::with_capacity(rows as usize + 1);
    lines.push(header_line(app, head));
    for i in off..(off + rows as usize).min(n) {
        let Some(j) = app.queue_rows.job(i, app.queue_jobs()) else {
            break;
        };
        let colour = t.share(&j.share);
        let counts;
        let bound;
        let (reason, name, est) = match &j.array {
            Some(a) => {
                counts = format!("array {}: {}", a.size, a.counts_text());
                let glyph = if app.unfolded.contains(&j.id) {
                    "▾"
                } else {
                    "▸"
                };
                (
                    counts.as_str(),
                    format!("{glyph} {}", j.name),
                    "-".to_string(),
                )
            }
            None if j.state == crate::model::JobState::Pending => {
                (app.snap.reason(j), j.name.clone(), "after".to_string())
            }
            None => {
                // A lower bound says first which job of unknown end it rests on (SPEC §11).
                let reason = match app.snap.estimate(j.id) {
                    crate::forecast::Estimate::AtLeast { why, .. } => {
                        bound = format!("start: {why}; {}", app.snap.reason(j));
                        bound.as_str()
                    }
                    _ => app.snap.reason(j),
                };
                (reason, j.name.clone(), estimate(app, j.id))
            }
        };
        let reason_style = if reason.starts_with("QUOTA_MANAGEMENT") {
            t.error_style()
        } else if j.nominated {
            t.warn_style()
        } else {
            t.text()
        };
        // GiB of one device on a unit sliced by memory: `20G` (SPEC §15); a gang's nodes ×
        // GPUs on each: `2×4` (SPEC §16).
        let quantity = j.amount(app.snap.sliced(&j.unit).then_some("G"));
        let spans = vec![
            Span::styled(rpad(&j.label(), id_w), t.dimmed()),
            Span::raw(" "),
            Span::styled(pad(&name, name_w), t.text()),
            Span::raw(" "),
            Span::styled(pad(&user_cell(app, j, fair), user_w), t.dimmed()),
            Span::raw(" "),
            Span::styled(
                pad(&j.share, share_w),
                Style::new().fg(colour).add_modifier(Modifier::BOLD),
            ),
            Span::raw(" "),
            Span::styled(rpad(&j.priority.to_string(), 4), t.text()),
            Span::raw(" "),
            Span::styled(rpad(&quantity, 4), t.text()),
            Span::raw(" "),
            Span::styled(rpad(&duration::human(app.now - j.submitted), 7), t.text()),
            Span::raw(" "),
            Span::styled(rpad(&est, est_w), t.dimmed()),
            Span::raw("  "),
            Span::styled(fit(reason, reason_w), reason_style),
        ];
        lines.push(Line::from(spans).style(row_style(app, Pane::Queue, i)));
    }
    if n == 0 {
        let msg = if total == 0 {
            " nothing is waiting — press s to submit a job"
        } else {
            " no queued job matches the filter (esc in / clears it)"
        };
        lines.push(Line::styled(msg, t.dimmed()));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// The user column: the submitter, and in a fair-share share the delay their usage adds
/// to the job's submission time (`alice +12m`).
fn user_cell(app: &App, j: &crate::snapshot::JobView, fair: bool) -> String {
    let queued = j.state == crate::model::JobState::Runnable;
    match (fair && queued)
        .then(|| app.snap.fair_standing(j))
        .flatten()
    {
        Some(u) => format!(
            "{} +{}",
            user(j),
            crate::duration::short((u.delay_seconds * 1000.0) as i64)
        ),
        None => user(j).to_string(),
    }
}

/// A queued job's estimated start as `jobs` writes it (SPEC §11, `forecast::Estimate`'s
/// one formatter): `14:32–18:10`, `≥ 14:32`, `overdue`, `>7d` (counted from the forecast,
/// as `jobs` says `not within 7d`), `?`.
fn estimate(app: &App, id: crate::model::JobId) -> String {
    app.snap
        .estimate(id)
        .label(app.now, app.snap.estimates.computed_at, app.utc_offset_secs)
}
