//! Small modal questions that name what they act on: cancel y/n, the priority prompt, and
//! the quit dialog (detach / stop all / stay).

use super::{centered, frame_block};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

fn dialog(f: &mut Frame, area: Rect, title: &str, lines: Vec<Line>, theme: &Theme) {
    let width = lines.iter().map(|l| l.width()).max().unwrap_or(20) as u16 + 4;
    let r = centered(area, width.clamp(30, 90), lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    let block = frame_block(title, theme);
    let inner = block.inner(r);
    f.render_widget(block, r);
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}

/// "Cancel job 231 sweep-19 (vision, running 3m)? y/n"
pub fn render_cancel(f: &mut Frame, area: Rect, question: &str, theme: &Theme) {
    let lines = vec![
        Line::styled(
            format!(" {}", crate::visible::visible(question)),
            theme.text().add_modifier(Modifier::BOLD),
        ),
        Line::styled(" y cancel it   n / esc keep it", theme.dimmed()),
    ];
    dialog(f, area, " Cancel ", lines, theme);
}

pub fn render_priority(
    f: &mut Frame,
    area: Rect,
    what: &str,
    input: &str,
    ok: bool,
    theme: &Theme,
) {
    let mut value = vec![
        Span::styled(" new priority: ", theme.text()),
        Span::styled(input.to_string(), theme.text().add_modifier(Modifier::BOLD)),
        Span::styled("▏", theme.text().fg(theme.accent)),
    ];
    if !ok {
        value.push(Span::styled("  0..9999", theme.warn_style()));
    }
    let lines = vec![
        Line::styled(format!(" {what}"), theme.text()),
        Line::from(value),
        Line::styled(" enter set   esc keep", theme.dimmed()),
    ];
    dialog(f, area, " Priority ", lines, theme);
}

/// The quit dialog; `stop_hint` (attached consoles): the command that stops the jobs the
/// person at the keyboard may stop ([`crate::tui::App::stop_hint`]).
pub fn render_quit(
    f: &mut Frame,
    area: Rect,
    running: usize,
    attached: bool,
    stop_hint: &str,
    theme: &Theme,
) {
    if attached {
        // Another process runs the scheduler: leaving this console changes nothing there.
        let lines = vec![
            Line::styled(
                format!(
                    " {running} job(s) are running on the scheduler this console is attached to."
                ),
                theme.text().add_modifier(Modifier::BOLD),
            ),
            Line::styled(
                " Quitting leaves it and its jobs running. To stop jobs:",
                theme.text(),
            ),
            Line::styled(format!(" {stop_hint}"), theme.dimmed()),
            Line::from(vec![
                Span::styled(" d / q ", theme.text().add_modifier(Modifier::BOLD)),
                Span::styled("leave", theme.text()),
                Span::styled("   esc ", theme.text().add_modifier(Modifier::BOLD)),
                Span::styled("stay", theme.text()),
            ]),
        ];
        dialog(f, area, " Quit ", lines, theme);
        return;
    }
    let lines = vec![
        Line::styled(
            format!(" {running} job(s) are running. Leave how?"),
            theme.text().add_modifier(Modifier::BOLD),
        ),
        Line::from(vec![
            Span::styled(" d ", theme.text().add_modifier(Modifier::BOLD)),
            Span::styled("detach: jobs keep running, the queue is kept", theme.text()),
        ]),
        Line::from(vec![
            Span::styled(" s ", theme.text().add_modifier(Modifier::BOLD)),
            Span::styled("stop all jobs and quit", theme.text()),
        ]),
        Line::from(vec![
            Span::styled(" esc ", theme.text().add_modifier(Modifier::BOLD)),
            Span::styled("stay", theme.text()),
        ]),
    ];
    dialog(f, area, " Quit ", lines, theme);
}
