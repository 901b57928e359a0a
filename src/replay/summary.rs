//! The `--summary` line: per-share GPU-seconds (within the limit, borrowed, lent), jobs
//! finished, wait times and preemptions, and the run's overall utilisation; per share and
//! overall, what preemption cost: the most preemptions of one job, the GPU-seconds lost
//! (work that restarts from zero) and the jobs started and preempted at the same instant.

use crate::sched::{Event, FailReason, Sched};
use std::collections::BTreeMap;

#[derive(Debug, Default, Clone)]
struct ShareTotals {
    within: f64,
    borrowed: f64,
    lent: f64,
    succeeded: u64,
    failed: u64,
    preemptions: u64,
    waits: Vec<i64>,
    /// The most times one job of the share was preempted.
    max_preemptions_of_one_job: u64,
    /// GPU-seconds held by attempts that were preempted, from their start until they
    /// released their GPUs: that work restarts from zero.
    gpu_seconds_lost: f64,
    /// Preemptions of a job at the very instant it started.
    started_and_preempted_same_instant: u64,
}

/// A preempted attempt whose loss is counted when it releases its GPUs.
#[derive(Debug, Clone)]
struct Stopping {
    share: String,
    started_at: i64,
    quantity: u32,
}

/// Accumulates the figures as the simulated clock advances.
#[derive(Debug)]
pub struct Stats {
    first: Option<i64>,
    last: i64,
    used: f64,
    capacity: f64,
    shares: BTreeMap<String, ShareTotals>,
    started_once: std::collections::HashSet<u64>,
    /// Preemptions per job.
    preempted: std::collections::HashMap<u64, u64>,
    /// Attempts preempted and not yet released, by job.
    stopping: std::collections::HashMap<u64, Stopping>,
    /// With `nodes`: GPU-seconds free while some job waited FRAGMENTED on their unit.
    fragmented_idle: f64,
    /// With `nodes`: submissions refused as larger than any node.
    larger_than_any_node: u64,
    /// Each job's latest start: (instant, quantity). Events are read after the pass, when
    /// a victim that released at once is already back in the queue.
    last_start: std::collections::HashMap<u64, (i64, u32)>,
}

impl Stats {
    pub fn new(_sched: &Sched) -> Stats {
        Stats {
            first: None,
            last: 0,
            used: 0.0,
            capacity: 0.0,
            shares: BTreeMap::new(),
            started_once: Default::default(),
            preempted: Default::default(),
            stopping: Default::default(),
            last_start: Default::default(),
            fragmented_idle: 0.0,
            larger_than_any_node: 0,
        }
    }

    /// Integrate the current standing over [last, t).
    pub fn advance(&mut self, sched: &Sched, t: i64) {
        let Some(_) = self.first else {
            self.first = Some(t);
            self.last = t;
            return;
        };
        let dt = (t - self.last) as f64;
        if dt > 0.0 {
            for st in sched.share_stats() {
                let e = self.shares.entry(st.share).or_default();
                e.within += f64::from(st.usage.min(st.limit)) * dt;
                e.borrowed += f64::from(st.borrowed) * dt;
                e.lent += f64::from(st.lent) * dt;
            }
            for (_, usable, used, _) in sched.unit_totals() {
                self.used += f64::from(used) * dt;
                self.capacity += f64::from(usable) * dt;
            }
            if sched.has_nodes() {
                for u in sched.unit_indexes() {
                    self.fragmented_idle += f64::from(sched.fragmented_idle(u)) * dt;
                }
            }
        }
        self.last = t;
    }

