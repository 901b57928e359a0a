//! The runtime task: the one owner of the scheduler. Each turn of its loop takes a batch
//! of inputs and due timers, runs one scheduling pass on the real clock, records the
//! decisions, carries them out through `exec`, publishes the changed picture (at most
//! every 20 ms while inputs pour in; `Input::Sync` forces one) and answers the clients.
//! See `Runtime::run`.

use super::carry::Executor;
use super::input::{CancelOutcome, ConfigUpdate, ExecKind, ExecReport, Input};
use super::timers::{Timer, Timers};
use super::turn::{Deferred, Outcome, Shutdown, Turn, Work};
use crate::config::{LoadedConfig, load_dir};
use crate::exec::telemetry::Samples;
use crate::exec::{Discovery, StateDir, now_ms};
use crate::model::{Command, JobId, JobSpec, JobState};
use crate::sched::{Event, Sched, UnitCapacity};
use crate::snapshot::{ConfigStatus, JobView, Picture, Snapshot};
use crate::store::recovery::Adopted;
use crate::store::{Observed, StateLock, Store};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How to start a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    pub state: StateDir,
    /// The config directory (re-read on `Input::Reload`).
    pub config_dir: PathBuf,
    /// The `shareq` binary that runs supervisors (`shareq __supervise`).
    pub supervisor_exe: PathBuf,
    /// The GPUs found on this machine (`Discovery::skipped()` for fake-only configs).
    pub discovery: Discovery,
}

/// A running runtime: send it inputs, watch its snapshots.
#[derive(Debug)]
pub struct RuntimeHandle {
    pub inputs: mpsc::UnboundedSender<Input>,
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    /// Set when the runtime stopped scheduling on its own because a batch of decisions
    /// could not be stored (then none of them was carried out): the reason.
    pub fatal: watch::Receiver<Option<String>>,
    task: JoinHandle<()>,
    /// The config directory watcher started by `boot::start`, stopped with the handle.
    pub(crate) watcher: Option<WatcherGuard>,
    /// The control socket's accept loop and the socket file (set by `boot::start`).
    server: Option<(JoinHandle<()>, PathBuf)>,
    /// Where accepted actions are recorded (set by `boot::start`; off in memory).
    pub audit: super::audit::Audit,
    /// The runtime's counters and histograms; its gauges read `snapshots`.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Each committed batch's decision lines (`shareq events --follow`).
    pub events: super::events::EventFeed,
    /// The metrics endpoint (set by `boot::start` with `--metrics`).
    pub(crate) metrics_server: Option<JoinHandle<()>>,
}

