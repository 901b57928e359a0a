//! The runtime task: the one owner of the scheduler. Each turn of its loop takes a batch
//! of inputs and due timers, runs one scheduling pass on the real clock, records the
//! decisions, carries them out through `exec::backend` (`carry`), publishes the changed
//! picture (at most every 20 ms while inputs pour in; `Input::Sync` forces one) and
//! answers the clients. See `Runtime::run`; `apply` takes the inputs that change the
//! scheduler, `reports` what comes back (timers, the executor's reports). The room also
//! holds the work that runs beside the task: forecasts, the event feed, the audit writer,
//! the utilisation sampler, the state-directory watch and the free-space reading.

mod apply;
pub mod audit;
pub(crate) mod carry;
mod checkpoints;
pub mod config_write;
pub mod events;
pub(crate) mod forecasts;
mod free_space;
pub mod input;
mod log_budget;
pub mod refusal;
mod reports;
pub(crate) mod state_watch;
pub(crate) mod timers;
pub(crate) mod tokens;
pub(crate) mod turn;
pub mod usage;

use self::carry::Carry;
use self::input::{CancelOutcome, ExecKind, ExecReport, Input};
use self::refusal::Refusal;
use self::timers::{Timer, Timers};
use self::turn::{Deferred, Outcome, Shutdown, Turn, Work};
use crate::config::{ConfigUpdate, LoadedConfig};
use crate::exec::backend::{Backend, Context, Report};
use crate::exec::gpu::telemetry::Samples;
use crate::exec::{Discovery, StateDir, now_ms};
use crate::model::{JobId, JobSpec, JobState, UnitCapacity};
use crate::sched::{Clock, Event, Sched};
use crate::snapshot::{ConfigStatus, JobView, Picture, Snapshot};
use crate::store::recovery::Adopted;
use crate::store::{Observed, StateLock, Store};
use std::collections::{HashMap, VecDeque};
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
    pub audit: self::audit::Audit,
    /// The runtime's counters and histograms; its gauges read `snapshots`.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Each committed batch's decision lines (`shareq events --follow`).
    pub events: self::events::EventFeed,
    /// The metrics endpoint (set by `boot::start` with `--metrics`).
    pub(crate) metrics_server: Option<JoinHandle<()>>,
}

