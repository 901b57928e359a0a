//! The console's real event loop (`drive`) on a TestBackend, fed keys through a channel:
//! actions reach the runtime, new snapshots reach the screen, quitting ends the loop.

use crate::fixtures;
use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use shareq::tui::{Action, drive};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

fn key(c: char) -> std::io::Result<Event> {
    Ok(Event::Key(KeyEvent::new(
        KeyCode::Char(c),
        KeyModifiers::NONE,
    )))
}

fn screen(term: &Terminal<TestBackend>) -> String {
    term.backend().to_string()
}

#[tokio::test]
async fn keys_become_actions_snapshots_redraw_and_quit_ends_the_loop() {
    let (snap_tx, mut snap_rx) = watch::channel(Arc::new(fixtures::lab()));
    let (act_tx, mut act_rx) = mpsc::channel(8);
    let (ev_tx, ev_rx) = futures::channel::mpsc::unbounded();
    let task = tokio::spawn(async move {
        let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
        let mut app = fixtures::app((**snap_rx.borrow_and_update()).clone());
        let r = drive(
            &mut term,
            &mut app,
            &mut snap_rx,
            &act_tx,
            ev_rx,
            std::future::pending(),
            None,
        )
        .await;
        (r, app, term)
    });
    ev_tx.unbounded_send(key('r')).unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), act_rx.recv())
        .await
        .unwrap();
    assert_eq!(got, Some(Action::Reload));
    let mut next = fixtures::lab();
    next.queue = next.queue.iter().take(2).cloned().collect();
    next.version += 1;
    snap_tx.send(Arc::new(next)).unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    ev_tx.unbounded_send(key('q')).unwrap();
    ev_tx.unbounded_send(key('d')).unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), act_rx.recv())
        .await
        .unwrap();
    assert_eq!(got, Some(Action::Detach));
    let (r, app, term) = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(r.is_ok());
    assert!(app.exit);
    assert_eq!(app.snap.queue.len(), 2, "the newest snapshot was taken in");
    assert!(screen(&term).contains("Queue (2)"), "{}", screen(&term));
}

#[tokio::test]
async fn shutdown_detaches_and_a_closed_event_stream_ends_quietly() {
    let (_snap_tx, mut snap_rx) = watch::channel(Arc::new(fixtures::aws()));
    let (act_tx, mut act_rx) = mpsc::channel(8);
    let (_ev_tx, ev_rx) = futures::channel::mpsc::unbounded();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
        let mut app = fixtures::app((**snap_rx.borrow_and_update()).clone());
        let stop = async {
            let _ = stop_rx.await;
        };
        drive(
            &mut term,
            &mut app,
            &mut snap_rx,
            &act_tx,
            ev_rx,
            stop,
            None,
        )
        .await
    });
    stop_tx.send(()).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(r.is_ok());
    assert_eq!(act_rx.recv().await, Some(Action::Detach));

    let (_snap_tx, mut snap_rx) = watch::channel(Arc::new(fixtures::aws()));
    let (act_tx, _act_rx) = mpsc::channel(8);
    let (ev_tx, ev_rx) = futures::channel::mpsc::unbounded::<std::io::Result<Event>>();
    drop(ev_tx);
    let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let mut app = fixtures::app((**snap_rx.borrow_and_update()).clone());
    let r = drive(
        &mut term,
        &mut app,
        &mut snap_rx,
        &act_tx,
        ev_rx,
        std::future::pending(),
        None,
    );
    assert!(
        tokio::time::timeout(Duration::from_secs(5), r)
            .await
            .unwrap()
            .is_ok()
    );
}

#[tokio::test]
async fn runtime_notices_show_in_the_footer() {
    use shareq::tui::bridge::Notice;
    let (_snap_tx, mut snap_rx) = watch::channel(Arc::new(fixtures::aws()));
    let (act_tx, _act_rx) = mpsc::channel(8);
    let (ev_tx, ev_rx) = futures::channel::mpsc::unbounded();
    let (n_tx, n_rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
        let mut app = fixtures::app((**snap_rx.borrow_and_update()).clone());
        let r = drive(
            &mut term,
            &mut app,
            &mut snap_rx,
            &act_tx,
            ev_rx,
            std::future::pending(),
            Some(n_rx),
        )
        .await;
        (r, term)
    });
    n_tx.send(
        Notice {
            text: "probe refused: no share named \"x\"".into(),
            error: true,
        }
        .into(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(ev_tx); // the event stream ends: the loop returns
    let (r, term) = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(r.is_ok());
    assert!(
        screen(&term).contains("probe refused: no share named"),
        "{}",
        screen(&term)
    );
}
