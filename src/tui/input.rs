//! Keys and mouse → state changes and [`Action`]s: the main screen's and each overlay's
//! keys are looked up in the key tables (`keymap`), one handler per screen. Pure: no I/O
//! except reading a log tail for `l`, so every binding is tested by feeding events to an
//! [`App`].

use super::action::Action;
use super::app::{App, Mode, PENDING_PRIORITY_MS, Pane, PendingPriority};
use super::draw::pane_at;
use super::filter::Filter;
use super::keymap::{
    CONFIG_ERRORS_KEYS, CONFIRM_CANCEL_KEYS, DETAILS_KEYS, ENDED_KEYS, FILTER_KEYS, HELP_KEYS,
    HISTORY_KEYS, LOG_KEYS, OverlayAction, PRIORITY_KEYS, QUIT_KEYS, UiAction, action_for,
    overlay_action,
};
use super::line_input::LineInput;
use super::popups::submit::{FormOutcome, SubmitForm};
use crate::access::JobAction;
use crate::duration;
use crate::model::{JobId, JobState, MAX_PRIORITY};
use crate::snapshot::JobView;
use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

/// Lines of log read for `l`.
pub const LOG_LINES: usize = 500;

/// Handle one key; returns the action to send, if any. An overlay opened from the `F`
/// view (details, log, filter prompt, confirmation) goes back to it when it closes.
pub fn on_key(app: &mut App, key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let action = key_action(app, key);
    if app.ended.open && app.mode == Mode::Normal && !app.exit {
        app.mode = Mode::Ended;
    }
    action
}

fn key_action(app: &mut App, key: KeyEvent) -> Option<Action> {
    if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
        return match app.mode {
            Mode::Normal | Mode::Help => quit(app),
            Mode::Ended => {
                app.ended.open = false;
                app.mode = Mode::Normal;
                None
            }
            // Ctrl-C backs out of whatever is open.
            _ => {
                app.mode = Mode::Normal;
                None
            }
        };
    }
    // Each overlay's handler puts its mode back while it stays open.
    let mode = std::mem::replace(&mut app.mode, Mode::Normal);
    match mode {
        Mode::Normal => normal(app, key),
        Mode::ConfigErrors { scroll } => config_errors_key(app, key, scroll),
        Mode::History => history_key(app, key),
        Mode::Ended => ended_key(app, key),
        Mode::Help => {
            if overlay_action(HELP_KEYS, key) != Some(OverlayAction::Close) {
                app.mode = Mode::Help;
            }
            None
        }
        Mode::Filter { input, before } => filter_key(app, key, input, before),
        Mode::Submit(form) => submit_key(app, key, form),
        Mode::ConfirmCancel { job, question } => match overlay_action(CONFIRM_CANCEL_KEYS, key) {
            Some(OverlayAction::Yes) => {
                app.say(format!("cancelling job {job}"), false);
                Some(Action::Cancel(job))
            }
            Some(OverlayAction::Close) => None,
            _ => {
                app.mode = Mode::ConfirmCancel { job, question };
                None
            }
        },
        Mode::Priority { job, name, input } => priority_key(app, key, job, name, input),
        Mode::Quit { running } => quit_key(app, key, running),
        Mode::Details(j) => details_key(app, key, j),
        Mode::Log {
            job,
            name,
            scroll_back,
        } => log_key(app, key, job, name, scroll_back),
    }
}

/// Keys of the `e` view of the rejected config's errors: scroll, or close it.
fn config_errors_key(app: &mut App, key: KeyEvent, scroll: usize) -> Option<Action> {
    app.mode = match overlay_action(CONFIG_ERRORS_KEYS, key) {
        Some(OverlayAction::Close) => Mode::Normal,
        Some(OverlayAction::Down) => Mode::ConfigErrors { scroll: scroll + 1 },
        Some(OverlayAction::Up) => Mode::ConfigErrors {
            scroll: scroll.saturating_sub(1),
        },
        _ => Mode::ConfigErrors { scroll },
    };
    None
}