/// Keeps the config watcher alive.
pub(crate) struct WatcherGuard(#[allow(dead_code)] pub(crate) crate::config::Watcher);

impl std::fmt::Debug for WatcherGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

/// What a durable runtime starts from (built by `boot::start`): the store and lock it
/// keeps, the scheduler restored from the store, and what recovery decided.
pub(crate) struct Durable {
    pub lock: StateLock,
    pub store: Store,
    pub sched: Sched,
    /// The decisions of the first pass after recovery, already stored.
    pub events: Vec<Event>,
    pub adopted: Vec<Adopted>,
    pub preemptions: Vec<crate::snapshot::PreemptionRecord>,
    pub finished: Vec<JobView>,
    pub retain_days: u32,
    pub config_hash: Option<String>,
    /// The database's identity, recorded in every run file.
    pub owner: crate::exec::runfiles::Owner,
}

/// The store the runtime writes to, and what it keeps for it.
struct Persist {
    store: Store,
    _lock: StateLock,
    retain_days: u32,
    config_hash: Option<String>,
}

/// How many finished jobs `jobs --all` reads from the database.
pub const HISTORY_LISTED: usize = 10_000;

/// How often old history is pruned while running.
const PRUNE_EVERY: Duration = Duration::from_secs(24 * 3600);

impl RuntimeHandle {
    /// Start the runtime task on the current tokio runtime with an initial config.
    pub fn start(opts: RuntimeOptions, initial: LoadedConfig) -> RuntimeHandle {
        RuntimeHandle::start_with(opts, initial, None)
    }

    /// Start with a store (see `boot::start`), or in memory only (`None`).
    pub(crate) fn start_with(
        opts: RuntimeOptions,
        initial: LoadedConfig,
        durable: Option<Durable>,
    ) -> RuntimeHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let now = now_ms();
        let (capacity, warnings) = opts.discovery.capacity(&initial.config);
        for w in &warnings {
            tracing::warn!("{w}");
        }
        let (sched, durable) = match durable {
            Some(mut d) => {
                let sched =
                    std::mem::replace(&mut d.sched, Sched::new(&initial.config, &capacity, false));
                (sched, Some(d))
            }
            None => (Sched::new(&initial.config, &capacity, false), None),
        };
        let config = ConfigStatus {
            source: opts.config_dir.display().to_string(),
            applied_at: Some(now),
            hash: Some(initial.hash.clone()),
            error: None,
            error_at: None,
            effects: None,
        };
        let (snap_tx, snap_rx) = watch::channel(Arc::new(Snapshot::empty()));
        start_telemetry(&capacity, &initial, &tx);
        crate::exec::device_health::start_fake(
            &opts.state,
            devices_of(&capacity, &initial, true),
            device_lost_sink(&tx),
            {
                let tx = tx.clone();
                move || !tx.is_closed()
            },
        );
        let mut exec = Executor::new(opts.state.clone(), opts.supervisor_exe.clone(), tx.clone());
        exec.log_limits = initial.config.env.logs.unwrap_or_default();
        exec.backend = super::carry::Backend::of(&initial.config);
        let (fatal_tx, fatal_rx) = watch::channel(None);
        let metrics = Arc::new(crate::metrics::Metrics::new());
        metrics.watch(snap_rx.clone());
        let feed = super::events::EventFeed::default();
        let mut rt = Runtime {
            metrics: metrics.clone(),
            feed: feed.clone(),
            sched,
            opts,
            config,
            exec,
            samples: Samples::new(),
            picture: Picture::new(),
            timers: Timers::default(),
            snapshots: snap_tx,
            finished: VecDeque::new(),
            maybe_done: Vec::new(),
            dirty: false,
            last_publish: None,
            persist: None,
            observed: Vec::new(),
            fatal: fatal_tx,
            access: Arc::new(super::auth::Access::new(&initial.config)),
            shutdown: None,
            tokens: Default::default(),
            halted: None,
            lost_devices: Default::default(),
            forecasts: super::forecasts::Forecasts::new(None),
            predictions: Vec::new(),
            slurm_down: Default::default(),
        };
        rt.exec.slurm_watch(&mut rt.timers);
        if let Some(d) = durable {
            let (sched, exec, timers) = (&mut rt.sched, &mut rt.exec, &mut rt.timers);
            exec.owner = d.owner;
            exec.seed_preemptions(d.preemptions);
            for a in &d.adopted {
                // Its supervisor recorded itself, so the command runs (or is about to).
                if sched
                    .job(a.job)
                    .is_some_and(|j| matches!(j.state, JobState::Scheduled | JobState::Starting))
                {
                    sched.set_running_state(a.job, JobState::Running);
                    rt.observed.push(Observed::StateChanged { job: a.job });
                }
                exec.adopt(sched, timers, a.job, a.attempt, a.pid, now);
            }
            // Recovery's first pass, already stored: carry it out now.
            exec.carry_out(sched, timers, d.events, now);
            rt.maybe_done = rt
                .sched
                .jobs()
                .filter(|j| j.state.is_finished())
                .map(|j| j.id)
                .collect();
            rt.finished = d.finished.into_iter().collect();
            rt.persist = Some(Persist {
                store: d.store,
                _lock: d.lock,
                retain_days: d.retain_days,
                config_hash: d.config_hash,
            });
            rt.timers.set(Timer::Prune, PRUNE_EVERY);
            rt.forecasts = super::forecasts::Forecasts::new(Some(rt.opts.state.root().into()));
        }
        rt.timers.set(Timer::Forecast, Duration::from_millis(500));
        rt.picture.rebuild(&rt.sched);
        rt.archive_finished();
        rt.publish(now);
        let task = tokio::spawn(rt.run(rx));
        RuntimeHandle {
            inputs: tx,
            snapshots: snap_rx,
            fatal: fatal_rx,
            task,
            watcher: None,
            server: None,
            audit: super::audit::Audit::off(),
            metrics,
            events: feed,
            metrics_server: None,
        }
    }

    /// A callback that hands config updates to the runtime, in the shape the directory
    /// watcher wants: `config::Watcher::start(dir, handle.config_sink())`.
    pub fn config_sink(&self) -> Box<dyn FnMut(ConfigUpdate) + Send> {
        let tx = self.inputs.clone();
        Box::new(move |u| drop(tx.send(Input::Config(u))))
    }

    /// Serve the control socket from this runtime until shutdown.
    pub(crate) fn serve_socket(
        &mut self,
        listener: tokio::net::UnixListener,
        path: PathBuf,
        guard: super::guard::Guard,
        limits: super::conn_limits::SocketLimits,
    ) {
        let guard = guard.observing(self.events.clone(), self.metrics.clone());
        let task = tokio::spawn(super::socket::serve(
            listener,
            self.inputs.clone(),
            self.snapshots.clone(),
            guard,
            limits,
        ));
        self.server = Some((task, path));
    }

    /// Stop scheduling and wait for the runtime to end (see `Input::Shutdown`).
    pub async fn shutdown(mut self, stop_jobs: bool) {
        self.watcher = None;
        if let Some(task) = self.metrics_server.take() {
            task.abort();
        }
        if let Some((task, path)) = self.server.take() {
            task.abort();
            let _ = std::fs::remove_file(path);
        }
        let (reply, done) = oneshot::channel();
        if self
            .inputs
            .send(Input::Shutdown {
                stop_jobs,
                reply: Some(reply),
            })
            .is_ok()
        {
            let _ = done.await;
        }
        let _ = self.task.await;
    }
}

/// The devices of a config, (unit, index): the fake ones (`fake`) or the real ones.
fn devices_of(capacity: &[UnitCapacity], initial: &LoadedConfig, fake: bool) -> Vec<(String, u32)> {
    use crate::model::Devices;
    let specs = initial.config.node_units();
    capacity
        .iter()
        .filter(|c| {
            specs.iter().any(|(node, unit, d)| {
                *node == c.node && *unit == c.unit && matches!(d, Devices::Fake(_)) == fake
            })
        })
        .flat_map(|c| c.devices.iter().map(|&d| (c.unit.clone(), d)))
        .collect()
}

