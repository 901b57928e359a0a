//! Key → action → effect against the real runtime: the console's event loop (`drive`) on a
//! TestBackend, wired through the bridge to a live `RuntimeHandle` running real `sleep`
//! processes on the AWS example's fake GPUs. Keys submit through the form, raise a
//! priority (an in-share preemption follows), cancel a running job and quit stopping all.

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use shareq::config::load_dir;
use shareq::exec::{Discovery, StateDir};
use shareq::model::JobState;
use shareq::server::{Input, RuntimeHandle, RuntimeOptions};
use shareq::snapshot::Snapshot;
use shareq::tui::bridge::{Exit, forward};
use shareq::tui::{Action, App, Theme, drive};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};

type Keys = futures::channel::mpsc::UnboundedSender<std::io::Result<Event>>;

fn press(keys: &Keys, code: KeyCode) {
    keys.unbounded_send(Ok(Event::Key(KeyEvent::new(code, KeyModifiers::NONE))))
        .expect("console is running");
}

fn type_text(keys: &Keys, text: &str) {
    for c in text.chars() {
        press(keys, KeyCode::Char(c));
    }
}

/// The newest snapshot, once the runtime has taken in everything sent before.
async fn synced(handle: &RuntimeHandle) -> Arc<Snapshot> {
    let (tx, rx) = oneshot::channel();
    handle
        .inputs
        .send(Input::Sync { reply: tx })
        .expect("runtime alive");
    rx.await.expect("sync answered");
    handle.snapshots.borrow().clone()
}

