//! `e`: every error of the rejected config, file:line:column first, paths relative to the
//! config directory so that the message, not the path, fills the screen. The header shows
//! the first of them the same way.

use crate::tui::app::App;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph, Wrap};

/// One error line with the config directory's prefix taken off its path.
pub fn relative(line: &str, source: &str) -> String {
    let dir = source.trim_end_matches('/');
    if dir.is_empty() {
        return line.to_string();
    }
    line.strip_prefix(dir)
        .and_then(|rest| rest.strip_prefix('/'))
        .map_or_else(|| line.to_string(), str::to_string)
}

/// The rejected config's error lines, relative to its directory.
pub fn lines(app: &App) -> Vec<String> {
    let source = &app.snap.config.source;
    app.snap
        .config
        .error
        .as_deref()
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| relative(l, source))
        .collect()
}

pub fn render(f: &mut Frame, area: Rect, app: &App, scroll: usize) {
    let t = &app.theme;
    let errors = lines(app);
    let r = Rect {
        x: area.x + 1,
        y: area.y + 1,
        width: area.width.saturating_sub(2),
        height: area.height.saturating_sub(2),
    };
    f.render_widget(Clear, r);
    let title = format!(
        " Config rejected: {} error(s) in {} — the previous config stays in force ",
        errors.len(),
        app.snap.config.source
    );
    let block = super::frame_block(&title, t)
        .title_bottom(Line::styled(" k/j scroll  esc close ", t.dimmed()));
    let text: Vec<Line> = errors
        .iter()
        .map(|e| Line::styled(crate::visible::visible(e).into_owned(), t.error_style()))
        .collect();
    let scroll = scroll.min(errors.len().saturating_sub(1));
    f.render_widget(
        Paragraph::new(text)
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((u16::try_from(scroll).unwrap_or(u16::MAX), 0)),
        r,
    );
}

#[cfg(test)]
mod tests {
    use super::relative;

    #[test]
    fn paths_are_shown_relative_to_the_config_directory() {
        assert_eq!(
            relative("/etc/shareq/teams/nlp.yaml:3:5: x", "/etc/shareq"),
            "teams/nlp.yaml:3:5: x"
        );
        assert_eq!(
            relative("/etc/other.yaml:1:1: y", "/etc/shareq"),
            "/etc/other.yaml:1:1: y"
        );
        assert_eq!(relative("a.yaml:1:1: z", ""), "a.yaml:1:1: z");
    }
}
