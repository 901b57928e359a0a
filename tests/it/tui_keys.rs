//! Keys and clicks → console state and the Action sent to the runtime.

use crate::fixtures;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use shareq::model::{Command, JobId};
use shareq::tui::app::{App, Mode, Pane};
use shareq::tui::input::{on_key, on_mouse};
use shareq::tui::{Action, filter::Sort};

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn code(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn typed(app: &mut App, s: &str) -> Vec<Action> {
    s.chars().filter_map(|c| on_key(app, key(c))).collect()
}

fn lab() -> App {
    fixtures::app(fixtures::lab())
}

fn selected_id(app: &App) -> JobId {
    app.selected_job().expect("a selected job").id
}

#[test]
fn cancel_asks_naming_the_job_then_sends_cancel() {
    let mut app = lab();
    let id = selected_id(&app);
    assert_eq!(on_key(&mut app, key('c')), None);
    match &app.mode {
        Mode::ConfirmCancel { job, question } => {
            assert_eq!(*job, id);
            assert_eq!(question, "Cancel job 4 sweep-16 (vision, queued 45m)? y/n");
        }
        m => panic!("expected confirmation, got {m:?}"),
    }
    assert_eq!(on_key(&mut app, key('y')), Some(Action::Cancel(id)));
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn cancel_of_a_running_job_says_how_long_it_ran_and_n_keeps_it() {
    let mut app = lab();
    on_key(&mut app, code(KeyCode::Tab)); // Queue → Running
    assert_eq!(app.focus, Pane::Running);
    on_key(&mut app, key('c'));
    let Mode::ConfirmCancel { question, .. } = &app.mode else {
        panic!("no confirmation")
    };
    assert_eq!(
        question,
        "Cancel job 1 train-resnet (vision, running 1h)? y/n"
    );
    assert_eq!(on_key(&mut app, key('x')), None, "other keys keep asking");
    assert!(matches!(app.mode, Mode::ConfirmCancel { .. }));
    assert_eq!(on_key(&mut app, key('n')), None);
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn priority_prompt_and_bumps() {
    let mut app = lab();
    let id = selected_id(&app);
    on_key(&mut app, key('p'));
    on_key(&mut app, code(KeyCode::Backspace));
    on_key(&mut app, code(KeyCode::Backspace));
    typed(&mut app, "42x");
    assert_eq!(
        on_key(&mut app, code(KeyCode::Enter)),
        Some(Action::SetPriority(id, 42))
    );
    // Bumps build on the value sent last, not the (lagging) one shown.
    assert_eq!(
        on_key(&mut app, key('+')),
        Some(Action::SetPriority(id, 43))
    );
    assert_eq!(
        on_key(&mut app, key('-')),
        Some(Action::SetPriority(id, 42))
    );
    // An empty number never leaves the prompt; more than 4 digits cannot be typed.
    on_key(&mut app, key('p'));
    on_key(&mut app, code(KeyCode::Backspace));
    on_key(&mut app, code(KeyCode::Backspace));
    assert_eq!(on_key(&mut app, code(KeyCode::Enter)), None);
    typed(&mut app, "123456");
    let Mode::Priority { input, .. } = &app.mode else {
        panic!()
    };
    assert_eq!(input.text, "1234");
    assert!(matches!(app.mode, Mode::Priority { .. }));
    assert_eq!(on_key(&mut app, code(KeyCode::Esc)), None);
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn submit_form_validates_and_sends_the_spec() {
    let mut app = lab();
    on_key(&mut app, key('s'));
    let Mode::Submit(form) = &app.mode else {
        panic!("no form")
    };
    assert_eq!(
        form.share.text, "vision",
        "defaults to the selected job's share"
    );
    assert!(!form.problems(&app.snap).is_empty());
    // Enter on an invalid form jumps to the first bad field instead of sending.
    assert_eq!(on_key(&mut app, code(KeyCode::Enter)), None);
    typed(&mut app, "probe");
    on_key(&mut app, code(KeyCode::Tab));
    typed(&mut app, "sleep 5");
    on_key(&mut app, code(KeyCode::Up));
    on_key(&mut app, code(KeyCode::Up));
    on_key(&mut app, code(KeyCode::Backspace));
    typed(&mut app, "7");
    on_key(&mut app, code(KeyCode::Up));
    on_key(&mut app, code(KeyCode::Up));
    on_key(&mut app, code(KeyCode::Right)); // vision → next enabled share
    let sent = on_key(&mut app, code(KeyCode::Enter));
    let Some(Action::Submit(spec)) = sent else {
        panic!("no submit: {sent:?}")
    };
    assert_eq!(spec.job_name, "probe");
    assert_eq!(
        spec.quota_share_name, "infra",
        "shares cycle in order and wrap"
    );
    assert_eq!(spec.scheduling_priority, 7);
    assert_eq!(spec.quantity, 1);
    assert_eq!(spec.command, Some(Command::Shell("sleep 5".into())));
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn submit_form_sends_the_expected_runtime_read_as_submit_expect_reads_it() {
    let mut app = lab();
    on_key(&mut app, key('s'));
    assert_eq!(on_key(&mut app, code(KeyCode::Enter)), None); // to the name
    typed(&mut app, "probe");
    on_key(&mut app, code(KeyCode::Tab));
    typed(&mut app, "sleep 5");
    // The last field, `expect`: a word that is no duration holds the form back.
    for _ in 0..3 {
        on_key(&mut app, code(KeyCode::Tab));
    }
    typed(&mut app, "soon");
    let Mode::Submit(form) = &app.mode else {
        panic!("no form")
    };
    assert_eq!(form.expect.text, "soon");
    let problems = form.problems(&app.snap);
    assert!(
        problems
            .iter()
            .any(|(f, why)| *f == shareq::tui::popups::submit::Field::Expect
                && why.contains("duration")),
        "{problems:?}"
    );
    assert_eq!(on_key(&mut app, code(KeyCode::Enter)), None);
    for _ in 0..4 {
        on_key(&mut app, code(KeyCode::Backspace));
    }
    typed(&mut app, "1h30m");
    let sent = on_key(&mut app, code(KeyCode::Enter));
    let Some(Action::Submit(spec)) = sent else {
        panic!("no submit: {sent:?}")
    };
    assert_eq!(spec.expected_runtime_seconds, Some(5400));
}

#[test]
fn submit_form_rejects_letters_in_numbers_and_esc_cancels() {
    let mut app = lab();
    on_key(&mut app, key('s'));
    on_key(&mut app, code(KeyCode::Tab));
    typed(&mut app, "a2");
    let Mode::Submit(form) = &app.mode else {
        panic!()
    };
    assert_eq!(form.gpus.text, "12");
    assert_eq!(on_key(&mut app, code(KeyCode::Esc)), None);
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn filter_narrows_the_queue_live_and_esc_restores() {
    let mut app = lab();
    let all = app.len(Pane::Queue);
    on_key(&mut app, key('/'));
    typed(&mut app, "share:infra");
    assert_eq!(app.len(Pane::Queue), 2);
    on_key(&mut app, code(KeyCode::Enter));
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.filter.raw(), "share:infra");
    on_key(&mut app, key('/'));
    typed(&mut app, " !nightly");
    assert_eq!(app.len(Pane::Queue), 1);
    on_key(&mut app, code(KeyCode::Esc));
    assert_eq!(
        app.filter.raw(),
        "share:infra",
        "esc in the prompt restores"
    );
    on_key(&mut app, code(KeyCode::Esc));
    assert_eq!(app.len(Pane::Queue), all, "esc in the panes clears");
}

#[test]
fn sort_cycles_and_enter_on_a_share_filters_its_jobs() {
    let mut app = lab();
    on_key(&mut app, key('o'));
    assert_eq!(app.sort, Sort::LongestWait);
    assert_eq!(
        app.selected_job().unwrap().name,
        "debug-3",
        "longest waiting first"
    );
    on_key(&mut app, ctrl_shift_tab());
    on_key(&mut app, ctrl_shift_tab());
    assert_eq!(app.focus, Pane::Shares);
    on_key(&mut app, key('G'));
    on_key(&mut app, code(KeyCode::Enter));
    assert_eq!(app.focus, Pane::Queue);
    assert_eq!(app.filter.raw(), "share:vision");
    assert!(
        app.snap
            .queue
            .iter()
            .filter(|j| j.share == "vision")
            .count()
            == app.len(Pane::Queue)
    );
}

fn ctrl_shift_tab() -> KeyEvent {
    code(KeyCode::BackTab)
}

#[test]
fn moving_clamps_at_the_ends() {
    let mut app = fixtures::app(fixtures::with_queue_len(&fixtures::lab(), 1000));
    on_key(&mut app, key('k'));
    assert_eq!(app.selected(), 0);
    on_key(&mut app, key('G'));
    assert_eq!(app.selected(), 999);
    on_key(&mut app, code(KeyCode::Down));
    assert_eq!(app.selected(), 999);
    on_key(&mut app, key('g'));
    on_key(&mut app, code(KeyCode::PageDown));
    assert!(app.selected() >= 1);
}

#[test]
fn quit_asks_when_jobs_run_and_answers_map_to_actions() {
    let mut app = lab();
    assert_eq!(on_key(&mut app, key('q')), None);
    assert_eq!(app.mode, Mode::Quit { running: 5 });
    assert_eq!(on_key(&mut app, code(KeyCode::Esc)), None);
    assert!(!app.exit);
    on_key(&mut app, ctrl('c'));
    assert_eq!(on_key(&mut app, key('d')), Some(Action::Detach));
    assert!(app.exit);
    let mut app = lab();
    on_key(&mut app, key('q'));
    assert_eq!(
        on_key(&mut app, key('s')),
        Some(Action::Quit { stop_jobs: true })
    );
    let mut app = fixtures::app(shareq::snapshot::Snapshot::empty());
    assert_eq!(
        on_key(&mut app, key('q')),
        Some(Action::Quit { stop_jobs: false })
    );
    assert!(app.exit);
}

#[test]
fn reload_help_details_and_log() {
    let mut app = lab();
    assert_eq!(on_key(&mut app, key('r')), Some(Action::Reload));
    on_key(&mut app, key('?'));
    assert_eq!(app.mode, Mode::Help);
    assert_eq!(on_key(&mut app, key('c')), None, "help swallows keys");
    on_key(&mut app, code(KeyCode::Esc));
    on_key(&mut app, code(KeyCode::Enter));
    let Mode::Details(j) = &app.mode else {
        panic!()
    };
    assert_eq!(j.name, "sweep-16");
    on_key(&mut app, key('l'));
    let Mode::Log { job, .. } = &app.mode else {
        panic!()
    };
    assert_eq!(*job, JobId(4));
    assert!(app.log_lines[0].contains("not available"));
}

#[test]
fn ctrl_c_backs_out_of_overlays() {
    let mut app = lab();
    on_key(&mut app, key('s'));
    assert_eq!(on_key(&mut app, ctrl('c')), None);
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn clicks_select_pane_and_row_unless_disabled() {
    let mut app = lab();
    let _ = fixtures::render_text(&mut app, 160, 48); // lays the panes out
    let running = app.areas[Pane::Running.index()];
    let click = |row| MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: running.area.x + 5,
        row,
        modifiers: KeyModifiers::NONE,
    };
    on_mouse(&mut app, click(running.body_top + 2));
    assert_eq!(app.focus, Pane::Running);
    assert_eq!(app.selected(), 2);
    assert_eq!(app.selected_job().unwrap().name, "sweep-17");
    let mut off = lab();
    off.mouse = false;
    let _ = fixtures::render_text(&mut off, 160, 48);
    on_mouse(&mut off, click(running.body_top + 2));
    assert_eq!(off.focus, Pane::Queue);
}

#[test]
fn selection_follows_the_job_across_snapshots() {
    let mut app = lab();
    on_key(&mut app, key('j'));
    on_key(&mut app, key('j'));
    let id = selected_id(&app);
    // A new snapshot where an earlier job is gone: the same job stays selected.
    let mut snap = (*app.snap).clone();
    let first = shareq::snapshot::list::key_of(&snap.queue[0]);
    snap.queue.remove(first);
    app.set_snapshot(std::sync::Arc::new(snap));
    assert_eq!(selected_id(&app), id);
}

/// SPEC §9 in the console: an action the person at the keyboard may not take is refused
/// in the footer with the scheduler's words, before any confirmation dialog.
#[test]
fn a_non_admin_is_refused_in_the_footer_before_any_dialog() {
    use shareq::access::{Access, Caller};
    use std::sync::Arc;
    let mut app = lab();
    let mut snap = (*app.snap).clone();
    snap.access = Arc::new(Access {
        scheduler_uid: 0,
        scheduler_user: "root".into(),
        admins: vec!["carol".into()],
        members: [("vision".to_string(), vec!["alice".to_string()])].into(),
        limits: Default::default(),
    });
    // The fixtures' vision jobs are vera's (uid 1001).
    app.set_snapshot(Arc::new(snap));
    let bob = Caller {
        uid: 1002,
        name: "bob".into(),
        groups: vec!["bob".into()],
    };
    app.caller = Some(bob);
    let id = selected_id(&app);
    for (k, words) in [
        ('c', "cancel"),
        ('p', "change the priority of"),
        ('+', "change the priority of"),
        ('l', "read the log of"),
    ] {
        assert_eq!(on_key(&mut app, key(k)), None, "{k}");
        assert_eq!(app.mode, Mode::Normal, "{k}: no dialog opens");
        let status = app.status.clone().expect("a footer message");
        assert!(status.error);
        assert_eq!(
            status.text,
            format!("bob may not {words} job {id}: it belongs to vera (admins: carol)")
        );
    }
    assert_eq!(on_key(&mut app, key('r')), None);
    assert!(
        app.status
            .clone()
            .unwrap()
            .text
            .starts_with("bob may not reload the config")
    );
    // The owner gets the dialog.
    app.caller = Some(Caller {
        uid: 1001,
        name: "vera".into(),
        groups: vec![],
    });
    on_key(&mut app, key('c'));
    assert!(matches!(app.mode, Mode::ConfirmCancel { .. }));
}

#[test]
fn quick_bumps_are_never_lost_while_the_display_lags() {
    let mut app = lab();
    let id = selected_id(&app);
    let shown = app.selected_job().expect("selected").priority;
    // Five quick presses before any new snapshot: five steps, not one.
    let sent: Vec<Action> = (0..5).filter_map(|_| on_key(&mut app, key('+'))).collect();
    let want: Vec<Action> = (1..=5)
        .map(|k| Action::SetPriority(id, shown + k))
        .collect();
    assert_eq!(sent, want);
    // Once the snapshot shows the value, the next press builds on it as usual.
    let mut snap = (*app.snap).clone();
    let mut view = snap
        .queue
        .iter()
        .find(|j| j.id == id)
        .cloned()
        .expect("the selected job is queued");
    snap.queue.remove(shareq::snapshot::list::key_of(&view));
    view.priority = shown + 5;
    snap.queue.upsert(std::sync::Arc::new(view));
    app.set_snapshot(std::sync::Arc::new(snap));
    assert!(app.pending_priority.is_empty());
    assert_eq!(
        on_key(&mut app, key('-')),
        Some(Action::SetPriority(id, shown + 4))
    );
}

#[test]
fn e_shows_the_rejected_configs_errors_and_esc_closes_them() {
    let mut app = lab();
    assert_eq!(on_key(&mut app, key('e')), None);
    assert_eq!(app.mode, Mode::Normal, "no error: nothing to open");
    assert!(
        app.status
            .as_ref()
            .is_some_and(|s| s.text.contains("without errors"))
    );
    let mut snap = (*app.snap).clone();
    snap.config.error = Some("a.yaml:1:1: kind: missing field `kind`".into());
    app.set_snapshot(std::sync::Arc::new(snap));
    on_key(&mut app, key('e'));
    assert!(matches!(app.mode, Mode::ConfigErrors { scroll: 0 }));
    on_key(&mut app, key('j'));
    assert!(matches!(app.mode, Mode::ConfigErrors { scroll: 1 }));
    on_key(&mut app, code(KeyCode::Esc));
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn an_attached_console_does_not_offer_to_stop_the_other_schedulers_jobs() {
    let mut app = lab();
    app.attached = true;
    assert_eq!(on_key(&mut app, key('q')), None);
    assert!(matches!(app.mode, Mode::Quit { .. }), "jobs run: it asks");
    assert_eq!(on_key(&mut app, key('s')), None, "nothing is stopped");
    assert!(matches!(app.mode, Mode::Quit { .. }));
    assert!(
        app.status
            .as_ref()
            .is_some_and(|s| s.error && s.text.contains("attached"))
    );
    assert_eq!(on_key(&mut app, key('q')), Some(Action::Detach));
    assert!(app.exit);
}