/// Where device health reports go: the runtime's channel, as `DeviceLost`.
fn device_lost_sink(
    tx: &mpsc::UnboundedSender<Input>,
) -> impl Fn(crate::exec::device_health::Lost) -> bool + Send + 'static {
    let tx = tx.clone();
    move |l| {
        tx.send(Input::Exec(ExecReport(ExecKind::DeviceLost {
            unit: l.unit,
            device: l.device,
            why: l.why,
        })))
        .is_ok()
    }
}

fn start_telemetry(
    capacity: &[UnitCapacity],
    initial: &LoadedConfig,
    tx: &mpsc::UnboundedSender<Input>,
) {
    let real = devices_of(capacity, initial, false);
    let lost = device_lost_sink(tx);
    let tx = tx.clone();
    let every = std::time::Duration::from_secs(3);
    if let Err(why) = crate::exec::telemetry::start(
        real,
        every,
        move |s| {
            tx.send(Input::Exec(ExecReport(ExecKind::Telemetry(s))))
                .is_ok()
        },
        lost,
    ) {
        tracing::info!("no GPU telemetry: {why}");
    }
}

struct Runtime {
    sched: Sched,
    opts: RuntimeOptions,
    config: ConfigStatus,
    exec: Executor,
    samples: Samples,
    /// The picture kept up to date change by change, published as snapshots.
    picture: Picture,
    /// Every timer of the runtime (grace periods, timeouts, probes, publish, prune).
    timers: Timers,
    snapshots: watch::Sender<Arc<Snapshot>>,
    /// Finished jobs, newest first, moved out of the scheduler so that its tables (and
    /// each snapshot) stay the size of the live work. Without a store, this is what
    /// `jobs --all` lists.
    finished: VecDeque<JobView>,
    /// Jobs that may have finished in this batch.
    maybe_done: Vec<JobId>,
    /// Something changed since the last snapshot.
    dirty: bool,
    last_publish: Option<Instant>,
    /// The store every batch is recorded in before it is carried out (`None`: memory
    /// only, as in tests of the runtime alone).
    persist: Option<Persist>,
    /// Facts fed to the scheduler since the last recorded batch.
    observed: Vec<Observed>,
    fatal: watch::Sender<Option<String>>,
    /// Who may do what under the config in force (published with each snapshot).
    access: Arc<super::auth::Access>,
    /// Set once a shutdown was asked for.
    shutdown: Option<Shutdown>,
    tokens: super::tokens::ClientTokens,
    /// Set when the state directory was deleted or replaced: stop at once.
    halted: Option<String>,
    /// GPUs telemetry found lost: never handed out again by this runtime, whatever the
    /// config says.
    lost_devices: std::collections::BTreeSet<(String, u32)>,
    /// Start estimates and predictions, run off this task.
    forecasts: super::forecasts::Forecasts,
    /// Predictions asked for in this batch: made after its pass, on the state it left.
    predictions: Vec<(JobSpec, oneshot::Sender<crate::forecast::Prediction>)>,
    /// Slurm nodes seen DOWN (their loss was reported to the core once).
    slurm_down: std::collections::HashSet<String>,
    metrics: Arc<crate::metrics::Metrics>,
    /// Where committed decision lines go.
    feed: super::events::EventFeed,
}

/// Snapshots are published at most this often while inputs pour in (a reader that must
/// see its own change asks with `Input::Sync`).
const PUBLISH_EVERY: Duration = Duration::from_millis(20);

/// The most inputs taken in one turn.
const MAX_BATCH: usize = 8192;

/// How many finished jobs the runtime remembers.
const FINISHED_KEPT: usize = 20_000;
/// How many of them each snapshot carries.
const FINISHED_IN_SNAPSHOT: usize = 200;

