//! The `?` overlay: every key, grouped, so nothing has to be remembered. The lines come
//! from the console's one key table (`tui::keymap`), so the help shows what the keys do;
//! the `/` filter's syntax follows as its own group (kept in `filter::KEYS`).

use super::{centered, frame_block};
use crate::tui::keymap;
use crate::tui::text::fit;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

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

/// The keys, then the `/` filter's syntax as its own group.
fn entries() -> Vec<(&'static str, &'static str)> {
    let mut all: Vec<(&str, &str)> = keymap::help_lines().collect();
    all.push(("", "Filter syntax (/)"));
    all.extend_from_slice(crate::tui::filter::KEYS);
    all
}

/// One column when it fits the height, else two (groups kept whole).
pub fn render(f: &mut Frame, area: Rect, theme: &Theme) {
    let keys = entries();
    let keys = &keys[..];
    let one_column = area.height as usize >= keys.len() + 2;
    let split = keys
        .iter()
        .enumerate()
        .filter(|(i, (k, _))| k.is_empty() && *i >= keys.len() / 2)
        .map(|(i, _)| i)
        .next()
        .unwrap_or(keys.len());
    let (w, h) = if one_column {
        (56, keys.len() as u16 + 2)
    } else {
        (
            area.width.min(100),
            split.max(keys.len() - split) as u16 + 2,
        )
    };
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    let block = frame_block(" Keys (esc or ? closes) ", theme);
    let inner = block.inner(r);
    f.render_widget(block, r);
    if one_column {
        f.render_widget(
            Paragraph::new(lines(keys, 12, inner.width as usize, theme)),
            inner,
        );
        return;
    }
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(inner);
    f.render_widget(
        Paragraph::new(lines(&keys[..split], 10, left.width as usize, theme)),
        left,
    );
    f.render_widget(
        Paragraph::new(lines(&keys[split..], 10, right.width as usize, theme)),
        right,
    );
}
