//! The console: a ratatui view over the runtime's `watch` of [`Snapshot`]s that turns keys
//! into [`Action`]s on an `mpsc` channel. It never touches scheduler state.
//!
//! - [`action`]: what the console asks of the runtime.
//! - [`app`]: console state ([`line_input`]: the prompts' one-line input); [`input`]: keys and mouse → state and actions, the main
//!   screen's keys through [`keymap`], the one key table the `?` help is written from.
//! - [`draw`]: layout; [`panes`]: one file per pane; [`popups`]: overlays.
//! - [`theme`]: colour themes; [`filter`]: `/` and `o`; [`logs`]: the `l` log tail;
//!   [`history`]: the `h` view's state and figures; [`ended`]: the `F` view's rows and
//!   selection; [`terminal`]: raw mode and its
//!   restoration. The submit form's prediction comes from the runtime
//!   (`crate::forecast::predict`, the real scheduler on a copy).
//! - [`bridge`]: actions → runtime inputs, answers → footer notices.
//! - [`demo`]: the load generator behind `shareq demo` (the console's sample snapshots for
//!   tests and benches are test data: `tests/it/fixtures.rs`).

pub mod action;
pub mod app;
pub mod arrays;
pub mod bridge;
pub mod demo;
pub mod draw;
pub mod ended;
pub mod filter;
pub mod history;
pub mod input;
pub mod keymap;
pub mod line_input;
pub mod logs;
pub mod panes;
pub mod popups;
pub mod terminal;
pub mod text;
pub mod theme;

pub use action::Action;
pub use app::App;
pub use logs::LogSource;
pub use theme::Theme;

use crate::snapshot::Snapshot;
use anyhow::Context;
use crossterm::event::{Event, EventStream};
use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch};

/// At most ~30 frames a second for what the console draws by itself (new snapshots,
/// the clock, the mouse); a key is drawn at once.
pub const FRAME: Duration = Duration::from_millis(33);

/// How the console looks and where it reads logs.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    /// `--theme NAME|PATH`: a built-in name (dark, light, high-contrast,
    /// colour-blind-safe) or a YAML file. `None`: dark.
    pub theme: Option<String>,
    /// Force monochrome; `None` follows the `NO_COLOR` environment variable.
    pub no_color: Option<bool>,
    /// Mouse clicks select panes and rows (`false` leaves the mouse to the terminal).
    pub mouse: bool,
    /// Where `l` reads job logs.
    pub logs: LogSource,
    /// Clock offset from UTC in seconds; `None`: the machine's local time.
    pub utc_offset_secs: Option<i32>,
    /// Answers from the runtime to show in the footer (see [`bridge::forward`]).
    pub notices: bridge::NoticeFeed,
    /// When the terminal hangs up (SIGHUP), stop every job instead of leaving them
    /// running: `shareq demo`, whose jobs and directory must not outlive it.
    pub stop_jobs_on_hangup: bool,
    /// The console is attached to another process's scheduler (see [`App::attached`]).
    pub attached: bool,
}

impl Default for ConsoleOptions {
    fn default() -> ConsoleOptions {
        ConsoleOptions {
            theme: None,
            no_color: None,
            mouse: true,
            logs: LogSource::None,
            utc_offset_secs: None,
            notices: bridge::NoticeFeed::default(),
            stop_jobs_on_hangup: false,
            attached: false,
        }
    }
}

