//! The usage figures of a run: per share GPU-seconds (within the limit, borrowed, lent,
//! idle guarantee), jobs finished, wait times and preemptions, and the overall
//! utilisation; per share and overall, what preemption cost: the most preemptions of one
//! job, the GPU-seconds lost (work since the attempt's last save, SPEC §14) and the jobs started and
//! preempted at the same instant. A sliced unit's usage (SPEC §15) is GiB-seconds, kept
//! apart from the GPU-seconds (`gib_seconds_used`) so the two never add up.
//!
//! One accumulator serves both `replay --summary` (fed from the simulated scheduler at each
//! instant) and `shareq report` (fed from the recorded standing and decision events of the
//! live history, `crate::report`): the figures are computed by the same code.

use crate::sched::{Event, FailReason, Sched};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

#[derive(Debug, Default, Clone)]
struct Totals {
    within: f64,
    borrowed: f64,
    lent: f64,
    idle: f64,
    /// GPU-seconds held by the group's jobs, from each start to the end of the attempt as
    /// the events say it (per user; per share `within + borrowed` is exact).
    used_by_jobs: f64,
    succeeded: u64,
    failed: u64,
    preemptions: u64,
    waits: Vec<i64>,
    /// The most times one job of the group was preempted.
    max_preemptions_of_one_job: u64,
    /// GPU-seconds held by attempts that were preempted, from their last save (their
    /// start when they saved nothing) until they released their GPUs (SPEC §14).
    gpu_seconds_lost: f64,
    /// Preemptions of a job at the very instant it started.
    started_and_preempted_same_instant: u64,
    /// GiB-seconds held on sliced units (SPEC §15): never added to GPU-seconds.
    gib_used: f64,
    /// GiB-seconds that preempted attempts on sliced units lost.
    gib_lost: f64,
}

/// A preempted attempt whose loss is counted when it releases its GPUs.
#[derive(Debug, Clone)]
struct Stopping {
    share: String,
    user: Option<String>,
    started_at: i64,
    quantity: u32,
    /// On a sliced unit: the loss is GiB-seconds.
    gib: bool,
}

/// One share's standing on one unit at an instant: what [`Stats::advance_with`]
/// integrates over time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct LaneFigures {
    pub share: String,
    pub unit: String,
    pub limit: u32,
    pub usage: u32,
    pub borrowed: u32,
    pub lent: u32,
    pub idle: u32,
}

/// One unit's capacity at an instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct UnitFigures {
    pub unit: String,
    pub usable: u32,
    pub used: u32,
    /// With `nodes`: GPUs free while some job of the unit waits FRAGMENTED.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fragmented_idle: u32,
    /// A sliced unit's GiB per device (SPEC §15): its quantities are GiB, not GPUs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slice_gib: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_nought(n: &f64) -> bool {
    *n == 0.0
}

/// The standing of a scheduler at an instant, as the accumulator reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Standing {
    pub lanes: Vec<LaneFigures>,
    pub units: Vec<UnitFigures>,
    /// The config has `nodes` (SPEC §10).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nodes: bool,
}

impl Standing {
    /// The scheduler's standing now.
    pub fn of(sched: &Sched) -> Standing {
        Standing {
            lanes: sched
                .share_stats()
                .into_iter()
                .map(|st| LaneFigures {
                    share: st.share,
                    unit: st.unit,
                    limit: st.limit,
                    usage: st.usage,
                    borrowed: st.borrowed,
                    lent: st.lent,
                    idle: st.idle,
                })
                .collect(),
            // `unit_totals` and `unit_indexes` both list the present units in index order.
            units: sched
                .unit_totals()
                .into_iter()
                .zip(sched.unit_indexes())
                .map(|((unit, usable, used, _), u)| UnitFigures {
                    unit,
                    usable,
                    used,
                    fragmented_idle: sched.fragmented_idle(u),
                    slice_gib: sched.slice_of(u).unwrap_or(0),
                })
                .collect(),
            nodes: sched.has_nodes(),
        }
    }
}

