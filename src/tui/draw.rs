//! Lays the panes out for the terminal's size (80×24 up to 240×70 and beyond) and draws
//! them, then the overlay of the current mode on top. Two steps: [`settle`] decides what
//! scrolls (each list pane's window) and records where the panes are; [`render`] draws
//! from `&App` alone.

use super::app::{App, Mode, Pane, PaneArea};
use super::panes::{
    footer, gpus, header, header_rows, lending, preemptions, queue, running, shares, window,
};
use super::popups::{config_errors, confirm, details, ended, help, history, log, submit};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph};

/// Smallest screen the layout is meant for; below it a notice is shown instead.
pub const MIN_W: u16 = 60;
pub const MIN_H: u16 = 16;

/// Where each part goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub header: Rect,
    pub shares: Rect,
    pub lending: Rect,
    pub gpus: Rect,
    pub queue: Rect,
    pub running: Rect,
    pub preemptions: Rect,
    pub footer: Rect,
}

pub fn layout(area: Rect, app: &App) -> Areas {
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let h = body.height;
    let wide = body.width >= 120;
    let shares_h = app.snap.shares.len().max(1) as u16 + 3;
    // A bordered lending list when there is room, else one line under the shares.
    let lending_h = if wide && h >= 36 {
        lending::wanted_height(app).min(6)
    } else {
        1
    };
    let top_cap = (h * 2 / 5).max(5);
    let top_h = (shares_h + lending_h)
        .max(gpus::wanted_height(app))
        .min(top_cap);
    let side = body.width >= 200;
    let bottom_cap = h / 3;
    let mut run_h = running::wanted_height(app).clamp(4, bottom_cap.max(4));
    let mut pre_h = preemptions::wanted_height(app).clamp(3, (bottom_cap / 2).max(3));
    if side {
        let both = run_h.max(pre_h).min(bottom_cap.max(4));
        run_h = both;
        pre_h = both;
    }
    let bottom_h = |r: u16, p: u16| if side { r.max(p) } else { r + p };
    // The queue keeps at least a few rows: shrink the bottom panes first (bounded: each
    // step lowers one of them until both sit at their minimum).
    let min_queue = 6;
    while h.saturating_sub(top_h + bottom_h(run_h, pre_h)) < min_queue && (run_h > 4 || pre_h > 3) {
        if side {
            run_h = (run_h - 1).max(4);
            pre_h = run_h;
        } else if run_h >= pre_h && run_h > 4 {
            run_h -= 1;
        } else if pre_h > 3 {
            pre_h -= 1;
        } else {
            run_h -= 1;
        }
        if side && run_h == 4 {
            break;
        }
    }
    let [top, queue, bottom] = Layout::vertical([
        Constraint::Length(top_h),
        Constraint::Fill(1),
        Constraint::Length(bottom_h(run_h, pre_h)),
    ])
    .areas(body);
    let gpu_w = if wide { 46 } else { 24 };
    let [left, gpus_area] =
        Layout::horizontal([Constraint::Fill(1), Constraint::Length(gpu_w)]).areas(top);
    let [shares_area, lending_area] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(lending_h.min(left.height.saturating_sub(3))),
    ])
    .areas(left);
    let (running_area, pre_area) = if side {
        let [a, b] = Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)])
            .areas(bottom);
        (a, b)
    } else {
        let [a, b] =
            Layout::vertical([Constraint::Length(run_h), Constraint::Length(pre_h)]).areas(bottom);
        (a, b)
    };
    Areas {
        header,
        shares: shares_area,
        lending: lending_area,
        gpus: gpus_area,
        queue,
        running: running_area,
        preemptions: pre_area,
        footer,
    }
}

/// Lay out and draw one frame: [`settle`], then [`render`].
pub fn draw(f: &mut Frame, app: &mut App) {
    settle(app, f.area());
    render(f, app);
}

