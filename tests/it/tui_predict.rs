//! The submit form's prediction comes from the real scheduler on a copy of the state: the
//! form asks (`Action::Predict`) whenever what it would submit or the picture changes, and
//! shows the answer for the form as it stands.

use crate::fixtures::{self, NOW};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use shareq::forecast::{self, Verdict};
use shareq::tui::input::{on_key, prediction_request};
use shareq::tui::{Action, App};

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

/// Answer the form's request as the runtime would: predict on a copy of the lab's
/// scheduler.
fn answer(app: &mut App) -> Option<forecast::Prediction> {
    let Some(Action::Predict { key, spec }) = prediction_request(app) else {
        return None;
    };
    let d = fixtures::lab_driver();
    let p = forecast::predict(d.sched.clone(), *spec, NOW, &fixtures::lab_runtimes());
    app.prediction = Some((key, p.clone()));
    Some(p)
}

#[test]
fn the_form_asks_once_per_change_and_shows_the_answer() {
    let mut app = fixtures::app(fixtures::lab());
    assert!(
        prediction_request(&mut app).is_none(),
        "no form, no question"
    );
    on_key(&mut app, key('s'));
    let first = answer(&mut app).expect("opening the form asks");
    assert!(prediction_request(&mut app).is_none(), "asked already");
    // vision (the selected job's share) borrows nothing more: the core says it waits.
    assert_eq!(first.verdict, Verdict::Wait, "{first:?}");
    let text = fixtures::render_text(&mut app, 100, 30);
    assert!(text.contains("⇒ waits"), "{text}");
    // Typing a name does not change the decision: no new question.
    on_key(&mut app, KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    on_key(&mut app, KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    on_key(&mut app, KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    on_key(&mut app, key('x'));
    assert!(prediction_request(&mut app).is_none());
    // A priority of 99 changes it: asked again; until the answer, the old one is not shown.
    on_key(
        &mut app,
        KeyEvent::new(KeyCode::BackTab, KeyModifiers::NONE),
    );
    on_key(
        &mut app,
        KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE),
    );
    for c in "99".chars() {
        on_key(&mut app, key(c));
    }
    let text = fixtures::render_text(&mut app, 100, 30);
    assert!(text.contains("asking the scheduler"), "{text}");
    let p = answer(&mut app).expect("a changed priority asks again");
    assert_eq!(p.verdict, Verdict::Preempt, "in-share priority: {p:?}");
    assert!(p.why.contains("IN_SHARE_PRIORITY"), "{}", p.why);
    let text = fixtures::render_text(&mut app, 100, 30);
    assert!(text.contains("starts after a preemption"), "{text}");
}

/// The form offers only the shares its user may submit to (SPEC §9, as the scheduler
/// would refuse the rest), says the rule for one typed by hand, and its prediction names
/// the jobs it would wait for (SPEC §13).
#[test]
fn the_form_offers_the_users_shares_only_and_its_prediction_names_its_dependencies() {
    use shareq::access::{Access, Caller};
    use shareq::tui::app::Mode;
    use std::sync::Arc;
    let mut app = fixtures::app(fixtures::lab());
    let mut snap = (*app.snap).clone();
    snap.access = Arc::new(Access {
        scheduler_uid: 0,
        scheduler_user: "root".into(),
        admins: vec!["carol".into()],
        members: [("vision".to_string(), vec!["alice".to_string()])].into(),
        limits: Default::default(),
    });
    let open: Vec<String> = snap
        .shares
        .iter()
        .filter(|s| s.present && s.enabled && s.share != "vision")
        .map(|s| s.share.clone())
        .collect();
    assert!(open.len() >= 2, "{open:?}");
    app.set_snapshot(Arc::new(snap));
    app.caller = Some(Caller {
        uid: 1002,
        name: "bob".into(),
        groups: vec!["bob".into()],
    });
    let share = |app: &App| match &app.mode {
        Mode::Submit(f) => f.share.text.clone(),
        other => panic!("not the form: {other:?}"),
    };
    // The selected job is vision's, which bob may not use: the form starts on one he may.
    on_key(&mut app, key('s'));
    assert_ne!(share(&app), "vision");
    let mut seen = vec![share(&app)];
    for _ in 0..open.len() * 2 {
        on_key(&mut app, KeyEvent::new(KeyCode::Right, KeyModifiers::NONE));
        seen.push(share(&app));
    }
    assert!(!seen.iter().any(|s| s == "vision"), "{seen:?}");
    let mut distinct = seen.clone();
    distinct.sort();
    distinct.dedup();
    let mut want = open.clone();
    want.sort();
    assert_eq!(distinct, want, "every share bob may use, and only those");
    // Typed by hand, vision is refused in the scheduler's words, and enter submits nothing.
    on_key(
        &mut app,
        KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL),
    );
    for c in "vision".chars() {
        on_key(&mut app, key(c));
    }
    let text = fixtures::render_text(&mut app, 120, 30);
    assert!(
        text.contains("bob may not submit to vision: members are alice"),
        "{text}"
    );
    // Back on a share of his, with a command and two jobs to run after.
    on_key(&mut app, KeyEvent::new(KeyCode::Right, KeyModifiers::NONE));
    for _ in 0..4 {
        on_key(&mut app, KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    }
    for c in "true".chars() {
        on_key(&mut app, key(c));
    }
    on_key(&mut app, KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    for c in "12, 14:3".chars() {
        on_key(&mut app, key(c));
    }
    answer(&mut app).expect("a prediction");
    let text = fixtures::render_text(&mut app, 120, 30);
    assert!(
        text.contains("after 12, 14:3: PENDING until they have all SUCCEEDED"),
        "{text}"
    );
}
