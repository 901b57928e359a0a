//! Overlays drawn over the panes: help, confirmations and prompts, the submit form, job
//! details, the log tail, the rejected config's errors, the utilisation history and the
//! ended jobs. Each file draws one; `input` handles their keys.

pub mod config_errors;
pub mod confirm;
pub mod details;
pub mod ended;
pub mod help;
pub mod history;
pub mod log;
pub mod submit;

use super::theme::Theme;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::widgets::{Block, BorderType};

/// A `w`×`h` rectangle centred in `area`, shrunk to fit.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// The border every overlay uses.
pub fn frame_block<'a>(title: &'a str, theme: &Theme) -> Block<'a> {
    Block::bordered()
        .border_type(BorderType::Rounded)
        .border_style(theme.border_style(true))
        .title(title)
        .title_style(theme.text().add_modifier(Modifier::BOLD))
}
