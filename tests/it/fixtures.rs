//! Sample snapshots made by driving the real scheduler (no runtime): the AWS 3-share
//! example, a busier 8-GPU lab, and a queue of any length. Used by the console's tests,
//! its render benches (which include this file: `#[path]`) and the screen captures in
//! `assets/`. Test data: here, not in the library, so that no release build carries it.

use shareq::config::{parse_documents, validate};
use shareq::exec::gpu::telemetry::Telemetry;
use shareq::model::UnitCapacity;
use shareq::model::{JobId, JobSpec};
use shareq::sched::{Clock, Event, Sched, Time};
use shareq::snapshot::{ConfigStatus, JobList, JobView, PreemptionRecord, Snapshot};
use std::collections::HashMap;
use std::sync::Arc;

/// 2025-11-30 14:05:37 UTC: the fixed "now" of the fixtures.
pub const NOW: i64 = 1_764_511_537_000;

/// The AWS quota-management example: 3 fake GPUs, qs1 LEND_AND_BORROW (in-share
/// preemption on), qs2 LEND, qs3 RESERVE, 1 GPU each.
pub const AWS_CONFIG: &str = "\
kind: ServiceEnvironment
name: aws-example
capacityLimits:
- {capacityUnit: gpu, maxCapacity: 3, devices: {fake: 3}}
preemption: {gracePeriodSeconds: 30}
---
kind: QuotaShare
quotaShareName: qs1
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
preemptionConfiguration: {inSharePreemption: ENABLED}
---
kind: QuotaShare
quotaShareName: qs2
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND}
---
kind: QuotaShare
quotaShareName: qs3
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: RESERVE}
";

