//! Lending: who borrows how many GPUs from whom, including the unassigned pool. A bordered
//! list when there is room, a single line when there is not.

use crate::sched::LendEdge;
use crate::tui::app::App;
use crate::tui::text::fit;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

fn edge_spans(app: &App, e: &LendEdge, multi_unit: bool) -> Vec<Span<'static>> {
    let t = &app.theme;
    let lender = match &e.lender {
        Some(l) => Span::styled(
            l.clone(),
            Style::new().fg(t.share(l)).add_modifier(Modifier::BOLD),
        ),
        None => Span::styled("unassigned pool", t.dimmed()),
    };
    let mut spans = vec![
        Span::styled(
            e.borrower.clone(),
            Style::new()
                .fg(t.share(&e.borrower))
                .add_modifier(Modifier::BOLD),
        ),
        Span::styled(" ← ", t.text()),
        lender,
        Span::styled(
            format!(" {} GPU{}", e.gpus, if e.gpus == 1 { "" } else { "s" }),
            t.text(),
        ),
    ];
    if multi_unit {
        spans.push(Span::styled(format!(" ({})", e.unit), t.dimmed()));
    }
    spans
}

/// Rows this pane would like (borders included).
pub fn wanted_height(app: &App) -> u16 {
    app.snap.lending.len().max(1) as u16 + 2
}

pub fn render(f: &mut Frame, area: Rect, app: &App) {
    if area.height == 0 {
        return;
    }
    let multi_unit = app.snap.units.len() > 1;
    let t = &app.theme;
    if area.height < 3 {
        // One line: "lending: qs1 ← qs2 1 GPU, qs1 ← unassigned pool 1 GPU".
        let mut spans = vec![Span::styled(" lending: ", t.dimmed())];
        if app.snap.lending.is_empty() {
            spans.push(Span::styled("nobody is borrowing", t.dimmed()));
        }
        for (i, e) in app.snap.lending.iter().enumerate() {
            if i > 0 {
                spans.push(Span::styled(", ", t.dimmed()));
            }
            spans.extend(edge_spans(app, e, multi_unit));
        }
        let line = Line::from(spans);
        if line.width() > area.width as usize {
            let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
            f.render_widget(
                Paragraph::new(Line::styled(fit(&text, area.width as usize), t.text())),
                area,
            );
        } else {
            f.render_widget(Paragraph::new(line), area);
        }
        return;
    }
    let blk = Block::bordered()
        .border_style(t.border_style(false))
        .title(Line::styled(" Lending ─ borrower ← lender ", t.text()));
    let inner = blk.inner(area);
    f.render_widget(blk, area);
    let mut lines: Vec<Line> = app
        .snap
        .lending
        .iter()
        .take(inner.height as usize)
        .map(|e| {
            let mut s = vec![Span::raw(" ")];
            s.extend(edge_spans(app, e, multi_unit));
            Line::from(s)
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::styled(" nobody is borrowing", t.dimmed()));
    }
    let hidden = app.snap.lending.len().saturating_sub(inner.height as usize);
    if hidden > 0
        && let Some(last) = lines.last_mut()
    {
        *last = Line::styled(format!(" … {} more", hidden + 1), t.dimmed());
    }
    f.render_widget(Paragraph::new(lines), inner);
}