/// A decision as the accumulator needs it: the job, its share and submitter, when it
/// was submitted, and what happened.
#[derive(Debug, Clone, Copy)]
pub struct Fact<'a> {
    pub job: u64,
    pub share: &'a str,
    pub user: Option<&'a str>,
    pub submitted: i64,
    pub kind: FactKind,
    /// On the `requeued` or `failed` that ends a preemption: the GPU-seconds it lost, as
    /// the core computed it (SPEC §14: since the attempt's last save); absent, the attempt
    /// lost everything since its start.
    pub lost: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactKind {
    Started {
        quantity: u32,
        /// The job's unit is sliced (SPEC §15): `quantity` is GiB, its time GiB-seconds.
        gib: bool,
    },
    Succeeded,
    /// `exhausted`: failed because its preemption retries ran out (at the release).
    Failed {
        exhausted: bool,
    },
    Cancelled,
    Requeued,
    Preempted,
}

impl FactKind {
    /// The kind of a scheduler event, for the events that count.
    pub fn of(ev: &Event) -> Option<(crate::model::JobId, FactKind)> {
        Some(match ev {
            Event::Started { job, .. } => (
                *job,
                FactKind::Started {
                    quantity: ev.devices_started().unwrap_or(0),
                    gib: false,
                },
            ),
            Event::Succeeded { job } => (*job, FactKind::Succeeded),
            Event::Failed { job, reason, .. } => (
                *job,
                FactKind::Failed {
                    exhausted: *reason == FailReason::PreemptionRetriesExhausted,
                },
            ),
            Event::Cancelled { job, .. } => (*job, FactKind::Cancelled),
            Event::Requeued { job, .. } => (*job, FactKind::Requeued),
            Event::Preempted { job, .. } => (*job, FactKind::Preempted),
            _ => return None,
        })
    }
}

/// Accumulates the figures as the clock advances. `per_second` is how many clock ticks
/// make a second (1 for the replay's seconds, 1000 for the live milliseconds).
#[derive(Debug)]
pub struct Stats {
    per_second: f64,
    first: Option<i64>,
    last: i64,
    used: f64,
    capacity: f64,
    shares: BTreeMap<String, Totals>,
    users: BTreeMap<String, Totals>,
    started_once: HashSet<u64>,
    /// Preemptions per job.
    preempted: HashMap<u64, u64>,
    /// Attempts preempted and not yet released, by job.
    stopping: HashMap<u64, Stopping>,
    /// Each job's latest start: (instant, quantity). Events are read after the pass, when
    /// a victim that released at once is already back in the queue.
    last_start: HashMap<u64, (i64, u32)>,
    /// Attempts holding GPUs (or a sliced unit's GiB): (start, quantity, submitter, GiB).
    holding: HashMap<u64, (i64, u32, Option<String>, bool)>,
    /// The standing integrated from `last` on.
    standing: Standing,
    /// With `nodes`: GPU-seconds free while some job waited FRAGMENTED on their unit.
    fragmented_idle: f64,
    /// With `nodes`: submissions refused as larger than any node.
    larger_than_any_node: u64,
    /// Some standing had `nodes`.
    nodes: bool,
    /// GiB-seconds used on sliced units.
    gib_used: f64,
    /// First-start waits of jobs larger than their share's guarantee, and of jobs within
    /// it (replay only: the class is read off the scheduler at the first start).
    waits_larger: Vec<i64>,
    waits_within: Vec<i64>,
}

/// The first-start waits of one class of jobs, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct WaitFigures {
    pub jobs: u64,
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
}

impl WaitFigures {
    fn of(mut waits: Vec<i64>, per_second: f64) -> WaitFigures {
        waits.sort_unstable();
        WaitFigures {
            jobs: waits.len() as u64,
            p50: percentile(&waits, 0.50) as f64 / per_second,
            p95: percentile(&waits, 0.95) as f64 / per_second,
            max: waits.last().copied().unwrap_or(0) as f64 / per_second,
        }
    }
}

