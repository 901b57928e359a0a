//! `h`: the utilisation history of the last hour, day or week. A chart of each share's GPUs
//! in use (or, with a share picked, its own / borrowed / lent GPUs and its limit), a chart
//! of the longest wait per share, and a table of the window's figures, whose coloured
//! share names are the charts' legend. Buckets in which no scheduler ran leave gaps. The
//! GiB of units sliced by memory (SPEC §15) are never drawn or summed with GPUs: the table
//! lists them under a heading of their own, and the use chart draws them when only sliced
//! units are shown (`u`).

use super::frame_block;
use crate::duration;
use crate::snapshot::usage::{UsageHistory, Window};
use crate::tui::app::App;
use crate::tui::history::{ShareLine, charts_gib, figures, headings};
use crate::tui::text::{clock, fit, pad};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Clear, Dataset, GraphType, Paragraph, Wrap};

pub fn render(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let st = &app.history;
    // Everything between the header and the footer.
    let r = Rect {
        y: area.y + 1,
        height: area.height.saturating_sub(2),
        ..area
    };
    f.render_widget(Clear, r);
    let unit = st.unit.as_deref().unwrap_or("all units");
    let title = format!(" Utilisation: last {} · {unit} ", st.window.label());
    let keys = Window::ALL
        .iter()
        .enumerate()
        .map(|(i, w)| format!("{} {}", i + 1, w.label()))
        .collect::<Vec<_>>()
        .join("  ");
    let hint = format!(" {keys}  u unit  j/k share  esc close ");
    let block = frame_block(&title, t).title_bottom(Line::styled(
        fit(&hint, r.width.saturating_sub(2) as usize),
        t.dimmed(),
    ));
    let inner = block.inner(r);
    f.render_widget(block, r);
    let h = match &st.data {
        None => return message(f, inner, "reading the history…", t.dimmed()),
        Some(Err(e)) => return message(f, inner, &e.to_string(), t.error_style()),
        Some(Ok(h)) => h,
    };
    let lines = st.lines();
    if h.is_empty() || lines.is_empty() {
        let text = if h.is_empty() {
            format!(
                "No utilisation samples in the last {}. The scheduler writes one every {} \
                 while it runs (serve --sample-seconds) and keeps them {} days; this one has \
                 none for this window yet.",
                st.window.label(),
                duration::short(h.interval_ms()),
                crate::snapshot::usage::KEEP_DAYS
            )
        } else {
            format!(
                "No share held, lent or queued GPUs{} in the last {}.",
                st.unit
                    .as_ref()
                    .map_or(String::new(), |u| format!(" on {u}")),
                st.window.label()
            )
        };
        return message(f, inner, &text, t.text());
    }
    // A heading over the GPU lines, and one over the GiB lines (which may take a row
    // more than the third of the screen the table gets).
    let gib_rows = u16::from(lines.iter().any(|l| l.gib));
    let headings = gib_rows + u16::from(lines.iter().any(|l| !l.gib));
    let table_h = (lines.len() as u16 + headings)
        .min(inner.height / 3 + gib_rows)
        .max(2);
    let charts_h = inner.height.saturating_sub(table_h);
    let wait_h = (charts_h * 2 / 5).max(4).min(charts_h);
    let [use_area, wait_area, table_area] = Layout::vertical([
        Constraint::Length(charts_h - wait_h),
        Constraint::Length(wait_h),
        Constraint::Length(table_h),
    ])
    .areas(inner);
    // The use chart's axis is GPUs, or GiB when only sliced units are shown.
    let gib = charts_gib(&lines);
    let picked = st
        .share
        .as_ref()
        .and_then(|s| lines.iter().find(|l| &l.share == s && l.gib == gib));
    let x_labels = x_labels(h, app.utc_offset_secs);
    // GPUs: every share's use, or one share's own, borrowed and lent against its limit.
    let mut segments: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut styles: Vec<Style> = Vec::new();
    let mut top = 1.0f64;
    let mut add = |values: Vec<f64>, style: Style, segs: &mut Vec<Vec<(f64, f64)>>| {
        for seg in gaps(h, &values) {
            top = seg.iter().map(|p| p.1).fold(top, f64::max);
            segs.push(seg);
            styles.push(style);
        }
    };
    let gpus_title = match picked {
        Some(l) => {
            let share = Style::default().fg(t.share(&l.share));
            let limit = vec![f64::from(l.limit); l.points.len()];
            add(limit, t.dimmed(), &mut segments);
            add(pick(l, |p| p.own), share, &mut segments);
            add(pick(l, |p| p.borrowed), share.fg(t.accent), &mut segments);
            add(pick(l, |p| p.lent), t.warn_style(), &mut segments);
            format!(
                " {}: own, borrowed (accent), lent (warn), limit (dim) ",
                l.share
            )
        }
        None => {
            for l in lines.iter().filter(|l| l.gib == gib) {
                let style = Style::default().fg(t.share(&l.share));
                add(pick(l, |p| p.own + p.borrowed), style, &mut segments);
            }
            if gib {
                " GiB in use per share (sliced units) ".to_string()
            } else if lines.iter().any(|l| l.gib) {
                " GPUs in use per share (sliced units' GiB: table, or u) ".to_string()
            } else {
                " GPUs in use per share ".to_string()
            }
        }
    };
    chart(
        f,
        use_area,
        &gpus_title,
        &segments,
        &styles,
        top.ceil(),
        if gib { "GiB" } else { "GPUs" },
        &x_labels,
        t,
    );
    // Waits: the longest-waiting queued job per share, in minutes, hours or days.
    let mut segments = Vec::new();
    let mut styles = Vec::new();
    let mut top = 1.0f64;
    let shown: Vec<&ShareLine> = lines
        .iter()
        .filter(|l| picked.is_none_or(|p| p.share == l.share && p.gib == l.gib))
        .collect();
    let longest = shown
        .iter()
        .map(|l| l.totals.wait_max_ms)
        .max()
        .unwrap_or(0);
    let (per, unit_name) = match longest {
        w if w < 3 * 3_600_000 => (60_000.0, "min"),
        w if w < 3 * 86_400_000 => (3_600_000.0, "h"),
        _ => (86_400_000.0, "d"),
    };
    for l in shown {
        let values = pick(l, |p| p.wait_max_ms as f64 / per);
        for seg in gaps(h, &values) {
            top = seg.iter().map(|p| p.1).fold(top, f64::max);
            segments.push(seg);
            styles.push(Style::default().fg(t.share(&l.share)));
        }
    }
    chart(
        f,
        wait_area,
        &format!(" longest wait in queue ({unit_name}) "),
        &segments,
        &styles,
        top.ceil(),
        unit_name,
        &x_labels,
        t,
    );
    table(f, table_area, &lines, picked, t);
}

