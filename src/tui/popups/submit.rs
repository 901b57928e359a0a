//! The `s` submit form: share, GPUs, priority, name, command, and the jobs it runs after
//! and its array size (SPEC §13), validated as you type (the share among those the person
//! at the keyboard may submit to), with a prediction of what the scheduler will do (start
//! now, borrow, preempt, wait; after the jobs it depends on).

use super::{centered, frame_block};
use crate::access::{Caller, Denied};
use crate::forecast::{Prediction, Verdict};
use crate::model::{Command, JobSpec, MAX_PRIORITY};
use crate::snapshot::Snapshot;
use crate::tui::line_input::LineInput;
use crate::tui::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Share,
    Gpus,
    Priority,
    Name,
    Command,
    After,
    Array,
    Expect,
}

const FIELDS: [Field; 8] = [
    Field::Share,
    Field::Gpus,
    Field::Priority,
    Field::Name,
    Field::Command,
    Field::After,
    Field::Array,
    Field::Expect,
];

impl Field {
    fn label(self) -> &'static str {
        match self {
            Field::Share => "share",
            Field::Gpus => "GPUs",
            Field::Priority => "priority",
            Field::Name => "name",
            Field::Command => "command",
            Field::After => "after",
            Field::Array => "array",
            Field::Expect => "expect",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SubmitForm {
    pub field: Field,
    pub share: LineInput,
    pub gpus: LineInput,
    pub priority: LineInput,
    pub name: LineInput,
    pub command: LineInput,
    /// `--after`: `12,14`, `12:3`, `N_TO_N:12`, `SEQUENTIAL` (empty: none).
    pub after: LineInput,
    /// `--array`: the number of children (empty: one job).
    pub array: LineInput,
    /// Who fills it in: the shares offered are those they may submit to (SPEC §9; `None`:
    /// every share, as in render tests).
    pub caller: Option<Caller>,
    /// `--expect`: how long the job should run, `20m` (empty: not said; SPEC §11).
    pub expect: LineInput,
}

/// What a key did to the form.
#[allow(clippy::large_enum_variant)] // one per key press: boxing buys nothing
#[derive(Debug, Clone, PartialEq)]
pub enum FormOutcome {
    Continue,
    Cancel,
    Submit(Box<JobSpec>),
}

/// What is wrong with the form's `dependsOn` or array size, worded as `submit --after` and
/// `--array` word it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum BadLinks {
    #[error("after {0}")]
    After(#[from] crate::model::BadJobRef),
    #[error(
        "--array: 2..{} children, or empty for one job",
        crate::model::MAX_ARRAY_SIZE
    )]
    ArraySize,
}

impl SubmitForm {
    pub fn new(share: &str) -> SubmitForm {
        SubmitForm {
            field: Field::Share,
            share: LineInput::new(share),
            gpus: LineInput::new("1"),
            priority: LineInput::new("0"),
            name: LineInput::default(),
            command: LineInput::default(),
            after: LineInput::default(),
            array: LineInput::default(),
            caller: None,
            expect: LineInput::default(),
        }
    }

    /// The form of `caller`, starting on `share` when they may submit to it, else on the
    /// first share they may.
    pub fn for_caller(share: &str, caller: Option<Caller>, snap: &Snapshot) -> SubmitForm {
        let mut form = SubmitForm::new(share);
        form.caller = caller;
        if form.may_use(snap, share).is_err()
            && let Some(first) = form.offered(snap).first()
        {
            form.share = LineInput::new(first);
        }
        form
    }

    /// May the person filling in the form submit to `share` (the scheduler's rule and
    /// words)? An empty picture (nothing from the scheduler yet) has no rules to apply.
    fn may_use(&self, snap: &Snapshot, share: &str) -> Result<(), Denied> {
        match &self.caller {
            Some(c) if !snap.access.scheduler_user.is_empty() => snap.access.may_submit(c, share),
            _ => Ok(()),
        }
    }