impl Runtime {
    /// The loop: one turn per batch of inputs and due timers.
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Input>) {
        while let Some(batch) = self.next_batch(&mut rx).await {
            let now = now_ms();
            let mut turn = Turn::default();
            for work in batch {
                self.take_in(work, now, &mut turn);
            }
            if let Some(why) = self.halted.take() {
                // Nothing of this batch is carried out or stored: another scheduler may
                // own these GPUs now (SPEC §8).
                self.fail(why, turn);
                return;
            }
            self.stop_jobs_if_shutting_down();
            let events = self.schedule(&turn, now);
            // Write-ahead: the batch's decisions (and the facts that led to them) are
            // stored in one transaction before anything is carried out or answered.
            if let Err(why) = self.record(now, &events) {
                let why = format!(
                    "cannot store the scheduler's decisions, so none was carried out and \
                     scheduling stopped: {why}"
                );
                self.fail(why, turn);
                return;
            }
            self.metrics.observe(now, &events, &self.sched);
            turn.changed |= !events.is_empty();
            self.exec
                .carry_out(&self.sched, &mut self.timers, events, now);
            for (spec, reply) in std::mem::take(&mut self.predictions) {
                self.forecasts.predict(&self.sched, spec, now, reply);
            }
            self.archive_finished();
            self.publish_if_due(&turn, now);
            turn.answer();
            if self.shutdown_complete() {
                break;
            }
        }
        self.end();
    }

    /// Wait for an input or a timer, then take whatever else is already waiting.
    async fn next_batch(&mut self, rx: &mut mpsc::UnboundedReceiver<Input>) -> Option<Vec<Work>> {
        let mut batch = Vec::new();
        tokio::select! {
            biased;
            input = rx.recv() => batch.push(Work::Input(input?)),
            () = self.timers.expired() => {}
        }
        batch.extend(self.timers.take_due().into_iter().map(Work::Timer));
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(input) => batch.push(Work::Input(input)),
                Err(_) => break,
            }
        }
        Some(batch)
    }

    fn take_in(&mut self, work: Work, now: i64, turn: &mut Turn) {
        match work {
            Work::Timer(timer) => {
                let outcome = self.on_timer(timer, now);
                turn.note(outcome);
            }
            Work::Input(Input::Sync { reply }) => turn.syncs.push(reply),
            Work::Input(Input::Shutdown { stop_jobs, reply }) => {
                let s = self.shutdown.get_or_insert(Shutdown {
                    stop_jobs,
                    replies: Vec::new(),
                });
                s.stop_jobs |= stop_jobs;
                s.replies.extend(reply);
            }
            Work::Input(Input::AllJobs { span, reply }) => self.list_all_jobs(span, reply),
            Work::Input(Input::History { window, reply }) => self.read_history(window, reply),
            Work::Input(input) => {
                let outcome = self.handle(input, now, &mut turn.deferred);
                turn.note(outcome);
            }
        }
    }

    /// Once a shutdown that stops the jobs is asked for, stop them (once).
    fn stop_jobs_if_shutting_down(&mut self) {
        if self.shutdown.as_ref().is_some_and(|s| s.stop_jobs)
            && self
                .exec
                .stop_all_once(&mut self.timers, self.sched.grace_period_seconds())
        {
            tracing::info!("stopping every running job before exit");
        }
    }

    /// Run the pass the turn needs (never once shutting down) and collect its decisions.
    fn schedule(&mut self, turn: &Turn, now: i64) -> Vec<Event> {
        if turn.needs_pass && self.shutdown.is_none() {
            let t0 = std::time::Instant::now();
            self.sched.pass(now);
            self.forecasts.busy();
            self.metrics.pass_took(t0.elapsed());
        }
        let events = self.sched.take_events();
        self.picture.touch_events(&events);
        self.arm_protection_end(now);
        self.arm_wakeup(now);
        events
    }

    /// The instants the scheduler asks for itself (a lapse's retry one second later, the
    /// moment a big job qualifies for a reservation, SPEC §3) make a pass: keep one timer
    /// at the next one. Stale ones are never asked for, since the answer is read off the
    /// state after every pass.
    fn arm_wakeup(&mut self, now: i64) {
        let at = self.sched.next_wakeup(now);
        self.arm_at(Timer::Wakeup, at, now);
    }

    /// The end of a running job's minimum runtime makes an instant with a pass (SPEC §11):
    /// keep one timer at the next such end.
    fn arm_protection_end(&mut self, now: i64) {
        let at = self.sched.next_protection_end(now);
        self.arm_at(Timer::ProtectionEnd, at, now);
    }

    /// Set `timer` to fire at instant `at` (ms), or cancel it when there is none.
    fn arm_at(&mut self, timer: Timer, at: Option<i64>, now: i64) {
        match at {
            Some(at) => {
                let after = Duration::from_millis(u64::try_from(at - now).unwrap_or(0));
                self.timers.set(timer, after);
            }
            None => self.timers.cancel(timer),
        }
    }

    /// Publish at most every PUBLISH_EVERY, and always before answering a `Sync`, so a
    /// reader that asks after its answer sees what it did.
    fn publish_if_due(&mut self, turn: &Turn, now: i64) {
        self.dirty |= turn.changed;
        if !self.dirty {
            return;
        }
        let since = self.last_publish.map(|t| t.elapsed());
        if since.is_none_or(|d| d >= PUBLISH_EVERY)
            || !turn.syncs.is_empty()
            || self.shutdown.is_some()
        {
            self.publish(now);
        } else if !self.timers.is_set(Timer::Flush) {
            let wait = PUBLISH_EVERY.saturating_sub(since.unwrap_or_default());
            self.timers.set(Timer::Flush, wait);
        }
    }

    fn shutdown_complete(&self) -> bool {
        self.shutdown
            .as_ref()
            .is_some_and(|s| !s.stop_jobs || self.exec.running_count() == 0)
    }

    /// The loop ended: tell whoever asked for the shutdown.
    fn end(self) {
        if let Some(s) = self.shutdown {
            tracing::info!(
                running = self.exec.running_count(),
                "runtime stopped; jobs still running keep running under their supervisors"
            );
            for r in s.replies {
                let _ = r.send(());
            }
        }
    }

    /// Record a batch. Nothing to do without a store or without news.
    fn record(&mut self, now: i64, events: &[Event]) -> Result<(), String> {
        let observed = std::mem::take(&mut self.observed);
        let Some(p) = &mut self.persist else {
            return Ok(());
        };
        if events.is_empty() && observed.is_empty() {
            return Ok(());
        }
        let sched = &self.sched;
        off_the_async_workers(|| p.store.record(now, &observed, events, sched))
            .map_err(|e| e.to_string())?;
        self.feed.publish(p.store.take_recorded());
        self.tokens.stored();
        Ok(())
    }

    /// A batch could not be stored: carry none of it out, refuse what waits for an
    /// answer, and stop scheduling. Jobs keep running under their supervisors; a restart
    /// recovers from what was stored.
    fn fail(&mut self, msg: String, turn: Turn) {
        tracing::error!("{msg}");
        turn.refuse(&msg);
        self.fatal.send_replace(Some(msg));
        if let Some(s) = self.shutdown.take() {
            for r in s.replies {
                let _ = r.send(());
            }
        }
    }

    /// Answer `AllJobs` off the runtime task: the live jobs from the latest snapshot,
    /// the finished ones from the database (a read-only connection) or, without a
    /// store, from memory.
    fn list_all_jobs(&self, span: super::input::Span, reply: oneshot::Sender<Vec<JobView>>) {
        let snap = self.snapshots.borrow().clone();
        let root = self
            .persist
            .as_ref()
            .map(|_| self.opts.state.root().to_path_buf());
        let kept: Vec<JobView> = match root {
            Some(_) => Vec::new(),
            None => self.finished.iter().cloned().collect(),
        };
        tokio::task::spawn_blocking(move || {
            let mut all: Vec<JobView> = snap.running.clone();
            all.extend(snap.queue_views());
            let history = root.map(|root| {
                Store::open_read_only(&root)
                    .and_then(|s| s.history_in(HISTORY_LISTED, span.since, span.until))
            });
            match history {
                Some(Ok(h)) => all.extend(h.iter().map(|r| r.view())),
                Some(Err(e)) => {
                    tracing::warn!("cannot read the history: {e}");
                    all.extend(snap.finished.iter().cloned());
                }
                None => all.extend(kept),
            }
            all.retain(|j| span.contains(j));
            let _ = reply.send(all);
        });
    }

    /// Answer `History` off the runtime task, from the database through a read-only
    /// connection (`store::usage`).
    fn read_history(
        &self,
        window: crate::store::usage::Window,
        reply: oneshot::Sender<Result<crate::store::usage::UsageHistory, String>>,
    ) {
        let Some(_) = &self.persist else {
            let _ = reply.send(Err(
                "this scheduler keeps no database, so no utilisation history".to_string(),
            ));
            return;
        };
        let db = self.opts.state.root().join(crate::store::DB_FILE);
        tokio::task::spawn_blocking(move || {
            let read = crate::store::usage::read_file(&db, window, now_ms())
                .map_err(|e| format!("cannot read the utilisation history: {e}"));
            let _ = reply.send(read);
        });
    }

    /// Move jobs that finished out of the scheduler into `finished`.
    fn archive_finished(&mut self) {
        let mut archived = false;
        for id in std::mem::take(&mut self.maybe_done) {
            if self.sched.job(id).is_some_and(|j| j.state.is_finished())
                && let Some(view) = Snapshot::job(&self.sched, id)
            {
                self.finished.push_front(view);
                self.sched.forget(id);
                self.picture.touch(id);
                archived = true;
            }
        }
        if archived || self.picture.version() == 0 {
            self.finished.truncate(FINISHED_KEPT);
            let shown = self.finished.iter().take(FINISHED_IN_SNAPSHOT).cloned();
            self.picture.set_finished(Arc::new(shown.collect()));
        }
    }

    /// Publish the picture with the jobs touched since the last one (O(changes)).
    fn publish(&mut self, now: i64) {
        self.dirty = false;
        self.last_publish = Some(Instant::now());
        self.timers.cancel(Timer::Flush);
        if let Some(log) = self.exec.take_preemption_log() {
            self.picture.set_preemptions(log);
        }
        let mut snap = self
            .picture
            .publish(&self.sched, now, self.config.clone(), &self.samples);
        snap.access = self.access.clone();
        self.snapshots.send_replace(Arc::new(snap));
    }

    /// A timer fired.
    fn on_timer(&mut self, timer: Timer, now: i64) -> Outcome {
        match timer {
            Timer::Grace { job, attempt } => {
                self.exec.kill_if_current(job, attempt);
                Outcome::Nothing
            }
            Timer::Timeout { job, attempt } => {
                if !self.exec.is_current(job, attempt) {
                    return Outcome::Nothing;
                }
                tracing::info!(job = %job, "timeout");
                self.sched.timeout(job, now);
                self.picture.touch(job);
                Outcome::Reschedule
            }
            Timer::Probe { job, attempt } => {
                if self.exec.is_current(job, attempt) {
                    self.exec.probe(job, attempt);
                }
                Outcome::Nothing
            }
            // The turn publishes what the rate limit held back.
            Timer::Flush => Outcome::Nothing,
            Timer::ProtectionEnd | Timer::Wakeup => Outcome::Reschedule,
            Timer::Forecast => {
                let tx = self.exec.inputs();
                self.forecasts
                    .start_estimate(&self.sched, now, &self.finished, &tx);
                self.timers
                    .set(Timer::Forecast, self.forecasts.next_after());
                Outcome::Nothing
            }
            Timer::SlurmPoll => {
                self.exec.slurm_look();
                Outcome::Nothing
            }
            Timer::Prune => {
                self.timers.set(Timer::Prune, PRUNE_EVERY);
                if let Some(p) = &mut self.persist {
                    let days = p.retain_days;
                    match off_the_async_workers(|| p.store.prune_jobs(days, now)) {
                        Ok(ids) => {
                            tracing::info!(jobs = ids.len(), days, "history pruned");
                            let state = self.opts.state.clone();
                            tokio::task::spawn_blocking(move || {
                                crate::exec::runfiles::remove_jobs(&state, &ids)
                            });
                        }
                        Err(e) => tracing::warn!("cannot prune the history: {e}"),
                    }
                }
                Outcome::Nothing
            }
        }
    }

    /// Apply one input.
    fn handle(&mut self, input: Input, now: i64, deferred: &mut Vec<Deferred>) -> Outcome {
        match input {
            Input::Submit { spec, reply } => {
                let result = self.submit(spec, now);
                tracing::info!(?result, "submit");
                if let Ok(id) = result {
                    self.picture.touch(id);
                }
                if let Some(tx) = reply {
                    deferred.push(Deferred::Submit(tx, result));
                }
                Outcome::Reschedule
            }
            Input::Cancel { ids, by, reply } => {
                let outcomes: Vec<CancelOutcome> = ids
                    .into_iter()
                    .map(|id| self.cancel(id, &by, now))
                    .collect();
                if let Some(tx) = reply {
                    deferred.push(Deferred::Cancel(tx, outcomes));
                }
                Outcome::Reschedule
            }
            Input::SetPriority {
                id,
                priority,
                reply,
            } => {
                let r = if self.sched.job(id).is_none() && self.existed(id) {
                    Ok(false)
                } else {
                    self.sched.set_priority(id, priority, now)
                };
                tracing::info!(job = %id, priority, ?r, "priority");
                self.picture.touch(id);
                if let Some(tx) = reply {
                    deferred.push(Deferred::Priority(tx, r));
                }
                Outcome::Reschedule
            }
            Input::Config(update) => {
                self.apply_config(update, now);
                Outcome::Reschedule
            }
            Input::Reload { reply } => {
                // Reading and validating the directory can take long (a huge or odd file):
                // never on this task. The result comes back as `Reloaded`.
                let (dir, tx) = (self.opts.config_dir.clone(), self.exec.inputs());
                tokio::spawn(async move {
                    let loaded = tokio::task::spawn_blocking(move || load_dir(&dir).map(Box::new))
                        .await
                        .unwrap_or_else(|e| {
                            Err(vec![crate::config::ConfigError::new(format!(
                                "reading the config failed: {e}"
                            ))])
                        });
                    let report = ExecKind::Reloaded { loaded, reply };
                    let _ = tx.send(Input::Exec(ExecReport(report)));
                });
                Outcome::Nothing
            }
            Input::Exec(ExecReport(ExecKind::StateLost(why))) => {
                self.halted = Some(why);
                Outcome::Nothing
            }
            Input::Exec(ExecReport(ExecKind::Reloaded { loaded, reply })) => {
                // A config this build cannot carry out is refused like an invalid one.
                let loaded = loaded.and_then(|l| match self.executor_refusal(&l) {
                    Some(e) => Err(vec![e]),
                    None => Ok(l),
                });
                let result = match loaded {
                    Ok(loaded) => {
                        self.apply_config(ConfigUpdate::Applied(loaded), now);
                        Ok(())
                    }
                    Err(errors) => {
                        let text = errors_text(&errors);
                        self.apply_config(ConfigUpdate::Rejected(errors), now);
                        Err(text)
                    }
                };
                if let Some(tx) = reply {
                    deferred.push(Deferred::Reload(tx, result));
                }
                Outcome::Reschedule
            }
            Input::Exec(ExecReport(kind)) => self.exec_report(kind, now),
            Input::Predict { spec, reply } => {
                self.predictions.push((spec, reply));
                Outcome::Nothing
            }
            Input::AllJobs { .. }
            | Input::History { .. }
            | Input::Shutdown { .. }
            | Input::Sync { .. } => Outcome::Nothing,
        }
    }

    fn cancel(&mut self, id: JobId, by: &str, now: i64) -> CancelOutcome {
        if self.sched.job(id).is_none() {
            // Finished and archived: nothing to do; never handed out: an error.
            let error = (!self.existed(id)).then(|| format!("no job {id}"));
            return CancelOutcome {
                id,
                cancelled: false,
                error,
            };
        }
        let cancelled = self.sched.cancel(id, by, now);
        self.maybe_done.push(id);
        self.picture.touch(id);
        tracing::info!(job = %id, by = %by, cancelled, "cancel");
        CancelOutcome {
            id,
            cancelled,
            error: None,
        }
    }

    /// Was this id ever handed out? (Finished jobs leave the scheduler's tables.)
    fn existed(&self, id: JobId) -> bool {
        id.0 >= 1 && id < self.sched.next_job_id()
    }

    fn submit(&mut self, spec: JobSpec, now: i64) -> Result<JobId, String> {
        match &spec.command {
            None => return Err("command is required".to_string()),
            Some(Command::Argv(v)) if v.is_empty() => {
                return Err("command is empty".to_string());
            }
            Some(Command::Shell(s)) if s.trim().is_empty() => {
                return Err("command is empty".to_string());
            }
            _ => {}
        }
        if let Some(dir) = &spec.working_directory
            && !std::path::Path::new(dir).is_dir()
        {
            return Err(format!("workingDirectory `{dir}` is not a directory"));
        }
        let token = spec.client_token.clone();
        if let Some(t) = &token {
            super::tokens::ClientTokens::check(t)?;
            if let Some(id) = self
                .tokens
                .lookup(t, self.persist.as_ref().map(|p| &p.store))
            {
                tracing::info!(job = %id, "submit retried with the same client token");
                return Ok(id);
            }
        }
        let id = self.sched.submit(spec, now).map_err(|r| r.0)?;
        if let Some(t) = token {
            self.tokens.remember(t, id);
        }
        Ok(id)
    }

    /// Why a new config cannot be applied by this running scheduler: an executor it
    /// cannot carry out, or a different executor than the one it started with.
    fn executor_refusal(&self, loaded: &LoadedConfig) -> Option<crate::config::ConfigError> {
        if let Some(e) = super::boot::executor_unavailable(loaded) {
            return Some(e);
        }
        (super::carry::Backend::of(&loaded.config) != self.exec.backend).then(|| {
            crate::config::ConfigError::new(
                "executor: changing the executor (or its partition) takes a restart of `shareq serve`; the running one stays",
            )
            .field("executor")
        })
    }

    fn apply_config(&mut self, update: ConfigUpdate, now: i64) {
        let update = match update {
            ConfigUpdate::Applied(loaded) => match self.executor_refusal(&loaded) {
                Some(e) => ConfigUpdate::Rejected(vec![e]),
                None => ConfigUpdate::Applied(loaded),
            },
            other => other,
        };
        match update {
            ConfigUpdate::Applied(loaded) => {
                let (mut capacity, warnings) = self.opts.discovery.capacity(&loaded.config);
                for w in &warnings {
                    tracing::warn!("{w}");
                }
                for c in &mut capacity {
                    c.devices
                        .retain(|d| !self.lost_devices.contains(&(c.unit.clone(), *d)));
                }
                // What the change does to the jobs, worked out on a copy of the state before
                // it, off this task (the console shows it with the config's status).
                let before = self.sched.clone();
                self.sched.apply_config(&loaded.config, &capacity, now);
                self.config.effects = None;
                super::forecasts::config_effects(
                    before,
                    &loaded,
                    capacity.clone(),
                    now,
                    &self.exec.inputs(),
                );
                self.exec.log_limits = loaded.config.env.logs.unwrap_or_default();
                self.access = Arc::new(super::auth::Access::new(&loaded.config));
                self.picture.touch_all();
                if let Some(p) = &mut self.persist {
                    p.retain_days = retain_days(&loaded);
                    if p.config_hash.as_deref() != Some(loaded.hash.as_str()) {
                        let source = self.opts.config_dir.display().to_string();
                        let recorded = off_the_async_workers(|| {
                            p.store.record_config(&loaded.hash, &source, now)
                        });
                        match recorded {
                            Ok(()) => p.config_hash = Some(loaded.hash.clone()),
                            Err(e) => tracing::warn!("cannot record the applied config: {e}"),
                        }
                    }
                }
                self.config.applied_at = Some(now);
                self.config.hash = Some(loaded.hash);
                self.config.error = None;
                self.config.error_at = None;
                tracing::info!("config applied");
            }
            ConfigUpdate::Rejected(errors) => {
                let text = errors_text(&errors);
                tracing::warn!("config rejected, the previous one stays in force: {text}");
                self.sched.config_rejected(text.clone(), now);
                self.config.error = Some(text);
                self.config.error_at = Some(now);
            }
        }
    }

    fn exec_report(&mut self, kind: ExecKind, now: i64) -> Outcome {
        match kind {
            ExecKind::Spawned { job, attempt, pid } => {
                self.exec.spawned(job, attempt, pid);
                let starting = self
                    .sched
                    .job(job)
                    .is_some_and(|j| j.state == JobState::Scheduled);
                if starting && self.exec.is_current(job, attempt) {
                    // SCHEDULED → STARTING: the supervisor exists, the command not yet.
                    self.set_state(job, JobState::Starting);
                    return Outcome::Redraw;
                }
                Outcome::Nothing
            }
            ExecKind::SlurmSubmitted { job, attempt, id } => {
                let starting = self
                    .sched
                    .job(job)
                    .is_some_and(|j| j.state == JobState::Scheduled);
                if self.exec.slurm_submitted(job, attempt, id) && starting {
                    // Slurm has the batch job; the supervisor has not reported in yet.
                    self.set_state(job, JobState::Starting);
                    return Outcome::Redraw;
                }
                Outcome::Nothing
            }
            ExecKind::SlurmView(view) => {
                let r = self.exec.slurm_reconcile(*view, &self.slurm_down);
                self.exec.slurm_watch(&mut self.timers);
                let mut outcome = Outcome::Nothing;
                for (job, attempt) in r.running {
                    if self.exec.is_current(job, attempt) {
                        self.set_state(job, JobState::Running);
                        outcome = Outcome::Redraw;
                    }
                }
                for node in r.nodes_down {
                    tracing::error!(node = %node, "Slurm says the node is down: its jobs are preempted (DEVICE_LOST) and their GPUs count as released (nothing of them can come back)");
                    self.sched.node_lost(&node, now);
                    let on_it: Vec<(JobId, u32)> = self
                        .sched
                        .jobs()
                        .filter(|j| j.is_holding())
                        .filter(|j| {
                            j.node().map(|n| self.sched.node_name(n)) == Some(node.as_str())
                        })
                        .map(|j| (j.id, j.attempts_started))
                        .collect();
                    for (job, attempt) in on_it {
                        self.attempt_ended(job, attempt, 255, now);
                    }
                    self.slurm_down.insert(node);
                    self.picture.touch_all();
                    outcome = Outcome::Reschedule;
                }
                for (node, drained) in r.drained {
                    if self.sched.is_drained(&node) != drained {
                        tracing::warn!(node = %node, drained, "Slurm says the node is {}", if drained { "drained: it takes no new jobs, its running jobs go on" } else { "back in service" });
                        self.sched.node_drained(&node, drained, now);
                        self.picture.touch_all();
                        outcome = Outcome::Reschedule;
                    }
                }
                for (job, attempt, code) in r.ended {
                    match self.attempt_ended(job, attempt, code, now) {
                        Outcome::Reschedule => outcome = Outcome::Reschedule,
                        Outcome::Nothing => {}
                        other if matches!(outcome, Outcome::Nothing) => outcome = other,
                        _ => {}
                    }
                }
                outcome
            }
            ExecKind::Running { job, attempt } => {
                if self.exec.is_current(job, attempt) {
                    self.set_state(job, JobState::Running);
                    return Outcome::Redraw;
                }
                Outcome::Nothing
            }
            ExecKind::Exited {
                job,
                attempt,
                status,
            } => self.attempt_ended(job, attempt, status.code, now),
            ExecKind::Probed { job, attempt, exit } => match exit {
                None => {
                    self.exec.probe_later(&mut self.timers, job, attempt);
                    Outcome::Nothing
                }
                Some(status) => self.attempt_ended(job, attempt, status.code, now),
            },
            ExecKind::Telemetry(samples) => {
                let changed = samples != self.samples;
                self.samples = samples;
                if changed {
                    Outcome::Redraw
                } else {
                    Outcome::Nothing
                }
            }
            ExecKind::DeviceLost { unit, device, why } => {
                if !self.lost_devices.insert((unit.clone(), device)) {
                    return Outcome::Nothing;
                }
                tracing::error!(unit = %unit, device, "GPU lost ({why}): its jobs are preempted (DEVICE_LOST) and it is no longer handed out");
                self.sched.device_lost(None, &unit, device, now);
                self.picture.touch_all();
                Outcome::Reschedule
            }
            ExecKind::ConfigEffects { hash, dry_run } => {
                if self.config.hash.as_deref() != Some(hash.as_str()) {
                    return Outcome::Nothing;
                }
                if !dry_run.is_empty() {
                    tracing::info!("the config applied at {}:\n{}", now, dry_run.text());
                }
                self.config.effects = Some(dry_run.summary());
                Outcome::Redraw
            }
            ExecKind::Estimated {
                estimates,
                runtimes,
            } => {
                self.forecasts.estimated(&estimates, runtimes);
                self.picture.set_estimates(estimates);
                Outcome::Redraw
            }
            // Handled in `handle`.
            ExecKind::Reloaded { .. } | ExecKind::StateLost(_) => Outcome::Nothing,
        }
    }

    fn set_state(&mut self, job: JobId, state: JobState) {
        self.sched.set_running_state(job, state);
        self.observed.push(Observed::StateChanged { job });
        self.picture.touch(job);
    }

    /// An attempt's supervisor ended with `code`.
    fn attempt_ended(&mut self, job: JobId, attempt: u32, code: i32, now: i64) -> Outcome {
        if !self.exec.finished(&mut self.timers, job, attempt) {
            return Outcome::Nothing;
        }
        let stopping = self.sched.job(job).is_some_and(|j| j.is_stopping());
        tracing::info!(job = %job, attempt, code, stopping, "attempt ended");
        self.maybe_done.push(job);
        self.picture.touch(job);
        let fact = if stopping {
            Observed::Released {
                job,
                code: Some(code),
            }
        } else {
            Observed::Exited { job, code }
        };
        fact.apply(&mut self.sched, now);
        self.observed.push(fact);
        Outcome::Reschedule
    }
}

/// Run blocking work (SQLite) without holding up the other tasks: on a multi-threaded
/// runtime the worker hands its other tasks over first; on a single-threaded one (tests)
/// it just runs.
fn off_the_async_workers<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// `history.retainDays` of a config (default 30).
pub(crate) fn retain_days(loaded: &LoadedConfig) -> u32 {
    loaded
        .config
        .env
        .history
        .as_ref()
        .map_or(crate::store::DEFAULT_RETAIN_DAYS, |h| h.retain_days)
}

fn errors_text(errors: &[crate::config::ConfigError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}
