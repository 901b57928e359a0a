//! Enter on a job: everything the snapshot knows about it, including its full reason and,
//! for a gang (SPEC §16), each of its nodes with its devices there.

use super::{centered, frame_block};
use crate::duration;
use crate::snapshot::JobView;
use crate::tui::text::clock;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// The popup's width, and the labels' (` {k:>11}  `).
const WIDTH: u16 = 76;
const LABEL_W: usize = 14;

/// `text` cut into lines of at most `width` columns, at spaces where it can (a word
/// longer than a line is cut inside).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out = vec![String::new()];
    for word in text.split(' ') {
        let line = out.last_mut().expect("never empty");
        let (lw, ww) = (line.width(), word.width());
        if lw > 0 && lw + 1 + ww <= width {
            line.push(' ');
            line.push_str(word);
            continue;
        }
        if lw > 0 {
            out.push(String::new());
        }
        for c in word.chars() {
            let line = out.last_mut().expect("never empty");
            if line.width() + c.width().unwrap_or(0) > width {
                out.push(String::new());
            }
            out.last_mut().expect("never empty").push(c);
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
pub fn render(
    f: &mut Frame,
    area: Rect,
    j: &JobView,
    sliced: bool,
    fair_share: Option<String>,
    now: i64,
    tz: i32,
    theme: &Theme,
) {
    // A long value (a command, a reason) continues under itself, not under the labels.
    let value_w = usize::from(WIDTH.min(area.width).saturating_sub(2)).saturating_sub(LABEL_W);
    let mut lines: Vec<Line> = Vec::new();
    let row = |k: &str, v: String| -> Vec<Line> {
        let v = crate::visible::visible(&v).into_owned();
        wrap(&v, value_w)
            .into_iter()
            .enumerate()
            .map(|(i, part)| {
                let label = if i == 0 { k } else { "" };
                Line::from(vec![
                    Span::styled(format!(" {label:>11}  "), theme.dimmed()),
                    Span::styled(part, theme.text()),
                ])
            })
            .collect()
    };
    lines.extend(row("name", j.name.clone()));
    lines.extend(row(
        "user",
        j.submitter.as_ref().map_or_else(
            || "-".to_string(),
            |s| format!("{} (uid {})", s.name, s.uid),
        ),
    ));
    lines.push(Line::from(vec![
        Span::styled(format!(" {:>11}  ", "share"), theme.dimmed()),
        Span::styled(
            j.share.clone(),
            theme
                .text()
                .fg(theme.share(&j.share))
                .add_modifier(Modifier::BOLD),
        ),
        Span::styled(format!("  unit {}", j.unit), theme.text()),
    ]));
    lines.extend(row("state", j.state.to_string()));
    lines.extend(row(
        "command",
        if j.command.is_empty() {
            // Another user's command is not sent to this console (SPEC §9).
            "(shown to its owner and admins only)".to_string()
        } else {
            j.command.clone()
        },
    ));
    // A job of a unit sliced by memory asks GiB of one device (SPEC §15).
    let borrowed = if j.on_borrowed {
        "  (share is borrowing)"
    } else {
        ""
    };
    lines.extend(if sliced {
        row("GPU memory", format!("{} GiB", j.quantity))
    } else if let Some(n) = j.num_nodes.filter(|_| j.is_gang()) {
        // A gang (SPEC §16): all of its nodes at once, or none.
        row(
            "GPUs",
            format!(
                "{} ({} in all: {} on each of {n} nodes){borrowed}",
                j.amount(None),
                j.quantity,
                j.per_node()
            ),
        )
    } else {
        row("GPUs", j.quantity.to_string())
    });
    if let Some(o) = j.over_memory {
        lines.extend(row(
            "overuse",
            format!(
                "{}: its processes held more than its GiB + 1 on two samples in a row \
                 (OVER_MEMORY)",
                o.text()
            ),
        ));
    }
    lines.extend(row("priority", j.priority.to_string()));
    lines.extend(row(
        "submitted",
        format!(
            "{} ({} ago)",
            clock(j.submitted, tz),
            duration::human(now - j.submitted)
        ),
    ));
    match (j.started, j.finished) {
        (Some(s), None) => lines.extend(row(
            "started",
            format!("{} (running {})", clock(s, tz), duration::human(now - s)),
        )),
        (Some(s), Some(_)) => lines.extend(row("started", clock(s, tz))),
        (None, _) => {}
    }
    if let Some(e) = j.finished {
        let ran = j
            .started
            .map(|s| format!(", ran {}", duration::human(e - s)))
            .unwrap_or_default();
        lines.extend(row(
            "ended",
            format!("{} ({} ago{ran})", clock(e, tz), duration::human(now - e)),
        ));
    }
    if !j.placements.is_empty() {
        // A gang's every node, one line each, in rank order (rank 0 is its main node).
        for (rank, p) in j.placements.iter().enumerate() {
            let on = crate::snapshot::places_text(
                &[(Some(p.node.as_str()), p.devices.as_slice())],
                crate::snapshot::PlaceStyle::Compact,
            );
            let label = if rank == 0 { "nodes" } else { "" };
            let main = if rank == 0 { ", main" } else { "" };
            lines.extend(row(label, format!("{on} (rank {rank}{main})")));
        }
    } else if !j.devices.is_empty() {
        let devs: Vec<String> = j.devices.iter().map(|d| d.to_string()).collect();
        let on = j
            .node
            .as_ref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default();
        lines.extend(row("devices", format!("{}{on}{borrowed}", devs.join(","))));
    }
    lines.extend(row(
        "attempts",
        format!(
            "{} started, preempted {} time(s)",
            j.attempts, j.preempted_count
        ),
    ));
    // SPEC §14: its saves (the running pane's words), and the last one's note.
    if let Some(s) = crate::snapshot::saves_text(j, now) {
        let mark = if s.overdue { "! " } else { "" };
        lines.extend(row("checkpoint", format!("{mark}{}", s.text)));
    }
    if let Some(c) = &j.last_checkpoint {
        let note = c.note.as_deref().unwrap_or("(no note)");
        lines.extend(row(
            "last save",
            format!("{} by attempt {}: {note}", clock(c.at, tz), c.attempt),
        ));
    }
    if let Some((what, since)) = &j.stopping {
        lines.extend(row(
            "stopping",
            format!("{what}, since {}", duration::human(now - since)),
        ));
        if let Some(stop) = j.stop {
            lines.extend(row("phase", stop.text(now)));
        }
    }
    if j.nominated {
        lines.extend(row("nominated", "GPUs are being freed for it".into()));
    }
    // SPEC §13: what it waits for, each with its state; an array's place and counts.
    if let (Some(p), Some(i)) = (j.parent, j.array_index) {
        lines.extend(row("array", format!("child {i} of array {p}")));
    }
    if let Some(a) = &j.array {
        lines.extend(row(
            "array",
            format!("{} children: {}", a.size, a.counts_text()),
        ));
    }
    for (i, d) in j.depends_on.iter().enumerate() {
        let state = d.state.map_or("unknown", |s| s.as_str());
        lines.extend(row(
            if i == 0 { "depends on" } else { "" },
            format!("job {} ({state})", d.label),
        ));
    }
    lines.extend(row("reason", j.reason.to_string()));
    if let Some(note) = fair_share {
        lines.extend(row("fair share", note));
    }
    lines.push(Line::styled(
        " esc closes   c cancel   p priority   l log",
        theme.dimmed(),
    ));
    let r = centered(area, WIDTH, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    let title = format!(" Job {} ", j.label());
    let block = frame_block(&title, theme);
    let inner = block.inner(r);
    f.render_widget(block, r);
    f.render_widget(Paragraph::new(lines), inner);
}

#[cfg(test)]
mod tests {
    #[test]
    fn wrap_breaks_at_spaces_and_inside_overlong_words() {
        assert_eq!(super::wrap("a bb ccc", 4), vec!["a bb", "ccc"]);
        assert_eq!(super::wrap("abcdefgh", 3), vec!["abc", "def", "gh"]);
        assert_eq!(super::wrap("", 3), vec![""]);
    }
}
