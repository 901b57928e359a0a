//! The runtime's forecasts, off the runtime task (SPEC §11): start estimates of the queue,
//! recomputed in the background at most every few seconds, and the submit form's
//! predictions. The runtime task only clones its scheduler. Estimates run on a thread of
//! their own at the lowest CPU priority (nice 19: a forecast of a long queue may take a
//! core for a second or more, and must never slow the scheduler or the jobs' starts); their
//! result comes back as an input (`ExecKind::Estimated`). Predictions, which someone waits
//! for, run on the blocking pool and go straight to whoever asked. While jobs run the queue
//! is estimated again every few seconds whatever changed (their predicted remaining times
//! shrink as they run), and at once when an estimate's latest start has passed (so
//! `overdue` lasts only until the next forecast); an idle scheduler that has not changed
//! (no pass) is estimated again only once an instant it foresaw has come, and at most once
//! a minute. Estimates are published never earlier than the moment they come back.

use super::input::{ExecKind, ExecReport, Input};
use crate::forecast::{self, Estimates, Prediction, Runtimes};
use crate::model::JobSpec;
use crate::sched::{Sched, Time};
use crate::snapshot::JobView;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// The shortest interval between two estimates of the queue.
pub(crate) const ESTIMATE_EVERY: Duration = Duration::from_secs(5);
/// A forecast may use at most a tenth of one core: the next waits 10 × its duration.
const MAX_CPU_SHARE: u32 = 10;
/// Copying the scheduler holds up the runtime task: at most 0.5 % of its time.
const MAX_RUNTIME_SHARE: u32 = 200;
/// Estimates wait for the scheduler to be this quiet (no pass)...
const QUIET: Duration = Duration::from_secs(1);
/// ...unless the latest estimate started this long ago: copying a long queue and running
/// it forward is best done between bursts of work (measured: docs/PERFORMANCE.md).
const MAX_STALE: Duration = Duration::from_secs(30);
/// An unchanged scheduler with nothing running is estimated again at most this often, once
/// an instant the latest estimate foresaw has come.
const UNCHANGED_EVERY: Duration = Duration::from_secs(60);
/// How often the run-time history is read again (at once when a job has finished since).
const RUNTIMES_EVERY: Duration = Duration::from_secs(60);

/// What the runtime keeps for its forecasts.
pub(crate) struct Forecasts {
    /// The state directory whose history gives typical runtimes (`None`: memory only,
    /// the runtime's own finished jobs do).
    state: Option<PathBuf>,
    runtimes: Arc<Runtimes>,
    runtimes_read: Option<Instant>,
    /// The newest finished job when the history was last read: a job that finished since
    /// makes the next estimate read it again (its run time is new history).
    finished_seen: Option<crate::model::JobId>,
    in_flight: bool,
    /// The published estimates are not empty (so an empty queue clears them once).
    shown: bool,
    /// How long the last one took (ms), and its copy on the runtime task.
    took_ms: u64,
    clone_ms: u64,
    /// Background estimates are turned off (`SHAREQ_ESTIMATES=off`).
    off: bool,
    /// The last pass of the runtime, and the start of the latest estimate.
    last_busy: Option<Instant>,
    last_started: Instant,
    /// The latest timer found the scheduler busy and put the estimate off.
    deferred: bool,
    /// The estimate thread (started with the first estimate).
    worker: Option<std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>>,
    /// The scheduler ran a pass since the latest estimate started.
    changed: bool,
    /// Until this instant the latest estimate holds for an unchanged scheduler: the
    /// earliest latest start of its ranges, or its horizon's end.
    holds_until: Time,
}

impl std::fmt::Debug for Forecasts {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_struct("Forecasts")
            .field("in_flight", &self.in_flight)
            .field("took_ms", &self.took_ms)
            .finish()
    }
}