/// One share's (or user's) figures, in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct GroupSummary {
    pub gpu_seconds_within_limit: f64,
    pub gpu_seconds_borrowed: f64,
    pub gpu_seconds_lent: f64,
    pub gpu_seconds_idle: f64,
    pub gpu_seconds_used: f64,
    pub jobs_finished: u64,
    pub jobs_succeeded: u64,
    pub jobs_failed: u64,
    pub mean_wait: f64,
    pub p50_wait: f64,
    pub p95_wait: f64,
    pub preemptions: u64,
    pub max_preemptions_of_one_job: u64,
    pub gpu_seconds_lost_to_preemption: f64,
    pub started_and_preempted_same_instant: u64,
    /// GiB-seconds used on sliced units (SPEC §15), kept apart from the GPU-seconds.
    #[serde(default, skip_serializing_if = "is_nought")]
    pub gib_seconds_used: f64,
    /// GiB-seconds of work lost by preempted attempts on sliced units (SPEC §14, §15).
    #[serde(default, skip_serializing_if = "is_nought")]
    pub gib_seconds_lost_to_preemption: f64,
}

/// The figures of a whole run (or of a report's window).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Summary {
    /// From the first to the last instant, in clock ticks.
    pub first: i64,
    pub last: i64,
    /// Seconds.
    pub span: f64,
    pub gpu_seconds_used: f64,
    pub utilisation: f64,
    pub max_preemptions_of_one_job: u64,
    pub gpu_seconds_lost_to_preemption: f64,
    pub started_and_preempted_same_instant: u64,
    /// With `nodes` (SPEC §10): GPU-seconds free while some job waited FRAGMENTED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_seconds_idle_while_fragmented: Option<f64>,
    /// With `nodes`: submissions refused as larger than any node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_rejected_larger_than_any_node: Option<u64>,
    pub shares: BTreeMap<String, GroupSummary>,
    pub users: BTreeMap<String, GroupSummary>,
    /// Useful GPU time (used minus lost to preemption) ÷ usable GPUs × span.
    #[serde(default)]
    pub goodput: f64,
    /// GPU-seconds lost to preemption, in percent of the GPU-seconds used.
    #[serde(default)]
    pub gpu_seconds_lost_to_preemption_pct: f64,
    /// First-start waits of jobs larger than their share's guarantee (they can only
    /// borrow) and of jobs within it.
    #[serde(default)]
    pub waits_larger_than_guarantee: WaitFigures,
    #[serde(default)]
    pub waits_within_guarantee: WaitFigures,
    /// GiB-seconds used on sliced units (SPEC §15); the GPU figures leave them out.
    #[serde(default, skip_serializing_if = "is_nought")]
    pub gib_seconds_used: f64,
}

impl Stats {
    pub fn new(per_second: u32) -> Stats {
        Stats {
            per_second: f64::from(per_second.max(1)),
            first: None,
            last: 0,
            used: 0.0,
            capacity: 0.0,
            shares: BTreeMap::new(),
            users: BTreeMap::new(),
            started_once: Default::default(),
            preempted: Default::default(),
            stopping: Default::default(),
            last_start: Default::default(),
            holding: Default::default(),
            standing: Standing::default(),
            fragmented_idle: 0.0,
            larger_than_any_node: 0,
            nodes: false,
            gib_used: 0.0,
            waits_larger: Vec::new(),
            waits_within: Vec::new(),
        }
    }

    /// Integrate the scheduler's current standing over [last, t).
    pub fn advance(&mut self, sched: &Sched, t: i64) {
        self.nodes |= sched.has_nodes();
        if self.first.is_some() && t > self.last {
            self.standing = Standing::of(sched);
        }
        self.advance_to(t);
    }

    /// Integrate the standing in force up to `t`, then hold `standing` from `t` on.
    pub fn advance_with(&mut self, t: i64, standing: Standing) {
        self.advance_to(t);
        self.nodes |= standing.nodes;
        self.standing = standing;
    }

