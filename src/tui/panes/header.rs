//! Header: environment, the scheduler an attached console shows, capacity totals, config
//! state (applied at …, or the last error with file:line in red), oversubscription,
//! containment and theme warnings, a paused scheduler, a state filesystem short of space (and
//! whose data fills it), and the clock.

use crate::tui::app::App;
use crate::tui::text::{clock, fit};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

const DAY_MS: i64 = 86_400_000;

/// Draw the header line: the scheduler's news, capacity, the config's state and the
/// warnings, cut to fit, then the clock on the right.
pub fn render(f: &mut Frame, area: Rect, app: &App) {
    let t = &app.theme;
    let s = &app.snap;
    let mut spans = scheduler_spans(app);
    let capacity = capacity_span(app);
    let over = unit_warnings(app);
    let config = config_span(app);
    // A rejected config is the loudest news: it goes first so that a narrow screen still
    // shows its file:line; otherwise capacity leads.
    let order: Vec<Span> = if s.config.error.is_some() {
        [Some(config), Some(capacity), over]
            .into_iter()
            .flatten()
            .collect()
    } else {
        [Some(capacity), over, Some(config)]
            .into_iter()
            .flatten()
            .collect()
    };
    for part in order {
        spans.push(sep(t));
        spans.push(part);
    }
    // Jobs not contained or GPUs not isolated (SPEC §7): short here; `shareq gpus` and
    // the log say why.
    if let Some(w) = &s.containment {
        let short = if w.starts_with("jobs are not contained") {
            "⚠ jobs are not contained"
        } else {
            "⚠ GPUs are not isolated"
        };
        spans.push(sep(t));
        spans.push(Span::styled(short, t.warn_style()));
    }
    if let Some(w) = &app.theme_warning {
        spans.push(sep(t));
        spans.push(Span::styled(w.clone(), t.warn_style()));
    }
    f.render_widget(Paragraph::new(with_clock(app, area, spans)), area);
}

/// The separator between the header's parts.
fn sep(t: &Theme) -> Span<'static> {
    Span::styled(" ─ ", t.dimmed())
}

/// The header's start: the name, a lost link to an attached scheduler, a paused
/// scheduler, the environment, and whose scheduler an attached console shows.
fn scheduler_spans(app: &App) -> Vec<Span<'static>> {
    let t = &app.theme;
    let s = &app.snap;
    let tz = app.utc_offset_secs;
    let env = if s.env_name.is_empty() {
        "shareq"
    } else {
        &s.env_name
    };
    let mut spans = vec![
        Span::styled(
            " shareq",
            t.text().fg(t.accent).add_modifier(Modifier::BOLD),
        ),
        sep(t),
    ];
    // An attached console whose scheduler went away says so first: what it shows is the
    // last picture it had, and it is reconnecting by itself.
    if let Some(since) = s.link_down_since {
        spans.push(Span::styled(
            format!(
                "⟳ reconnecting to the scheduler (down {}; showing the picture of {})",
                crate::duration::human(app.now - since),
                clock(since, tz)
            ),
            t.error_style().add_modifier(Modifier::BOLD),
        ));
        spans.push(sep(t));
    }
    // A scheduler that cannot write its decisions says so next (SPEC §8).
    if let Some(why) = &s.paused {
        spans.push(Span::styled(
            format!("⏸ {}", crate::visible::visible(why)),
            t.error_style().add_modifier(Modifier::BOLD),
        ));
        spans.push(sep(t));
    }
    // A state filesystem short of space says whose data fills it (SPEC §8).
    if let Some(disk) = &s.disk {
        spans.push(Span::styled(
            format!("⛁ {}", crate::visible::visible(disk)),
            t.error_style().add_modifier(Modifier::BOLD),
        ));
        spans.push(sep(t));
    }
    spans.push(Span::styled(
        env.to_string(),
        t.text().add_modifier(Modifier::BOLD),
    ));
    // An attached console says whose picture it shows (its keys act on that scheduler).
    if let Some(by) = s.served_by.filter(|_| s.link_down_since.is_none()) {
        let since = match by.since {
            Some(at) if app.now - at < DAY_MS => format!(", since {}", clock(at, tz)),
            Some(at) => format!(", up {}", crate::duration::human(app.now - at)),
            None => String::new(),
        };
        spans.push(sep(t));
        spans.push(Span::styled(
            format!("attached to serve (pid {}{since})", by.pid),
            t.text().fg(t.accent),
        ));
    }
    spans
}

