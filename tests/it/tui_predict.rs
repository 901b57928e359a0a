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
