//! Running: jobs holding GPUs — share, priority, devices (a gang's size and all its
//! nodes, SPEC §16), run time, a `▤` marker when their share is borrowing (saying which
//! jobs a reclaim would take first), while they are being stopped the stop's phase and
//! what is left of it (SPEC §14), and a job found over its GPU memory slice `! over
//! 22/20 GiB` (SPEC §15).

use super::shares::GLYPH_BORROWED;
use super::{USER_W, block, header_line, position, row_style, window};
use crate::duration;
use crate::snapshot::JobView;
use crate::tui::app::{App, Pane};
use crate::tui::text::{fit, pad, rpad};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Rows this pane would like (borders and header included).
pub fn wanted_height(app: &App) -> u16 {
    app.running_rows.len().max(1) as u16 + 3
}

/// "⏳ notice: SIGTERM in 3m12s: preempted (CROSS_SHARE_RECLAIM)" — the stop's phase
/// and what is left of it (`snapshot::StopView`), and why.
pub fn stopping_text(j: &JobView, now: i64) -> Option<String> {
    let (what, _) = j.stopping.as_ref()?;
    let phase = j
        .stop
        .map_or_else(|| "stopping".to_string(), |s| s.text(now));
    Some(format!("⏳ {phase}: {what}"))
}

/// The devices cell: `0,1`, `gpu1:0,1`, or a gang's size and every node (SPEC §16):
/// `2×2 gpu1:0,1 gpu2:0,1` (its details list them one per line).
fn devices_cell(j: &JobView) -> String {
    let on = j.places_text(crate::snapshot::PlaceStyle::Compact);
    if j.is_gang() {
        format!("{} {on}", j.amount(None))
    } else {
        on
    }
}

pub fn render(f: &mut Frame, area: Rect, app: &App) {
    let n = app.running_rows.len();
    let mut title = format!(" Running ({n}) ");
    if app.focus == Pane::Running {
        title.push_str(&position(app.sel[Pane::Running.index()], n));
    }
    let blk = block(app, Pane::Running, Line::from(title));
    let inner = blk.inner(area);
    f.render_widget(blk, area);
    if inner.height == 0 {
        return;
    }
    let w = inner.width as usize;
    let id_w = app.id_width.max(4);
    let name_w = if w >= 90 { 18 } else { 12 };
    // A gang's cell names all its nodes: the column grows for it, within reason.
    let dev_w = app
        .snap
        .running
        .iter()
        .filter(|j| j.is_gang())
        .map(|j| devices_cell(j).chars().count())
        .max()
        .map_or(7, |m| m.clamp(7, if w >= 120 { 28 } else { 14 }));
    let fixed = id_w + 1 + name_w + 1 + USER_W + 1 + 8 + 1 + 4 + 1 + dev_w + 1 + 7 + 1 + 1 + 1;
    let state_w = w.saturating_sub(fixed);
    let head = format!(
        "{} {} {} {} {} {} {}   {}",
        rpad("id", id_w),
        pad("name", name_w),
        pad("user", USER_W),
        pad("share", 8),
        rpad("prio", 4),
        pad("devices", dev_w),
        rpad("running", 7),
        "state",
    );
    let rows = inner.height.saturating_sub(1);
    let off = window(app, Pane::Running, rows);
    let t = &app.theme;
    let mut lines = vec![header_line(app, head)];
    for i in off..(off + rows as usize).min(n) {
        let Some(j) = app.running_rows.job(i, &app.snap.running) else {
            break;
        };
        let devs = devices_cell(j);
        let ran = j
            .started
            .map(|s| duration::human(app.now - s))
            .unwrap_or_default();
        let (state, style) = match stopping_text(j, app.now) {
            Some(s) if s.chars().count() > state_w => {
                let short = ["CROSS_SHARE_RECLAIM", "IN_SHARE_PRIORITY", "DEVICE_LOST"]
                    .iter()
                    .fold(s, |acc, r| {
                        acc.replace(r, super::preemptions::short_reason(r))
                    })
                    .replace("notice: SIGTERM in ", "notice ")
                    .replace("stopping: SIGKILL in ", "");
                (short, t.warn_style().add_modifier(Modifier::BOLD))
            }
            Some(s) => (s, t.warn_style().add_modifier(Modifier::BOLD)),
            // SPEC §15: over its slice, reported and not stopped (`overuse: REPORT`).
            None if j.over_memory.is_some() => (
                j.over_memory
                    .map(|o| format!("! {}", o.text()))
                    .unwrap_or_default(),
                t.warn_style().add_modifier(Modifier::BOLD),
            ),
            None if j.reclaimed_first => (
                format!("reclaim next ({} borrows)", j.share),
                Style::new().fg(t.bar_borrowed).add_modifier(Modifier::BOLD),
            ),
            None if j.on_borrowed => (
                format!("kept ({} borrows)", j.share),
                Style::new().fg(t.bar_borrowed),
            ),
            // SPEC §14: `saved 4m ago`, or why it is late (`!`, warned).
            None => match crate::snapshot::saves_text(j, app.now) {
                Some(s) if s.overdue => (format!("! {}", s.text), t.warn_style()),
                Some(s) => (s.text, t.text()),
                None => (j.state.as_str().to_lowercase(), t.text()),
            },
        };
        let colour = t.share(&j.share);
        let spans = vec![
            Span::styled(rpad(&j.label(), id_w), t.dimmed()),
            Span::raw(" "),
            Span::styled(pad(&j.name, name_w), t.text()),
            Span::raw(" "),
            Span::styled(pad(super::user(j), USER_W), t.dimmed()),
            Span::raw(" "),
            Span::styled(
                pad(&j.share, 8),
                Style::new().fg(colour).add_modifier(Modifier::BOLD),
            ),
            Span::raw(" "),
            Span::styled(rpad(&j.priority.to_string(), 4), t.text()),
            Span::raw(" "),
            Span::styled(pad(&devs, dev_w), t.text()),
            Span::raw(" "),
            Span::styled(rpad(&ran, 7), t.text()),
            Span::raw(" "),
            Span::styled(
                if j.on_borrowed {
                    GLYPH_BORROWED.to_string()
                } else {
                    " ".into()
                },
                Style::new().fg(t.bar_borrowed),
            ),
            Span::raw(" "),
            Span::styled(fit(&state, state_w), style),
        ];
        lines.push(Line::from(spans).style(row_style(app, Pane::Running, i)));
    }
    if n == 0 {
        lines.push(Line::styled(" no job is running", t.dimmed()));
    }
    f.render_widget(Paragraph::new(lines), inner);
}