/// Each unit's GPUs in use of its usable ones.
fn capacity_span(app: &App) -> Span<'static> {
    let caps: Vec<String> = app
        .snap
        .units
        .iter()
        .map(|u| format!("{}/{} {} in use", u.used, u.usable, u.name))
        .collect();
    Span::styled(
        if caps.is_empty() {
            "no GPUs".to_string()
        } else {
            caps.join(", ")
        },
        app.theme.text(),
    )
}

/// Oversubscribed units and units reserved for a big job, if any.
fn unit_warnings(app: &App) -> Option<Span<'static>> {
    let t = &app.theme;
    let s = &app.snap;
    let tz = app.utc_offset_secs;
    let mut over: Vec<String> = s
        .units
        .iter()
        .filter(|u| u.oversubscribed())
        .map(|u| {
            format!(
                "⚠ {} oversubscribed: {} guaranteed > {} usable, guarantees may wait",
                u.name, u.guaranteed, u.usable
            )
        })
        .collect();
    // A unit with no usable device here, and why (a MIG profile without instances).
    over.extend(
        s.units
            .iter()
            .filter_map(|u| Some(format!("⚠ {}: {}", u.name, u.unusable.as_ref()?))),
    );
    // A unit reserved for a big job (SPEC §3): its borrowers wait until the job starts.
    let reserved: Vec<String> = s
        .units
        .iter()
        .filter_map(|u| {
            let r = u.reservation.as_ref()?;
            let on = r
                .node
                .as_ref()
                .map(|n| format!(" on {n}"))
                .unwrap_or_default();
            Some(format!(
                "{}{on} reserved for job {} ({}) since {}",
                u.name,
                r.job,
                r.share,
                clock(r.since, tz)
            ))
        })
        .collect();
    if !reserved.is_empty() {
        over.push(reserved.join("; "));
    }
    (!over.is_empty())
        .then(|| Span::styled(over.join("; "), t.warn_style().add_modifier(Modifier::BOLD)))
}

/// The config's state: rejected (its first error, and the config kept), applied (when,
/// from where, and what it did to the jobs), or none yet.
fn config_span(app: &App) -> Span<'static> {
    let t = &app.theme;
    let s = &app.snap;
    let tz = app.utc_offset_secs;
    match (&s.config.error, s.config.applied_at) {
        (Some(_), applied) => {
            let keep = applied
                .map(|a| format!(" (keeping config applied {})", clock(a, tz)))
                .unwrap_or_default();
            // The first error, file:line:column first and relative to the config directory,
            // so that it fits; `e` lists them all.
            let errors = crate::tui::popups::config_errors::lines(app);
            let first = errors.first().map_or("", String::as_str);
            let more = match errors.len() {
                0 | 1 => " (e: details)".to_string(),
                n => format!(" (+{} more, e: all)", n - 1),
            };
            Span::styled(
                format!("✗ config rejected: {first}{more}{keep}"),
                if t.monochrome {
                    Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
                } else {
                    Style::new().fg(t.error).add_modifier(Modifier::BOLD)
                },
            )
        }
        (None, Some(a)) => Span::styled(
            match &s.config.effects {
                // What the newest config did to the jobs (a dry run on the state before).
                Some(e) if e != "no job affected" => {
                    format!("config applied {} ({}): {e}", clock(a, tz), s.config.source)
                }
                _ => format!("config applied {} ({})", clock(a, tz), s.config.source),
            },
            Style::new().fg(t.ok),
        ),
        (None, None) => Span::styled("no config applied yet", t.warn_style()),
    }
}

/// The header's parts cut to the width left of the clock (in one style when cut), a rule
/// up to the clock, and the clock.
fn with_clock<'a>(app: &App, area: Rect, spans: Vec<Span<'a>>) -> Line<'a> {
    let t = &app.theme;
    let right = format!(" {} ", clock(app.now, app.utc_offset_secs));
    let width = area.width as usize;
    let left_w = width.saturating_sub(right.len());
    let mut line = Line::from(spans);
    if line.width() > left_w {
        // Keep the start (env, capacity) and the config error's beginning.
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        let style = if app.snap.config.error.is_some() {
            t.error_style()
        } else {
            t.text()
        };
        line = Line::styled(fit(&text, left_w), style);
    }
    let pad = left_w.saturating_sub(line.width());
    line.spans.push(Span::styled("─".repeat(pad), t.dimmed()));
    line.spans
        .push(Span::styled(right, t.text().add_modifier(Modifier::BOLD)));
    line
}
