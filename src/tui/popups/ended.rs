//! `F`: the jobs that ended lately, newest first, as the `/` filter narrows them: when
//! each ended (and how long ago), its id, name, user, share, GPUs (a gang's `2×4`), its
//! outcome (succeeded, failed, cancelled, killed from outside, timed out) and the reason.
//! Enter opens a job's details, `l` its log.

use super::frame_block;
use crate::duration;
use crate::tui::app::App;
use crate::tui::ended::{outcome, rows, why};
use crate::tui::panes::{USER_W, user};
use crate::tui::text::{clock, fit, pad, rpad};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

pub fn render(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    // Everything between the header and the footer.
    let r = Rect {
        y: area.y + 1,
        height: area.height.saturating_sub(2),
        ..area
    };
    f.render_widget(Clear, r);
    let list = rows(&app.snap, &app.filter);
    let n = list.len();
    let sel = app.ended.selected(&list);
    let mut title = format!(" Ended jobs ({n}) · newest first ");
    if !app.filter.is_empty() {
        title.push_str(&format!("· filter: {} ", app.filter.raw()));
    }
    if n > 0 {
        title.push_str(&format!("· {}/{n} ", sel + 1));
    }
    let hint = " j/k select  enter details  l log  / filter  esc close ";
    let block = frame_block(&title, t).title_bottom(Line::styled(
        fit(hint, r.width.saturating_sub(2) as usize),
        t.dimmed(),
    ));
    let inner = block.inner(r);
    f.render_widget(block, r);
    if inner.height == 0 {
        return;
    }
    if n == 0 {
        let msg = if app.snap.finished.is_empty() {
            "no job has ended since the scheduler started (shareq jobs --all lists older ones)"
        } else {
            "no ended job matches the filter (esc, then / to change it)"
        };
        f.render_widget(Paragraph::new(Line::styled(msg, t.dimmed())), inner);
        return;
    }
    let w = inner.width as usize;
    let id_w = app.id_width.max(4);
    let name_w = if w >= 120 { 20 } else { 12 };
    let share_w = 8;
    let (ended_w, ago_w, gpus_w, out_w) = (8, 4, 4, 9);
    // Each column and the space after it.
    let fixed = [ended_w, ago_w, id_w, name_w, USER_W, share_w, gpus_w, out_w]
        .iter()
        .map(|c| c + 1)
        .sum::<usize>();
    let why_w = w.saturating_sub(fixed);
    let head = format!(
        "{} {} {} {} {} {} {} {} {}",
        pad("ended", ended_w),
        rpad("ago", ago_w),
        rpad("id", id_w),
        pad("name", name_w),
        pad("user", USER_W),
        pad("share", share_w),
        rpad("gpus", gpus_w),
        pad("outcome", out_w),
        "reason",
    );
    let mut lines = vec![Line::styled(
        fit(&head, w),
        t.dimmed().add_modifier(Modifier::BOLD),
    )];
    let body = inner.height.saturating_sub(1) as usize;
    // The window that keeps the selection in view.
    let off = (sel + 1).saturating_sub(body.max(1));
    for (i, j) in list.iter().enumerate().skip(off).take(body) {
        let ended = j
            .finished
            .map_or("-".to_string(), |at| clock(at, app.utc_offset_secs));
        let ago = j
            .finished
            .map_or("-".to_string(), |at| duration::short(app.now - at));
        let word = outcome(j);
        let word_style = match word {
            "succeeded" => Style::new().fg(t.ok),
            "cancelled" | "timed out" => t.warn_style(),
            _ => t.error_style(),
        };
        let row_style = if i == sel { t.selected() } else { Style::new() };
        let line = Line::from(vec![
            Span::styled(format!("{} ", pad(&ended, ended_w)), t.dimmed()),
            Span::styled(format!("{} ", rpad(&ago, ago_w)), t.dimmed()),
            Span::styled(format!("{} ", rpad(&j.label(), id_w)), t.text()),
            Span::styled(format!("{} ", pad(&j.name, name_w)), t.text()),
            Span::styled(format!("{} ", pad(user(j), USER_W)), t.text()),
            Span::styled(
                format!("{} ", pad(&j.share, share_w)),
                t.text().fg(t.share(&j.share)),
            ),
            // The queue's GPUS cell: `20G` on a sliced unit, a gang's `2×4` (SPEC §16).
            Span::styled(
                format!(
                    "{} ",
                    rpad(&j.amount(app.snap.sliced(&j.unit).then_some("G")), gpus_w)
                ),
                t.text(),
            ),
            Span::styled(format!("{} ", pad(word, out_w)), word_style),
            Span::styled(fit(why(j), why_w), t.text()),
        ])
        .style(row_style);
        lines.push(line);
    }
    f.render_widget(Paragraph::new(lines), inner);
}