/// The machine's current offset from UTC.
pub fn local_utc_offset() -> i32 {
    chrono::Local::now().offset().local_minus_utc()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Build the console state for `snap` with `opts` (theme, mouse, logs, clock).
pub fn app_for(snap: Arc<Snapshot>, opts: &ConsoleOptions) -> App {
    let no_color = opts.no_color.unwrap_or_else(Theme::no_color_env);
    let (theme, warning) = Theme::resolve(opts.theme.as_deref(), no_color);
    let mut app = App::new(snap, theme);
    app.theme_warning = warning;
    app.mouse = opts.mouse;
    app.logs = opts.logs.clone();
    app.utc_offset_secs = opts.utc_offset_secs.unwrap_or_else(local_utc_offset);
    app.caller = Some(crate::access::Caller::current());
    app.attached = opts.attached;
    app
}

/// Run the console until the user quits (or detaches), SIGTERM arrives, or the runtime
/// drops its snapshot sender. The terminal is restored on every way out, panics included.
///
/// Quitting sends [`Action::Quit`] or [`Action::Detach`] before returning; SIGTERM sends
/// [`Action::Detach`] (running jobs are left to the runtime's own shutdown), and so does
/// SIGHUP (the terminal closed), unless `stop_jobs_on_hangup` asks to stop every job; a
/// write that fails because the terminal is gone counts as the hang-up ([`console_loop`]).
pub async fn run_console(
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
    actions: mpsc::Sender<Action>,
    opts: ConsoleOptions,
) -> anyhow::Result<()> {
    let first = snapshots.borrow_and_update().clone();
    let mut app = app_for(first, &opts);
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigterm = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut sighup = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;
    let (mut term, guard) = terminal::enter(opts.mouse).context("cannot set up the terminal")?;
    let stop_on_hangup = opts.stop_jobs_on_hangup;
    let hangup_actions = actions.clone();
    let shutdown = async move {
        tokio::select! {
            _ = sigterm.recv() => {}
            _ = sighup.recv() => {
                tracing::info!("the terminal hung up");
                terminal::terminal_gone();
                if stop_on_hangup {
                    let _ = hangup_actions.send(Action::Quit { stop_jobs: true }).await;
                }
            }
        }
    };
    let notices = opts.notices.take();
    let result = console_loop(
        &mut term,
        &mut app,
        &mut snapshots,
        &actions,
        EventStream::new(),
        shutdown,
        notices,
        stop_on_hangup,
        terminal::terminal_gone,
    )
    .await;
    drop(guard);
    result
}

/// [`drive`], then what a lost terminal asks for. A terminal that hangs up fails every
/// write to it (EIO) from that instant, and SIGHUP arrives beside it: when a redraw comes
/// first, the loop ends with that error before the signal is seen. Either is the hang-up:
/// the failed write is taken as one (`on_lost` runs: the real terminal points output at
/// /dev/null from then on; the console ends without an error), and with `stop_on_hangup` every job is stopped unless
/// the operator chose otherwise first (the bridge acts on the first `Quit` or `Detach`
/// only, so this `Quit` is read only when the console sent neither: a lost terminal, a
/// console that failed, an input stream that ended).
#[allow(clippy::too_many_arguments)]
pub async fn console_loop<B, S>(
    term: &mut ratatui::Terminal<B>,
    app: &mut App,
    snapshots: &mut watch::Receiver<Arc<Snapshot>>,
    actions: &mpsc::Sender<Action>,
    events: S,
    shutdown: impl std::future::Future<Output = ()>,
    notices: Option<mpsc::UnboundedReceiver<bridge::Feed>>,
    stop_on_hangup: bool,
    on_lost: impl FnOnce(),
) -> anyhow::Result<()>
where
    B: ratatui::backend::Backend,
    B::Error: Send + Sync + 'static,
    S: futures::Stream<Item = std::io::Result<Event>> + Unpin,
{
    let mut result = drive(term, app, snapshots, actions, events, shutdown, notices).await;
    if result.as_ref().is_err_and(terminal_lost) {
        tracing::info!("the terminal hung up (a write to it failed)");
        on_lost();
        result = Ok(());
    }
    if stop_on_hangup {
        let _ = actions.send(Action::Quit { stop_jobs: true }).await;
    }
    result
}

/// Did the console fail because its terminal is gone (EIO, what a hung-up tty answers)?
fn terminal_lost(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(nix::libc::EIO))
    })
}