/// Builds the backend a runtime runs on, from what every backend is built from.
pub(crate) type BackendMaker<'a> = Box<dyn FnOnce(Context) -> Box<dyn Backend> + 'a>;

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
    pub owner: crate::exec::state::runfiles::Owner,
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
        RuntimeHandle::start_with(opts, initial, None, None)
    }

    /// Start in memory only, carrying attempts out through the backend `backend` builds
    /// (`exec::scripted::Script::backend` in tests) instead of the config's executor.
    pub fn start_on(
        opts: RuntimeOptions,
        initial: LoadedConfig,
        backend: impl FnOnce(Context) -> Box<dyn Backend>,
    ) -> RuntimeHandle {
        RuntimeHandle::start_with(opts, initial, None, Some(Box::new(backend)))
    }

    /// Start with a store (see `boot::start`), or in memory only (`None`); on the
    /// config's executor unless `backend` builds another.
    pub(crate) fn start_with(
        opts: RuntimeOptions,
        initial: LoadedConfig,
        durable: Option<Durable>,
        backend: Option<BackendMaker<'_>>,
    ) -> RuntimeHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let now = now_ms();
        let (capacity, warnings) = opts.discovery.capacity(&initial.config);
        for w in &warnings {
            tracing::warn!("{w}");
        }
        let (sched, durable) = match durable {
            Some(mut d) => {
                let sched = std::mem::replace(
                    &mut d.sched,
                    Sched::new(&initial.config, &capacity, Clock::Wall),
                );
                (sched, Some(d))
            }
            None => (Sched::new(&initial.config, &capacity, Clock::Wall), None),
        };
        let mut sched = sched;
        // Reasons that name a time of day read as the operator's clock.
        sched.set_utc_offset(chrono::Local::now().offset().local_minus_utc());
        let config = ConfigStatus {
            source: opts.config_dir.display().to_string(),
            applied_at: Some(now),
            hash: Some(initial.hash.clone()),
            error: None,
            error_at: None,
            effects: None,
        };
        let (snap_tx, snap_rx) = watch::channel(Arc::new(Snapshot::empty()));
        start_gpu_watch(&opts.state, &capacity, &initial, &tx);
        let fake_devices = devices_of(&capacity, &initial, true).into_iter().collect();
        let owner = durable
            .as_ref()
            .map_or_else(Carry::memory_owner, |d| d.owner.clone());
        let executor = initial.config.executor();
        let ctx = Context {
            state: opts.state.clone(),
            exe: opts.supervisor_exe.clone(),
            owner: owner.clone(),
            reports: attempt_reports(&tx),
        };
        let backend = match backend {
            Some(make) => make(ctx),
            None => crate::exec::choice::choose(&executor, ctx),
        };
        let mut exec = Carry::new(opts.state.clone(), owner, backend);
        let opts_state = opts.state.clone();
        exec.log_limits = initial.config.env.logs.unwrap_or_default();
        exec.pids_per_job = initial.config.env.limits.unwrap_or_default().pids_per_job;
        exec.mig = opts.discovery.mig_units(&initial.config);
        let (fatal_tx, fatal_rx) = watch::channel(None);
        let metrics = Arc::new(crate::metrics::Metrics::new());
        metrics.watch(snap_rx.clone());
        let user_labels = initial.config.env.metrics.as_ref();
        metrics.show_user_labels(user_labels.is_some_and(|m| m.user_labels));
        let feed = self::events::EventFeed::default();
        let mut rt = Runtime {
            metrics: metrics.clone(),
            feed: feed.clone(),
            paused: None,
            sched,
            opts,
            config,
            exec,
            executor,
            inputs: tx.clone(),
            samples: Samples::new(),
            overuse: crate::exec::gpu::overuse::Watch::new(),
            picture: Picture::new(),
            timers: Timers::default(),
            snapshots: snap_tx,
            finished: VecDeque::new(),
            maybe_done: Vec::new(),
            ended_starts: HashMap::new(),
            dirty: false,
            last_publish: None,
            persist: None,
            observed: Vec::new(),
            labels_due: false,
            fatal: fatal_tx,
            access: Arc::new(crate::access::Access::new(&initial.config)),
            shutdown: None,
            tokens: Default::default(),
            halted: None,
            lost_devices: Default::default(),
            fake_devices,
            config_refusals: None,
            refused_config: None,
            forecasts: self::forecasts::Forecasts::new(None),
            predictions: Vec::new(),
            per_user: HashMap::new(),
            data_per_user: HashMap::new(),
            user_names: HashMap::new(),
            free_space: self::free_space::FreeSpace::watch(opts_state),
        };
        rt.exec.watch(&mut rt.timers);
        if let Some(d) = durable {
            rt.resume(d, now);
        }
        rt.timers.set(Timer::Forecast, Duration::from_millis(500));
        // Every job the scheduler holds counts for its user until it is archived.
        for j in rt.sched.jobs().filter(|j| !j.is_parent()) {
            if let Some(s) = &j.spec.submitter {
                *rt.per_user.entry(s.uid).or_default() += 1;
                rt.exec.log_budget.owner(j.id, s.uid, &s.name);
            }
        }
        // The logs of the finished jobs it lists count for their users too.
        for j in &rt.finished {
            if let Some(s) = &j.submitter {
                rt.exec.log_budget.owner(j.id, s.uid, &s.name);
            }
        }
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
            audit: self::audit::Audit::off(),
            metrics,
            events: feed,
            metrics_server: None,
        }
    }

    /// The config watcher runs: an explicit reload's refusal is told to it.
    pub fn watching(&self, refusals: crate::config::Refusals) {
        let _ = self.inputs.send(Input::Watching(refusals));
    }

    /// A callback that hands config updates to the runtime, in the shape the directory
    /// watcher wants: `config::Watcher::start(dir, handle.config_sink())`.
    pub fn config_sink(&self) -> Box<dyn FnMut(ConfigUpdate) + Send> {
        let tx = self.inputs.clone();
        Box::new(move |u| drop(tx.send(Input::Config(u))))
    }

    /// The control socket's accept loop serving this runtime, and the socket file:
    /// stopped and removed with the handle.
    pub(crate) fn attach_server(&mut self, task: JoinHandle<()>, path: PathBuf) {
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
                *node == c.node
                    && *unit == c.unit
                    && match d {
                        Devices::Fake(_) | Devices::Mig { fake: Some(_), .. } => fake,
                        Devices::Indices(_) | Devices::Auto => !fake,
                        // A MIG unit's devices are its instances, not GPU indices: the
                        // telemetry of whole GPUs does not watch them.
                        Devices::Mig { fake: None, .. } => false,
                    }
            })
        })
        .flat_map(|c| c.devices.iter().map(|&d| (c.unit.clone(), d)))
        .collect()
}