/// A thread at the lowest CPU priority that runs the estimates one after the other.
fn low_priority_worker() -> Option<std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>> {
    let (tx, rx) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
    std::thread::Builder::new()
        .name("shareq-forecast".to_string())
        .spawn(move || {
            let tid = nix::unistd::gettid().as_raw();
            // SAFETY: setpriority only reads its integer arguments; on Linux a thread id
            // with PRIO_PROCESS sets that thread's nice value.
            let r = unsafe { nix::libc::setpriority(nix::libc::PRIO_PROCESS, tid as u32, 19) };
            if r != 0 {
                tracing::debug!(
                    "forecast thread keeps its priority: {}",
                    std::io::Error::last_os_error()
                );
            }
            for job in rx {
                job();
            }
        })
        .map_err(|e| tracing::warn!("no forecast thread: {e}"))
        .ok()?;
    Some(tx)
}

impl Forecasts {
    pub(crate) fn new(state: Option<PathBuf>) -> Forecasts {
        // `SHAREQ_ESTIMATES=off` turns the background estimates off (to measure what they
        // cost; predictions and dry runs still work).
        let off = std::env::var("SHAREQ_ESTIMATES").is_ok_and(|v| v == "off");
        Forecasts {
            off,
            last_busy: None,
            last_started: Instant::now(),
            deferred: false,
            state,
            runtimes: Arc::default(),
            runtimes_read: None,
            finished_seen: None,
            in_flight: false,
            shown: false,
            took_ms: 0,
            clone_ms: 0,
            worker: None,
            changed: true,
            holds_until: Time::MIN,
        }
    }

    /// The runtime ran a pass: estimates wait for a quiet second, and the next one has a
    /// changed scheduler to look at.
    pub(crate) fn busy(&mut self) {
        self.last_busy = Some(Instant::now());
        self.changed = true;
    }

    /// When the next estimate may start.
    pub(crate) fn next_after(&self) -> Duration {
        if self.deferred {
            return QUIET;
        }
        ESTIMATE_EVERY
            .max(Duration::from_millis(self.took_ms) * MAX_CPU_SHARE)
            .max(Duration::from_millis(self.clone_ms) * MAX_RUNTIME_SHARE)
    }

    /// The estimate timer fired: start one on a copy of `sched` unless one runs already,
    /// there is nothing to estimate, or the latest one still holds (no pass since, no job
    /// running, and none of the instants it foresaw has come or it is younger than a
    /// minute). A range that has passed is estimated again without waiting for a quiet
    /// scheduler.
    pub(crate) fn start_estimate(
        &mut self,
        sched: &Sched,
        now: Time,
        finished: &std::collections::VecDeque<Arc<JobView>>,
        tx: &mpsc::UnboundedSender<Input>,
    ) {
        self.deferred = false;
        if self.off || self.in_flight || (sched.queue_len() == 0 && !self.shown) {
            return;
        }
        let passed = now > self.holds_until;
        if !self.changed
            && !sched.jobs().any(|j| j.is_holding())
            && (!passed || self.last_started.elapsed() < UNCHANGED_EVERY)
        {
            return;
        }
        if !passed
            && self.last_busy.is_some_and(|t| t.elapsed() < QUIET)
            && self.last_started.elapsed() < MAX_STALE
        {
            self.deferred = true;
            return;
        }
        self.last_started = Instant::now();
        self.in_flight = true;
        self.changed = false;
        let t0 = Instant::now();
        let copy = sched.clone();
        let clone_ms = t0.elapsed().as_millis() as u64;
        let newest = finished.front().map(|j| j.id);
        let refresh = newest != self.finished_seen
            || self
                .runtimes_read
                .is_none_or(|t| t.elapsed() >= RUNTIMES_EVERY);
        if refresh {
            self.finished_seen = newest;
        }
        if refresh && self.state.is_none() {
            self.runtimes = Arc::new(from_finished(finished));
            self.runtimes_read = Some(Instant::now());
        }
        let state = self.state.clone().filter(|_| refresh);
        let runtimes = self.runtimes.clone();
        let tx = tx.clone();
        if self.worker.is_none() {
            self.worker = low_priority_worker();
        }
        let Some(worker) = &self.worker else {
            self.in_flight = false;
            return;
        };
        let job = Box::new(move || {
            let learned = state.map(|s| Arc::new(learned_runtimes(&s)));
            let r = learned.as_ref().unwrap_or(&runtimes);
            let mut est = forecast::estimate(copy, now, r);
            est.took_ms += clone_ms;
            est.clone_ms = clone_ms;
            let report = ExecKind::Estimated {
                estimates: Arc::new(est),
                runtimes: learned,
            };
            let _ = tx.send(Input::Exec(ExecReport(report)));
        });
        if worker.send(job).is_err() {
            self.worker = None;
            self.in_flight = false;
        }
    }