/// The console's loop on any backend and event source (the terminal in `run_console`;
/// `TestBackend` and a channel in tests). Returns when the user quits or detaches, the
/// event stream ends, or `shutdown` completes (then [`Action::Detach`] is sent).
pub async fn drive<B, S>(
    term: &mut ratatui::Terminal<B>,
    app: &mut App,
    snapshots: &mut watch::Receiver<Arc<Snapshot>>,
    actions: &mpsc::Sender<Action>,
    mut events: S,
    shutdown: impl std::future::Future<Output = ()>,
    mut notices: Option<mpsc::UnboundedReceiver<bridge::Feed>>,
) -> anyhow::Result<()>
where
    B: ratatui::backend::Backend,
    B::Error: Send + Sync + 'static,
    S: futures::Stream<Item = std::io::Result<Event>> + Unpin,
{
    tokio::pin!(shutdown);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut dirty = true;
    let mut snapshot_pending = false;
    let mut runtime_gone = false;
    let mut last_draw = Instant::now() - FRAME;
    // A key is drawn at once; snapshots, the mouse and the clock keep to the frame pace.
    let mut pressed = false;
    loop {
        if dirty && (pressed || last_draw.elapsed() >= FRAME) {
            if snapshot_pending {
                // Only the newest snapshot matters; intermediate ones are never shown.
                let snap = snapshots.borrow_and_update().clone();
                app.set_snapshot(snap);
                snapshot_pending = false;
            }
            app.now = now_ms();
            term.draw(|f| draw::draw(f, app))?;
            dirty = false;
            pressed = false;
            last_draw = Instant::now();
        }
        let frame_wait = FRAME.saturating_sub(last_draw.elapsed());
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(Event::Key(key))) => {
                    app.now = now_ms();
                    if let Some(action) = input::on_key(app, key) {
                        send(app, actions, action).await;
                    }
                    dirty = true;
                    pressed = true;
                }
                Some(Ok(Event::Mouse(m))) => {
                    // Paced: a moving mouse sends a stream of events.
                    input::on_mouse(app, m);
                    dirty = true;
                }
                Some(Ok(Event::Resize(..))) => dirty = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e).context("reading terminal input"),
                None => return Ok(()),
            },
            changed = snapshots.changed(), if !runtime_gone => match changed {
                Ok(()) => {
                    snapshot_pending = true;
                    dirty = true;
                }
                Err(_) => {
                    runtime_gone = true;
                    app.say("the runtime has stopped: q quits", true);
                    dirty = true;
                }
            },
            _ = tick.tick() => {
                if let app::Mode::Log { job, .. } = app.mode {
                    refresh_log(app, job);
                }
                app.now = now_ms();
                if let Some(action) = app.history_refresh() {
                    send(app, actions, action).await;
                }
                dirty = true;
            }
            n = next_notice(&mut notices) => match n {
                Some(bridge::Feed::Prediction(p)) => {
                    app.prediction = Some(*p);
                    dirty = true;
                }
                Some(bridge::Feed::Notice(n)) => {
                    app.now = now_ms();
                    app.say(n.text, n.error);
                    dirty = true;
                }
                Some(bridge::Feed::History(h)) => {
                    app.history.data = Some(h);
                    dirty = true;
                }
                None => notices = None,
            },
            _ = &mut shutdown => {
                let _ = actions.try_send(Action::Detach);
                return Ok(());
            }
            _ = tokio::time::sleep(frame_wait), if dirty => {}
        }
        if app.exit {
            return Ok(());
        }
        if let Some(ask) = input::prediction_request(app) {
            send(app, actions, ask).await;
        }
    }
}

/// The next notice, or never when there is no feed.
async fn next_notice(
    notices: &mut Option<mpsc::UnboundedReceiver<bridge::Feed>>,
) -> Option<bridge::Feed> {
    match notices {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

fn refresh_log(app: &mut App, job: crate::model::JobId) {
    let attempt = app.find_job(job).map(|j| j.attempts.max(1)).unwrap_or(1);
    if let Ok(lines) = app.logs.tail(job, attempt, input::LOG_LINES) {
        app.log_lines = lines;
    }
}

/// Send an action. Quitting waits for room in the channel; anything else is dropped with
/// a message rather than freezing the screen when the runtime is busy.
async fn send(app: &mut App, actions: &mpsc::Sender<Action>, action: Action) {
    if action.ends_console() {
        let _ = actions.send(action).await;
        return;
    }
    match actions.try_send(action) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Full(_)) => app.say("the runtime is busy: try again", true),
        Err(mpsc::error::TrySendError::Closed(_)) => app.say("the runtime has stopped", true),
    }
}
