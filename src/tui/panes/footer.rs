//! Footer: the filter being typed, a transient status message, the rejected config's
//! first error (the header has no room for it on a narrow screen), or the keys that work
//! in the focused pane.

use crate::tui::app::{App, Mode, Pane};
use crate::tui::text::fit;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Key hints for a pane: (key, word).
pub fn hints(pane: Pane) -> &'static [(&'static str, &'static str)] {
    match pane {
        Pane::Queue | Pane::Running => &[
            ("s", "submit"),
            ("c", "cancel"),
            ("p", "priority"),
            ("+/-", "bump"),
            ("l", "log"),
            ("/", "filter"),
            ("o", "sort"),
            ("enter", "details"),
            ("r", "reload"),
            ("tab", "pane"),
            ("?", "help"),
            ("q", "quit"),
        ],
        Pane::Shares => &[
            ("s", "submit to share"),
            ("enter", "filter its jobs"),
            ("/", "filter"),
            ("r", "reload"),
            ("tab", "pane"),
            ("?", "help"),
            ("q", "quit"),
        ],
        Pane::Gpus | Pane::Preemptions => &[
            ("enter", "job details"),
            ("c", "cancel job"),
            ("l", "log"),
            ("s", "submit"),
            ("r", "reload"),
            ("tab", "pane"),
            ("?", "help"),
            ("q", "quit"),
        ],
    }
}

pub fn render(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let w = area.width as usize;
    let line = if let Mode::Filter { input, .. } = &app.mode {
        let err = super::super::filter::Filter::parse(&input.text).err();
        let mut spans = vec![
            Span::styled(" / ", t.text().fg(t.accent).add_modifier(Modifier::BOLD)),
            Span::styled(input.text.clone(), t.text()),
            Span::styled("▏", t.text().fg(t.accent)),
        ];
        match err {
            Some(e) => spans.push(Span::styled(format!("  {e}"), t.warn_style())),
            None => spans.push(Span::styled(
                "  text · user: share: state: node: · !negate · enter keep · esc clear",
                t.dimmed(),
            )),
        }
        Line::from(spans)
    } else if let Some(st) = app.status.as_ref().filter(|s| s.until > app.now) {
        Line::styled(
            format!(" {}", fit(&st.text, w.saturating_sub(1))),
            if st.error {
                t.error_style()
            } else {
                t.text().fg(t.ok)
            },
        )
    } else if let Some(first) = crate::tui::popups::config_errors::lines(app).first() {
        let hint = "  e: all errors";
        Line::from(vec![
            Span::styled(
                format!(" ✗ {}", fit(first, w.saturating_sub(4 + hint.len()))),
                t.error_style(),
            ),
            Span::styled(hint, t.dimmed()),
        ])
    } else {
        let mut spans = Vec::new();
        let mut used = 0;
        for (k, word) in hints(app.focus) {
            let len = k.len() + word.len() + 3;
            if used + len > w {
                break;
            }
            used += len;
            spans.push(Span::styled(
                format!(" {k}"),
                t.text().fg(t.accent).add_modifier(Modifier::BOLD),
            ));
            spans.push(Span::styled(format!(" {word} "), t.dimmed()));
        }
        Line::from(spans)
    };
    f.render_widget(Paragraph::new(line), area);
}
