//! The `--summary` line: per-share GPU-seconds (within the limit, borrowed, lent), jobs
//! finished, wait times and preemptions, and the run's overall utilisation.

use crate::sched::{Event, Sched};
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
            Event::Started { job, .. } => {
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
                self.shares.entry(share_of(job)).or_default().succeeded += 1
            }
            Event::Failed { job, .. } => self.shares.entry(share_of(job)).or_default().failed += 1,
            Event::Cancelled { job, .. } => {
                self.shares.entry(share_of(job)).or_default().failed += 1
            }
            Event::Preempted { job, .. } => {
                self.shares.entry(share_of(job)).or_default().preemptions += 1
            }
            _ => {}
        }
    }

    /// The summary as one JSON line.
    pub fn finish(mut self, sched: &Sched) -> String {
        let span = (self.last - self.first.unwrap_or(self.last)) as f64;
        let mut shares = serde_json::Map::new();
        for (name, mut s) in std::mem::take(&mut self.shares) {
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
                }),
            );
        }
        let _ = sched;
        let utilisation = if self.capacity > 0.0 {
            self.used / self.capacity
        } else {
            0.0
        };
        format!(
            "{{\"t\":{},\"event\":\"summary\",\"span\":{},\"gpu_seconds_used\":{},\"utilisation\":{},\"shares\":{}}}",
            self.last,
            span,
            self.used,
            utilisation,
            serde_json::Value::Object(shares)
        )
    }
}