    /// Integrate the standing in force over [last, t).
    pub fn advance_to(&mut self, t: i64) {
        let Some(_) = self.first else {
            self.first = Some(t);
            self.last = t;
            return;
        };
        let dt = (t - self.last) as f64 / self.per_second;
        if dt > 0.0 {
            let sliced: HashSet<&str> = self
                .standing
                .units
                .iter()
                .filter(|u| u.slice_gib > 0)
                .map(|u| u.unit.as_str())
                .collect();
            for st in &self.standing.lanes {
                let e = self.shares.entry(st.share.clone()).or_default();
                if sliced.contains(st.unit.as_str()) {
                    // GiB, not GPUs: counted apart (SPEC §15).
                    e.gib_used += f64::from(st.usage.min(st.limit) + st.borrowed) * dt;
                    continue;
                }
                e.within += f64::from(st.usage.min(st.limit)) * dt;
                e.borrowed += f64::from(st.borrowed) * dt;
                e.lent += f64::from(st.lent) * dt;
                e.idle += f64::from(st.idle) * dt;
            }
            for u in &self.standing.units {
                if u.slice_gib > 0 {
                    self.gib_used += f64::from(u.used) * dt;
                    continue;
                }
                self.used += f64::from(u.used) * dt;
                self.capacity += f64::from(u.usable) * dt;
                self.fragmented_idle += f64::from(u.fragmented_idle) * dt;
            }
        }
        self.last = self.last.max(t);
    }

    /// Count a scheduler event at `t`.
    pub fn record(&mut self, sched: &Sched, ev: &Event, t: i64) {
        if let Event::Rejected { error, .. } = ev {
            self.rejected(error);
        }
        let Some((id, kind)) = FactKind::of(ev) else {
            return;
        };
        let Some(j) = sched.job(id) else { return };
        // A sliced job holds one device and its GiB (SPEC §15).
        let kind = match kind {
            FactKind::Started { .. } if sched.slice_of(j.unit).is_some() => FactKind::Started {
                quantity: j.quantity,
                gib: true,
            },
            k => k,
        };
        // SPEC §14: a preemption loses the work since the attempt's last save.
        let lost = match ev {
            Event::Requeued { lost: Some(l), .. } | Event::Failed { lost: Some(l), .. } => {
                Some(l.gpu_ticks() as f64 / self.per_second)
            }
            _ => None,
        };
        // An array parent runs nothing: its children are the jobs counted (SPEC §13).
        if j.array_size().is_some() {
            return;
        }
        if let FactKind::Started { quantity, .. } = kind
            && !self.started_once.contains(&id.0)
        {
            let wait = t - j.submitted;
            let limit = sched
                .share_stats_for(j.share, j.unit)
                .map_or(0, |(_, limit)| limit);
            if quantity > limit {
                self.waits_larger.push(wait);
            } else {
                self.waits_within.push(wait);
            }
        }
        let user = j.spec.submitter.as_ref().map(|s| s.name.as_str());
        self.note(
            Fact {
                job: id.0,
                share: sched.share_name(j.share),
                user,
                submitted: j.submitted,
                kind,
                lost,
            },
            t,
        );
    }

    /// A submission was refused with `error`.
    pub fn rejected(&mut self, error: &str) {
        if crate::sched::is_larger_than_any_node(error) {
            self.larger_than_any_node += 1;
        }
    }

    /// Count a decision at `t`.
    pub fn note(&mut self, f: Fact, t: i64) {
        let groups = |me: &mut Stats, op: &mut dyn FnMut(&mut Totals)| {
            op(me.shares.entry(f.share.to_string()).or_default());
            if let Some(u) = f.user {
                op(me.users.entry(u.to_string()).or_default());
            }
        };
        match f.kind {
            FactKind::Started { quantity, gib } => {
                self.end_holding(f.job, t);
                self.last_start.insert(f.job, (t, quantity));
                self.holding
                    .insert(f.job, (t, quantity, f.user.map(str::to_string), gib));
                if self.started_once.insert(f.job) {
                    let wait = t - f.submitted;
                    groups(self, &mut |e| e.waits.push(wait));
                }
            }
            FactKind::Succeeded => {
                // A victim that ended by itself during its stop lost nothing.
                self.stopping.remove(&f.job);
                self.end_holding(f.job, t);
                groups(self, &mut |e| e.succeeded += 1);
            }
            FactKind::Failed { exhausted } => {
                if exhausted {
                    self.count_loss(f.job, t, f.lost);
                } else {
                    self.stopping.remove(&f.job);
                }
                self.end_holding(f.job, t);
                groups(self, &mut |e| e.failed += 1);
            }
            FactKind::Cancelled => {
                self.stopping.remove(&f.job);
                self.end_holding(f.job, t);
                groups(self, &mut |e| e.failed += 1);
            }
            FactKind::Requeued => {
                self.count_loss(f.job, t, f.lost);
                self.end_holding(f.job, t);
            }
            FactKind::Preempted => {
                let count = self.preempted.entry(f.job).or_default();
                *count += 1;
                let count = *count;
                let start = self.last_start.get(&f.job).copied();
                let same = start.is_some_and(|(at, _)| at == t);
                groups(self, &mut |e| {
                    e.preemptions += 1;
                    e.max_preemptions_of_one_job = e.max_preemptions_of_one_job.max(count);
                    if same {
                        e.started_and_preempted_same_instant += 1;
                    }
                });
                if let Some((started_at, quantity)) = start {
                    let gib = self.holding.get(&f.job).is_some_and(|h| h.3);
                    self.stopping.insert(
                        f.job,
                        Stopping {
                            share: f.share.to_string(),
                            user: f.user.map(str::to_string),
                            started_at,
                            quantity,
                            gib,
                        },
                    );
                }
            }
        }
    }

