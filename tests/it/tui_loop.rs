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

/// A terminal that hangs up: from `hung` on, every write fails with EIO, as a tty's do
/// once its other end is closed.
struct HangingUp {
    inner: TestBackend,
    hung: Arc<std::sync::atomic::AtomicBool>,
}

/// TestBackend never fails.
fn ok<T>(r: Result<T, std::convert::Infallible>) -> std::io::Result<T> {
    match r {
        Ok(t) => Ok(t),
        Err(e) => match e {},
    }
}

impl HangingUp {
    fn check(&self) -> std::io::Result<()> {
        if self.hung.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(nix::libc::EIO));
        }
        Ok(())
    }
}

impl ratatui::backend::Backend for HangingUp {
    type Error = std::io::Error;
    fn draw<'a, I>(&mut self, content: I) -> std::io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a ratatui::buffer::Cell)>,
    {
        self.check()?;
        ok(self.inner.draw(content))
    }
    fn hide_cursor(&mut self) -> std::io::Result<()> {
        self.check()
    }
    fn show_cursor(&mut self) -> std::io::Result<()> {
        self.check()
    }
    fn get_cursor_position(&mut self) -> std::io::Result<ratatui::layout::Position> {
        ok(self.inner.get_cursor_position())
    }
    fn set_cursor_position<P: Into<ratatui::layout::Position>>(
        &mut self,
        p: P,
    ) -> std::io::Result<()> {
        self.check()?;
        ok(self.inner.set_cursor_position(p))
    }
    fn clear(&mut self) -> std::io::Result<()> {
        self.check()?;
        ok(self.inner.clear())
    }
    fn clear_region(&mut self, t: ratatui::backend::ClearType) -> std::io::Result<()> {
        self.check()?;
        ok(self.inner.clear_region(t))
    }
    fn size(&self) -> std::io::Result<ratatui::layout::Size> {
        ok(self.inner.size())
    }
    fn window_size(&mut self) -> std::io::Result<ratatui::backend::WindowSize> {
        ok(self.inner.window_size())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.check()
    }
}

/// The demo's hang-up when a redraw comes before SIGHUP is seen (the flaky
/// `closing_the_demos_terminal_stops_its_jobs_and_removes_its_directory`): the write
/// fails first, and still every job is stopped and the console ends without an error.
#[tokio::test]
async fn a_hang_up_seen_as_a_failed_write_still_stops_the_demos_jobs() {
    let (snap_tx, mut snap_rx) = watch::channel(Arc::new(fixtures::aws()));
    let (act_tx, mut act_rx) = mpsc::channel(8);
    let (_ev_tx, ev_rx) = futures::channel::mpsc::unbounded::<std::io::Result<Event>>();
    let hung = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let backend = HangingUp {
        inner: TestBackend::new(100, 30),
        hung: hung.clone(),
    };
    let seen = lost.clone();
    let task = tokio::spawn(async move {
        let mut term = Terminal::new(backend).unwrap();
        let mut app = fixtures::app((**snap_rx.borrow_and_update()).clone());
        shareq::tui::console_loop(
            &mut term,
            &mut app,
            &mut snap_rx,
            &act_tx,
            ev_rx,
            // SIGHUP not seen yet.
            std::future::pending(),
            None,
            true,
            move || seen.store(true, std::sync::atomic::Ordering::SeqCst),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    hung.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut next = fixtures::aws();
    next.version += 1;
    next.queue = next.queue.iter().take(1).cloned().collect();
    snap_tx.send(Arc::new(next)).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the console ends when its terminal is gone")
        .unwrap();
    assert!(r.is_ok(), "a hang-up is no error: {r:?}");
    assert!(lost.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(
        act_rx.recv().await,
        Some(Action::Quit { stop_jobs: true }),
        "the demo's jobs are stopped"
    );
}