/// Keys of the `/` prompt: the filter applies as it is typed (when it parses); enter keeps
/// it, esc restores the one it began with.
fn filter_key(
    app: &mut App,
    key: KeyEvent,
    mut input: LineInput,
    before: String,
) -> Option<Action> {
    match overlay_action(FILTER_KEYS, key) {
        Some(OverlayAction::Accept) => {
            if let Err(e) = Filter::parse(&input.text) {
                app.say(e, true);
                app.mode = Mode::Filter { input, before };
            }
            return None;
        }
        Some(OverlayAction::Close) => {
            set_filter(app, &before);
            return None;
        }
        Some(OverlayAction::DeleteBack) => {
            input.text.pop();
        }
        Some(OverlayAction::ClearLine) => input.text.clear(),
        Some(_) => {}
        None => match key.code {
            KeyCode::Char(c) if input.text.len() < 256 => input.text.push(c),
            _ => {}
        },
    }
    if Filter::parse(&input.text).is_ok() {
        set_filter(app, &input.text);
    }
    app.mode = Mode::Filter { input, before };
    None
}

/// Keys of the `s` form, which reads them itself; a submission is checked against the
/// caller's rights first.
fn submit_key(app: &mut App, key: KeyEvent, mut form: Box<SubmitForm>) -> Option<Action> {
    match form.on_key(key, &app.snap) {
        FormOutcome::Continue => {
            app.mode = Mode::Submit(form);
            None
        }
        FormOutcome::Cancel => None,
        FormOutcome::Submit(spec) => {
            if !app.may_submit(&spec.quota_share_name) {
                return None;
            }
            app.say(
                format!(
                    "submitted {} to {} ({} GPU)",
                    spec.job_name, spec.quota_share_name, spec.quantity
                ),
                false,
            );
            Some(Action::Submit(spec))
        }
    }
}

/// Keys of the `p` prompt: digits, and enter sends a priority in range.
fn priority_key(
    app: &mut App,
    key: KeyEvent,
    job: JobId,
    name: String,
    mut input: LineInput,
) -> Option<Action> {
    match overlay_action(PRIORITY_KEYS, key) {
        Some(OverlayAction::Close) => return None,
        Some(OverlayAction::Accept) => {
            if let Ok(p) = input.text.parse::<u32>()
                && p <= MAX_PRIORITY
            {
                app.say(format!("priority of job {job} {name} → {p}"), false);
                let at = app.now;
                app.pending_priority
                    .insert(job, PendingPriority { priority: p, at });
                return Some(Action::SetPriority(job, p));
            }
        }
        Some(OverlayAction::DeleteBack) => {
            input.text.pop();
        }
        Some(_) => {}
        None => match key.code {
            KeyCode::Char(c) if c.is_ascii_digit() && input.text.len() < 4 => input.text.push(c),
            _ => {}
        },
    }
    app.mode = Mode::Priority { job, name, input };
    None
}

/// Keys of the quit dialog (jobs are running): detach, stop them all, or go back.
fn quit_key(app: &mut App, key: KeyEvent, running: usize) -> Option<Action> {
    match overlay_action(QUIT_KEYS, key) {
        Some(OverlayAction::Detach) => {
            app.exit = true;
            Some(Action::Detach)
        }
        Some(OverlayAction::DetachAttached) if app.attached => {
            app.exit = true;
            Some(Action::Detach)
        }
        Some(OverlayAction::StopJobs) if app.attached => {
            let hint = app.stop_hint();
            app.say(
                format!("attached: this console cannot stop the other scheduler's jobs ({hint})"),
                true,
            );
            app.mode = Mode::Quit { running };
            None
        }
        Some(OverlayAction::StopJobs) => {
            app.exit = true;
            Some(Action::Quit { stop_jobs: true })
        }
        Some(OverlayAction::Close) => None,
        _ => {
            app.mode = Mode::Quit { running };
            None
        }
    }
}

/// Keys of a job's details: cancel it, set its priority, read its log, or close.
fn details_key(app: &mut App, key: KeyEvent, j: Box<JobView>) -> Option<Action> {
    match overlay_action(DETAILS_KEYS, key) {
        Some(OverlayAction::Close) => None,
        Some(OverlayAction::Cancel) => ask_cancel(app, &j),
        Some(OverlayAction::Priority) => {
            ask_priority(app, &j);
            None
        }
        Some(OverlayAction::Log) => {
            open_log(app, &j);
            None
        }
        _ => {
            app.mode = Mode::Details(j);
            None
        }
    }
}