    /// Learn from a decision made before the figures start (a report's window): which
    /// jobs had started (a later start is no first start), what held GPUs and what was
    /// being stopped. Nothing is counted.
    pub fn prime(&mut self, f: Fact, t: i64) {
        match f.kind {
            FactKind::Started { quantity, gib } => {
                self.started_once.insert(f.job);
                self.last_start.insert(f.job, (t, quantity));
                self.holding
                    .insert(f.job, (t, quantity, f.user.map(str::to_string), gib));
            }
            FactKind::Preempted => {
                *self.preempted.entry(f.job).or_default() += 1;
                if let Some(&(started_at, quantity)) = self.last_start.get(&f.job) {
                    let gib = self.holding.get(&f.job).is_some_and(|h| h.3);
                    self.stopping.insert(
                        f.job,
                        Stopping {
                            share: f.share.to_string(),
                            user: f.user.map(str::to_string),
                            started_at,
                            quantity,
                            gib,
                        },
                    );
                }
            }
            FactKind::Succeeded
            | FactKind::Failed { .. }
            | FactKind::Cancelled
            | FactKind::Requeued => {
                self.stopping.remove(&f.job);
                self.holding.remove(&f.job);
            }
        }
    }

    /// The figures start at `t`: GPU-time held before it is not counted (a preempted
    /// attempt's loss still counts whole when it releases inside).
    pub fn start_at(&mut self, t: i64) {
        for h in self.holding.values_mut() {
            h.0 = h.0.max(t);
        }
        self.first = None;
        self.advance_to(t);
    }

    /// The job's attempt no longer holds GPUs (as far as the events say; a cancelled
    /// job's until the cancel): its GPU-time counts for its submitter.
    fn end_holding(&mut self, job: u64, t: i64) {
        if let Some((started_at, quantity, Some(user), gib)) = self.holding.remove(&job) {
            let held = f64::from(quantity) * (t - started_at) as f64 / self.per_second;
            let e = self.users.entry(user).or_default();
            if gib {
                e.gib_used += held;
            } else {
                e.used_by_jobs += held;
            }
        }
    }

    /// A preempted attempt released its GPUs at `t`: what it ran since its last save (the
    /// `lost` its line carries; else since its start) is lost.
    fn count_loss(&mut self, job: u64, t: i64, lost: Option<f64>) {
        if let Some(st) = self.stopping.remove(&job) {
            let lost = lost.unwrap_or_else(|| {
                f64::from(st.quantity) * (t - st.started_at) as f64 / self.per_second
            });
            // A sliced unit's loss is GiB-seconds (SPEC §15): kept apart.
            let add = |t: &mut Totals| {
                if st.gib {
                    t.gib_lost += lost;
                } else {
                    t.gpu_seconds_lost += lost;
                }
            };
            add(self.shares.entry(st.share).or_default());
            if let Some(u) = st.user {
                add(self.users.entry(u).or_default());
            }
        }
    }