fn message(f: &mut Frame, area: Rect, text: &str, style: Style) {
    f.render_widget(
        Paragraph::new(Line::styled(text.to_string(), style)).wrap(Wrap { trim: true }),
        area,
    );
}

fn pick(l: &ShareLine, f: impl Fn(&crate::snapshot::usage::UsagePoint) -> f64) -> Vec<f64> {
    l.points.iter().map(f).collect()
}

/// The points of a series as line segments, cut where a bucket had no sample.
fn gaps(h: &UsageHistory, values: &[f64]) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        if h.samples.get(i).copied().unwrap_or(0) == 0 {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        cur.push((i as f64 + 0.5, *v));
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Start, middle and end of the window as clock times (with the day for a day or a week).
fn x_labels(h: &UsageHistory, offset: i32) -> Vec<String> {
    let at = |ms: i64| match h.window {
        // A day's (or a week's) ends are the same clock time: name the days too.
        Window::Week | Window::Day => {
            chrono::DateTime::from_timestamp_millis(ms + i64::from(offset) * 1000)
                .map_or_else(String::new, |d| d.format("%a %H:%M").to_string())
        }
        _ => clock(ms, offset)[..5].to_string(),
    };
    vec![at(h.from), at((h.from + h.to) / 2), at(h.to)]
}

#[allow(clippy::too_many_arguments)]
fn chart(
    f: &mut Frame,
    area: Rect,
    title: &str,
    segments: &[Vec<(f64, f64)>],
    styles: &[Style],
    top: f64,
    unit: &str,
    x_labels: &[String],
    t: &Theme,
) {
    let datasets: Vec<Dataset> = segments
        .iter()
        .zip(styles)
        .map(|(seg, style)| {
            let marker = if seg.len() == 1 {
                Marker::Dot
            } else {
                Marker::Braille
            };
            Dataset::default()
                .marker(marker)
                .graph_type(GraphType::Line)
                .style(*style)
                .data(seg)
        })
        .collect();
    let axis_style = t.dimmed();
    let chart = Chart::new(datasets)
        .block(
            ratatui::widgets::Block::default()
                .title(Line::styled(title.to_string(), t.text()))
                .title_style(t.text().add_modifier(Modifier::BOLD)),
        )
        .legend_position(None)
        .x_axis(
            Axis::default()
                .style(axis_style)
                .bounds([0.0, crate::snapshot::usage::BUCKETS as f64])
                .labels(x_labels.iter().map(|l| Span::styled(l.clone(), axis_style))),
        )
        .y_axis(
            Axis::default()
                .style(axis_style)
                .bounds([0.0, top])
                .labels([
                    Span::styled("0".to_string(), axis_style),
                    Span::styled(format!("{top:.0} {unit}"), axis_style),
                ]),
        );
    f.render_widget(chart, area);
}

/// The window's figures per share (`tui::history::figures`); the share names, in their
/// colours, are the charts' legend. The GiB lines of sliced units follow under a heading
/// of their own.
fn table(f: &mut Frame, area: Rect, lines: &[ShareLine], picked: Option<&ShareLine>, t: &Theme) {
    let wide = area.width >= 96;
    let name_w = if wide { 14 } else { 12 };
    let heading = |first: &str| {
        Line::styled(
            format!("{}{}", pad(first, name_w), headings(wide)),
            t.dimmed().add_modifier(Modifier::BOLD),
        )
    };
    let mut out = Vec::new();
    let mut gib_heading = None;
    for (i, l) in lines.iter().enumerate() {
        if i == 0 && !l.gib {
            out.push(heading("SHARE"));
        }
        if l.gib && lines.get(i.wrapping_sub(1)).is_none_or(|p| !p.gib) {
            gib_heading = Some(out.len());
            out.push(heading("GiB (sliced)"));
        }
        let mut name = Style::default().fg(t.share(&l.share));
        if picked.is_some_and(|p| p.share == l.share && p.gib == l.gib) {
            name = name.add_modifier(Modifier::REVERSED);
        }
        out.push(Line::from(vec![
            Span::styled(pad(&l.share, name_w), name),
            Span::styled(figures(&l.totals, wide), t.text()),
        ]));
    }
    out.truncate(area.height as usize);
    // A heading cut off from its lines says nothing.
    if gib_heading.is_some_and(|at| at + 1 >= out.len()) {
        out.truncate(gib_heading.unwrap_or_default());
    }
    f.render_widget(Paragraph::new(out), area);
}
