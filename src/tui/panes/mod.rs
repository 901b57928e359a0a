//! One file per pane. Each `render` draws its pane into the area `draw` gives it, builds
//! rows only for the visible window, and records where its rows are for mouse clicks.

pub mod footer;
pub mod gpus;
pub mod header;
pub mod lending;
pub mod preemptions;
pub mod queue;
pub mod running;
pub mod shares;

use super::app::{App, Pane};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType};

/// The bordered block of a pane: focused panes get the accent border and a bold title.
pub fn block<'a>(app: &App, pane: Pane, title: Line<'a>) -> Block<'a> {
    let focused = app.focus == pane;
    let title_style = if focused {
        app.theme.text().add_modifier(Modifier::BOLD)
    } else {
        app.theme.text()
    };
    Block::bordered()
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(app.theme.border_style(focused))
        .title(title.style(title_style))
}

/// The first row `pane` shows in a window of `rows` rows: the last frame's first row,
/// moved just enough to keep the selection in view. Pure: `draw::settle` stores it (and
/// the pane's place for mouse clicks) before the frame is drawn, and drawing reads it
/// again here, which gives the same row.
pub fn window(app: &App, pane: Pane, rows: u16) -> usize {
    let i = pane.index();
    let n = app.len(pane);
    let rows_us = rows.max(1) as usize;
    let sel = app.sel[i].min(n.saturating_sub(1));
    let mut off = app.offset[i];
    if sel < off {
        off = sel;
    }
    if sel >= off + rows_us {
        off = sel + 1 - rows_us;
    }
    off.min(n.saturating_sub(rows_us))
}

/// Header lines above a list pane's rows (inside its border): its column titles.
pub fn header_rows(pane: Pane) -> u16 {
    match pane {
        Pane::Shares | Pane::Queue | Pane::Running => 1,
        Pane::Gpus | Pane::Preemptions => 0,
    }
}

/// The style of a list row: selected rows are highlighted only in the focused pane.
pub fn row_style(app: &App, pane: Pane, index: usize) -> Style {
    if app.focus == pane && app.sel[pane.index()] == index {
        app.theme.selected()
    } else {
        Style::new()
    }
}

/// A column header line.
pub fn header_line(app: &App, text: String) -> Line<'static> {
    Line::from(Span::styled(
        text,
        app.theme.dimmed().add_modifier(Modifier::BOLD),
    ))
}

/// "(k/n)" position marker for titles of long lists.
pub fn position(sel: usize, n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" {}/{} ", sel + 1, n)
    }
}

/// Width of the user column of the job tables.
pub const USER_W: usize = 8;

/// A job's submitter as the tables show it (`-` for jobs stored before it was recorded).
pub fn user(j: &crate::snapshot::JobView) -> &str {
    j.submitter.as_ref().map_or("-", |s| s.name.as_str())
}