    /// The figures.
    pub fn summary(mut self) -> Summary {
        // Attempts still holding GPUs count up to the last instant.
        let last = self.last;
        for job in self.holding.keys().copied().collect::<Vec<_>>() {
            self.end_holding(job, last);
        }
        let first = self.first.unwrap_or(self.last);
        let span = (self.last - first) as f64 / self.per_second;
        let per_second = self.per_second;
        let (mut most, mut lost, mut same_instant) = (0u64, 0f64, 0u64);
        let shares: BTreeMap<String, GroupSummary> = std::mem::take(&mut self.shares)
            .into_iter()
            .map(|(name, s)| {
                most = most.max(s.max_preemptions_of_one_job);
                lost += s.gpu_seconds_lost;
                same_instant += s.started_and_preempted_same_instant;
                (name, group(s, per_second, true))
            })
            .collect();
        let users = std::mem::take(&mut self.users)
            .into_iter()
            .map(|(name, s)| (name, group(s, per_second, false)))
            .collect();
        let utilisation = if self.capacity > 0.0 {
            self.used / self.capacity
        } else {
            0.0
        };
        let goodput = if self.capacity > 0.0 {
            (self.used - lost).max(0.0) / self.capacity
        } else {
            0.0
        };
        let lost_pct = if self.used > 0.0 {
            100.0 * lost / self.used
        } else {
            0.0
        };
        Summary {
            goodput,
            gpu_seconds_lost_to_preemption_pct: lost_pct,
            waits_larger_than_guarantee: WaitFigures::of(
                std::mem::take(&mut self.waits_larger),
                per_second,
            ),
            waits_within_guarantee: WaitFigures::of(
                std::mem::take(&mut self.waits_within),
                per_second,
            ),
            first,
            last: self.last,
            span,
            gpu_seconds_used: self.used,
            utilisation,
            max_preemptions_of_one_job: most,
            gpu_seconds_lost_to_preemption: lost,
            started_and_preempted_same_instant: same_instant,
            gpu_seconds_idle_while_fragmented: self.nodes.then_some(self.fragmented_idle),
            jobs_rejected_larger_than_any_node: self.nodes.then_some(self.larger_than_any_node),
            shares,
            users,
            gib_seconds_used: self.gib_used,
        }
    }

    /// The summary as the replay's one JSON line.
    pub fn finish(self) -> String {
        Stats::line(&self.summary())
    }

