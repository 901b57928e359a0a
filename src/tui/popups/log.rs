//! `l`: the tail of the selected job's log, refreshed while open.

use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph};

pub fn render(
    f: &mut Frame,
    area: Rect,
    title: &str,
    lines: &[String],
    scroll_back: usize,
    theme: &Theme,
) {
    let r = Rect {
        x: area.x + 2,
        y: area.y + 1,
        width: area.width.saturating_sub(4),
        height: area.height.saturating_sub(2),
    };
    f.render_widget(Clear, r);
    let block = super::frame_block(title, theme).title_bottom(Line::styled(
        " k/j scroll  G end  esc close ",
        theme.dimmed(),
    ));
    let inner = block.inner(r);
    f.render_widget(block, r);
    let h = inner.height as usize;
    let end = lines.len().saturating_sub(scroll_back.min(lines.len()));
    let start = end.saturating_sub(h);
    let shown: Vec<Line> = if lines.is_empty() {
        vec![Line::styled("(no output yet)", theme.dimmed())]
    } else {
        lines[start..end]
            .iter()
            .map(|l| Line::styled(crate::visible::visible(l).into_owned(), theme.text()))
            .collect()
    };
    f.render_widget(Paragraph::new(shown), inner);
}
