//! The `?` overlay: every key, grouped, so nothing has to be remembered.

use super::{centered, frame_block};
use crate::tui::text::fit;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

/// (key, what it does); an empty key starts a group.
pub const KEYS: &[(&str, &str)] = &[
    ("", "Moving"),
    ("tab/S-tab", "next / previous pane"),
    ("j k ↓ ↑", "select row"),
    ("g / G", "first / last row"),
    ("PgDn/PgUp", "page down / up"),
    ("enter", "details / share's jobs"),
    ("click", "select pane and row"),
    ("", "Jobs"),
    ("s", "submit a job"),
    ("c", "cancel job (asks y/n)"),
    ("p", "set job priority"),
    ("+ / -", "priority up / down by 1"),
    ("l", "job's log tail"),
    ("", "View"),
    ("h", "GPU use history (1/2/3)"),
    ("/", "filter jobs (see below)"),
    ("o", "cycle queue sort order"),
    ("r", "re-read the config now"),
    ("e", "the rejected config's errors"),
    ("?", "this help"),
    ("q/ctrl-c", "quit / detach / stop"),
    ("", "Shares bar"),
    ("■", "own, within limit"),
    ("▤", "borrowed (over limit)"),
    ("░", "idle, lent out"),
    ("·", "idle guarantee"),
];

fn lines<'a>(
    keys: &'a [(&'a str, &'a str)],
    key_w: usize,
    width: usize,
    theme: &Theme,
) -> Vec<Line<'a>> {
    keys.iter()
        .map(|(k, what)| {
            if k.is_empty() {
                Line::styled(
                    format!(" {what}"),
                    theme.text().fg(theme.accent).add_modifier(Modifier::BOLD),
                )
            } else {
                Line::from(vec![
                    Span::styled(
                        format!("   {k:<key_w$} "),
                        theme.text().add_modifier(Modifier::BOLD),
                    ),
                    Span::styled(fit(what, width.saturating_sub(key_w + 4)), theme.text()),
                ])
            }
        })
        .collect()
}

/// The keys, then the `/` filter's syntax as its own group (kept in `filter::KEYS`).
fn entries() -> Vec<(&'static str, &'static str)> {
    let mut all = KEYS.to_vec();
    all.push(("", "Filter syntax (/)"));
    all.extend_from_slice(crate::tui::filter::KEYS);
    all
}

/// One column when it fits the height, else two (groups kept whole).
pub fn render(f: &mut Frame, area: Rect, theme: &Theme) {
    let all = entries();
    let one_column = area.height as usize >= all.len() + 2;
    let split = all
        .iter()
        .enumerate()
        .filter(|(i, (k, _))| k.is_empty() && *i >= all.len() / 2)
        .map(|(i, _)| i)
        .next()
        .unwrap_or(all.len());
    let (w, h) = if one_column {
        (56, all.len() as u16 + 2)
    } else {
        (area.width.min(100), split.max(all.len() - split) as u16 + 2)
    };
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    let block = frame_block(" Keys (esc or ? closes) ", theme);
    let inner = block.inner(r);
    f.render_widget(block, r);
    if one_column {
        f.render_widget(
            Paragraph::new(lines(&all, 12, inner.width as usize, theme)),
            inner,
        );
        return;
    }
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(inner);
    f.render_widget(
        Paragraph::new(lines(&all[..split], 10, left.width as usize, theme)),
        left,
    );
    f.render_widget(
        Paragraph::new(lines(&all[split..], 10, right.width as usize, theme)),
        right,
    );
}