async fn wait_until(
    handle: &RuntimeHandle,
    what: &str,
    ok: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    let start = Instant::now();
    loop {
        let snap = synced(handle).await;
        if ok(&snap) {
            return snap;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what} never happened; queue {:?}, running {:?}",
            snap.queue.iter().map(|j| &j.name).collect::<Vec<_>>(),
            snap.running.iter().map(|j| &j.name).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn running(snap: &Snapshot, name: &str) -> bool {
    snap.running
        .iter()
        .any(|j| j.name == name && j.stopping.is_none())
}

/// Submit through the `s` form: share qs1 (the form's default), 1 GPU, this priority.
fn submit(keys: &Keys, name: &str, priority: u32) {
    type_text(keys, "s");
    press(keys, KeyCode::Tab);
    press(keys, KeyCode::Tab);
    press(keys, KeyCode::Backspace);
    type_text(keys, &priority.to_string());
    press(keys, KeyCode::Tab);
    type_text(keys, name);
    press(keys, KeyCode::Tab);
    type_text(keys, "sleep 60");
    press(keys, KeyCode::Enter);
}

/// Let the console take in the newest snapshot (it redraws at most every ~33 ms).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(250)).await;
}

/// Filter to one job, so the selection lands on it.
fn select(keys: &Keys, name: &str) {
    type_text(keys, "/");
    type_text(keys, name);
    press(keys, KeyCode::Enter);
}

/// A live runtime on the AWS example's fake GPUs in a fresh directory under the system's
/// temporary one (`shareq-tui-<tag>-<pid>`), returned with it for removal.
fn aws_example_runtime(tag: &str) -> (PathBuf, RuntimeHandle) {
    let root: PathBuf =
        std::env::temp_dir().join(format!("shareq-tui-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let state = StateDir::new(root.join("state"));
    state.create().expect("state dir");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-configs/aws-example");
    let loaded = load_dir(&config).expect("sample config is valid");
    let handle = RuntimeHandle::start(
        RuntimeOptions {
            state,
            config_dir: config,
            supervisor_exe: PathBuf::from(env!("CARGO_BIN_EXE_shareq")),
            discovery: Discovery::skipped(),
        },
        loaded,
    );
    (root, handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_drive_the_live_runtime() {
    let (root, handle) = aws_example_runtime("live");
    let (act_tx, act_rx) = mpsc::channel::<Action>(64);
    let (notice_tx, notice_rx) = mpsc::unbounded_channel();
    let bridge = tokio::spawn(forward(
        act_rx,
        handle.inputs.clone(),
        "tester".into(),
        notice_tx,
        shareq::server::runtime::audit::Audit::off(),
    ));
    let (keys, events) = futures::channel::mpsc::unbounded();
    let mut snaps: watch::Receiver<Arc<Snapshot>> = handle.snapshots.clone();
    let console = tokio::spawn(async move {
        let mut term = Terminal::new(TestBackend::new(160, 48)).expect("terminal");
        let mut app = App::new(snaps.borrow_and_update().clone(), Theme::dark());
        let r = drive(
            &mut term,
            &mut app,
            &mut snaps,
            &act_tx,
            events,
            std::future::pending::<()>(),
            Some(notice_rx),
        )
        .await;
        (r, term)
    });

    // Two qs1 jobs: one on qs1's own GPU, one borrowed from qs2 (qs3 reserves its own).
    submit(&keys, "live-a", 0);
    wait_until(&handle, "live-a starts", |s| running(s, "live-a")).await;
    submit(&keys, "live-b", 0);
    let snap = wait_until(&handle, "live-b starts", |s| running(s, "live-b")).await;
    assert!(
        snap.running
            .iter()
            .any(|j| j.name == "live-b" && j.on_borrowed),
        "live-b runs on borrowed capacity"
    );
    submit(&keys, "live-c", 0);
    wait_until(&handle, "live-c queues", |s| {
        s.queue.iter().any(|j| j.name == "live-c")
    })
    .await;

    // Raise live-c's priority from the queue: it preempts the newest lower-priority job.
    // (Give the console a moment to take in the snapshot that shows live-c.)
    settle().await;
    select(&keys, "live-c");
    settle().await;
    type_text(&keys, "p");
    type_text(&keys, "7");
    press(&keys, KeyCode::Enter);
    let snap = wait_until(&handle, "live-c starts", |s| running(s, "live-c")).await;
    let p = snap
        .preemptions
        .iter()
        .find(|p| p.by_name.as_deref() == Some("live-c"))
        .expect("a preemption by live-c is logged");
    assert_eq!(p.victim_name, "live-b");
    assert_eq!(p.reason, "IN_SHARE_PRIORITY");
    let c = snap.running.iter().find(|j| j.name == "live-c").expect("c");
    assert_eq!(c.priority, 7);

    // Cancel live-a from the running pane, confirming with y.
    settle().await;
    press(&keys, KeyCode::Esc);
    select(&keys, "live-a");
    settle().await;
    for _ in 0..6 {
        press(&keys, KeyCode::Tab);
        tokio::time::sleep(Duration::from_millis(30)).await;
        let (tx, rx) = oneshot::channel();
        handle
            .inputs
            .send(Input::Sync { reply: tx })
            .expect("alive");
        let _ = rx.await;
        // The console focuses panes in a cycle; try `c` on each until it asks about live-a.
        type_text(&keys, "c");
        tokio::time::sleep(Duration::from_millis(100)).await;
        type_text(&keys, "y");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let snap = synced(&handle).await;
        if !running(&snap, "live-a") {
            break;
        }
    }
    let snap = wait_until(&handle, "live-a is cancelled", |s| {
        s.finished
            .iter()
            .any(|j| j.name == "live-a" && j.state == JobState::Failed)
    })
    .await;
    let a = snap
        .finished
        .iter()
        .find(|j| j.name == "live-a")
        .expect("a");
    assert!(a.reason.contains("CANCELLED: by tester"), "{}", a.reason);

    // Quit, stopping every job.
    type_text(&keys, "q");
    type_text(&keys, "s");
    let exit = tokio::time::timeout(Duration::from_secs(10), bridge)
        .await
        .expect("bridge ends")
        .expect("bridge task");
    assert_eq!(exit, Exit::Quit { stop_jobs: true });
    let (r, _term) = tokio::time::timeout(Duration::from_secs(10), console)
        .await
        .expect("console ends")
        .expect("console task");
    assert!(r.is_ok());
    tokio::time::timeout(Duration::from_secs(30), handle.shutdown(true))
        .await
        .expect("jobs stop within the grace period");
    let _ = std::fs::remove_dir_all(&root);
}

/// The rows a console shows and the job it has selected, to compare two consoles.
fn shown(app: &App) -> (Vec<u64>, Option<u64>) {
    let n = app.len(shareq::tui::app::Pane::Queue);
    let ids = (0..n)
        .map(|i| app.queue_rows.job(i, app.queue_jobs()).expect("row").id.0)
        .collect();
    (ids, app.selected_job().map(|j| j.id.0))
}

/// A console that follows the real runtime's snapshots by their changes (only the rows
/// that changed) shows, after every batch of submits, priority changes and cancels, what a
/// console opened on that snapshot shows: the same rows, filtered and sorted, and the
/// selected job still selected wherever it moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_following_changes_shows_what_a_fresh_console_shows() {
    use shareq::model::{JobId, JobSpec};
    use shareq::tui::filter::{Filter, Sort};
    let (root, handle) = aws_example_runtime("follow");
    let submit = |name: String, share: &str, priority: u32| {
        let mut spec = JobSpec::new(&name, share, 1, priority);
        spec.command = Some(serde_json::from_str(r#""sleep 300""#).expect("command"));
        let (tx, rx) = oneshot::channel();
        handle
            .inputs
            .send(Input::Submit {
                spec,
                reply: Some(tx),
            })
            .expect("runtime alive");
        rx
    };
    let mut ids = Vec::new();
    for i in 0..150u32 {
        let share = ["qs1", "qs2", "qs3"][(i % 3) as usize];
        ids.push(submit(format!("job-{i}"), share, i % 4));
    }
    let mut queued: Vec<JobId> = Vec::new();
    for rx in ids {
        queued.push(rx.await.expect("answered").expect("accepted"));
    }
    let first = synced(&handle).await;
    let views = [
        ("", Sort::Scheduling),
        ("qs1", Sort::Scheduling),
        ("!share:qs2", Sort::Priority),
        ("job-1", Sort::Share),
        ("", Sort::LongestWait),
    ];
    let mut consoles: Vec<App> = views
        .iter()
        .map(|(f, sort)| {
            let mut app = App::new(first.clone(), Theme::dark());
            app.filter = Filter::parse(f).expect("filter");
            app.sort = *sort;
            app.rebuild_rows();
            app.focus = shareq::tui::app::Pane::Queue;
            for _ in 0..7 {
                shareq::tui::input::on_key(
                    &mut app,
                    KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE),
                );
            }
            app
        })
        .collect();
    let mut seed = 11u64;
    let mut rand = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut next = 150u32;
    for round in 0..12 {
        // A batch: priority changes (rows move), a cancel, new submits.
        for _ in 0..6 {
            let id = queued[rand(queued.len() as u64) as usize];
            let (tx, _rx) = oneshot::channel();
            let _ = handle.inputs.send(Input::SetPriority {
                id,
                priority: rand(6) as u32,
                by: "tester".into(),
                reply: Some(tx),
            });
        }
        let gone = queued.swap_remove(rand(queued.len() as u64) as usize);
        let (tx, _rx) = oneshot::channel();
        let _ = handle.inputs.send(Input::Cancel {
            ids: vec![gone],
            by: "tester".into(),
            reply: Some(tx),
        });
        for _ in 0..3 {
            let rx = submit(format!("job-{next}"), "qs1", rand(4) as u32);
            next += 1;
            queued.push(rx.await.expect("answered").expect("accepted"));
        }
        // Every other round, a console skips a snapshot: its next one spans two batches.
        let snap = synced(&handle).await;
        for (app, (f, sort)) in consoles.iter_mut().zip(views) {
            if round % 2 == 1 && f.is_empty() {
                continue;
            }
            let was = app.selected_job().map(|j| j.id);
            app.set_snapshot(snap.clone());
            let mut fresh = App::new(snap.clone(), Theme::dark());
            fresh.filter = Filter::parse(f).expect("filter");
            fresh.sort = sort;
            fresh.rebuild_rows();
            let (rows, selected) = shown(app);
            assert_eq!(
                rows,
                shown(&fresh).0,
                "round {round}, filter {f:?}, {sort:?}"
            );
            // The selected job stays selected while it is still shown.
            if let Some(was) = was
                && rows.contains(&was.0)
            {
                assert_eq!(
                    selected,
                    Some(was.0),
                    "round {round}, filter {f:?}, {sort:?}"
                );
            }
        }
    }
    tokio::time::timeout(Duration::from_secs(30), handle.shutdown(true))
        .await
        .expect("jobs stop within the grace period");
    let _ = std::fs::remove_dir_all(&root);
}
