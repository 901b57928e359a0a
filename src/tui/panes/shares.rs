//! Shares: one row per share (and unit) with the stacked bar — own use within the limit
//! `■`, borrowed `▤`, lent `░`, idle `·` — so it reads in monochrome too.

use super::{block, header_line, row_style, window};
use crate::duration;
use crate::model::Strategy;
use crate::sched::ShareUnitStats;
use crate::tui::app::{App, Pane};
use crate::tui::text::{pad, rpad};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub const GLYPH_OWN: char = '■';
pub const GLYPH_BORROWED: char = '▤';
pub const GLYPH_LENT: char = '░';
pub const GLYPH_IDLE: char = '·';

/// Cells for (own, borrowed, lent, idle) GPUs in a bar `width` wide, where `scale_max`
/// GPUs fill the whole bar. One cell per GPU when they fit; otherwise proportional, and
/// a non-zero part always gets at least one cell.
pub fn bar_cells(parts: [u32; 4], width: usize, scale_max: u32) -> [usize; 4] {
    let total: u32 = parts.iter().sum();
    if total == 0 || width == 0 {
        return [0; 4];
    }
    let max = scale_max.max(total) as usize;
    if max <= width {
        return parts.map(|p| p as usize);
    }
    let mut cells = parts.map(|p| {
        if p == 0 {
            0
        } else {
            ((p as usize * width) / max).max(1)
        }
    });
    // Rounding up small parts may overflow: take the excess from the largest part.
    while cells.iter().sum::<usize>() > width {
        let Some(i) = (0..4).max_by_key(|&i| cells[i]) else {
            break;
        };
        if cells[i] <= 1 {
            break;
        }
        cells[i] -= 1;
    }
    cells
}

fn strategy(s: Strategy, wide: bool) -> &'static str {
    match (s, wide) {
        (_, true) => s.as_str(),
        (Strategy::Reserve, false) => "RSRV",
        (Strategy::Lend, false) => "LEND",
        (Strategy::LendAndBorrow, false) => "L&B",
    }
}

/// The type column, which is always on screen: a removed share says so there (its row
/// would otherwise read like a LEND share of limit 0), a DISABLED one too.
fn type_text(s: &ShareUnitStats, wide: bool) -> (String, bool) {
    match (s.present, s.enabled, wide) {
        (false, _, true) => ("REMOVED".into(), true),
        (false, _, false) => ("GONE".into(), true),
        (true, false, true) => (format!("{}, off", strategy(s.strategy, false)), true),
        (true, false, false) => ("OFF".into(), true),
        (true, true, _) => (strategy(s.strategy, wide).into(), false),
    }
}

fn limit_text(s: &ShareUnitStats) -> String {
    match (s.strategy, s.cap) {
        (Strategy::LendAndBorrow, None) => format!("{} +∞", s.limit),
        (Strategy::LendAndBorrow, Some(c)) => format!("{} +{c}", s.limit),
        _ => s.limit.to_string(),
    }
}