    pub fn record(&mut self, sched: &Sched, ev: &Event, t: i64) {
        let share_of = |id: &crate::model::JobId| {
            sched
                .job(*id)
                .map(|j| sched.share_name(j.share).to_string())
                .unwrap_or_default()
        };
        match ev {
            Event::Started { job, devices, .. } => {
                self.last_start.insert(job.0, (t, devices.len() as u32));
                if self.started_once.insert(job.0)
                    && let Some(j) = sched.job(*job)
                {
                    let wait = t - j.submitted;
                    self.shares
                        .entry(share_of(job))
                        .or_default()
                        .waits
                        .push(wait);
                }
            }
            Event::Succeeded { job } => {
                // A victim that ended by itself during its stop lost nothing.
                self.stopping.remove(&job.0);
                self.shares.entry(share_of(job)).or_default().succeeded += 1
            }
            Event::Failed { job, reason } => {
                if *reason == FailReason::PreemptionRetriesExhausted {
                    self.count_loss(job.0, t);
                } else {
                    self.stopping.remove(&job.0);
                }
                self.shares.entry(share_of(job)).or_default().failed += 1
            }
            Event::Cancelled { job, .. } => {
                self.stopping.remove(&job.0);
                self.shares.entry(share_of(job)).or_default().failed += 1
            }
            Event::Requeued { job } => self.count_loss(job.0, t),
            Event::Rejected { error, .. } if crate::sched::is_larger_than_any_node(error) => {
                self.larger_than_any_node += 1
            }
            Event::Preempted { job, .. } => {
                let share = share_of(job);
                let count = self.preempted.entry(job.0).or_default();
                *count += 1;
                let count = *count;
                let e = self.shares.entry(share.clone()).or_default();
                e.preemptions += 1;
                e.max_preemptions_of_one_job = e.max_preemptions_of_one_job.max(count);
                if let Some(&(started_at, quantity)) = self.last_start.get(&job.0) {
                    if started_at == t {
                        e.started_and_preempted_same_instant += 1;
                    }
                    self.stopping.insert(
                        job.0,
                        Stopping {
                            share,
                            started_at,
                            quantity,
                        },
                    );
                }
            }
            _ => {}
        }
    }

    /// A preempted attempt released its GPUs at `t`: what it ran is lost.
    fn count_loss(&mut self, job: u64, t: i64) {
        if let Some(st) = self.stopping.remove(&job) {
            let lost = f64::from(st.quantity) * (t - st.started_at) as f64;
            self.shares.entry(st.share).or_default().gpu_seconds_lost += lost;
        }
    }

    /// The summary as one JSON line.
    pub fn finish(mut self, sched: &Sched) -> String {
        let span = (self.last - self.first.unwrap_or(self.last)) as f64;
        let mut shares = serde_json::Map::new();
        let (mut most, mut lost, mut same_instant) = (0u64, 0f64, 0u64);
        for (name, mut s) in std::mem::take(&mut self.shares) {
            most = most.max(s.max_preemptions_of_one_job);
            lost += s.gpu_seconds_lost;
            same_instant += s.started_and_preempted_same_instant;
            s.waits.sort_unstable();
            let mean = if s.waits.is_empty() {
                0.0
            } else {
                s.waits.iter().map(|&w| w as f64).sum::<f64>() / s.waits.len() as f64
            };
            let p95 = if s.waits.is_empty() {
                0
            } else {
                let i = ((s.waits.len() as f64) * 0.95).ceil() as usize;
                s.waits[i.clamp(1, s.waits.len()) - 1]
            };
            shares.insert(
                name,
                serde_json::json!({
                    "gpu_seconds_within_limit": s.within,
                    "gpu_seconds_borrowed": s.borrowed,
                    "gpu_seconds_lent": s.lent,
                    "jobs_finished": s.succeeded + s.failed,
                    "jobs_succeeded": s.succeeded,
                    "jobs_failed": s.failed,
                    "mean_wait": mean,
                    "p95_wait": p95,
                    "preemptions": s.preemptions,
                    "max_preemptions_of_one_job": s.max_preemptions_of_one_job,
                    "gpu_seconds_lost_to_preemption": s.gpu_seconds_lost,
                    "started_and_preempted_same_instant": s.started_and_preempted_same_instant,
                }),
            );
        }
        let utilisation = if self.capacity > 0.0 {
            self.used / self.capacity
        } else {
            0.0
        };
        // Without `nodes` the line is what it always was.
        let nodes = if sched.has_nodes() {
            format!(
                ",\"gpu_seconds_idle_while_fragmented\":{},\"jobs_rejected_larger_than_any_node\":{}",
                self.fragmented_idle, self.larger_than_any_node
            )
        } else {
            String::new()
        };
        format!(
            "{{\"t\":{},\"event\":\"summary\",\"span\":{},\"gpu_seconds_used\":{},\"utilisation\":{},\"max_preemptions_of_one_job\":{},\"gpu_seconds_lost_to_preemption\":{},\"started_and_preempted_same_instant\":{}{nodes},\"shares\":{}}}",
            self.last,
            span,
            self.used,
            utilisation,
            most,
            lost,
            same_instant,
            serde_json::Value::Object(shares)
        )
    }
}
