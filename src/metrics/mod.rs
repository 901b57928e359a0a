//! Prometheus metrics (`serve --metrics ADDR:PORT`, `metrics.listen` in the environment):
//! counters and histograms fed by the runtime after each recorded batch (a few atomic
//! adds per decision, never inside the scheduling pass), and gauges read from the latest
//! published snapshot at scrape time (`gauges`), so a scrape costs the runtime nothing.
//! Labels are bounded: shares, units, reasons, outcomes and device indices, never job ids.
//! `http` serves them; docs/METRICS.md lists them.

mod gauges;
pub mod http;

use crate::sched::{Event, FailReason, Sched};
use crate::snapshot::Snapshot;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use tokio::sync::watch;

type Labels = Vec<(&'static str, String)>;
type FloatCounter = Counter<f64, std::sync::atomic::AtomicU64>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// Every counter and histogram of a scheduler, and the registry that encodes them with
/// the snapshot's gauges.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    preemptions: Family<Labels, Counter>,
    /// GPU-seconds lost by preemptions (SPEC §14), by the victim's share.
    lost: Family<Labels, FloatCounter>,
    starts: Family<Labels, Counter>,
    finishes: Family<Labels, Counter>,
    submits: Family<Labels, Counter>,
    /// Jobs found over their slice's GPU memory (SPEC §15), by share.
    over_memory: Family<Labels, Counter>,
    reloads: Family<Labels, Counter>,
    wait: Histograms,
    pass: Histogram,
    submit_latency: Histogram,
    commits: Counter,
    /// Where the gauges come from (set once the runtime publishes).
    snapshots: Arc<std::sync::Mutex<Option<watch::Receiver<Arc<Snapshot>>>>>,
    /// Per-user gauges are shown: the config's `metrics.userLabels`.
    user_labels: Arc<std::sync::atomic::AtomicBool>,
}