    /// A summary as the replay's one JSON line (`replay --summary --json`).
    pub fn line(s: &Summary) -> String {
        let shares: serde_json::Map<String, serde_json::Value> = s
            .shares
            .iter()
            .map(|(name, g)| {
                let mut v = serde_json::json!({
                        "gpu_seconds_within_limit": g.gpu_seconds_within_limit,
                        "gpu_seconds_borrowed": g.gpu_seconds_borrowed,
                        "gpu_seconds_lent": g.gpu_seconds_lent,
                        "jobs_finished": g.jobs_finished,
                        "jobs_succeeded": g.jobs_succeeded,
                        "jobs_failed": g.jobs_failed,
                        "mean_wait": g.mean_wait,
                        "p95_wait": g.p95_wait as i64,
                        "preemptions": g.preemptions,
                        "max_preemptions_of_one_job": g.max_preemptions_of_one_job,
                        "gpu_seconds_lost_to_preemption": g.gpu_seconds_lost_to_preemption,
                        "started_and_preempted_same_instant": g.started_and_preempted_same_instant,
                        "gpu_seconds_idle": g.gpu_seconds_idle,
                        "p50_wait": g.p50_wait as i64,
                });
                // Only a share with a sliced unit has GiB (SPEC §15).
                if let Some(o) = v.as_object_mut() {
                    if g.gib_seconds_used > 0.0 {
                        o.insert("gib_seconds_used".into(), g.gib_seconds_used.into());
                    }
                    if g.gib_seconds_lost_to_preemption > 0.0 {
                        o.insert(
                            "gib_seconds_lost_to_preemption".into(),
                            g.gib_seconds_lost_to_preemption.into(),
                        );
                    }
                }
                (name.clone(), v)
            })
            .collect();
        // Without `nodes` the line is what it always was.
        let nodes = match (
            s.gpu_seconds_idle_while_fragmented,
            s.jobs_rejected_larger_than_any_node,
        ) {
            (Some(idle), Some(rejected)) => format!(
                ",\"gpu_seconds_idle_while_fragmented\":{idle},\"jobs_rejected_larger_than_any_node\":{rejected}"
            ),
            _ => String::new(),
        };
        // Appended after the fields that were there before, so that readers of the old
        // line find theirs in place.
        let waits = |w: &WaitFigures| serde_json::json!({"jobs": w.jobs, "p50": w.p50, "p95": w.p95, "max": w.max});
        // Per user (SPEC §12), only when the submissions name users.
        let users = if s.users.is_empty() {
            String::new()
        } else {
            let users: serde_json::Map<String, serde_json::Value> = s
                .users
                .iter()
                .map(|(name, g)| {
                    (
                        name.clone(),
                        serde_json::json!({
                            "gpu_seconds_used": g.gpu_seconds_used,
                            "jobs_finished": g.jobs_finished,
                            "mean_wait": g.mean_wait,
                            "p50_wait": g.p50_wait as i64,
                            "p95_wait": g.p95_wait as i64,
                            "gpu_seconds_lost_to_preemption": g.gpu_seconds_lost_to_preemption,
                        }),
                    )
                })
                .collect();
            format!(",\"users\":{}", serde_json::Value::Object(users))
        };
        // With sliced units only (SPEC §15), last so the older fields stay in place.
        let gib = if s.gib_seconds_used > 0.0 {
            format!(",\"gib_seconds_used\":{}", s.gib_seconds_used)
        } else {
            String::new()
        };
        format!(
            "{{\"t\":{},\"event\":\"summary\",\"span\":{},\"gpu_seconds_used\":{},\"utilisation\":{},\"max_preemptions_of_one_job\":{},\"gpu_seconds_lost_to_preemption\":{},\"started_and_preempted_same_instant\":{}{nodes},\"shares\":{},\"goodput\":{},\"gpu_seconds_lost_to_preemption_pct\":{},\"waits_larger_than_guarantee\":{},\"waits_within_guarantee\":{}{users}{gib}}}",
            s.last,
            s.span,
            s.gpu_seconds_used,
            s.utilisation,
            s.max_preemptions_of_one_job,
            s.gpu_seconds_lost_to_preemption,
            s.started_and_preempted_same_instant,
            serde_json::Value::Object(shares),
            s.goodput,
            s.gpu_seconds_lost_to_preemption_pct,
            waits(&s.waits_larger_than_guarantee),
            waits(&s.waits_within_guarantee),
        )
    }
}

/// A group's totals as figures in seconds. `share`: GPU-time used is within + borrowed
/// (exact, from the standing); for a user it is what its jobs' attempts held.
fn group(mut s: Totals, per_second: f64, share: bool) -> GroupSummary {
    s.waits.sort_unstable();
    let mean = if s.waits.is_empty() {
        0.0
    } else {
        s.waits.iter().map(|&w| w as f64).sum::<f64>() / s.waits.len() as f64 / per_second
    };
    GroupSummary {
        gpu_seconds_within_limit: s.within,
        gpu_seconds_borrowed: s.borrowed,
        gpu_seconds_lent: s.lent,
        gpu_seconds_idle: s.idle,
        gpu_seconds_used: if share {
            s.within + s.borrowed
        } else {
            s.used_by_jobs
        },
        jobs_finished: s.succeeded + s.failed,
        jobs_succeeded: s.succeeded,
        jobs_failed: s.failed,
        mean_wait: mean,
        p50_wait: percentile(&s.waits, 0.50) as f64 / per_second,
        p95_wait: percentile(&s.waits, 0.95) as f64 / per_second,
        preemptions: s.preemptions,
        max_preemptions_of_one_job: s.max_preemptions_of_one_job,
        gpu_seconds_lost_to_preemption: s.gpu_seconds_lost,
        started_and_preempted_same_instant: s.started_and_preempted_same_instant,
        gib_seconds_used: s.gib_used,
        gib_seconds_lost_to_preemption: s.gib_lost,
    }
}

/// The nearest-rank percentile of sorted values (0 for none).
fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[i.clamp(1, sorted.len()) - 1]
}