/// A MIG unit's devices and running jobs, as instances (SPEC §15): each device says
/// which instance it is (`MIG 1g.10gb of GPU 4`), each running job its UUIDs.
fn label_mig(mig: &crate::exec::gpu::mig::MigUnits, snap: &mut crate::snapshot::Snapshot) {
    if mig.0.is_empty() {
        return;
    }
    for u in &mut snap.units {
        u.unusable = mig.1.get(&u.name).cloned();
        let Some(all) = mig.0.get(&u.name) else {
            continue;
        };
        for d in &mut u.devices {
            d.mig = all.get(d.index as usize).map(|m| crate::snapshot::MigView {
                profile: m.profile.clone(),
                parent: m.parent,
                uuid: m.uuid.clone(),
            });
        }
    }
    for j in &mut snap.running {
        if let Some(inst) = mig.instances(&j.unit, &j.devices) {
            j.uuids = inst.into_iter().map(|m| m.uuid.clone()).collect();
        }
    }
}

/// Where the executor's reports go: the runtime's channel, as `Attempt`.
fn attempt_reports(tx: &mpsc::UnboundedSender<Input>) -> crate::exec::backend::Reports {
    let tx = tx.clone();
    crate::exec::backend::Reports::new(move |r| {
        tx.send(Input::Exec(ExecReport(ExecKind::Attempt(r))))
            .is_ok()
    })
}

/// Where device health reports go: the runtime's channel, as `DeviceLost`.
fn device_lost_sink(
    tx: &mpsc::UnboundedSender<Input>,
) -> impl Fn(crate::exec::gpu::health::Lost) -> bool + Send + 'static {
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