    /// The shares the form cycles through: taking jobs, and open to the caller.
    fn offered<'a>(&self, snap: &'a Snapshot) -> Vec<&'a str> {
        let mut names: Vec<&str> = snap
            .shares
            .iter()
            .filter(|s| s.present && s.enabled)
            .map(|s| s.share.as_str())
            .filter(|name| self.may_use(snap, name).is_ok())
            .collect();
        names.dedup();
        names
    }

    fn input(&mut self, f: Field) -> &mut LineInput {
        match f {
            Field::Share => &mut self.share,
            Field::Gpus => &mut self.gpus,
            Field::Priority => &mut self.priority,
            Field::Name => &mut self.name,
            Field::Command => &mut self.command,
            Field::After => &mut self.after,
            Field::Array => &mut self.array,
            Field::Expect => &mut self.expect,
        }
    }

    fn value(&self, f: Field) -> &str {
        match f {
            Field::Share => &self.share.text,
            Field::Gpus => &self.gpus.text,
            Field::Priority => &self.priority.text,
            Field::Name => &self.name.text,
            Field::Command => &self.command.text,
            Field::After => &self.after.text,
            Field::Array => &self.array.text,
            Field::Expect => &self.expect.text,
        }
    }

    /// Per-field problems, in field order; empty when the form can be submitted.
    pub fn problems(&self, snap: &Snapshot) -> Vec<(Field, String)> {
        let mut out = Vec::new();
        let share = self.share.text.trim();
        match snap.shares.iter().find(|s| s.share == share) {
            None => {
                let names = self.offered(snap);
                out.push((
                    Field::Share,
                    format!(
                        "unknown share {share:?}; ←/→ picks one of {}",
                        names.join(", ")
                    ),
                ))
            }
            Some(s) if !s.present || !s.enabled => {
                out.push((Field::Share, format!("{share} takes no new jobs")))
            }
            Some(_) => {
                if let Err(d) = self.may_use(snap, share) {
                    out.push((Field::Share, d.0));
                }
            }
        }
        match self.gpus.text.trim().parse::<u32>() {
            Ok(n) if n >= 1 => {}
            _ => out.push((Field::Gpus, "a whole number, at least 1".into())),
        }
        match self.priority.text.trim().parse::<u32>() {
            Ok(p) if p <= MAX_PRIORITY => {}
            _ => out.push((
                Field::Priority,
                format!("0..{MAX_PRIORITY}, higher runs first"),
            )),
        }
        let name = self.name.text.trim();
        if name.is_empty() || name.chars().count() > 128 {
            out.push((Field::Name, "1 to 128 characters".into()));
        }
        if self.command.text.trim().is_empty() {
            out.push((
                Field::Command,
                "what to run, e.g. python train.py (sh -c)".into(),
            ));
        }
        if let Err(e) = self.links() {
            let field = match e {
                BadLinks::After(_) => Field::After,
                BadLinks::ArraySize => Field::Array,
            };
            out.push((field, e.to_string()));
        }
        if self.expected_seconds().is_err() {
            out.push((
                Field::Expect,
                "a duration like 90s, 20m, 2h30m, or empty".into(),
            ));
        }
        out
    }

    /// `--expect` as typed, in whole seconds (`None`: empty), read by the one duration
    /// parser (`crate::duration::parse_seconds`: `90`, `20m`, `2h30m`).
    fn expected_seconds(&self) -> Result<Option<u64>, ()> {
        match self.expect.text.trim() {
            "" => Ok(None),
            t => match crate::duration::parse_seconds(t) {
                Ok(secs) if secs >= 1 => Ok(Some(secs)),
                _ => Err(()),
            },
        }
    }

    /// The form's `dependsOn` and array size, read as `submit --after` and `--array` read
    /// theirs (`Dependency::parse` serves both).
    fn links(&self) -> Result<(Vec<crate::model::Dependency>, Option<u32>), BadLinks> {
        let deps = self
            .after
            .text
            .split(',')
            .filter(|t| !t.trim().is_empty())
            .map(crate::model::Dependency::parse)
            .collect::<Result<Vec<_>, _>>()?;
        let size = match self.array.text.trim() {
            "" => None,
            n => match n.parse::<u32>() {
                Ok(n) if (2..=crate::model::MAX_ARRAY_SIZE).contains(&n) => Some(n),
                _ => return Err(BadLinks::ArraySize),
            },
        };
        Ok((deps, size))
    }

    /// The spec, when the form is valid.
    pub fn spec(&self, snap: &Snapshot) -> Option<JobSpec> {
        if !self.problems(snap).is_empty() {
            return None;
        }
        let mut spec = self.probe(snap)?;
        spec.command = Some(Command::Shell(self.command.text.trim().to_string()));
        let (deps, size) = self.links().ok()?;
        spec.depends_on = deps;
        spec.array_properties = size.map(|size| crate::model::ArrayProperties { size });
        spec.expected_runtime_seconds = self.expected_seconds().ok()?;
        Some(spec)
    }

    /// What the prediction is about: share, GPUs and priority as typed.
    pub fn probe_key(&self) -> String {
        format!(
            "{}\u{1f}{}\u{1f}{}",
            self.share.text.trim(),
            self.gpus.text.trim(),
            self.priority.text.trim()
        )
    }

    /// The job to predict: the form's share, GPUs and priority (name and command do not
    /// change what the scheduler decides). `None` while a number does not parse. With
    /// several units it says which one (the share's first); with one, it leaves it to the
    /// default as a CLI user would.
    pub fn probe(&self, snap: &Snapshot) -> Option<JobSpec> {
        let name = match self.name.text.trim() {
            "" => "job",
            n => n,
        };
        let mut spec = JobSpec::new(
            name,
            self.share.text.trim(),
            self.gpus.text.trim().parse().ok()?,
            self.priority.text.trim().parse().ok()?,
        );
        if snap.units.len() > 1 {
            spec.capacity_unit = snap
                .shares
                .iter()
                .find(|s| s.share == spec.quota_share_name)
                .map(|s| s.unit.clone());
        }
        Some(spec)
    }

    fn move_field(&mut self, delta: isize) {
        let i = FIELDS.iter().position(|f| *f == self.field).unwrap_or(0) as isize;
        let n = FIELDS.len() as isize;
        self.field = FIELDS[((i + delta).rem_euclid(n)) as usize];
    }

    fn cycle_share(&mut self, snap: &Snapshot, delta: isize) {
        let names = self.offered(snap);
        if names.is_empty() {
            return;
        }
        let cur = names.iter().position(|n| *n == self.share.text.trim());
        let n = names.len() as isize;
        let next = match cur {
            Some(i) => (i as isize + delta).rem_euclid(n) as usize,
            None => 0,
        };
        self.share = LineInput::new(names[next]);
    }

    /// The jobs the form's job would wait for, as typed (`12, 14:3, SEQUENTIAL`), when
    /// there are any and they read.
    fn after_text(&self) -> Option<String> {
        let (deps, _) = self.links().ok()?;
        if deps.is_empty() {
            return None;
        }
        let words: Vec<String> = self
            .after
            .text
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
        Some(words.join(", "))
    }

    pub fn on_key(&mut self, key: KeyEvent, snap: &Snapshot) -> FormOutcome {
        let numeric = matches!(self.field, Field::Gpus | Field::Priority | Field::Array);
        match key.code {
            KeyCode::Esc => return FormOutcome::Cancel,
            KeyCode::Enter => {
                if let Some(spec) = self.spec(snap) {
                    return FormOutcome::Submit(Box::new(spec));
                }
                // Jump to the first field that needs attention.
                if let Some((f, _)) = self.problems(snap).first() {
                    self.field = *f;
                }
            }
            KeyCode::Tab | KeyCode::Down => self.move_field(1),
            KeyCode::BackTab | KeyCode::Up => self.move_field(-1),
            KeyCode::Left if self.field == Field::Share => self.cycle_share(snap, -1),
            KeyCode::Right if self.field == Field::Share => self.cycle_share(snap, 1),
            KeyCode::Char('+') if numeric => bump(self.input(self.field), 1),
            KeyCode::Char('-') if numeric => bump(self.input(self.field), -1),
            KeyCode::Backspace => {
                self.input(self.field).text.pop();
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.input(self.field).text.clear();
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                let input = self.input(self.field);
                if (!numeric || c.is_ascii_digit()) && input.text.chars().count() < 512 {
                    input.text.push(c);
                }
            }
            _ => {}
        }
        FormOutcome::Continue
    }
}

