//! GPUs: one cell per device with its job in its share's colour, plus utilisation and
//! memory where NVML reports them (`fake GPU` on the config's fake devices, which have
//! nothing to measure; `n/a` on a real one NVML does not report). Free devices say who
//! holds them. A device of a unit sliced by memory (SPEC §15) reads as its GiB in use and
//! each job's GiB: `1 ▮▮▮▯ 60/80 GiB  j12 20 · j14 40`.

use super::shares::{GLYPH_IDLE, GLYPH_OWN};
use super::{block, row_style, window};
use crate::model::Strategy;
use crate::tui::app::{App, Pane};
use crate::tui::text::{pad, rpad};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Rows this pane would like (borders included).
pub fn wanted_height(app: &App) -> u16 {
    app.len(Pane::Gpus).max(1) as u16 + 2
}

fn telemetry(d: &crate::snapshot::DeviceView) -> String {
    match (d.util, d.mem_used, d.mem_total) {
        (Some(u), Some(m), Some(t)) => format!("{u:>3}% {:>3}/{}G", m / 1024, t / 1024),
        (Some(u), _, _) => format!("{u:>3}%"),
        _ if d.fake => "fake GPU".into(),
        _ => "n/a".into(),
    }
}

/// How many of a bar's `cells` `used` of `total` fills: rounded down, but a device in
/// use never looks empty (`60/80` fills 3 of 4, `70/80` too; only a full one fills 4).
fn filled(used: u32, total: u32, cells: u32) -> u32 {
    if total == 0 || used == 0 {
        return 0;
    }
    (u64::from(used) * u64::from(cells) / u64::from(total)).clamp(1, u64::from(cells)) as u32
}

/// A sliced device's row after its label: a bar, its GiB in use, each job's GiB in its
/// share's colour.
fn sliced_spans<'a>(
    app: &App,
    d: &crate::snapshot::DeviceView,
    gib: u32,
    free_label: Option<String>,
) -> Vec<Span<'a>> {
    let t = &app.theme;
    let used = d.gib_used();
    let n = filled(used, gib, 4);
    let mut spans = vec![
        Span::styled("▮".repeat(n as usize), t.text()),
        Span::styled("▯".repeat((4 - n) as usize), t.dimmed()),
        Span::styled(format!(" {used}/{gib} GiB "), t.text()),
    ];
    if d.slices.is_empty() {
        spans.push(Span::styled(
            format!(" {}", free_label.unwrap_or_default()),
            t.dimmed(),
        ));
    }
    for (i, s) in d.slices.iter().enumerate() {
        spans.push(Span::styled(if i == 0 { " " } else { " · " }, t.dimmed()));
        spans.push(Span::styled(
            format!("j{} {}", s.job, s.gib),
            Style::new().fg(t.share(&s.share)),
        ));
    }
    spans
}