/// Is the screen too small for the layout (a notice is drawn instead)?
fn too_small(area: Rect) -> bool {
    area.width < MIN_W || area.height < MIN_H
}

/// The layout step, before drawing: each list pane's window (its first row, from its
/// selection, its height and the last frame's window) and its place on screen, for the
/// mouse and for paging. Drawing then only reads the `App`.
pub fn settle(app: &mut App, area: Rect) {
    if too_small(area) {
        return;
    }
    let a = layout(area, app);
    for (pane, area) in [
        (Pane::Shares, a.shares),
        (Pane::Gpus, a.gpus),
        (Pane::Queue, a.queue),
        (Pane::Running, a.running),
        (Pane::Preemptions, a.preemptions),
    ] {
        let inner = Block::bordered().inner(area);
        let header = header_rows(pane);
        if header > 0 && inner.height == 0 {
            continue; // the pane draws its border only: it keeps its last window
        }
        let rows = inner.height.saturating_sub(header);
        let offset = window(app, pane, rows);
        app.offset[pane.index()] = offset;
        app.areas[pane.index()] = PaneArea {
            area,
            body_top: inner.y + header,
            offset,
            rows,
        };
    }
}

/// Draw one frame of a settled `App`.
pub fn render(f: &mut Frame, app: &App) {
    let area = f.area();
    if too_small(area) {
        let msg = format!(
            "shareq needs at least {MIN_W}×{MIN_H} (this is {}×{}); q quits",
            area.width, area.height
        );
        f.render_widget(
            Paragraph::new(Line::styled(msg, app.theme.warn_style())),
            area,
        );
        return;
    }
    let a = layout(area, app);
    header::render(f, a.header, app);
    shares::render(f, a.shares, app);
    lending::render(f, a.lending, app);
    gpus::render(f, a.gpus, app);
    queue::render(f, a.queue, app);
    running::render(f, a.running, app);
    preemptions::render(f, a.preemptions, app);
    footer::render(f, a.footer, app);
    let t = &app.theme;
    match &app.mode {
        Mode::Normal | Mode::Filter { .. } => {}
        Mode::Help => help::render(f, area, t),
        Mode::Submit(form) => {
            let key = form.probe_key();
            let pred = app
                .prediction
                .as_ref()
                .filter(|(k, _)| *k == key)
                .map(|(_, p)| p);
            submit::render(f, area, form, &app.snap, pred, app.utc_offset_secs, t)
        }
        Mode::ConfirmCancel { question, .. } => confirm::render_cancel(f, area, question, t),
        Mode::Priority { job, name, input } => {
            let ok = input
                .text
                .parse::<u32>()
                .is_ok_and(|p| p <= crate::model::MAX_PRIORITY);
            let what = format!("job {job} {name}");
            confirm::render_priority(f, area, &what, &input.text, ok, t)
        }
        Mode::Quit { running } => {
            let hint = app.stop_hint();
            confirm::render_quit(f, area, *running, app.attached, &hint, t)
        }
        Mode::Details(j) => {
            let fair = (j.state == crate::model::JobState::Runnable)
                .then(|| app.snap.fair_share_note(j))
                .flatten();
            let sliced = app.snap.sliced(&j.unit);
            details::render(f, area, j, sliced, fair, app.now, app.utc_offset_secs, t)
        }
        Mode::Log {
            job,
            name,
            scroll_back,
        } => {
            let title = format!(" Log: job {job} {name} ");
            log::render(f, area, &title, &app.log_lines, *scroll_back, t)
        }
        Mode::ConfigErrors { scroll } => config_errors::render(f, area, app, *scroll),
        Mode::History => history::render(f, area, app),
        Mode::Ended => ended::render(f, area, app),
    }
}

/// The pane under a screen position, if any (for mouse clicks).
pub fn pane_at(app: &App, x: u16, y: u16) -> Option<Pane> {
    Pane::ALL.into_iter().find(|p| {
        let r = app.areas[p.index()].area;
        x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height
    })
}