fn wait_buckets() -> Histogram {
    // 1 s .. ~ 3 days.
    Histogram::new(exponential_buckets(1.0, 3.0, 12))
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let preemptions = Family::<Labels, Counter>::default();
        let lost = Family::<Labels, FloatCounter>::default();
        let starts = Family::<Labels, Counter>::default();
        let finishes = Family::<Labels, Counter>::default();
        let submits = Family::<Labels, Counter>::default();
        let over_memory = Family::<Labels, Counter>::default();
        let reloads = Family::<Labels, Counter>::default();
        let wait: Histograms = Family::new_with_constructor(wait_buckets);
        // 10 µs .. ~ 5 s.
        let pass = Histogram::new(exponential_buckets(0.000_01, 4.0, 11));
        // 100 µs .. ~ 26 s.
        let submit_latency = Histogram::new(exponential_buckets(0.000_1, 4.0, 10));
        registry.register(
            "shareq_preemptions",
            "Preemptions, by reason, the victim's share and the preemptor's share",
            preemptions.clone(),
        );
        registry.register(
            "shareq_preemption_lost_gpu_seconds",
            "GPU-seconds of work lost by preemptions (each victim's GPUs times the time from its last checkpoint, or its start, to its release), by the victim's share",
            lost.clone(),
        );
        registry.register(
            "shareq_job_starts",
            "Attempts started, by share and unit",
            starts.clone(),
        );
        registry.register(
            "shareq_job_finishes",
            "Jobs finished, by share and outcome (succeeded, failed, cancelled)",
            finishes.clone(),
        );
        registry.register(
            "shareq_job_submits",
            "Jobs submitted, by share",
            submits.clone(),
        );
        registry.register(
            "shareq_config_reloads",
            "Configurations applied or rejected, by result",
            reloads.clone(),
        );
        registry.register(
            "shareq_job_wait_seconds",
            "Time from submission to a job's first start, by share",
            wait.clone(),
        );
        registry.register(
            "shareq_scheduling_pass_seconds",
            "Duration of one scheduling pass",
            pass.clone(),
        );
        registry.register(
            "shareq_submit_latency_seconds",
            "Time from reading a submit on the control socket to its answer (stored)",
            submit_latency.clone(),
        );
        registry.register(
            "shareq_over_memory",
            "Jobs whose processes held more GPU memory than their slice (+ 1 GiB) on two samples in a row, by share.",
            over_memory.clone(),
        );
        let commits = Counter::default();
        registry.register(
            "shareq_store_commits",
            "Transactions committed to the database; each holds every decision and fact of one turn of the scheduler (a group commit: a burst of requests shares one)",
            commits.clone(),
        );
        let snapshots = Arc::new(std::sync::Mutex::new(None));
        let user_labels = Arc::new(std::sync::atomic::AtomicBool::new(false));
        registry.register_collector(Box::new(gauges::Gauges {
            snapshots: snapshots.clone(),
            user_labels: user_labels.clone(),
        }));
        Metrics {
            registry,
            preemptions,
            lost,
            starts,
            finishes,
            submits,
            over_memory,
            reloads,
            wait,
            pass,
            submit_latency,
            commits,
            snapshots,
            user_labels,
        }
    }

    /// Show the per-user gauges or not (the config in force's `metrics.userLabels`).
    pub fn show_user_labels(&self, on: bool) {
        self.user_labels
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Read the gauges from these snapshots.
    pub fn watch(&self, snapshots: watch::Receiver<Arc<Snapshot>>) {
        if let Ok(mut s) = self.snapshots.lock() {
            *s = Some(snapshots);
        }
    }

    /// Count a recorded batch of decisions made at `now` (ms), read against the scheduler
    /// after them.
    pub fn observe(&self, now: i64, events: &[Event], sched: &Sched) {
        let share = |id: &crate::model::JobId| {
            sched.job(*id).map_or_else(
                || "?".to_string(),
                |j| sched.share_name(j.share).to_string(),
            )
        };
        for ev in events {
            // An array parent runs nothing: its children are the jobs counted (SPEC §13).
            let parent = crate::events::job_of(ev)
                .and_then(|id| sched.job(id))
                .is_some_and(|j| j.array_size().is_some());
            if parent {
                continue;
            }
            match ev {
                Event::OverMemory { job, .. } => {
                    self.over_memory
                        .get_or_create(&vec![("share", share(job))])
                        .inc();
                }
                Event::Submitted { job } => {
                    self.submits
                        .get_or_create(&vec![("share", share(job))])
                        .inc();
                }
                Event::Started { job, .. } => {
                    let Some(j) = sched.job(*job) else { continue };
                    let s = sched.share_name(j.share).to_string();
                    let unit = sched.unit_name(j.unit).to_string();
                    self.starts
                        .get_or_create(&vec![("share", s.clone()), ("unit", unit)])
                        .inc();
                    if j.attempts_started == 1 {
                        let wait = (now - j.submitted).max(0) as f64 / 1000.0;
                        self.wait.get_or_create(&vec![("share", s)]).observe(wait);
                    }
                }
                Event::Preempted { job, by, reason } => {
                    let by_share = by.as_ref().map_or_else(String::new, share);
                    self.preemptions
                        .get_or_create(&vec![
                            ("reason", reason.as_str().to_string()),
                            ("share", share(job)),
                            ("by_share", by_share),
                        ])
                        .inc();
                }
                Event::Requeued { job, lost: Some(l) } => self.lost(share(job), l),
                Event::Succeeded { job } => self.finished(share(job), "succeeded"),
                Event::Failed { job, reason, lost } => {
                    if let Some(l) = lost {
                        self.lost(share(job), l);
                    }
                    let outcome = match reason {
                        FailReason::PreemptionRetriesExhausted => "preemption_retries_exhausted",
                        _ => "failed",
                    };
                    self.finished(share(job), outcome);
                }
                Event::Cancelled { job, .. } => self.finished(share(job), "cancelled"),
                Event::ConfigApplied => self.reload("applied"),
                Event::ConfigRejected { .. } => self.reload("rejected"),
                _ => {}
            }
        }
    }

    /// A preemption of a job of `share` ended, losing `l` (GPU-ms on the live clock).
    fn lost(&self, share: String, l: &crate::sched::Lost) {
        self.lost
            .get_or_create(&vec![("share", share)])
            .inc_by(l.gpu_ticks() as f64 / 1000.0);
    }

    fn finished(&self, share: String, outcome: &str) {
        self.finishes
            .get_or_create(&vec![("share", share), ("outcome", outcome.to_string())])
            .inc();
    }

    fn reload(&self, result: &str) {
        self.reloads
            .get_or_create(&vec![("result", result.to_string())])
            .inc();
    }

    /// One scheduling pass took `d`.
    pub fn pass_took(&self, d: std::time::Duration) {
        self.pass.observe(d.as_secs_f64());
    }

    /// A turn's transaction was committed.
    pub fn committed(&self) {
        self.commits.inc();
    }

    /// A submit was answered `d` after it was read.
    pub fn submit_took(&self, d: std::time::Duration) {
        self.submit_latency.observe(d.as_secs_f64());
    }

    /// Everything, in the Prometheus text format (0.0.4).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            tracing::warn!("cannot encode the metrics: {e}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{DeviceView, UnitView};

    /// Every help text reads the same way: a capital first and one full stop at the end.
    #[test]
    fn help_texts_are_punctuated_alike() {
        let mut snap = Snapshot::empty();
        snap.units = vec![UnitView {
            name: "gpu".into(),
            usable: 1,
            used: 0,
            guaranteed: 1,
            devices: vec![],
            reservation: None,
            unusable: None,
            memory_gib: None,
        }];
        let (_tx, rx) = watch::channel(Arc::new(snap));
        let m = Metrics::new();
        m.watch(rx);
        let text = m.encode();
        let helps: Vec<&str> = text.lines().filter(|l| l.starts_with("# HELP")).collect();
        assert!(helps.len() > 10, "{text}");
        for h in helps {
            let help = h.splitn(4, ' ').nth(3).unwrap_or("");
            assert!(
                help.ends_with('.')
                    && !help.ends_with("..")
                    && help.starts_with(char::is_uppercase),
                "{h}"
            );
        }
    }

    /// A job over its slice's GPU memory (SPEC §15) counts once per report, by its share.
    #[test]
    fn over_memory_reports_count_by_share() {
        use crate::config::{parse_documents, validate};
        use crate::model::{JobSpec, UnitCapacity};
        use crate::sched::Clock;
        let yaml = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: mem, maxCapacity: 80, devices: {fake: 1}, slicing: {memoryGiB: 80}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: mem, maxCapacity: 80}]