pub fn render(f: &mut Frame, area: Rect, app: &App) {
    // GiB of sliced units and whole GPUs are never added together.
    let whole = || app.snap.units.iter().filter(|u| u.memory_gib.is_none());
    let used: u32 = whole().map(|u| u.used).sum();
    let usable: u32 = whole().map(|u| u.usable).sum();
    let sliced: String = app
        .snap
        .units
        .iter()
        .filter(|u| u.memory_gib.is_some())
        .map(|u| format!("· {} {}/{} GiB ", u.name, u.used, u.usable))
        .collect();
    let nodes = app
        .snap
        .units
        .iter()
        .flat_map(|u| u.by_node().into_iter().map(|(n, _)| n))
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let title = if nodes > 1 {
        Line::from(format!(" GPUs {used}/{usable} on {nodes} nodes {sliced}"))
    } else {
        Line::from(format!(" GPUs {used}/{usable} {sliced}"))
    };
    let blk = block(app, Pane::Gpus, title);
    let inner = blk.inner(area);
    f.render_widget(blk, area);
    let rows = inner.height;
    let off = window(app, Pane::Gpus, rows);
    let w = inner.width as usize;
    let multi_unit = app.snap.units.len() > 1;
    let multi_node = app.snap.units.iter().any(|u| u.by_node().len() > 1);
    let share_w = app
        .snap
        .shares
        .iter()
        .map(|s| s.share.chars().count())
        .max()
        .unwrap_or(3)
        .clamp(3, if w >= 30 { 10 } else { 6 });
    let t = &app.theme;
    let mut lines = Vec::new();
    let mut index = 0usize;
    for u in &app.snap.units {
        // Free devices are labelled with the RESERVE shares holding idle guarantee first.
        let mut reserved: Vec<&str> = Vec::new();
        for s in app.snap.shares.iter().filter(|s| s.unit == u.name) {
            if s.strategy == Strategy::Reserve {
                reserved.extend(std::iter::repeat_n(s.share.as_str(), s.idle as usize));
            }
        }
        let mut reserved = reserved.into_iter();
        for d in &u.devices {
            let i = index;
            index += 1;
            // With nodes the devices come node by node, each labelled with its node.
            let mut label = match (multi_node, multi_unit) {
                (true, true) => format!("{}/{}:{}", d.node, u.name, d.index),
                (true, false) => format!("{}:{}", d.node, d.index),
                (false, true) => format!("{}:{}", u.name, d.index),
                (false, false) => d.index.to_string(),
            };
            // A MIG instance says which it is (SPEC §15).
            if let Some(m) = &d.mig {
                label = format!("{label} {}", m.label());
            }
            let free_label =
                (d.job.is_none() && d.lost_since.is_none()).then(|| match reserved.next() {
                    Some(r) => format!("(reserved: {r})"),
                    None => "free".to_string(),
                });
            if i < off || i >= off + rows as usize {
                continue;
            }
            let mut spans = vec![Span::styled(format!(" {label:>2} "), t.dimmed())];
            match (&d.share, &d.job_name) {
                _ if d.lost_since.is_none() && u.memory_gib.is_some() => {
                    let gib = u.memory_gib.unwrap_or_default();
                    spans.extend(sliced_spans(app, d, gib, free_label));
                }
                _ if d.lost_since.is_some() => {
                    let since = d.lost_since.map_or_else(String::new, |at| {
                        format!(
                            " since {}",
                            crate::tui::text::clock(at, app.utc_offset_secs)
                        )
                    });
                    spans.push(Span::styled(format!("✗ lost{since}"), t.error_style()));
                }
                (Some(share), name) => {
                    let c = t.share(share);
                    let tel = telemetry(d);
                    let name_w =
                        w.saturating_sub(label.len().max(2) + 4 + share_w + 1 + tel.len() + 1);
                    spans.push(Span::styled(format!("{GLYPH_OWN} "), Style::new().fg(c)));
                    spans.push(Span::styled(
                        pad(share, share_w),
                        Style::new().fg(c).add_modifier(Modifier::BOLD),
                    ));
                    spans.push(Span::raw(" "));
                    if w >= 30 {
                        spans.push(Span::styled(
                            pad(name.as_deref().unwrap_or("?"), name_w),
                            t.text(),
                        ));
                        spans.push(Span::styled(rpad(&tel, tel.len() + 1), t.dimmed()));
                    } else {
                        let nw = w.saturating_sub(label.len().max(2) + 4 + share_w + 1);
                        spans.push(Span::styled(
                            pad(name.as_deref().unwrap_or("?"), nw),
                            t.text(),
                        ));
                    }
                }
                (None, _) => {
                    spans.push(Span::styled(format!("{GLYPH_IDLE} "), t.dimmed()));
                    spans.push(Span::styled(free_label.unwrap_or_default(), t.dimmed()));
                }
            }
            lines.push(Line::from(spans).style(row_style(app, Pane::Gpus, i)));
        }
    }
    if index == 0 {
        lines.push(Line::styled(" no usable GPUs found", t.warn_style()));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

#[cfg(test)]
mod tests {
    use super::filled;

    #[test]
    fn the_bar_fills_by_gib_and_never_looks_empty_when_used() {
        assert_eq!(filled(60, 80, 4), 3);
        assert_eq!(filled(70, 80, 4), 3);
        assert_eq!(filled(80, 80, 4), 4);
        assert_eq!(filled(1, 80, 4), 1);
        assert_eq!(filled(0, 80, 4), 0);
        assert_eq!(filled(90, 80, 4), 4);
        assert_eq!(filled(5, 0, 4), 0);
    }
}