/// An 8-GPU lab machine with four teams, as in the console sketch.
pub const LAB_CONFIG: &str = "\
kind: ServiceEnvironment
name: lab-node-1
capacityLimits:
- {capacityUnit: a100, maxCapacity: 8, devices: {fake: 8}}
preemption: {gracePeriodSeconds: 30}
---
kind: QuotaShare
quotaShareName: vision
capacityLimits: [{capacityUnit: a100, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW, borrowLimit: 100}
preemptionConfiguration: {inSharePreemption: ENABLED}
---
kind: QuotaShare
quotaShareName: nlp
capacityLimits: [{capacityUnit: a100, maxCapacity: 3}]
resourceSharingConfiguration: {strategy: LEND}
---
kind: QuotaShare
quotaShareName: robotics
capacityLimits: [{capacityUnit: a100, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: RESERVE}
---
kind: QuotaShare
quotaShareName: infra
capacityLimits: [{capacityUnit: a100, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
preemptionConfiguration: {inSharePreemption: ENABLED}
";

/// Drives a live-style scheduler (milliseconds, victims release only when told) and
/// keeps the preemption log the runtime would keep.
pub struct Driver {
    pub sched: Sched,
    pub log: Vec<PreemptionRecord>,
    pub source: String,
    pub telemetry: HashMap<(String, u32), Telemetry>,
    /// Jobs started since the caller last drained this (a runtime would spawn them).
    pub started: Vec<JobId>,
    /// Jobs told to stop since the caller last drained this (a runtime would SIGTERM).
    pub stopping: Vec<JobId>,
    version: u64,
}

impl Driver {
    /// A scheduler for a YAML config (several documents separated by `---`).
    pub fn new(yaml: &str, source: &str) -> Result<Driver, String> {
        let docs = parse_documents(yaml, Some(source)).map_err(errors)?;
        let cfg = validate(docs).map_err(errors)?;
        Ok(Driver {
            sched: Sched::new(&cfg, &UnitCapacity::simulated(&cfg), Clock::Wall),
            log: Vec::new(),
            source: source.to_string(),
            telemetry: HashMap::new(),
            started: Vec::new(),
            stopping: Vec::new(),
            version: 0,
        })
    }

    /// Submit and run a pass; the new job's id.
    pub fn submit(
        &mut self,
        name: &str,
        share: &str,
        gpus: u32,
        prio: u32,
        at: Time,
    ) -> Option<JobId> {
        let mut spec = JobSpec::new(name, share, gpus, prio);
        spec.submitter = Some(std::sync::Arc::new(member_of(share)));
        spec.command = Some(shareq::model::Command::Argv(vec![
            "python".into(),
            "run.py".into(),
            format!("--job={name}"),
        ]));
        let id = self.sched.submit(spec, at).ok();
        self.pass(at);
        id
    }

    /// Submit a multi-node job (SPEC §16): `per_node` GPUs on each of `nodes` nodes; run a
    /// pass.
    pub fn submit_gang(
        &mut self,
        name: &str,
        share: &str,
        (nodes, per_node): (u32, u32),
        prio: u32,
        at: Time,
    ) -> Option<JobId> {
        let mut spec = JobSpec::new(name, share, per_node, prio);
        spec.num_nodes = Some(nodes);
        spec.submitter = Some(std::sync::Arc::new(member_of(share)));
        spec.command = Some(shareq::model::Command::Argv(vec![
            "torchrun".into(),
            format!("--nnodes={nodes}"),
            "train.py".into(),
        ]));
        let id = self.sched.submit(spec, at).ok();
        self.pass(at);
        id
    }

    /// [`Driver::submit`] by another submitter than the share's usual one.
    pub fn submit_by(
        &mut self,
        user: (&str, u32),
        name: &str,
        share: &str,
        gpus: u32,
        at: Time,
    ) -> Option<JobId> {
        let mut spec = JobSpec::new(name, share, gpus, 10);
        spec.submitter = Some(std::sync::Arc::new(shareq::model::Submitter {
            name: user.0.to_string(),
            uid: user.1,
        }));
        spec.command = Some(shareq::model::Command::Argv(vec![
            "python".into(),
            "run.py".into(),
        ]));
        let id = self.sched.submit(spec, at).ok();
        self.pass(at);
        id
    }

    /// A stopped job handed its GPUs back.
    pub fn released(&mut self, id: JobId, at: Time) {
        self.sched.gpus_released(id, at);
        self.pass(at);
    }

    pub fn pass(&mut self, at: Time) {
        self.sched.pass(at);
        for ev in self.sched.take_events() {
            self.record(ev, at);
        }
    }

    fn record(&mut self, ev: Event, at: Time) {
        let user = |s: &Sched, id: Option<JobId>| {
            s.job(id?)
                .and_then(|j| j.spec.submitter.as_ref())
                .map(|u| u.name.clone())
        };
        let name = |s: &Sched, id: JobId| {
            s.job(id)
                .map(|j| (j.name().to_string(), s.share_name(j.share).to_string()))
        };
        match ev {
            Event::Started { job, .. } => self.started.push(job),
            Event::Cancelled { job, stop: true } | Event::TimedOut { job } => {
                self.stopping.push(job)
            }
            Event::Preempted { job, by, reason } => {
                self.stopping.push(job);
                let (victim_name, victim_share) = name(&self.sched, job).unwrap_or_default();
                let by_info = by.and_then(|b| name(&self.sched, b));
                let ran_for = self
                    .sched
                    .job(job)
                    .and_then(|j| j.started_at())
                    .map_or(0, |s| at - s);
                let gpus = self.sched.job(job).map_or(0, |j| j.quantity);
                self.log.insert(
                    0,
                    PreemptionRecord {
                        at,
                        victim: job,
                        victim_name,
                        victim_share,
                        by,
                        by_name: by_info.as_ref().map(|b| b.0.clone()),
                        by_share: by_info.map(|b| b.1),
                        reason: reason.as_str().to_string(),
                        gpus,
                        ran_for,
                        outcome: None,
                        victim_user: user(&self.sched, Some(job)),
                        by_user: user(&self.sched, by),
                        lost: None,
                        victim_placements: self
                            .sched
                            .job(job)
                            .map(|j| shareq::snapshot::gang_placements(&self.sched, j))
                            .unwrap_or_default(),
                    },
                );
            }
            Event::Requeued { job, lost } => self.outcome(job, "requeued".into(), lost),
            Event::Failed { job, reason, lost } => {
                self.outcome(job, format!("failed ({})", reason.code()), lost)
            }
            _ => {}
        }
    }

    fn outcome(&mut self, job: JobId, what: String, lost: Option<shareq::sched::Lost>) {
        if let Some(r) = self
            .log
            .iter_mut()
            .find(|r| r.victim == job && r.outcome.is_none())
        {
            r.lost = lost.as_ref().map(shareq::snapshot::LostWork::of);
            let n = self.sched.job(job).map_or(1, |j| j.preempted_count);
            r.outcome = Some(if what == "requeued" {
                format!("requeued ({} preemption)", shareq::tui::text::ordinal(n))
            } else {
                what
            });
        }
    }

    pub fn snapshot(&mut self, at: Time, applied_at: Time) -> Snapshot {
        self.version += 1;
        let config = ConfigStatus {
            source: self.source.clone(),
            applied_at: Some(applied_at),
            hash: None,
            error: None,
            error_at: None,
            effects: None,
        };
        Snapshot::build(
            &self.sched,
            at,
            self.version,
            config,
            self.log.clone(),
            &self.telemetry,
        )
    }
}

fn errors<E: std::fmt::Display>(errs: Vec<E>) -> String {
    errs.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The AWS example 25 s in: qs1 borrowed qs2's GPU, qs2 reclaimed it (the victim is still
/// stopping), qs3 runs on its reserve, one qs1 job waits.
pub fn aws() -> Snapshot {
    let t0 = NOW - 40_000;
    let mut d = Driver::new(AWS_CONFIG, "sample-configs/aws-example").expect("fixture config");
    d.submit("j3", "qs1", 1, 3, t0);
    d.submit("j2", "qs1", 1, 2, t0 + 1_000);
    d.submit("j1", "qs1", 1, 1, t0 + 2_000);
    d.submit("k", "qs2", 1, 1, t0 + 30_000);
    d.submit("r", "qs3", 1, 1, t0 + 32_000);
    d.snapshot(NOW, t0 - 60_000)
}

/// The AWS example an hour on, with jobs that ended every way the `F` view tells apart:
/// one succeeded, one exited 3, one killed by SIGKILL from outside, one cancelled while
/// queued, one timed out; `k` still runs.
pub fn ended() -> Snapshot {
    let t0 = NOW - 3_600_000;
    let mut d = Driver::new(AWS_CONFIG, "sample-configs/aws-example").expect("fixture config");
    let train = d.submit("train", "qs1", 1, 5, t0).expect("accepted");
    let eval = d.submit("eval", "qs2", 1, 5, t0 + 1_000).expect("accepted");
    let sweep = d
        .submit("sweep", "qs3", 1, 5, t0 + 2_000)
        .expect("accepted");
    let late = d.submit("late", "qs1", 1, 1, t0 + 3_000).expect("accepted");
    d.sched.job_exited(train, 0, t0 + 1_200_000);
    d.pass(t0 + 1_200_000);
    d.sched.job_exited(eval, 3, t0 + 1_500_000);
    d.pass(t0 + 1_500_000);
    d.sched.job_killed(sweep, 9, t0 + 2_400_000);
    d.pass(t0 + 2_400_000);
    let k = d
        .submit("k", "qs2", 1, 1, t0 + 2_500_000)
        .expect("accepted");
    let queued = d
        .submit("queued", "qs2", 1, 1, t0 + 2_600_000)
        .expect("accepted");
    d.sched.cancel(queued, "bob", t0 + 2_700_000);
    d.pass(t0 + 2_700_000);
    // `late` started when train ended; it ran past a timeout and was stopped.
    d.sched.timeout(late, t0 + 3_000_000);
    d.pass(t0 + 3_000_000);
    d.released(late, t0 + 3_001_000);
    let _ = k;
    d.snapshot(NOW, t0 - 60_000)
}

/// The AWS example after reloads: qs2's file deleted while its job runs and another waits,
/// qs3 set DISABLED, and two GPUs gone, so the unit is oversubscribed (2 guaranteed on 1).
pub fn reloaded() -> Snapshot {
    let t0 = NOW - 40_000;
    let mut d = Driver::new(AWS_CONFIG, "sample-configs/aws-example").expect("fixture config");
    d.submit("a", "qs1", 1, 1, t0);
    d.submit("b", "qs2", 1, 1, t0 + 1_000);
    d.submit("b2", "qs2", 1, 1, t0 + 2_000);
    d.submit("c", "qs3", 1, 1, t0 + 3_000);
    let after = AWS_CONFIG
        .replace(
            "maxCapacity: 3, devices: {fake: 3}",
            "maxCapacity: 3, devices: [0]",
        )
        .replace(
            "resourceSharingConfiguration: {strategy: RESERVE}",
            "resourceSharingConfiguration: {strategy: RESERVE}\nstate: DISABLED",
        );
    let after: String = after
        .split("---")
        .filter(|doc| !doc.contains("quotaShareName: qs2"))
        .collect::<Vec<_>>()
        .join("---");
    let cfg =
        validate(parse_documents(&after, Some("sample-configs/aws-example")).expect("parses"))
            .expect("valid");
    d.sched
        .apply_config(&cfg, &UnitCapacity::simulated(&cfg), t0 + 20_000);
    d.pass(t0 + 20_000);
    d.snapshot(NOW, t0 + 20_000)
}

/// A busy 8-GPU lab: borrowing, a reserve held idle, a long queue with varied reasons,
/// finished preemptions in the log (one fresh) and NVML figures on some devices.
pub fn lab() -> Snapshot {
    lab_snapshot(lab_driver())
}

/// The same lab on two nodes of 4 GPUs (SPEC §10): the GPU pane groups by node, jobs say
/// their node.
pub fn lab_nodes() -> Snapshot {
    let cfg = LAB_CONFIG.replace(
        "- {capacityUnit: a100, maxCapacity: 8, devices: {fake: 8}}",
        "- {capacityUnit: a100, maxCapacity: 8}\nnodes:\n- {name: gpu1, devices: {a100: {fake: 4}}}\n- {name: gpu2, devices: {a100: {fake: 4}}}",
    );
    lab_snapshot(lab_driver_on(&cfg))
}

/// The lab on two nodes of 4 GPUs with gangs (SPEC §16): vision's `ddp-resnet` runs
/// 2×2 on both nodes, on GPUs borrowed from nlp and infra; its low-priority
/// `sweep-gang` (2×1) was reclaimed for infra's `ci-smoke` and waits again, as does
/// `ddp-big` (2×3), which needs 3 GPUs free on each of two nodes.
pub fn lab_gang() -> Snapshot {
    lab_snapshot(lab_gang_driver())
}

/// The lab's shares on two nodes of 4 GPUs (`gpu1`, `gpu2`), vision allowed to borrow
/// up to 3× its limit (what nlp and infra lend: it may hold 6).
pub fn lab_gang_config() -> String {
    let cfg = LAB_CONFIG
        .replace(
            "- {capacityUnit: a100, maxCapacity: 8, devices: {fake: 8}}",
            "- {capacityUnit: a100, maxCapacity: 8}\nnodes:\n- {name: gpu1, devices: {a100: {fake: 4}}}\n- {name: gpu2, devices: {a100: {fake: 4}}}",
        )
        .replace("borrowLimit: 100}", "borrowLimit: 300}");
    assert!(cfg.contains("borrowLimit: 300"));
    cfg
}

/// The scheduler behind [`lab_gang`].
pub fn lab_gang_driver() -> Driver {
    let t0 = NOW - 3_600_000;
    let mut d =
        Driver::new(&lab_gang_config(), "sample-configs/lab-2nodes").expect("fixture config");
    let sweep = d.submit_gang("sweep-gang", "vision", (2, 1), 1, t0);
    d.submit_gang("ddp-resnet", "vision", (2, 2), 10, t0 + 600_000);
    // infra's own GPU, taken back from the borrowing vision: its lowest-priority job, the
    // gang, goes, and hands its GPUs back on both nodes after its grace period.
    d.submit("ci-smoke", "infra", 1, 8, t0 + 1_500_000);
    if let Some(id) = sweep {
        d.released(id, t0 + 1_520_000);
    }
    d.submit_gang("ddp-big", "vision", (2, 3), 20, t0 + 3_500_000);
    d
}

fn lab_snapshot(mut d: Driver) -> Snapshot {
    let mut snap = d.snapshot(NOW, NOW - 206_000);
    // The queue's start estimates, as the runtime's background forecast makes them.
    snap.estimates = Arc::new(shareq::forecast::estimate(
        d.sched.clone(),
        NOW,
        &lab_runtimes(),
    ));
    // One preemption a moment ago, to show the fresh highlight.
    if let Some(first) = Arc::make_mut(&mut snap.preemptions).first_mut() {
        first.at = NOW - 2_000;
    }
    snap
}

/// Typical runtimes for the lab's teams (what its history would say).
pub fn lab_runtimes() -> shareq::forecast::Runtimes {
    shareq::forecast::Runtimes::from_samples(
        [
            ("vision", [20, 45, 90, 240]),
            ("nlp", [60, 120, 180, 480]),
            ("infra", [5, 10, 30, 120]),
            ("robotics", [15, 30, 60, 90]),
        ]
        .into_iter()
        .flat_map(|(s, mins)| mins.map(|m| (s.to_string(), m * 60_000))),
    )
}

/// The lab with fair share in `vision` (SPEC §12): vera has used it for an hour, and vik
/// queues a job last, which goes ahead of her queued sweeps.
pub fn lab_fair() -> Snapshot {
    let cfg = LAB_CONFIG.replace(
        "resourceSharingConfiguration: {strategy: LEND_AND_BORROW, borrowLimit: 100}\npreemptionConfiguration: {inSharePreemption: ENABLED}",
        "resourceSharingConfiguration: {strategy: LEND_AND_BORROW, borrowLimit: 100}\npreemptionConfiguration: {inSharePreemption: ENABLED}\nfairShare: {halfLifeSeconds: 86400}\nuserLimit: 4",
    );
    assert!(cfg.contains("fairShare"));
    let mut d = lab_driver_on(&cfg);
    d.submit_by(("vik", 1005), "vik-probe", "vision", 1, NOW - 60_000);
    lab_snapshot(d)
}

/// The scheduler behind [`lab`] (for predictions made on a copy of it).
pub fn lab_driver() -> Driver {
    lab_driver_on(LAB_CONFIG)
}

fn lab_driver_on(config: &str) -> Driver {
    let t0 = NOW - 3_600_000;
    let mut d = Driver::new(config, "sample-configs/lab-8gpu").expect("fixture config");
    let train = d.submit("train-resnet", "vision", 2, 10, t0);
    d.submit("eval-llama", "nlp", 1, 5, t0 + 60_000);
    let debug = d.submit("debug-3", "infra", 1, 1, t0 + 600_000);
    d.submit("sweep-16", "vision", 1, 10, t0 + 900_000);
    d.submit("sweep-17", "vision", 1, 10, t0 + 1_200_000);
    d.submit("ci-smoke", "infra", 1, 8, t0 + 1_300_000);
    if let Some(id) = debug {
        d.released(id, t0 + 1_305_000);
    }
    let extra = d.submit("eval-mixtral", "nlp", 2, 5, t0 + 3_350_000);
    // The reclaimed sweep hands its GPU back after its grace period.
    if let Some(r) = d.log.first().map(|r| r.victim) {
        d.released(r, t0 + 3_352_000);
    }
    d.submit("sweep-18", "vision", 1, 10, t0 + 3_380_000);
    d.submit("sweep-19", "vision", 1, 10, t0 + 3_400_000);
    d.submit("sweep-20", "vision", 1, 10, t0 + 3_400_500);
    d.submit("nightly-build", "infra", 2, 5, t0 + 3_559_000);
    d.submit("robot-sim", "robotics", 1, 1, t0 + 3_590_000);
    let _ = (train, extra);
    for (i, (u, m)) in [(97, 71_000), (95, 71_000), (88, 40_000)]
        .into_iter()
        .enumerate()
    {
        d.telemetry.insert(
            ("a100".to_string(), i as u32),
            Telemetry {
                util: u,
                mem_used: m,
                mem_total: 81_920,
            },
        );
    }
    d
}

/// `base` with its queue grown to `n` jobs (copies with new ids, names and wait times),
/// for the 100,000-job render bench.
pub fn with_queue_len(base: &Snapshot, n: usize) -> Snapshot {
    let mut s = base.clone();
    let template: Vec<JobView> = if base.queue.is_empty() {
        base.running.clone()
    } else {
        base.queue_views()
    };
    if template.is_empty() {
        return s;
    }
    let mut next = s
        .queue
        .iter()
        .chain(&s.running)
        .map(|j| j.id.0)
        .max()
        .unwrap_or(0)
        + 1;
    let reason: Arc<str> =
        Arc::from("waiting for vision capacity (2/2 in use); no idle capacity to borrow");
    let mut queue = s.queue_views();
    while queue.len() < n {
        let mut j = template[queue.len() % template.len()].clone();
        j.id = JobId(next);
        j.name = format!("sweep-{next}");
        j.submitted = NOW - 1_000 * (n - queue.len()) as i64 / 10;
        j.reason = reason.clone();
        j.reason_group = None;
        j.nominated = false;
        j.started = None;
        j.devices.clear();
        j.stopping = None;
        queue.push(j);
        next += 1;
    }
    s.queue = JobList::from_views(queue);
    for sh in &mut s.shares {
        sh.queued = s.queue.iter().filter(|j| j.share == sh.share).count();
    }
    s
}

/// Draw `app` on a `w`×`h` test terminal and return the screen as plain text lines.
pub fn render_text(app: &mut shareq::tui::App, w: u16, h: u16) -> String {
    render_with(w, h, |f| shareq::tui::draw::draw(f, app))
}

/// Run `draw` on a `w`×`h` test terminal and return the screen as plain text lines
/// (trailing blanks trimmed; wide characters counted once).
pub fn render_with(w: u16, h: u16, draw: impl FnOnce(&mut ratatui::Frame)) -> String {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    let mut term = match Terminal::new(TestBackend::new(w, h)) {
        Ok(t) => t,
        Err(e) => match e {},
    };
    if let Err(e) = term.draw(draw) {
        match e {}
    }
    let buf = term.backend().buffer();
    let mut out = String::with_capacity((w as usize + 1) * h as usize);
    for y in 0..h {
        let mut line = String::new();
        let mut skip = 0;
        for x in 0..w {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let sym = buf[(x, y)].symbol();
            line.push_str(sym);
            skip = unicode_width::UnicodeWidthStr::width(sym).saturating_sub(1);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A console state over `snap` at the fixtures' fixed clock (UTC, dark theme).
pub fn app(snap: Snapshot) -> shareq::tui::App {
    let mut app = shareq::tui::App::new(Arc::new(snap), shareq::tui::Theme::dark());
    app.now = NOW;
    app.utc_offset_secs = 0;
    app
}

/// Who submits a fixture's jobs to a share: one person per team.
fn member_of(share: &str) -> shareq::model::Submitter {
    let (name, uid) = match share {
        "vision" => ("vera", 1001),
        "nlp" => ("nadia", 1002),
        "infra" => ("ops-ana", 1003),
        "robotics" => ("rob", 1004),
        "qs1" => ("alice", 1011),
        "qs2" => ("bob", 1012),
        "qs3" => ("carol", 1013),
        _ => ("sam", 1000),
    };
    shareq::model::Submitter {
        name: name.to_string(),
        uid,
    }
}

/// A utilisation history of the lab's shares over `window` ending at [`NOW`]: vision
/// borrows more and more of nlp's idle guarantee in the second half, its queue waits
/// longer, infra's use comes and goes, robotics starts at the end, and for a stretch in
/// the middle no scheduler ran (buckets without samples).
pub fn history(window: shareq::snapshot::usage::Window) -> shareq::snapshot::usage::UsageHistory {
    use shareq::snapshot::usage::{BUCKETS, ShareSeries, UsageHistory, UsagePoint};
    let bucket_ms = window.ms() / BUCKETS as i64;
    let to = (NOW / bucket_ms + 1) * bucket_ms;
    let samples: Vec<u32> = (0..BUCKETS)
        .map(|i| if (52..60).contains(&i) { 0 } else { 2 })
        .collect();
    let series = |share: &str, limit: u32, f: &dyn Fn(usize) -> UsagePoint| ShareSeries {
        share: share.to_string(),
        unit: "a100".to_string(),
        limit,
        memory_gib: None,
        points: (0..BUCKETS)
            .map(|i| {
                if samples[i] == 0 {
                    UsagePoint::default()
                } else {
                    f(i)
                }
            })
            .collect(),
    };
    let half = BUCKETS / 2;
    let borrowed = |i: usize| {
        if i < half {
            0.0
        } else {
            ((i - half) / 15) as f64
        }
    };
    UsageHistory {
        window,
        from: to - window.ms(),
        to,
        bucket_ms,
        samples: samples.clone(),
        every_ms: 30_000,
        series: vec![
            series("infra", 1, &|i| UsagePoint {
                own: if (i / 10) % 2 == 0 { 1.0 } else { 0.0 },
                ..UsagePoint::default()
            }),
            series("nlp", 3, &|i| UsagePoint {
                own: 1.0,
                lent: borrowed(i).min(2.0),
                started: u32::from(i % 30 == 0),
                started_wait_ms: if i % 30 == 0 { 45_000 } else { 0 },
                ..UsagePoint::default()
            }),
            series("robotics", 2, &|i| UsagePoint {
                own: if i + 6 >= BUCKETS { 1.0 } else { 0.0 },
                ..UsagePoint::default()
            }),
            series("vision", 2, &|i| UsagePoint {
                own: 2.0,
                borrowed: borrowed(i),
                queued_gpus: if i < half { 1.0 } else { 3.0 },
                wait_max_ms: (i as i64 % 40) * bucket_ms / 2,
                started: u32::from(i % 8 == 0),
                started_wait_ms: if i % 8 == 0 { 120_000 } else { 0 },
                ..UsagePoint::default()
            }),
        ],
    }
}