/// Keys of the `l` log tail: scroll by a line, a page or to either end, or close.
fn log_key(
    app: &mut App,
    key: KeyEvent,
    job: JobId,
    name: String,
    mut scroll_back: usize,
) -> Option<Action> {
    let page = 10;
    match overlay_action(LOG_KEYS, key) {
        Some(OverlayAction::Close) => return None,
        Some(OverlayAction::Up) => scroll_back += 1,
        Some(OverlayAction::Down) => scroll_back = scroll_back.saturating_sub(1),
        Some(OverlayAction::PageUp) => scroll_back += page,
        Some(OverlayAction::PageDown) => scroll_back = scroll_back.saturating_sub(page),
        Some(OverlayAction::Last) => scroll_back = 0,
        Some(OverlayAction::First) => scroll_back = app.log_lines.len(),
        _ => {}
    }
    app.mode = Mode::Log {
        job,
        name,
        scroll_back: scroll_back.min(app.log_lines.len()),
    };
    None
}

fn set_filter(app: &mut App, text: &str) {
    if let Ok(f) = Filter::parse(text) {
        app.filter = f;
        app.rebuild_rows();
        app.sel[Pane::Queue.index()] = 0;
        app.sel[Pane::Running.index()] = 0;
    }
}

fn quit(app: &mut App) -> Option<Action> {
    let running = app.snap.running.len();
    if running > 0 {
        app.mode = Mode::Quit { running };
        None
    } else {
        app.exit = true;
        Some(Action::Quit { stop_jobs: false })
    }
}

fn move_sel(app: &mut App, delta: isize) {
    let n = app.len(app.focus);
    let i = app.focus.index();
    if n == 0 {
        app.sel[i] = 0;
        return;
    }
    let cur = app.sel[i] as isize;
    app.sel[i] = (cur + delta).clamp(0, n as isize - 1) as usize;
}

fn focus_step(app: &mut App, delta: isize) {
    let n = Pane::ALL.len() as isize;
    let i = (app.focus.index() as isize + delta).rem_euclid(n);
    app.focus = Pane::ALL[i as usize];
}

fn job_label(j: &JobView, now: i64) -> String {
    match (j.state, j.started) {
        (JobState::Runnable | JobState::Submitted, _) => {
            format!("{}, queued {}", j.share, duration::short(now - j.submitted))
        }
        (_, Some(s)) if j.finished.is_none() => {
            format!("{}, running {}", j.share, duration::short(now - s))
        }
        _ => format!("{}, {}", j.share, j.state.as_str().to_lowercase()),
    }
}

fn ask_cancel(app: &mut App, j: &JobView) -> Option<Action> {
    if !app.may(JobAction::Cancel, j) {
        return None;
    }
    if j.state.is_finished() {
        app.say(
            format!("job {} {} has already finished", j.id, j.name),
            true,
        );
        return None;
    }
    let question = format!(
        "Cancel job {} {} ({})? y/n",
        j.id,
        j.name,
        job_label(j, app.now)
    );
    app.mode = Mode::ConfirmCancel {
        job: j.id,
        question,
    };
    None
}

fn ask_priority(app: &mut App, j: &JobView) {
    if !app.may(JobAction::Priority, j) {
        return;
    }
    app.mode = Mode::Priority {
        job: j.id,
        name: j.name.clone(),
        input: LineInput::new(&j.priority.to_string()),
    };
}

/// Keys of the `h` view: 1/2/3 or tab pick the window, u the unit, j/k a share; esc, q
/// or h close it.
fn history_key(app: &mut App, key: KeyEvent) -> Option<Action> {
    use crate::snapshot::usage::Window;
    app.mode = Mode::History;
    let window = match overlay_action(HISTORY_KEYS, key)? {
        OverlayAction::Close => {
            app.mode = Mode::Normal;
            return None;
        }
        OverlayAction::HourWindow => Window::Hour,
        OverlayAction::DayWindow => Window::Day,
        OverlayAction::WeekWindow => Window::Week,
        OverlayAction::NextWindow => app.history.window.next(),
        OverlayAction::NextUnit => {
            app.history.next_unit();
            return None;
        }
        OverlayAction::Down => {
            app.history.step_share(1);
            return None;
        }
        OverlayAction::Up => {
            app.history.step_share(-1);
            return None;
        }
        _ => return None,
    };
    Some(app.history.ask(window, app.now))
}

