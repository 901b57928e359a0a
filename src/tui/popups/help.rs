//! The `?` overlay: every key, grouped, so nothing has to be remembered.

use super::{centered, frame_block};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

/// (key, what it does); an empty key starts a group.
pub const KEYS: &[(&str, &str)] = &[
    ("", "Moving"),
    ("tab / shift-tab", "next / previous pane"),
    ("j k / ↓ ↑", "select row"),
    ("g / G", "first / last row"),
    ("PgDn / PgUp", "page down / up"),
    ("enter", "details (on a share: filter its jobs)"),
    ("mouse click", "select pane and row"),
    ("", "Jobs"),
    ("s", "submit a job (form predicts start / borrow / wait)"),
    ("c", "cancel the selected job (asks y/n)"),
    ("p", "set the selected job's priority"),
    ("+ / -", "raise / lower its priority by 1"),
    ("l", "log tail of the selected job"),
    ("", "View"),
    ("/", "filter: text, share:NAME, !negate (esc clears)"),
    ("o", "cycle the queue's sort order"),
    ("r", "re-read the config now"),
    ("?", "this help"),
    ("q / ctrl-c", "quit (asks detach / stop all when jobs run)"),
    ("", "Shares bar"),
    ("■", "GPUs in use within the share's limit"),
    ("▤", "GPUs in use beyond the limit (borrowed)"),
    ("░", "idle guarantee lent to another share"),
    ("·", "idle guarantee"),
];

pub fn render(f: &mut Frame, area: Rect, theme: &Theme) {
    let h = KEYS.len() as u16 + 3;
    let r = centered(area, 66, h);
    f.render_widget(Clear, r);
    let block = frame_block(" Keys (esc or ? closes) ", theme);
    let inner = block.inner(r);
    f.render_widget(block, r);
    let lines: Vec<Line> = KEYS
        .iter()
        .map(|(k, what)| {
            if k.is_empty() {
                Line::styled(
                    format!(" {what}"),
                    theme.text().fg(theme.accent).add_modifier(Modifier::BOLD),
                )
            } else {
                Line::from(vec![
                    Span::styled(
                        format!("   {k:<16}"),
                        theme.text().add_modifier(Modifier::BOLD),
                    ),
                    Span::styled(*what, theme.text()),
                ])
            }
        })
        .collect();
    f.render_widget(Paragraph::new(lines), inner);
}