/// "2 own, 1 borrowed, 1 lent" — the bar in words, zeros left out.
fn bar_words(parts: [u32; 4]) -> String {
    let names = ["own", "borrowed", "lent", "idle"];
    parts
        .iter()
        .zip(names)
        .filter(|(n, _)| **n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Marks a share whose queue is ordered by fair share among its users (SPEC §12).
const GLYPH_FAIR: &str = "⚖";

/// Draw the shares pane: the legend in its title, the column heads, one row per share.
pub fn render(f: &mut Frame, area: Rect, app: &App) {
    let any_fair = app.snap.shares.iter().any(|s| s.fair_share);
    let fair_legend = if any_fair {
        format!(" {GLYPH_FAIR} fair share")
    } else {
        String::new()
    };
    let title = Line::from(format!(
        " Shares ─ {GLYPH_OWN} own {GLYPH_BORROWED} borrowed {GLYPH_LENT} lent {GLYPH_IDLE} idle{fair_legend} "
    ));
    let blk = block(app, Pane::Shares, title);
    let inner = blk.inner(area);
    f.render_widget(blk, area);
    if inner.height == 0 {
        return;
    }
    let cols = Columns::new(app, inner.width as usize);
    let mut lines = vec![header_line(app, cols.head())];
    let rows = inner.height.saturating_sub(1);
    let off = window(app, Pane::Shares, rows);
    for (i, s) in app
        .snap
        .shares
        .iter()
        .enumerate()
        .skip(off)
        .take(rows as usize)
    {
        lines.push(share_row(app, s, &cols).style(row_style(app, Pane::Shares, i)));
    }
    if app.snap.shares.is_empty() {
        lines.push(Line::styled(
            " no shares configured yet",
            app.theme.dimmed(),
        ));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// The pane's column widths for a width, and the bar's scale.
struct Columns {
    /// Labels are `share/unit` when there is more than one unit.
    multi_unit: bool,
    /// At least 100 columns: the long headings and strategy names.
    wide: bool,
    name_w: usize,
    strat_w: usize,
    ish_w: usize,
    q_w: usize,
    /// The bar section: the bar, then its words when they fit.
    room: usize,
    /// GPUs that fill the whole bar: the largest unit or share.
    scale_max: u32,
    /// Cells per GPU (1 to 3).
    per_gpu: usize,
    bar_w: usize,
    /// 0: no words after the bar.
    words_w: usize,
}

impl Columns {
    /// The widths for a pane `w` columns wide.
    fn new(app: &App, w: usize) -> Columns {
        let multi_unit = app.snap.units.len() > 1;
        let name_w = app
            .snap
            .shares
            .iter()
            .map(|s| {
                s.share.chars().count()
                    + if multi_unit { s.unit.len() + 1 } else { 0 }
                    + if s.fair_share { 2 } else { 0 }
            })
            .max()
            .unwrap_or(5)
            .clamp(5, 16);
        let wide = w >= 100;
        let strat_w = if wide { 15 } else { 4 };
        let ish_w = if wide { 8 } else { 3 };
        let q_w = if wide { 6 } else { 5 };
        // name strat ish limit use [bar] run queued wait
        let fixed = name_w + 1 + strat_w + 1 + ish_w + 1 + 5 + 1 + 5 + 1 + 1 + 3 + 1 + q_w + 1 + 6;
        let room = w.saturating_sub(fixed);
        let scale_max = app
            .snap
            .units
            .iter()
            .map(|u| u.usable)
            .max()
            .unwrap_or(0)
            .max(
                app.snap
                    .shares
                    .iter()
                    .map(|s| s.limit + s.borrowed)
                    .max()
                    .unwrap_or(0),
            );
        // Up to 3 cells per GPU when there is room, so a small machine's bar is easy to
        // read; the rest of the room (wide screens) spells the numbers out.
        let per_gpu = if scale_max == 0 {
            1
        } else {
            (room / 2 / scale_max as usize).clamp(1, 3)
        };
        let bar_w = (scale_max as usize * per_gpu).min(room);
        let words_w = Some(room.saturating_sub(bar_w + 1))
            .filter(|&w| w >= 14)
            .unwrap_or(0);
        Columns {
            multi_unit,
            wide,
            name_w,
            strat_w,
            ish_w,
            q_w,
            room,
            scale_max,
            per_gpu,
            bar_w,
            words_w,
        }
    }

    /// The column heads.
    fn head(&self) -> String {
        let wide = self.wide;
        format!(
            "{} {} {} {} {} {} {} {} {}",
            pad("share", self.name_w),
            pad(if wide { "strategy" } else { "type" }, self.strat_w),
            pad(if wide { "in-share" } else { "ish" }, self.ish_w),
            pad("limit", 5),
            rpad("use", 5),
            pad("", self.room),
            rpad("run", 3),
            rpad(if wide { "queued" } else { "queue" }, self.q_w),
            rpad("wait", 6),
        )
    }
}

/// One share's row: label, type, in-share, limit, use, the bar, running, queued and the
/// oldest wait.
fn share_row(app: &App, s: &ShareUnitStats, cols: &Columns) -> Line<'static> {
    let t = &app.theme;
    let colour = t.share(&s.share);
    let mut label = if cols.multi_unit {
        format!("{}/{}", s.share, s.unit)
    } else {
        s.share.clone()
    };
    if s.fair_share {
        label.push(' ');
        label.push_str(GLYPH_FAIR);
    }
    let (type_text, marked) = type_text(s, cols.wide);
    let type_style = if marked {
        t.warn_style().add_modifier(Modifier::BOLD)
    } else {
        t.text()
    };
    let in_share = match (s.in_share, cols.wide) {
        (true, true) => "on",
        (false, true) => "off",
        (true, false) => "✓",
        (false, false) => "·",
    };
    let mut spans = vec![
        Span::styled(
            pad(&label, cols.name_w),
            Style::new().fg(colour).add_modifier(Modifier::BOLD),
        ),
        Span::raw(" "),
        Span::styled(pad(&type_text, cols.strat_w), type_style),
        Span::raw(" "),
        Span::styled(pad(in_share, cols.ish_w), t.text()),
        Span::raw(" "),
        Span::styled(pad(&limit_text(s), 5), t.text()),
        Span::raw(" "),
        Span::styled(
            rpad(&format!("{}/{}", s.usage, s.limit), 5),
            if s.borrowed > 0 {
                Style::new().fg(t.bar_borrowed)
            } else {
                t.text()
            },
        ),
        Span::raw(" "),
    ];
    spans.extend(bar_spans(app, s, cols));
    spans.push(Span::raw(" "));
    let wait = s
        .oldest_queued
        .map(|t0| duration::human(app.now - t0))
        .unwrap_or_else(|| "-".into());
    spans.push(Span::styled(rpad(&s.running.to_string(), 3), t.text()));
    spans.push(Span::raw(" "));
    spans.push(Span::styled(
        rpad(&s.queued.to_string(), cols.q_w),
        t.text(),
    ));
    spans.push(Span::raw(" "));
    spans.push(Span::styled(rpad(&wait, 6), t.text()));
    Line::from(spans)
}

/// The bar section of a share's row, exactly `room` columns: the stacked bar, then its
/// words when they fit.
fn bar_spans(app: &App, s: &ShareUnitStats, cols: &Columns) -> Vec<Span<'static>> {
    let t = &app.theme;
    let own = s.usage.min(s.limit);
    let parts = [own, s.borrowed, s.lent, s.idle.saturating_sub(s.lent)];
    let cells = if (cols.scale_max as usize) * cols.per_gpu <= cols.bar_w {
        parts.map(|p| p as usize * cols.per_gpu)
    } else {
        bar_cells(parts, cols.bar_w, cols.scale_max)
    };
    let glyphs = [GLYPH_OWN, GLYPH_BORROWED, GLYPH_LENT, GLYPH_IDLE];
    let bar_colours = [t.share(&s.share), t.bar_borrowed, t.bar_lent, t.bar_idle];
    let mut spans = Vec::new();
    let mut used = 0;
    for k in 0..4 {
        if cells[k] > 0 {
            spans.push(Span::styled(
                glyphs[k].to_string().repeat(cells[k]),
                Style::new().fg(bar_colours[k]),
            ));
            used += cells[k];
        }
    }
    if cols.words_w > 0 {
        spans.push(Span::raw(" ".repeat(cols.bar_w.saturating_sub(used) + 1)));
        spans.push(Span::styled(
            pad(&bar_words(parts), cols.words_w),
            t.dimmed(),
        ));
    } else {
        spans.push(Span::raw(" ".repeat(cols.room.saturating_sub(used))));
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::bar_cells;

    #[test]
    fn one_cell_per_gpu_when_it_fits() {
        assert_eq!(bar_cells([2, 1, 1, 0], 10, 8), [2, 1, 1, 0]);
        assert_eq!(bar_cells([0, 0, 0, 0], 10, 8), [0; 4]);
    }

    #[test]
    fn scales_down_keeping_every_part_visible() {
        let c = bar_cells([500, 1, 1, 10], 20, 1000);
        assert!(c.iter().sum::<usize>() <= 20);
        assert!(c.iter().all(|&x| x >= 1));
        assert_eq!(bar_cells([1000, 0, 0, 0], 20, 1000), [20, 0, 0, 0]);
    }
}
