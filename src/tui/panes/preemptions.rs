//! Preemption log: time, victim and its share (a gang victim's nodes, SPEC §16), the job
//! that caused it and its share, the reason, how long the victim ran, what became of it
//! and the work it lost (SPEC §14: `lost 2 GPU × 12m`, or `saved 40s before`, as
//! `snapshot::LostWork::text` says it). New entries are marked `●` and highlighted for a
//! few seconds, then settle.

use super::{block, row_style, window};
use crate::duration;
use crate::snapshot::PreemptionRecord;
use crate::tui::app::{App, FRESH_MS, Pane};
use crate::tui::text::{clock, fit};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Rows this pane would like (borders included).
pub fn wanted_height(app: &App) -> u16 {
    app.snap.preemptions.len().max(1) as u16 + 2
}

/// Short reason words for narrow panes.
pub fn short_reason(reason: &str) -> &str {
    match reason {
        "CROSS_SHARE_RECLAIM" => "reclaim",
        "IN_SHARE_PRIORITY" => "in-share",
        "DEVICE_LOST" => "device lost",
        other => other,
    }
}

use crate::visible::visible;

fn spans(app: &App, p: &PreemptionRecord, fresh: bool, narrow: bool) -> Vec<Span<'static>> {
    let t = &app.theme;
    let share = |s: &str| Style::new().fg(t.share(s)).add_modifier(Modifier::BOLD);
    let mut out = vec![
        Span::styled(if fresh { "● " } else { "  " }, t.fresh_style()),
        Span::styled(clock(p.at, app.utc_offset_secs), t.dimmed()),
        Span::raw("  "),
        Span::styled(
            visible(&p.victim_name).into_owned(),
            t.text().add_modifier(Modifier::BOLD),
        ),
        Span::styled(" (", t.text()),
        Span::styled(p.victim_share.clone(), share(&p.victim_share)),
        Span::styled(
            p.victim_user
                .as_ref()
                .map_or(String::new(), |u| format!(", {}", visible(u))),
            t.dimmed(),
        ),
        Span::styled(format!(", ran {}", duration::human(p.ran_for)), t.text()),
    ];
    // A gang victim (SPEC §16) was stopped on every node: all of them are named.
    if let Some(on) = p.victim_on() {
        let on = if narrow {
            format!(", {} nodes", p.victim_placements.len())
        } else {
            format!(", on {on}")
        };
        out.push(Span::styled(on, t.text()));
    }
    out.push(Span::styled(")", t.text()));
    match (&p.by_name, &p.by_share) {
        (Some(by), Some(bs)) => {
            out.push(Span::styled(" ← ", t.text()));
            out.push(Span::styled(
                visible(by).into_owned(),
                t.text().add_modifier(Modifier::BOLD),
            ));
            out.push(Span::styled(" (", t.text()));
            out.push(Span::styled(bs.clone(), share(bs)));
            out.push(Span::styled(")", t.text()));
        }
        _ => out.push(Span::styled(" ← (config/device)", t.dimmed())),
    }
    let reason = if narrow {
        short_reason(&p.reason)
    } else {
        &p.reason
    };
    out.push(Span::styled(format!("  {reason}"), t.warn_style()));
    let outcome = p.outcome.clone().unwrap_or_else(|| "stopping…".into());
    let outcome_style = if outcome.starts_with("failed") {
        t.error_style()
    } else {
        t.text()
    };
    out.push(Span::styled(format!("  {outcome}"), outcome_style));
    if let Some(l) = &p.lost {
        let style = if l.text().starts_with("saved") {
            t.dimmed()
        } else {
            t.warn_style()
        };
        out.push(Span::styled(format!("  {}", l.text()), style));
    }
    out
}

pub fn render(f: &mut Frame, area: Rect, app: &App) {
    let n = app.snap.preemptions.len();
    let blk = block(
        app,
        Pane::Preemptions,
        Line::from(format!(" Preemptions ({n}) ")),
    );
    let inner = blk.inner(area);
    f.render_widget(blk, area);
    let rows = inner.height;
    let off = window(app, Pane::Preemptions, rows);
    let t = &app.theme;
    let w = inner.width as usize;
    let mut lines = Vec::new();
    for (i, p) in app
        .snap
        .preemptions
        .iter()
        .enumerate()
        .skip(off)
        .take(rows as usize)
    {
        let fresh = app.now - p.at < FRESH_MS && app.now >= p.at;
        let mut line = Line::from(spans(app, p, fresh, false));
        if line.width() > w {
            line = Line::from(spans(app, p, fresh, true));
        }
        if line.width() > w {
            // Too wide: keep the colours of what fits and end in an ellipsis.
            let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
            line = Line::styled(fit(&text, w), t.text());
        }
        let mut style = row_style(app, Pane::Preemptions, i);
        if fresh && style == Style::new() {
            style = t.fresh_style();
        }
        lines.push(line.style(style));
    }
    if n == 0 {
        lines.push(Line::styled(" no preemptions yet", t.dimmed()));
    }
    f.render_widget(Paragraph::new(lines), inner);
}
