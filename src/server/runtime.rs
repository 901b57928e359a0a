//! The runtime task: the one owner of the scheduler. It drains its input channel in
//! batches, runs one scheduling pass per batch on the real clock, carries the decisions
//! out through `exec` and publishes an immutable snapshot after changes (at most one per
//! 20 ms while inputs pour in; `Input::Sync` forces one).

use super::carry::Executor;
use super::input::{CancelOutcome, ConfigUpdate, ExecKind, ExecReport, Input};
use crate::config::{LoadedConfig, load_dir};
use crate::exec::telemetry::Samples;
use crate::exec::{Discovery, StateDir, now_ms};
use crate::model::{Command, JobId, JobSpec};
use crate::sched::{Sched, UnitCapacity};
use crate::snapshot::{ConfigStatus, JobView, Snapshot};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

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
    task: JoinHandle<()>,
}

impl RuntimeHandle {
    /// Start the runtime task on the current tokio runtime with an initial config.
    pub fn start(opts: RuntimeOptions, initial: LoadedConfig) -> RuntimeHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let now = now_ms();
        let (capacity, warnings) = opts.discovery.capacity(&initial.config);
        for w in &warnings {
            tracing::warn!("{w}");
        }
        let sched = Sched::new(&initial.config, &capacity, false);
        let config = ConfigStatus {
            source: opts.config_dir.display().to_string(),
            applied_at: Some(now),
            hash: Some(initial.hash.clone()),
            error: None,
            error_at: None,
        };
        let snapshot = Snapshot::build(&sched, now, 0, config.clone(), Vec::new(), &Samples::new());
        let (snap_tx, snap_rx) = watch::channel(Arc::new(snapshot));
        start_telemetry(&capacity, &initial, &tx);
        let exec = Executor::new(opts.state.clone(), opts.supervisor_exe.clone(), tx.clone());
        let rt = Runtime {
            sched,
            opts,
            config,
            exec,
            samples: Samples::new(),
            version: 0,
            snapshots: snap_tx,
            finished: VecDeque::new(),
            maybe_done: Vec::new(),
            dirty: false,
            last_publish: None,
            flush_pending: false,
            tx: tx.clone(),
        };
        let task = tokio::spawn(rt.run(rx));
        RuntimeHandle {
            inputs: tx,
            snapshots: snap_rx,
            task,
        }
    }

    /// A callback that hands config updates to the runtime, in the shape the directory
    /// watcher wants: `config::Watcher::start(dir, handle.config_sink())`.
    pub fn config_sink(&self) -> Box<dyn FnMut(ConfigUpdate) + Send> {
        let tx = self.inputs.clone();
        Box::new(move |u| drop(tx.send(Input::Config(u))))
    }

    /// Stop scheduling and wait for the runtime to end (see `Input::Shutdown`).
    pub async fn shutdown(self, stop_jobs: bool) {
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

fn start_telemetry(
    capacity: &[UnitCapacity],
    initial: &LoadedConfig,
    tx: &mpsc::UnboundedSender<Input>,
) {
    use crate::model::Devices;
    let real: Vec<(String, u32)> = capacity
        .iter()
        .filter(|c| {
            initial
                .config
                .env
                .capacity_limits
                .iter()
                .any(|l| l.capacity_unit == c.unit && !matches!(l.devices, Devices::Fake(_)))
        })
        .flat_map(|c| c.devices.iter().map(|&d| (c.unit.clone(), d)))
        .collect();
    let tx = tx.clone();
    let every = std::time::Duration::from_secs(3);
    if let Err(why) = crate::exec::telemetry::start(real, every, move |s| {
        tx.send(Input::Exec(ExecReport(ExecKind::Telemetry(s))))
            .is_ok()
    }) {
        tracing::info!("no GPU telemetry: {why}");
    }
}

struct Runtime {
    sched: Sched,
    opts: RuntimeOptions,
    config: ConfigStatus,
    exec: Executor,
    samples: Samples,
    version: u64,
    snapshots: watch::Sender<Arc<Snapshot>>,
    /// Finished jobs, newest first, moved out of the scheduler so that its tables (and
    /// each snapshot) stay the size of the live work. Until the store keeps history,
    /// this is what `jobs --all` lists.
    finished: VecDeque<JobView>,
    /// Jobs that may have finished in this batch.
    maybe_done: Vec<JobId>,
    /// Something changed since the last snapshot.
    dirty: bool,
    last_publish: Option<Instant>,
    /// A `Flush` timer is on its way.
    flush_pending: bool,
    tx: mpsc::UnboundedSender<Input>,
}

/// Snapshots are published at most this often while inputs pour in (a reader that must
/// see its own change asks with `Input::Sync`).
const PUBLISH_EVERY: Duration = Duration::from_millis(20);

/// How many finished jobs the runtime remembers.
const FINISHED_KEPT: usize = 20_000;
/// How many of them each snapshot carries.
const FINISHED_IN_SNAPSHOT: usize = 200;

/// Answers held back until the batch's decisions are carried out (and, with a store,
/// recorded): a job is accepted only once that is done.
enum Deferred {
    Submit(
        oneshot::Sender<Result<JobId, String>>,
        Result<JobId, String>,
    ),
    Cancel(oneshot::Sender<Vec<CancelOutcome>>, Vec<CancelOutcome>),
    Priority(oneshot::Sender<Result<bool, String>>, Result<bool, String>),
    Reload(oneshot::Sender<Result<(), String>>, Result<(), String>),
}

impl Runtime {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Input>) {
        let mut shutting_down: Option<(bool, Vec<oneshot::Sender<()>>)> = None;
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < 8192 {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            let now = now_ms();
            let mut deferred = Vec::new();
            let mut needs_pass = false;
            let mut changed = false;
            let mut syncs = Vec::new();
            for input in batch {
                match input {
                    Input::Sync { reply } => syncs.push(reply),
                    Input::Shutdown { stop_jobs, reply } => {
                        let entry = shutting_down.get_or_insert((stop_jobs, Vec::new()));
                        entry.0 |= stop_jobs;
                        entry.1.extend(reply);
                    }
                    Input::AllJobs { reply } => {
                        let mut all = Snapshot::all_jobs(&self.sched);
                        all.extend(self.finished.iter().cloned());
                        let _ = reply.send(all);
                    }
                    other => {
                        let (pass, change) = self.handle(other, now, &mut deferred);
                        needs_pass |= pass;
                        changed |= change;
                    }
                }
            }
            if let Some((stop_jobs, _)) = &shutting_down {
                if *stop_jobs && self.exec.stop_all_once(self.sched.grace_period_seconds()) {
                    tracing::info!("stopping every running job before exit");
                }
                needs_pass = false; // never start anything once shutting down
            }
            if needs_pass {
                self.sched.pass(now);
            }
            let events = self.sched.take_events();
            // Seam for durability: the store records `events` (and the accepted
            // submissions) here, before anything is carried out or answered.
            changed |= !events.is_empty();
            self.exec.carry_out(&self.sched, events, now);
            self.archive_finished();
            // Publish at most every PUBLISH_EVERY, and always before answering a `Sync`,
            // so a reader that asks after its answer sees what it did.
            self.dirty |= changed;
            if self.dirty {
                let since = self.last_publish.map(|t| t.elapsed());
                if since.is_none_or(|d| d >= PUBLISH_EVERY)
                    || !syncs.is_empty()
                    || shutting_down.is_some()
                {
                    self.publish(now);
                } else if !self.flush_pending {
                    self.flush_pending = true;
                    let wait = PUBLISH_EVERY.saturating_sub(since.unwrap_or_default());
                    let tx = self.tx.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(wait).await;
                        let _ = tx.send(Input::Exec(ExecReport(ExecKind::Flush)));
                    });
                }
            }
            for d in deferred {
                match d {
                    Deferred::Submit(tx, v) => drop(tx.send(v)),
                    Deferred::Cancel(tx, v) => drop(tx.send(v)),
                    Deferred::Priority(tx, v) => drop(tx.send(v)),
                    Deferred::Reload(tx, v) => drop(tx.send(v)),
                }
            }
            for tx in syncs {
                let _ = tx.send(());
            }
            if let Some((stop_jobs, _)) = &shutting_down
                && (!*stop_jobs || self.exec.running_count() == 0)
            {
                break;
            }
        }
        if let Some((_, replies)) = shutting_down {
            tracing::info!(
                running = self.exec.running_count(),
                "runtime stopped; jobs still running keep running under their supervisors"
            );
            for r in replies {
                let _ = r.send(());
            }
        }
    }

    /// Move jobs that finished out of the scheduler into `finished`.
    fn archive_finished(&mut self) {
        for id in std::mem::take(&mut self.maybe_done) {
            if self.sched.job(id).is_some_and(|j| j.state.is_finished())
                && let Some(view) = Snapshot::job(&self.sched, id)
            {
                self.finished.push_front(view);
                self.sched.forget(id);
            }
        }
        self.finished.truncate(FINISHED_KEPT);
    }

    fn publish(&mut self, now: i64) {
        self.dirty = false;
        self.last_publish = Some(Instant::now());
        self.version += 1;
        let mut snap = Snapshot::build(
            &self.sched,
            now,
            self.version,
            self.config.clone(),
            self.exec.preemption_log(),
            &self.samples,
        );
        snap.finished = self
            .finished
            .iter()
            .take(FINISHED_IN_SNAPSHOT)
            .cloned()
            .collect();
        self.snapshots.send_replace(Arc::new(snap));
    }

    /// Apply one input. Returns (needs a pass, changed the picture).
    fn handle(&mut self, input: Input, now: i64, deferred: &mut Vec<Deferred>) -> (bool, bool) {
        match input {
            Input::Submit { spec, reply } => {
                let result = self.submit(spec, now);
                tracing::info!(?result, "submit");
                if let Some(tx) = reply {
                    deferred.push(Deferred::Submit(tx, result));
                }
                (true, true)
            }
            Input::Cancel { ids, by, reply } => {
                let outcomes: Vec<CancelOutcome> = ids
                    .into_iter()
                    .map(|id| {
                        if self.sched.job(id).is_none() {
                            if self.existed(id) {
                                // Finished and archived: nothing to do.
                                return CancelOutcome {
                                    id,
                                    cancelled: false,
                                    error: None,
                                };
                            }
                            return CancelOutcome {
                                id,
                                cancelled: false,
                                error: Some(format!("no job {id}")),
                            };
                        }
                        let cancelled = self.sched.cancel(id, &by, now);
                        self.maybe_done.push(id);
                        tracing::info!(job = %id, by = %by, cancelled, "cancel");
                        CancelOutcome {
                            id,
                            cancelled,
                            error: None,
                        }
                    })
                    .collect();
                if let Some(tx) = reply {
                    deferred.push(Deferred::Cancel(tx, outcomes));
                }
                (true, true)
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
                if let Some(tx) = reply {
                    deferred.push(Deferred::Priority(tx, r));
                }
                (true, true)
            }
            Input::Config(update) => {
                self.apply_config(update, now);
                (true, true)
            }
            Input::Reload { reply } => {
                let result = match load_dir(&self.opts.config_dir) {
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
                (true, true)
            }
            Input::Exec(ExecReport(kind)) => self.exec_report(kind, now),
            Input::AllJobs { .. } | Input::Shutdown { .. } | Input::Sync { .. } => (false, false),
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
        self.sched.submit(spec, now).map_err(|r| r.0)
    }

    fn apply_config(&mut self, update: ConfigUpdate, now: i64) {
        match update {
            ConfigUpdate::Applied(loaded) => {
                let (capacity, warnings) = self.opts.discovery.capacity(&loaded.config);
                for w in &warnings {
                    tracing::warn!("{w}");
                }
                self.sched.apply_config(&loaded.config, &capacity, now);
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

    fn exec_report(&mut self, kind: ExecKind, now: i64) -> (bool, bool) {
        match kind {
            ExecKind::Spawned { job, attempt, pid } => {
                self.exec.spawned(job, attempt, pid);
                let starting = self
                    .sched
                    .job(job)
                    .is_some_and(|j| j.state == crate::model::JobState::Scheduled);
                if starting && self.exec.is_current(job, attempt) {
                    // SCHEDULED → STARTING: the supervisor exists, the command not yet.
                    self.sched
                        .set_running_state(job, crate::model::JobState::Starting);
                    return (false, true);
                }
                (false, false)
            }
            ExecKind::Running { job, attempt } => {
                if self.exec.is_current(job, attempt) {
                    self.sched
                        .set_running_state(job, crate::model::JobState::Running);
                    return (false, true);
                }
                (false, false)
            }
            ExecKind::Exited {
                job,
                attempt,
                status,
            } => {
                if !self.exec.finished(job, attempt) {
                    return (false, false);
                }
                let stopping = self.sched.job(job).is_some_and(|j| j.is_stopping());
                tracing::info!(job = %job, attempt, code = status.code, stopping, "attempt ended");
                self.maybe_done.push(job);
                if stopping {
                    self.sched.gpus_released(job, now);
                } else {
                    self.sched.job_exited(job, status.code, now);
                }
                (true, true)
            }
            ExecKind::GraceOver { job, attempt } => {
                self.exec.kill_if_current(job, attempt);
                (false, false)
            }
            ExecKind::TimeoutOver { job, attempt } => {
                if self.exec.is_current(job, attempt) {
                    tracing::info!(job = %job, "timeout");
                    self.sched.timeout(job, now);
                    return (true, true);
                }
                (false, false)
            }
            ExecKind::Flush => {
                self.flush_pending = false;
                (false, false)
            }
            ExecKind::Telemetry(samples) => {
                let changed = samples != self.samples;
                self.samples = samples;
                (false, changed)
            }
        }
    }
}

fn errors_text(errors: &[crate::config::ConfigError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}
