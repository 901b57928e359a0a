//! Enter on a job: everything the snapshot knows about it, including its full reason.

use super::{centered, frame_block};
use crate::snapshot::JobView;
use crate::tui::text::{clock, duration};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

pub fn render(f: &mut Frame, area: Rect, j: &JobView, now: i64, tz: i32, theme: &Theme) {
    let row = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!(" {k:>11}  "), theme.dimmed()),
            Span::styled(crate::visible::visible(&v).into_owned(), theme.text()),
        ])
    };
    let mut lines = vec![
        row("name", j.name.clone()),
        row(
            "user",
            j.submitter.as_ref().map_or_else(
                || "-".to_string(),
                |s| format!("{} (uid {})", s.name, s.uid),
            ),
        ),
        Line::from(vec![
            Span::styled(format!(" {:>11}  ", "share"), theme.dimmed()),
            Span::styled(
                j.share.clone(),
                theme
                    .text()
                    .fg(theme.share(&j.share))
                    .add_modifier(Modifier::BOLD),
            ),
            Span::styled(format!("  unit {}", j.unit), theme.text()),
        ]),
        row("state", j.state.to_string()),
        row(
            "command",
            if j.command.is_empty() {
                // Another user's command is not sent to this console (SPEC §9).
                "(shown to its owner and admins only)".to_string()
            } else {
                j.command.clone()
            },
        ),
        row("GPUs", j.quantity.to_string()),
        row("priority", j.priority.to_string()),
        row(
            "submitted",
            format!(
                "{} ({} ago)",
                clock(j.submitted, tz),
                duration(now - j.submitted)
            ),
        ),
    ];
    if let Some(s) = j.started {
        lines.push(row(
            "started",
            format!("{} (running {})", clock(s, tz), duration(now - s)),
        ));
    }
    if !j.devices.is_empty() {
        let devs: Vec<String> = j.devices.iter().map(|d| d.to_string()).collect();
        let borrowed = if j.on_borrowed {
            "  (share is borrowing)"
        } else {
            ""
        };
        let on = j
            .node
            .as_ref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default();
        lines.push(row("devices", format!("{}{on}{borrowed}", devs.join(","))));
    }
    lines.push(row(
        "attempts",
        format!(
            "{} started, preempted {} time(s)",
            j.attempts, j.preempted_count
        ),
    ));
    if let Some((what, since)) = &j.stopping {
        lines.push(row(
            "stopping",
            format!("{what}, since {}", duration(now - since)),
        ));
    }
    if j.nominated {
        lines.push(row("nominated", "GPUs are being freed for it".into()));
    }
    lines.push(row("reason", j.reason.to_string()));
    lines.push(Line::styled(
        " esc closes   c cancel   p priority   l log",
        theme.dimmed(),
    ));
    // The reason may wrap: allow two extra rows.
    let r = centered(area, 76, lines.len() as u16 + 4);
    f.render_widget(Clear, r);
    let title = format!(" Job {} ", j.id);
    let block = frame_block(&title, theme);
    let inner = block.inner(r);
    f.render_widget(block, r);
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}