    /// An estimate came back at `now`: what the runtime publishes (no instant before
    /// `now`), and how soon the next estimate is due (just after the first range's latest
    /// start, if that comes before the regular timer).
    pub(crate) fn estimated(
        &mut self,
        est: &Estimates,
        runtimes: Option<Arc<Runtimes>>,
        now: Time,
    ) -> (Arc<Estimates>, Option<Duration>) {
        self.in_flight = false;
        self.shown = !est.starts.is_empty();
        self.took_ms = est.took_ms;
        self.clone_ms = est.clone_ms;
        let est = Arc::new(est.clone().not_before(now));
        self.holds_until = est
            .starts
            .iter()
            .filter_map(|(_, s)| match s {
                forecast::Start::Range { latest, .. } => Some(*latest),
                _ => None,
            })
            .min()
            .map_or(est.horizon_end, |t| t.min(est.horizon_end));
        if let Some(r) = runtimes {
            self.runtimes = r;
            self.runtimes_read = Some(Instant::now());
        }
        let soon = u64::try_from(self.holds_until.saturating_sub(now).saturating_add(1))
            .ok()
            .map(Duration::from_millis)
            .filter(|d| *d < self.next_after());
        (est, soon)
    }

    /// Predict a submission on a copy of `sched`; the answer goes to `reply`.
    pub(crate) fn predict(
        &self,
        sched: &Sched,
        spec: JobSpec,
        now: Time,
        reply: oneshot::Sender<Prediction>,
    ) {
        let copy = sched.clone();
        let runtimes = self.runtimes.clone();
        tokio::task::spawn_blocking(move || {
            let _ = reply.send(forecast::predict(copy, spec, now, &runtimes));
        });
    }
}

/// Run-time history from the finished jobs a runtime without a store remembers (their
/// last attempts, which ended by themselves).
fn from_finished(finished: &std::collections::VecDeque<Arc<JobView>>) -> Runtimes {
    Runtimes::from_samples(finished.iter().filter_map(|j| {
        if j.state != crate::model::JobState::Succeeded {
            return None;
        }
        Some(forecast::Sample {
            user: j
                .submitter
                .as_ref()
                .map_or(String::new(), |s| s.name.clone()),
            share: j.share.clone(),
            gpus: j.quantity,
            ms: j.finished? - j.started?,
            censored: false,
        })
    }))
}

/// Work out what applying `loaded` to `before` (a copy of the state before it) does, on
/// the blocking pool; the answer comes back as `ExecKind::ConfigEffects`.
pub(crate) fn config_effects(
    before: Sched,
    loaded: &crate::config::LoadedConfig,
    capacity: Vec<crate::model::UnitCapacity>,
    now: Time,
    tx: &mpsc::UnboundedSender<Input>,
) {
    let (config, hash, tx) = (loaded.config.clone(), loaded.hash.clone(), tx.clone());
    tokio::task::spawn_blocking(move || {
        let d = forecast::dry_run(before, &config, &capacity, now);
        let report = ExecKind::ConfigEffects {
            hash,
            dry_run: Box::new(d),
        };
        let _ = tx.send(Input::Exec(ExecReport(report)));
    });
}

