//! Start estimates for the queue (SPEC §11): run the copy forward and note when each job
//! queued now first starts.

use super::{HORIZON_SECONDS, Runtimes};
use crate::model::JobId;
use crate::sched::{Event, Sched, Time};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The estimates of one forecast, for the jobs queued when it ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Estimates {
    /// When the forecast ran, in the driver's instants (ms live); 0: never.
    pub computed_at: Time,
    /// The last instant it looked at.
    pub horizon_end: Time,
    /// Each job queued then, by id, with its estimated start (`None`: not within the
    /// horizon).
    pub starts: Vec<(JobId, Option<Time>)>,
    /// How long the forecast took (ms of wall time), copy included.
    #[serde(default)]
    pub took_ms: u64,
    /// Of which copying the scheduler (on the live runtime: the part on its task).
    #[serde(default)]
    pub clone_ms: u64,
}

/// What the forecast says about one queued job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimate {
    /// It would start at this instant.
    At(Time),
    /// It would not start before this instant (the end of the horizon).
    NotWithin(Time),
    /// No forecast covers it yet (it was queued after the last one).
    NotYet,
}

impl Estimates {
    pub fn of(&self, id: JobId) -> Estimate {
        match self.starts.binary_search_by_key(&id, |&(j, _)| j) {
            Ok(i) => match self.starts[i].1 {
                Some(t) => Estimate::At(t),
                None => Estimate::NotWithin(self.horizon_end),
            },
            Err(_) => Estimate::NotYet,
        }
    }
}

impl Estimate {
    /// The start instant, if one was estimated.
    pub fn start(self) -> Option<Time> {
        match self {
            Estimate::At(t) => Some(t),
            _ => None,
        }
    }

    /// For tables (ms instants): `~in 12m05s` (an estimate, hence the tilde), `overdue`
    /// (the estimate has passed and the job is still queued: it could not start then; the
    /// next forecast estimates it again, SPEC §11), `>7d`, or `?` before the first
    /// forecast.
    pub fn label(self, now: Time) -> String {
        match self {
            Estimate::At(t) if t <= now => "overdue".to_string(),
            Estimate::At(t) => format!("~in {}", crate::duration::human(t - now)),
            Estimate::NotWithin(end) => format!(">{}", crate::duration::short(end - now)),
            Estimate::NotYet => "?".to_string(),
        }
    }
}

/// Estimate when each queued job of `sched` (a copy) starts, from `now`.
pub fn estimate(sched: Sched, now: Time, runtimes: &Runtimes) -> Estimates {
    estimate_within(sched, now, runtimes, HORIZON_SECONDS)
}

/// [`estimate`] with another horizon (seconds).
pub fn estimate_within(
    sched: Sched,
    now: Time,
    runtimes: &Runtimes,
    horizon_seconds: i64,
) -> Estimates {
    let t0 = std::time::Instant::now();
    let tps = sched.ticks_per_second();
    let mut first: HashMap<JobId, Option<Time>> =
        sched.queue().into_iter().map(|id| (id, None)).collect();
    if !first.is_empty() {
        super::run(sched, now, runtimes, horizon_seconds, &mut |o| {
            for ev in o.events {
                if let Event::Started { job, .. } = ev
                    && let Some(slot @ None) = first.get_mut(job)
                {
                    *slot = Some(o.t);
                }
            }
        });
    }
    let mut starts: Vec<(JobId, Option<Time>)> = first.into_iter().collect();
    starts.sort_unstable_by_key(|&(id, _)| id);
    Estimates {
        computed_at: now,
        horizon_end: now.saturating_add(horizon_seconds.saturating_mul(tps)),
        starts,
        took_ms: t0.elapsed().as_millis() as u64,
        clone_ms: 0,
    }
}