/// Keys of the `F` view: move, enter for the details, `l` for the log, `/` to filter;
/// esc, q or F close it.
fn ended_key(app: &mut App, key: KeyEvent) -> Option<Action> {
    app.mode = Mode::Ended;
    let page = 10;
    let action = overlay_action(ENDED_KEYS, key);
    let selected = {
        let rows = super::ended::rows(&app.snap, &app.filter);
        let selected = rows.get(app.ended.selected(&rows)).map(|j| (*j).clone());
        let view = &mut app.ended;
        match action {
            Some(OverlayAction::Down) => view.step(&rows, 1),
            Some(OverlayAction::Up) => view.step(&rows, -1),
            Some(OverlayAction::PageDown) => view.step(&rows, page),
            Some(OverlayAction::PageUp) => view.step(&rows, -page),
            Some(OverlayAction::First) => view.step(&rows, isize::MIN / 2),
            Some(OverlayAction::Last) => view.step(&rows, isize::MAX / 2),
            _ => {}
        }
        selected
    };
    match action {
        Some(OverlayAction::Close) => {
            app.ended.open = false;
            app.mode = Mode::Normal;
        }
        Some(OverlayAction::Open) => match selected {
            Some(j) => app.mode = Mode::Details(Box::new(j)),
            None => app.say("no ended job to open", true),
        },
        Some(OverlayAction::Log) => match selected {
            Some(j) => open_log(app, &j),
            None => app.say("no ended job to read the log of", true),
        },
        Some(OverlayAction::Filter) => {
            let before = app.filter.raw().to_string();
            app.mode = Mode::Filter {
                input: LineInput::new(&before),
                before,
            };
        }
        _ => {}
    }
    None
}

fn open_log(app: &mut App, j: &JobView) {
    if !app.may(JobAction::Log, j) {
        return;
    }
    app.log_lines = match app.logs.tail(j.id, j.attempts.max(1), LOG_LINES) {
        Ok(lines) => lines,
        Err(e) => vec![format!("(log not available: {e})")],
    };
    app.mode = Mode::Log {
        job: j.id,
        name: j.name.clone(),
        scroll_back: 0,
    };
}

/// The main screen: the key's [`UiAction`] from the one key table (`keymap`).
fn normal(app: &mut App, key: KeyEvent) -> Option<Action> {
    let page = app.areas[app.focus.index()].rows.max(1) as isize;
    let job = app.selected_job().cloned();
    let nothing = |app: &mut App| {
        app.say("no job selected here: pick one in Queue or Running", true);
        None
    };
    let action = action_for(key)?;
    match action {
        UiAction::Quit => return quit(app),
        UiAction::Help => app.mode = Mode::Help,
        UiAction::ConfigErrors => {
            if app.snap.config.error.is_some() {
                app.mode = Mode::ConfigErrors { scroll: 0 };
            } else {
                app.say("the config in force was applied without errors", false);
            }
        }
        UiAction::NextPane => focus_step(app, 1),
        UiAction::PrevPane => focus_step(app, -1),
        UiAction::Down => move_sel(app, 1),
        UiAction::Up => move_sel(app, -1),
        UiAction::First => move_sel(app, isize::MIN / 2),
        UiAction::Last => move_sel(app, isize::MAX / 2),
        UiAction::PageDown => move_sel(app, page),
        UiAction::PageUp => move_sel(app, -page),
        UiAction::Fold => {
            if !app.toggle_fold() {
                app.say(
                    "space folds or unfolds an array: select its row in the queue",
                    false,
                );
            }
        }
        UiAction::Open => match (app.focus, job) {
            (Pane::Queue, Some(j)) if j.array.is_some() => {
                app.toggle_fold();
            }
            (Pane::Shares, _) => {
                if let Some(name) = app.snap.shares.get(app.selected()).map(|s| s.share.clone()) {
                    set_filter(app, &format!("share:{name}"));
                    app.focus = Pane::Queue;
                    app.say(
                        format!("showing {name}'s jobs; esc clears the filter"),
                        false,
                    );
                }
            }
            (_, Some(j)) => app.mode = Mode::Details(Box::new(app.snap.resolved(&j))),
            (_, None) => return nothing(app),
        },
        UiAction::ClearFilter => {
            if !app.filter.is_empty() {
                set_filter(app, "")
            }
        }
        UiAction::Submit => {
            let share = submit_share(app, job.as_ref());
            let form = SubmitForm::for_caller(&share, app.caller.clone(), &app.snap);
            app.mode = Mode::Submit(Box::new(form));
        }
        UiAction::Cancel => match job {
            Some(j) => return ask_cancel(app, &j),
            None => return nothing(app),
        },
        UiAction::Priority => match job {
            Some(j) => ask_priority(app, &j),
            None => return nothing(app),
        },
        step @ (UiAction::PriorityUp | UiAction::PriorityDown) => {
            let Some(j) = job else { return nothing(app) };
            return bump_priority(app, &j, step == UiAction::PriorityUp);
        }
        UiAction::Filter => {
            let before = app.filter.raw().to_string();
            app.mode = Mode::Filter {
                input: LineInput::new(&before),
                before,
            };
        }
        UiAction::Sort => {
            app.sort = app.sort.next();
            app.rebuild_rows();
            app.sel[Pane::Queue.index()] = 0;
            app.say(format!("queue sorted by {}", app.sort.label()), false);
        }
        UiAction::Log => match job {
            Some(j) => open_log(app, &j),
            None => return nothing(app),
        },
        UiAction::History => {
            app.mode = Mode::History;
            return Some(app.history.ask(app.history.window, app.now));
        }
        UiAction::Ended => {
            app.ended = super::ended::EndedView {
                open: true,
                ..Default::default()
            };
            app.mode = Mode::Ended;
        }
        UiAction::Reload => {
            if !app.may_reload() {
                return None;
            }
            app.say("re-reading the config…", false);
            return Some(Action::Reload);
        }
    }
    None
}

