//! What applying a config would do to the state now (`shareq check DIR --against STATE`):
//! apply it to a copy, run the pass the live scheduler would run, and compare.

use crate::model::{JobId, UnitCapacity, ValidConfig};
use crate::sched::{Event, Sched, Time};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One job the new config would affect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Affected {
    pub id: JobId,
    pub name: String,
    pub share: String,
    /// What happens to it, in words.
    pub detail: String,
}

/// Everything the new config would change, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DryRun {
    /// Running jobs the first pass would preempt at once.
    pub preempted: Vec<Affected>,
    /// Running jobs that would count as borrowed (reclaimable) and did not before.
    pub reclaimable: Vec<Affected>,
    /// Queued jobs the first pass would start (or nominate: they start once their
    /// victims have stopped).
    pub start: Vec<Affected>,
    /// Queued jobs that would become impossible (a limit or a unit they need is gone).
    pub impossible: Vec<Affected>,
    /// Queued jobs that would keep waiting, for a new reason.
    pub new_reason: Vec<Affected>,
}

impl DryRun {
    pub fn is_empty(&self) -> bool {
        self.preempted.is_empty()
            && self.reclaimable.is_empty()
            && self.start.is_empty()
            && self.impossible.is_empty()
            && self.new_reason.is_empty()
    }

    /// In one line: `1 preempted at once, 2 now reclaimable, 1 start, 1 impossible`.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "no job affected".to_string();
        }
        [
            (self.preempted.len(), "preempted at once"),
            (self.reclaimable.len(), "now reclaimable"),
            (self.start.len(), "start"),
            (self.impossible.len(), "impossible"),
            (self.new_reason.len(), "wait for a new reason"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect::<Vec<_>>()
        .join(", ")
    }

    /// The report, one section per kind that is not empty.
    pub fn text(&self) -> String {
        if self.is_empty() {
            return "applying it now changes nothing for the jobs queued or running\n".to_string();
        }
        let mut out = String::new();
        for (title, list) in [
            ("would be preempted at once", &self.preempted),
            ("would become reclaimable (borrowed)", &self.reclaimable),
            ("would start", &self.start),
            ("would become impossible", &self.impossible),
            ("would wait for a new reason", &self.new_reason),
        ] {
            if list.is_empty() {
                continue;
            }
            out.push_str(&format!("{} job(s) {title}:\n", list.len()));
            for a in list {
                out.push_str(&format!(
                    "  {:>6} {} ({}): {}\n",
                    a.id.0,
                    crate::visible::visible(&a.name),
                    a.share,
                    crate::visible::visible(&a.detail)
                ));
            }
        }
        out
    }
}

/// Would the core call this reason "can never start as configured"?
fn impossible(reason: &str) -> bool {
    reason.contains("_LIMIT_EXCEEDED")
        || reason.contains("no longer lists")
        || reason.contains("quota share removed")
}

/// Running jobs whose share is borrowing on their unit.
fn borrowing(sched: &Sched) -> BTreeSet<JobId> {
    let over: BTreeSet<(String, String)> = sched
        .share_stats()
        .into_iter()
        .filter(|s| s.borrowed > 0)
        .map(|s| (s.share, s.unit))
        .collect();
    sched
        .jobs()
        .filter(|j| j.is_holding() && !j.is_stopping())
        .filter(|j| {
            over.contains(&(
                sched.share_name(j.share).to_string(),
                sched.unit_name(j.unit).to_string(),
            ))
        })
        .map(|j| j.id)
        .collect()
}

/// Apply `config` (with the devices `capacity`) to `sched` (a copy) at `now` and say what
/// it would do.
pub fn dry_run(
    mut sched: Sched,
    config: &ValidConfig,
    capacity: &[UnitCapacity],
    now: Time,
) -> DryRun {
    let _ = sched.take_events();
    let queued: Vec<JobId> = sched.queue();
    let before: BTreeMap<JobId, String> = queued.iter().map(|&id| (id, sched.reason(id))).collect();
    let borrowing_before = borrowing(&sched);
    sched.apply_config(config, capacity, now);
    sched.pass(now);
    let events = sched.take_events();
    let mut out = DryRun::default();
    let about = |sched: &Sched, id: JobId, detail: String| Affected {
        id,
        name: sched
            .job(id)
            .map_or(String::new(), |j| j.name().to_string()),
        share: sched
            .job(id)
            .map_or(String::new(), |j| sched.share_name(j.share).to_string()),
        detail,
    };
    let mut started = BTreeSet::new();
    for ev in &events {
        match ev {
            Event::Started { job, borrowed, .. } if before.contains_key(job) => {
                started.insert(*job);
                let how = if *borrowed > 0 {
                    format!("at once, borrowing {borrowed} GPU(s)")
                } else {
                    "at once".to_string()
                };
                out.start.push(about(&sched, *job, how));
            }
            Event::Preempted { job, by, reason } => {
                let by = by.and_then(|b| sched.job(b)).map_or(String::new(), |b| {
                    format!(" for {} ({})", b.name(), sched.share_name(b.share))
                });
                out.preempted
                    .push(about(&sched, *job, format!("{}{by}", reason.as_str())));
            }
            _ => {}
        }
    }
    for id in borrowing(&sched).difference(&borrowing_before) {
        let detail = sched.job(*id).map_or(String::new(), |j| {
            format!(
                "{} now borrows on {}: the job can be reclaimed{}",
                sched.share_name(j.share),
                sched.unit_name(j.unit),
                if sched.reclaimed_first(*id) {
                    " (a reclaim takes it first)"
                } else {
                    ""
                }
            )
        });
        out.reclaimable.push(about(&sched, *id, detail));
    }
    for (id, old) in &before {
        if started.contains(id) {
            continue;
        }
        let Some(j) = sched.job(*id) else { continue };
        if j.is_nominated() {
            out.start.push(about(
                &sched,
                *id,
                "once the jobs preempted for it have stopped".to_string(),
            ));
            continue;
        }
        if !j.is_pending() {
            continue;
        }
        let new = sched.reason(*id);
        if new == *old {
            continue;
        }
        let detail = format!("{new} (was: {old})");
        if impossible(&new) && !impossible(old) {
            out.impossible.push(about(&sched, *id, detail));
        } else {
            out.new_reason.push(about(&sched, *id, detail));
        }
    }
    out
}