/// Watch the GPUs: NVML telemetry where it answers, and the fake GPUs made to fail on
/// purpose (`exec::gpu::health`); both stop when the runtime's inputs close.
fn start_gpu_watch(
    state: &StateDir,
    capacity: &[UnitCapacity],
    initial: &LoadedConfig,
    tx: &mpsc::UnboundedSender<Input>,
) {
    start_telemetry(capacity, initial, tx);
    crate::exec::gpu::health::start_fake(
        state,
        devices_of(capacity, initial, true),
        device_lost_sink(tx),
        {
            let tx = tx.clone();
            move || !tx.is_closed()
        },
    );
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
    if let Err(why) = crate::exec::gpu::telemetry::start(
        real,
        every,
        move |s, p| {
            tx.send(Input::Exec(ExecReport(ExecKind::Telemetry(s))))
                .is_ok()
                && tx
                    .send(Input::Exec(ExecReport(ExecKind::GpuProcesses(p))))
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
    exec: Carry,
    /// The executor this runtime started with (a change takes a restart).
    executor: crate::model::Executor,
    /// The runtime's own input channel (for work done off its task).
    inputs: mpsc::UnboundedSender<Input>,
    samples: Samples,
    /// Sliced jobs over their GiB, two samples in a row (SPEC §15).
    overuse: crate::exec::gpu::overuse::Watch<JobId>,
    /// The picture kept up to date change by change, published as snapshots.
    picture: Picture,
    /// Every timer of the runtime (grace periods, timeouts, probes, publish, prune).
    timers: Timers,
    snapshots: watch::Sender<Arc<Snapshot>>,
    /// Finished jobs, newest first, moved out of the scheduler so that its tables (and
    /// each snapshot) stay the size of the live work. Without a store, this is what
    /// `jobs --all` lists.
    finished: VecDeque<Arc<JobView>>,
    /// Jobs that may have finished in this batch.
    maybe_done: Vec<JobId>,
    /// When each job's latest ended attempt started: kept for its view once it is
    /// archived (the core forgets an attempt's start when it ends; `job` and the console
    /// show it, as the history does).
    ended_starts: HashMap<JobId, i64>,
    /// Something changed since the last snapshot.
    dirty: bool,
    last_publish: Option<Instant>,
    /// The store every batch is recorded in before it is carried out (`None`: memory
    /// only, as in tests of the runtime alone).
    persist: Option<Persist>,
    /// Facts fed to the scheduler since the last recorded batch.
    observed: Vec<Observed>,
    /// The state labels held back are due to be stored (`Timer::Labels` fired).
    labels_due: bool,
    fatal: watch::Sender<Option<String>>,
    /// Who may do what under the config in force (published with each snapshot).
    access: Arc<crate::access::Access>,
    /// Set once a shutdown was asked for.
    shutdown: Option<Shutdown>,
    tokens: self::tokens::ClientTokens,
    /// Set when the state directory was deleted or replaced: stop at once.
    halted: Option<String>,
    /// GPUs telemetry found lost: never handed out again by this runtime, whatever the
    /// config says.
    /// GPUs lost while running, with when (ms): never handed out again until restart.
    lost_devices: std::collections::BTreeMap<(String, u32), i64>,
    /// The config's fake GPUs, (unit, index): marked so in the picture (no telemetry to
    /// show: the console says what they are rather than `n/a`).
    fake_devices: std::collections::HashSet<(String, u32)>,
    /// Where a directory an explicit reload refused is told to the config watcher.
    config_refusals: Option<crate::config::Refusals>,
    /// The content hash of the directory an explicit reload refused, while that refusal
    /// is what the status reports (told to the watcher once it runs).
    refused_config: Option<String>,
    /// Start estimates and predictions, run off this task.
    forecasts: self::forecasts::Forecasts,
    /// Predictions asked for in this batch: made after its pass, on the state it left.
    predictions: Vec<(JobSpec, oneshot::Sender<crate::forecast::Prediction>)>,
    metrics: Arc<crate::metrics::Metrics>,
    /// Where committed decision lines go.
    feed: self::events::EventFeed,
    /// Set while a batch's decisions cannot be written (SPEC §8).
    paused: Option<Paused>,
    /// Bytes of job data (commands and envs) in the database per submitter uid
    /// (`limits.maxDataMiBPerUser`): read at start and after each prune, added to by
    /// each submit.
    data_per_user: HashMap<u32, u64>,
    /// Submitters' names by uid, for the users `status` names when space is short.
    user_names: HashMap<u32, String>,
    /// Jobs not yet ended per submitter uid (`limits.maxQueuedJobsPerUser`, SPEC §9).
    per_user: HashMap<u32, u64>,
    /// The state filesystem's free bytes, read off this task (the reserve of submits).
    free_space: self::free_space::FreeSpace,
}

/// After a commit, the database's own room on the state filesystem (SPEC §8): short of
/// space (below the reserve and a ballast), the write-ahead log is folded in and truncated
/// (it would keep its size); with room for it again, the ballast given up is made whole.
fn keep_room(store: &crate::store::Store, free: u64, reserve: u64) {
    if free < reserve.saturating_add(store.ballast_bytes().saturating_mul(2)) {
        store.shrink_log();
    }
    store.restore_ballast_if(|size| free >= reserve.saturating_add(size.saturating_mul(2)));
}

/// A batch whose decisions could not be stored, held with what came after it.
struct Paused {
    /// What the console and `status` say.
    why: String,
    now: i64,
    events: Vec<Event>,
    turn: Turn,
    /// Inputs and timers taken in while paused, in order: taken in once it resumes.
    backlog: Vec<Work>,
}

/// What a turn leaves the runtime's loop to do.
enum Next {
    Go,
    /// The shutdown is complete.
    Done,
    /// The state directory is gone: stop at once.
    Halted,
}

/// How often a paused scheduler tries its write again.
const PAUSED_RETRY: Duration = Duration::from_secs(1);

/// How long a paused scheduler's retry waits for another connection's lock (the runtime
/// answers nobody meanwhile).
const PAUSED_LOCK_WAIT: Duration = Duration::from_millis(100);

/// Snapshots are published at most this often while inputs pour in (a reader that must
/// see its own change asks with `Input::Sync`).
const PUBLISH_EVERY: Duration = Duration::from_millis(20);

/// The most inputs taken in one turn.
const MAX_BATCH: usize = 8192;

/// How many finished jobs the runtime remembers.
const FINISHED_KEPT: usize = 20_000;
/// How many of them each snapshot carries.
const FINISHED_IN_SNAPSHOT: usize = 200;

/// A cancel while paused: no id is cancelled, each says why.
fn paused_cancels(ids: Vec<JobId>, why: &str) -> Vec<CancelOutcome> {
    ids.into_iter()
        .map(|id| CancelOutcome {
            id,
            cancelled: false,
            error: Some(why.to_string()),
        })
        .collect()
}

impl Runtime {
    /// Take over what recovery made of the store (see `boot::start`): the preemption log,
    /// the adopted attempts, recovery's first pass (already stored: carried out now), the
    /// finished jobs, and the store itself.
    fn resume(&mut self, d: Durable, now: i64) {
        let (sched, exec, timers) = (&mut self.sched, &mut self.exec, &mut self.timers);
        exec.seed_preemptions(d.preemptions);
        for a in &d.adopted {
            // Its supervisor recorded itself, so the command runs (or is about to).
            if sched
                .job(a.job)
                .is_some_and(|j| matches!(j.state, JobState::Scheduled | JobState::Starting))
            {
                sched.set_running_state(a.job, JobState::Running);
                self.observed.push(Observed::StateChanged { job: a.job });
            }
            exec.adopt(sched, timers, a.job, a.attempt, a.pid, now);
        }
        // Recovery's first pass, already stored: carry it out now.
        exec.carry_out(sched, timers, d.events, now);
        self.maybe_done = self
            .sched
            .jobs()
            .filter(|j| j.state.is_finished())
            .map(|j| j.id)
            .collect();
        self.finished = d.finished.into_iter().map(Arc::new).collect();
        match d.store.data_by_user() {
            Ok(rows) => self.set_data_per_user(rows),
            Err(e) => tracing::warn!("cannot sum the users' job data: {e}"),
        }
        self.persist = Some(Persist {
            store: d.store,
            _lock: d.lock,
            retain_days: d.retain_days,
            config_hash: d.config_hash,
        });
        self.timers.set(Timer::Prune, PRUNE_EVERY);
        self.forecasts = self::forecasts::Forecasts::new(Some(self.opts.state.root().into()));
    }

    /// The loop: one turn per batch of inputs and due timers.
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Input>) {
        while let Some(batch) = self.next_batch(&mut rx).await {
            let now = now_ms();
            let next = if self.paused.is_some() {
                self.while_paused(batch, now)
            } else {
                self.turn(batch, now)
            };
            match next {
                Next::Go => {}
                Next::Done => break,
                // Nothing of the batch is carried out or stored (SPEC §8).
                Next::Halted => return,
            }
        }
        self.end();
    }

    /// One turn: take the batch in, run the pass it needs, store its decisions, carry
    /// them out. A decision that cannot be stored pauses scheduling instead.
    fn turn(&mut self, batch: Vec<Work>, now: i64) -> Next {
        let mut turn = Turn::default();
        for work in batch {
            self.take_in(work, now, &mut turn);
        }
        if let Some(why) = self.halted.take() {
            // Another scheduler may own these GPUs now (SPEC §8).
            self.fail(why, turn);
            return Next::Halted;
        }
        self.stop_jobs_if_shutting_down();
        let events = self.schedule(&turn, now);
        // Write-ahead: the batch's decisions (and the facts that led to them) are
        // stored in one transaction before anything is carried out or answered. What
        // can be undone may get ready meanwhile (a supervisor with nothing to run yet).
        self.exec.prepare(&self.sched, &events);
        if let Err(why) = self.record(now, &events) {
            self.exec.unprepare();
            self.pause(why.to_string(), now, events, turn);
            return Next::Go;
        }
        if self.carry_out(now, events, turn) {
            Next::Done
        } else {
            Next::Go
        }
    }

    /// Carry out a recorded batch's decisions and answer who waits for them; true when
    /// the shutdown is complete.
    fn carry_out(&mut self, now: i64, events: Vec<Event>, mut turn: Turn) -> bool {
        self.free_space.committed();
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
        self.shutdown_complete()
    }

    /// A batch's decisions could not be stored (SPEC §8): none is carried out and nobody
    /// waiting for them is answered; scheduling pauses — later inputs wait, submits are
    /// refused saying why — and the write is tried again every second until it succeeds.
    /// The scheduler never exits for it.
    fn pause(&mut self, why: String, now: i64, events: Vec<Event>, mut turn: Turn) {
        let why = format!(
            "scheduling is paused: the scheduler cannot write its decisions to the database \
             ({why}); nothing starts or is preempted, and it resumes by itself once a write \
             succeeds"
        );
        tracing::error!("{why}");
        // Who only waited for the picture (a read's `Sync`) is answered once it is
        // published below: nothing of theirs waits for the write.
        let readers = std::mem::take(&mut turn.syncs);
        self.paused = Some(Paused {
            why,
            now,
            events,
            turn,
            backlog: Vec::new(),
        });
        self.lock_wait(PAUSED_LOCK_WAIT);
        self.publish(now);
        for tx in readers {
            let _ = tx.send(());
        }
        // After the publish, which cancels the held-back publish's timer (the same one).
        self.timers.set(Timer::Flush, PAUSED_RETRY);
    }

    /// How long the store's writes wait for another connection's lock: briefly while
    /// paused, so that a retry never keeps the runtime from answering for long.
    fn lock_wait(&self, wait: Duration) {
        if let Some(p) = &self.persist
            && let Err(e) = p.store.set_lock_wait(wait)
        {
            tracing::warn!("cannot set the database's lock wait: {e}");
        }
    }

    /// While paused: answer who only reads (`jobs`, `history`, `status`, `predict`),
    /// refuse submits, cancels, priority changes and reloads saying why, keep the rest for
    /// later, and try the write again when its timer fires. On success carry out the held batch, then the backlog. A lost
    /// state directory halts at once; a shutdown ends the loop without the held batch
    /// (nothing of it was stored: a restart recovers, jobs go on under their supervisors).
    fn while_paused(&mut self, batch: Vec<Work>, now: i64) -> Next {
        let Some(mut paused) = self.paused.take() else {
            return Next::Go;
        };
        let mut retry = false;
        for work in batch {
            match work {
                Work::Input(Input::Sync { reply }) => drop(reply.send(())),
                Work::Input(Input::Submit {
                    reply: Some(reply), ..
                }) => drop(reply.send(Err(Refusal::Paused(paused.why.clone())))),
                // Reads answer from memory and the database read-only (SPEC §8).
                Work::Input(Input::AllJobs { span, reply }) => self.list_all_jobs(span, reply),
                Work::Input(Input::History { window, reply }) => self.read_history(window, reply),
                Work::Input(Input::Predict { spec, reply }) => {
                    self.forecasts.predict(&self.sched, spec, now, reply)
                }
                // Changes are refused at once, saying why: none could be stored.
                Work::Input(Input::Cancel {
                    ids,
                    reply: Some(reply),
                    ..
                }) => drop(reply.send(paused_cancels(ids, &paused.why))),
                Work::Input(Input::SetPriority {
                    reply: Some(reply), ..
                }) => drop(reply.send(Err(Refusal::Paused(paused.why.clone())))),
                Work::Input(Input::Reload { reply: Some(reply) }) => {
                    drop(reply.send(Err(Refusal::Paused(paused.why.clone()))))
                }
                Work::Input(Input::PutConfig { reply, .. }) => {
                    drop(reply.send(Err(Refusal::Paused(paused.why.clone()))))
                }
                Work::Input(Input::Checkpoint { reply, .. }) => {
                    drop(reply.send(Err(Refusal::Paused(paused.why.clone()))))
                }
                Work::Input(Input::Exec(ExecReport(ExecKind::StateLost(why)))) => {
                    self.fail(why, paused.turn);
                    return Next::Halted;
                }
                Work::Input(Input::Shutdown { reply, .. }) => {
                    paused.turn.refuse("the scheduler is shutting down");
                    let s = self.shutdown.get_or_insert(Shutdown {
                        stop_jobs: false,
                        replies: Vec::new(),
                    });
                    s.replies.extend(reply);
                    return Next::Done;
                }
                Work::Timer(Timer::Flush) => retry = true,
                other => paused.backlog.push(other),
            }
        }
        // The write is tried again when its timer says, not for every read.
        if !retry {
            self.paused = Some(paused);
            return Next::Go;
        }
        if let Err(e) = self.record(paused.now, &paused.events) {
            tracing::warn!("still cannot write the decisions: {e}");
            self.paused = Some(paused);
            self.timers.set(Timer::Flush, PAUSED_RETRY);
            return Next::Go;
        }
        tracing::info!("the database takes writes again: scheduling resumes");
        self.lock_wait(crate::store::LOCK_WAIT);
        let Paused {
            events,
            turn,
            backlog,
            ..
        } = paused;
        self.dirty = true;
        if self.carry_out(now, events, turn) {
            return Next::Done;
        }
        if backlog.is_empty() {
            self.publish(now);
            return Next::Go;
        }
        self.turn(backlog, now)
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
            // The instants the scheduler asks for change only with a pass. Armed after
            // passes only: a turn without one (a `jobs` read) that comes after such an
            // instant but before its timer fired (a loaded machine) would find it past
            // and cancel the timer, and the pass it was for would never run.
            self.arm_protection_end(now);
            self.arm_wakeup(now);
        }
        let events = self.sched.take_events();
        self.picture.touch_events(&events);
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
    fn end(mut self) {
        // The labels held back are stored before the runtime goes.
        if !self.observed.is_empty() && self.paused.is_none() {
            self.labels_due = true;
            if let Err(e) = self.record(now_ms(), &[]) {
                tracing::warn!("cannot store the last state labels: {e}");
            }
        }
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
    fn record(&mut self, now: i64, events: &[Event]) -> Result<(), crate::store::StoreError> {
        let Some(p) = &mut self.persist else {
            self.observed.clear();
            self.exec.stored();
            return Ok(());
        };
        if events.is_empty() && self.observed.is_empty() {
            self.exec.stored();
            return Ok(());
        }
        // A batch of state labels only (SCHEDULED → STARTING → RUNNING: no decision, no
        // exit, nobody waiting for it to be stored) waits for the next write, at most
        // `LABELS_HELD`: a restart goes by the attempts' run files, not by these labels,
        // and most batches come with a decision or an exit soon after. A commit of its
        // own was a third of the commits of a burst of short jobs (docs/PERFORMANCE.md).
        let labels_only = events.is_empty()
            && self
                .observed
                .iter()
                .all(|o| matches!(o, Observed::StateChanged { .. }));
        if labels_only && !self.labels_due {
            if !self.timers.is_set(Timer::Labels) {
                self.timers.set(Timer::Labels, timers::LABELS_HELD);
            }
            self.exec.stored();
            return Ok(());
        }
        let (sched, observed) = (&self.sched, &self.observed);
        // The facts stay until they are stored: a failed write is tried again with them.
        off_the_async_workers(|| p.store.record(now, observed, events, sched))?;
        self.metrics.committed();
        self.observed.clear();
        self.labels_due = false;
        self.timers.cancel(Timer::Labels);
        self.feed.publish(p.store.take_recorded());
        let reserve = self.exec.log_limits.reserve_bytes();
        if let Some(free) = self.free_space.latest() {
            off_the_async_workers(|| keep_room(&p.store, free, reserve));
        }
        self.tokens.stored();
        // Supervisors that waited with an exit status now stored may end.
        self.exec.stored();
        Ok(())
    }

    /// A batch could not be stored: carry none of it out, refuse what waits for an
    /// answer, and stop scheduling. Jobs keep running under their supervisors; a restart
    /// recovers from what was stored.
    fn fail(&mut self, msg: String, turn: Turn) {
        tracing::error!("{msg}");
        // Said before the refusals go out: the socket reads it to tell a refusal because
        // the scheduler stopped from a refusal of the request itself.
        self.fatal.send_replace(Some(msg.clone()));
        turn.refuse(&msg);
        if let Some(s) = self.shutdown.take() {
            for r in s.replies {
                let _ = r.send(());
            }
        }
    }

    /// Answer `AllJobs` off the runtime task: the live jobs from the latest snapshot,
    /// the finished ones from the database (a read-only connection) or, without a
    /// store, from memory.
    fn list_all_jobs(&self, span: self::input::Span, reply: oneshot::Sender<Vec<JobView>>) {
        let snap = self.snapshots.borrow().clone();
        let root = self
            .persist
            .as_ref()
            .map(|_| self.opts.state.root().to_path_buf());
        let kept: Vec<JobView> = match root {
            Some(_) => Vec::new(),
            None => self.finished.iter().map(|j| (**j).clone()).collect(),
        };
        tokio::task::spawn_blocking(move || {
            let mut all: Vec<JobView> = snap.running.clone();
            all.extend(snap.queue_views());
            let history = root.map(|root| {
                Store::open_read_only(&root)
                    .and_then(|s| s.history_in(HISTORY_LISTED, span.since, span.until))
            });
            match history {
                Some(Ok(h)) => all.extend(h.iter().map(JobView::from)),
                Some(Err(e)) => {
                    tracing::warn!("cannot read the history: {e}");
                    all.extend(snap.finished.iter().map(|j| (**j).clone()));
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
        window: crate::snapshot::usage::Window,
        reply: oneshot::Sender<Result<crate::snapshot::usage::UsageHistory, Refusal>>,
    ) {
        let Some(_) = &self.persist else {
            let _ = reply.send(Err(Refusal::NoHistory));
            return;
        };
        let db = self.opts.state.root().join(crate::store::DB_FILE);
        tokio::task::spawn_blocking(move || {
            let read = crate::store::usage::read_file(&db, window, now_ms())
                .map_err(|e| Refusal::HistoryUnreadable(e.to_string()));
            let _ = reply.send(read);
        });
    }

    /// Move jobs that finished out of the scheduler into `finished`.
    fn archive_finished(&mut self) {
        let mut archived = false;
        for id in std::mem::take(&mut self.maybe_done) {
            if self.sched.job(id).is_some_and(|j| j.state.is_finished())
                && let Some(mut view) = Snapshot::job(&self.sched, id)
            {
                let started = self.ended_starts.remove(&id);
                view.started = view.started.or(started);
                if let Some(n) = view
                    .submitter
                    .as_ref()
                    .filter(|_| view.array.is_none())
                    .and_then(|s| self.per_user.get_mut(&s.uid))
                {
                    *n = n.saturating_sub(1);
                }
                self.finished.push_front(Arc::new(view));
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

    /// The users' job data, summed by the store (at start, after a prune).
    fn set_data_per_user(&mut self, rows: Vec<(u32, String, u64)>) {
        self.data_per_user.clear();
        for (uid, name, bytes) in rows {
            self.data_per_user.insert(uid, bytes);
            self.user_names.insert(uid, name);
        }
    }

    /// While the state filesystem is short of space (within twice the database's ballast,
    /// at least 16 MiB, of the reserve; the ballast given up; or scheduling paused): its
    /// figures and the three users whose job data and logs hold the most of it.
    fn disk_line(&self) -> Option<String> {
        let free = self.free_space.latest()?;
        let reserve = self.exec.log_limits.reserve_bytes();
        let (ballast, owed) = self.persist.as_ref().map_or((0, 0), |p| {
            (p.store.ballast_bytes(), p.store.ballast_owed())
        });
        let margin = (ballast * 2).max(16 << 20);
        if free >= reserve.saturating_add(margin) && owed == 0 && self.paused.is_none() {
            return None;
        }
        let mut held: HashMap<u32, u64> = self.data_per_user.clone();
        for (uid, bytes) in self.exec.log_budget.totals() {
            *held.entry(uid).or_default() += bytes;
        }
        let mut top: Vec<(u32, u64)> = held.into_iter().filter(|&(_, b)| b > 0).collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let names: Vec<String> = top
            .iter()
            .take(3)
            .map(|(uid, bytes)| {
                let name = self
                    .user_names
                    .get(uid)
                    .cloned()
                    .unwrap_or_else(|| uid.to_string());
                format!("{name} {:.1} MiB", *bytes as f64 / f64::from(1 << 20))
            })
            .collect();
        let mib = |b: u64| b >> 20;
        let mut line = format!(
            "the state filesystem has {} MiB free, reserve {} MiB",
            mib(free),
            mib(reserve)
        );
        if owed > 0 {
            line += &format!(" (the database's {} MiB ballast is given up)", mib(owed));
        }
        if !names.is_empty() {
            line += &format!("; most job data and logs: {}", names.join(", "));
        }
        Some(line)
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
        if !self.fake_devices.is_empty() {
            for u in &mut snap.units {
                for d in &mut u.devices {
                    d.fake = self.fake_devices.contains(&(u.name.clone(), d.index));
                }
            }
        }
        // The lost GPUs stay on show, marked, after the usable ones of their unit.
        for ((unit, index), since) in &self.lost_devices {
            if let Some(u) = snap.units.iter_mut().find(|u| u.name == *unit) {
                u.devices.push(crate::snapshot::DeviceView::lost(
                    crate::model::LOCAL_NODE,
                    *index,
                    *since,
                ));
            }
        }
        label_mig(&self.exec.mig, &mut snap);
        snap.paused = self.paused.as_ref().map(|p| p.why.clone());
        snap.disk = self.disk_line();
        snap.containment = self.exec.warning();
        self.snapshots.send_replace(Arc::new(snap));
    }
}

impl Runtime {
    /// When an attempt ended, on its supervisor's clock (SPEC §7): its start plus the run
    /// time the supervisor measured — so a scheduler that was stopped meanwhile does not
    /// stretch it — within its start and now. This may lie before the core's latest
    /// instant (the scheduler learns of the exit late): the exit is applied at that time,
    /// the pass that follows runs at now, and the store records the batch at now.
    fn ended_at(&self, job: JobId, status: &crate::exec::ExitStatus, now: i64) -> i64 {
        let started = self.sched.job(job).and_then(|j| j.started_at());
        match (started, status.ran_ms) {
            (Some(started), Some(ran)) if started <= now => started
                .saturating_add(i64::try_from(ran).unwrap_or(i64::MAX))
                .clamp(started, now),
            _ => now,
        }
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

/// The config directory, read and validated (blocking), with its content hash when it
/// could be read.
type ReadConfig = (
    Result<Box<LoadedConfig>, Vec<crate::config::ConfigError>>,
    Option<String>,
);

fn read_dir(dir: &std::path::Path) -> ReadConfig {
    match crate::config::DirSnapshot::read(dir) {
        Ok(snap) => {
            let hash = snap.hash.clone();
            (snap.load().map(Box::new), Some(hash))
        }
        Err(e) => (Err(vec![e]), None),
    }
}

fn errors_text(errors: &[crate::config::ConfigError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests;