/// The share the `s` form starts on: the selected share, or the selected job's, or the
/// first enabled one.
fn submit_share(app: &App, job: Option<&JobView>) -> String {
    match (app.focus, job) {
        (Pane::Shares, _) => app.snap.shares.get(app.selected()).map(|s| s.share.clone()),
        (_, Some(j)) => Some(j.share.clone()),
        _ => None,
    }
    .or_else(|| {
        app.snap
            .shares
            .iter()
            .find(|s| s.enabled && s.present)
            .map(|s| s.share.clone())
    })
    .unwrap_or_default()
}

/// `+` / `-`: the job's priority one up or down from the last value sent.
fn bump_priority(app: &mut App, j: &JobView, up: bool) -> Option<Action> {
    if !app.may(JobAction::Priority, j) {
        return None;
    }
    // Build on the last value sent, not the one shown: the display may lag behind
    // quick presses (issue 15), and each press must count.
    let base = app
        .pending_priority
        .get(&j.id)
        .filter(|p| app.now - p.at < PENDING_PRIORITY_MS)
        .map_or(j.priority, |p| p.priority);
    let p = if up {
        (base + 1).min(MAX_PRIORITY)
    } else {
        base.saturating_sub(1)
    };
    if p == base {
        app.say(format!("priority of job {} is already {p}", j.id), true);
        return None;
    }
    app.pending_priority.insert(
        j.id,
        PendingPriority {
            priority: p,
            at: app.now,
        },
    );
    app.say(format!("priority of job {} {} → {p}", j.id, j.name), false);
    Some(Action::SetPriority(j.id, p))
}

/// Handle a mouse event: clicks focus a pane and select the row under the pointer, the
/// wheel moves the selection. Ignored while an overlay is open.
pub fn on_mouse(app: &mut App, ev: MouseEvent) {
    if !app.mouse || app.mode != Mode::Normal {
        return;
    }
    let Some(pane) = pane_at(app, ev.column, ev.row) else {
        return;
    };
    match ev.kind {
        MouseEventKind::Down(MouseButton::Left) => {
            app.focus = pane;
            let a = app.areas[pane.index()];
            if ev.row >= a.body_top && ev.row < a.body_top + a.rows {
                let i = a.offset + usize::from(ev.row - a.body_top);
                if i < app.len(pane) {
                    app.sel[pane.index()] = i;
                }
            }
        }
        MouseEventKind::ScrollDown => {
            app.focus = pane;
            move_sel(app, 3);
        }
        MouseEventKind::ScrollUp => {
            app.focus = pane;
            move_sel(app, -3);
        }
        _ => {}
    }
}

/// The submit form asks for a prediction when what it would submit changed, or the
/// picture did (at most once per snapshot version and form key).
pub fn prediction_request(app: &mut App) -> Option<Action> {
    let Mode::Submit(form) = &app.mode else {
        return None;
    };
    let key = form.probe_key();
    let asked = (key.clone(), app.snap.version);
    if app.predict_asked.as_ref() == Some(&asked) {
        return None;
    }
    let spec = form.probe(&app.snap)?;
    app.predict_asked = Some(asked);
    Some(Action::Predict {
        key,
        spec: Box::new(spec),
    })
}