resourceSharingConfiguration: {strategy: LEND}
";
        let cfg = validate(parse_documents(yaml, None).unwrap()).unwrap();
        let mut s = Sched::new(&cfg, &UnitCapacity::simulated(&cfg), Clock::Wall);
        let id = s.submit(JobSpec::new("j", "a", 20, 0), 0).unwrap();
        s.pass(0);
        s.take_events();
        let m = Metrics::new();
        assert!(!m.encode().contains("shareq_over_memory_total{"));
        s.over_memory(id, 27, 20, false, 1);
        m.observe(1, &s.take_events(), &s);
        let text = m.encode();
        assert!(
            text.contains("shareq_over_memory_total{share=\"a\"} 1"),
            "{text}"
        );
    }

    /// Telemetry of real GPUs (what NVML gives the snapshot) becomes per-device gauges;
    /// devices without telemetry (fake ones) get no series.
    #[test]
    fn device_telemetry_becomes_gauges_only_where_reported() {
        let mut snap = Snapshot::empty();
        let dev = |index, util, mem: Option<(u64, u64)>| DeviceView {
            index,
            node: "local".into(),
            job: None,
            job_name: None,
            share: None,
            util,
            mem_used: mem.map(|m| m.0),
            mem_total: mem.map(|m| m.1),
            lost_since: None,
            fake: false,
            mig: None,
            slices: Vec::new(),
        };
        snap.units = vec![UnitView {
            name: "h200".into(),
            usable: 2,
            used: 1,
            guaranteed: 2,
            reservation: None,
            unusable: None,
            memory_gib: None,
            devices: vec![dev(0, Some(87), Some((1024, 143_771))), dev(1, None, None)],
        }];
        let (_tx, rx) = watch::channel(Arc::new(snap));
        let m = Metrics::new();
        m.watch(rx);
        let text = m.encode();
        assert!(
            text.contains(
                "shareq_device_utilization_ratio{unit=\"h200\",node=\"local\",device=\"0\"} 0.87"
            ),
            "{text}"
        );
        assert!(
            text.contains("shareq_device_memory_used_bytes{unit=\"h200\",node=\"local\",device=\"0\"} 1073741824"),
            "{text}"
        );
        assert!(!text.contains("device=\"1\""), "{text}");
        assert!(
            text.contains("shareq_unit_usable_gpus{unit=\"h200\"} 2"),
            "{text}"
        );
    }

    /// A unit sliced by memory says so (SPEC §15): its `_gpus` series count GiB.
    #[test]
    fn a_sliced_unit_is_marked_so_gib_never_add_to_gpus() {
        let mut snap = Snapshot::empty();
        let unit = |name: &str, usable, memory_gib| UnitView {
            name: name.into(),
            usable,
            used: 0,
            guaranteed: usable.into(),
            devices: vec![],
            reservation: None,
            unusable: None,
            memory_gib,
        };
        snap.units = vec![unit("a100", 2, None), unit("a100-mem", 160, Some(80))];
        let (_tx, rx) = watch::channel(Arc::new(snap));
        let m = Metrics::new();
        m.watch(rx);
        let text = m.encode();
        assert!(
            text.contains("shareq_unit_slice_memory_gib{unit=\"a100-mem\"} 80"),
            "{text}"
        );
        assert!(
            !text.contains("shareq_unit_slice_memory_gib{unit=\"a100\"}"),
            "{text}"
        );
        assert!(
            text.contains("shareq_unit_usable_gpus{unit=\"a100-mem\"} 160"),
            "{text}"
        );
    }
}