/// The run-time history of a state directory's database (read-only), for the forecast. An
/// unreadable one gives none.
fn learned_runtimes(state: &std::path::Path) -> Runtimes {
    match crate::store::Store::open_read_only(state)
        .and_then(|s| s.attempt_runtimes(crate::forecast::runtimes::LEARNED_FROM))
    {
        Ok(samples) => Runtimes::from_samples(samples),
        Err(e) => {
            tracing::debug!("no run-time history: {e}");
            Runtimes::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_documents, validate};
    use crate::model::UnitCapacity;
    use crate::sched::Clock;

    const CONFIG: &str = "\
kind: ServiceEnvironment
name: t
capacityLimits:
- {capacityUnit: gpu, maxCapacity: 1, devices: {fake: 1}}
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
";

    /// One job running on the only GPU (its timeout ends it at 60 s), one queued.
    fn busy_sched() -> Sched {
        let cfg = validate(parse_documents(CONFIG, None).unwrap()).unwrap();
        let mut sched = Sched::new(&cfg, &UnitCapacity::simulated(&cfg), Clock::Wall);
        for _ in 0..2 {
            let mut spec = JobSpec::new("j", "a", 1, 0);
            spec.timeout_seconds = Some(60);
            sched.submit(spec, 0).unwrap();
        }
        sched.pass(0);
        assert_eq!(sched.queue_len(), 1);
        sched
    }

    /// Start an estimate if the forecasts want one and wait for its result, which the
    /// runtime would hand back (`estimated`). False when none started.
    fn estimate_if_due(
        f: &mut Forecasts,
        sched: &Sched,
        now: Time,
        rx: &mut mpsc::UnboundedReceiver<Input>,
        tx: &mpsc::UnboundedSender<Input>,
    ) -> bool {
        f.start_estimate(sched, now, &std::collections::VecDeque::new(), tx);
        if !f.in_flight {
            return false;
        }
        match rx.blocking_recv() {
            Some(Input::Exec(ExecReport(ExecKind::Estimated {
                estimates,
                runtimes,
            }))) => {
                f.estimated(&estimates, runtimes, now);
            }
            _ => panic!("no estimate came back"),
        }
        true
    }

    #[test]
    fn while_a_job_runs_the_queue_is_estimated_again_at_every_timer() {
        let sched = busy_sched();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut f = Forecasts::new(None);
        f.off = false;
        assert!(estimate_if_due(&mut f, &sched, 0, &mut rx, &tx));
        let foreseen = f.holds_until;
        assert_eq!(foreseen, 60_000, "the queued job starts at the timeout");
        // Nothing changed, but a job runs: its predicted end moves as it runs.
        assert!(estimate_if_due(&mut f, &sched, 1, &mut rx, &tx));
        // Busy a moment ago: put off for a quiet second...
        f.busy();
        assert!(!estimate_if_due(&mut f, &sched, 2, &mut rx, &tx));
        assert!(f.deferred);
        // ...unless a range has passed: then at once.
        assert!(estimate_if_due(&mut f, &sched, foreseen + 1, &mut rx, &tx));
    }

    #[test]
    fn an_estimate_is_published_never_in_the_past_and_the_next_comes_after_its_latest() {
        let sched = busy_sched();
        let mut f = Forecasts::new(None);
        let est = forecast::estimate(sched.clone(), 0, &Runtimes::default());
        let queued = sched.queue()[0];
        assert_eq!(est.of(queued).latest(), Some(60_000));
        // Came back late (a slow forecast): nothing before the moment it is published.
        let (published, soon) = f.estimated(&est, None, 59_990);
        assert_eq!(published.of(queued).earliest(), Some(60_000));
        assert_eq!(soon, Some(Duration::from_millis(11)));
        let (published, soon) = f.estimated(&est, None, 70_000);
        assert_eq!(published.of(queued).latest(), Some(70_000));
        assert_eq!(soon, Some(Duration::from_millis(1)));
        // Far ahead: the regular timer comes first.
        let (_, soon) = f.estimated(&est, None, 0);
        assert_eq!(soon, None);
    }
}