fn bump(input: &mut LineInput, delta: i64) {
    let v: i64 = input.text.trim().parse().unwrap_or(0);
    input.text = (v + delta).clamp(0, i64::from(MAX_PRIORITY)).to_string();
}

/// Draw the form; `prediction` is the runtime's answer for the form as it stands (`None`
/// while it is being asked).
pub fn render(
    f: &mut Frame,
    area: Rect,
    form: &SubmitForm,
    snap: &Snapshot,
    prediction: Option<&Prediction>,
    utc_offset: i32,
    theme: &Theme,
) {
    let after = form.after_text();
    let r = centered(area, 72, if after.is_some() { 17 } else { 15 });
    f.render_widget(Clear, r);
    let block = frame_block(" Submit a job ", theme);
    let inner = block.inner(r);
    f.render_widget(block, r);
    let problems = form.problems(snap);
    let mut lines = Vec::new();
    for field in FIELDS {
        let focused = field == form.field;
        let label = format!("{:>9} ", field.label());
        let mut spans = vec![Span::styled(
            label,
            if focused {
                Style::new().fg(theme.accent).add_modifier(Modifier::BOLD)
            } else {
                theme.dimmed()
            },
        )];
        let value = form.value(field);
        spans.push(Span::styled(value.to_string(), theme.text()));
        if focused {
            spans.push(Span::styled("▏", Style::new().fg(theme.accent)));
        }
        if let Some((_, why)) = problems.iter().find(|(f, _)| *f == field) {
            spans.push(Span::styled(format!("  ✗ {why}"), theme.warn_style()));
        } else {
            spans.push(Span::styled("  ✓", Style::new().fg(theme.ok)));
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::default());
    match prediction {
        Some(pred) => {
            let style = match pred.verdict {
                Verdict::StartNow | Verdict::Borrow => Style::new().fg(theme.ok),
                Verdict::Preempt | Verdict::Wait => theme.warn_style(),
                Verdict::Reject => theme.error_style(),
            };
            let mut spans = vec![
                Span::styled("  ⇒ ", style),
                Span::styled(pred.verdict.label(), style.add_modifier(Modifier::BOLD)),
            ];
            if let Some(e) = pred.estimate() {
                spans.push(Span::styled(
                    format!(
                        " (start {}, estimate)",
                        e.label(pred.at, pred.at, utc_offset)
                    ),
                    style,
                ));
            }
            spans.push(Span::styled(": ", style));
            spans.push(Span::styled(pred.why.clone(), theme.text()));
            lines.push(Line::from(spans));
            // The prediction is for the job as if free to run: with dependencies it is
            // PENDING until they have all succeeded (SPEC §13).
            if let Some(after) = &after {
                lines.push(Line::styled(
                    format!(
                        "    after {after}: PENDING until they have all SUCCEEDED; \
                         the prediction is for once they have"
                    ),
                    theme.warn_style(),
                ));
            }
        }
        None => lines.push(Line::styled(
            "  ⇒ asking the scheduler what this job would do…",
            theme.dimmed(),
        )),
    }
    lines.push(Line::default());
    lines.push(Line::styled(
        "  tab/↑↓ field  ←/→ share  +/- number  enter submit  esc cancel",
        theme.dimmed(),
    ));
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}
