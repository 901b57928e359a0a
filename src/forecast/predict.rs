//! What a submission would do now (the console's submit form), decided by the real
//! scheduler on a copy of the live state: submit the job to the copy, run one pass, and
//! read what the core did (started, borrowed, preempted for it, or why it waits); when it
//! does not start at once, run the copy forward for its estimated start.

use super::{Estimate, EstimateKind, HORIZON_SECONDS, Runtimes};
use crate::model::JobSpec;
use crate::sched::{Event, Sched, Time};
use serde::{Deserialize, Serialize};

/// The expected outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// Starts at once within the share's guarantee.
    StartNow,
    /// Starts at once on borrowed capacity (can be reclaimed later).
    Borrow,
    /// Starts once running jobs are preempted for it.
    Preempt,
    /// Queues.
    Wait,
    /// Refused at submission.
    Reject,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::StartNow => "starts now",
            Verdict::Borrow => "starts now, borrowing",
            Verdict::Preempt => "starts after a preemption",
            Verdict::Wait => "waits",
            Verdict::Reject => "rejected",
        }
    }
}

/// A prediction: the verdict, the core's own words, and (when it does not start at once)
/// the estimated start, as the queue's estimates say it (SPEC §11: a range, a lower bound
/// or beyond the horizon).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prediction {
    pub verdict: Verdict,
    pub why: String,
    /// The estimated start in the median run (driver instants; for a lower bound: the
    /// bound), `None` when it starts now, is rejected, or would not start within the
    /// horizon (see `beyond`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Time>,
    /// The range's ends (a lower bound has `earliest` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earliest: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<Time>,
    /// `range`, `lower_bound` or `beyond_horizon`, when it does not start at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<EstimateKind>,
    /// A lower bound's reason: the job of unknown end it waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_on: Option<String>,
    /// It would not start within the horizon ending at this instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beyond: Option<Time>,
    /// When the prediction was made (driver instants).
    pub at: Time,
}

impl Prediction {
    /// A prediction that the submit would be refused, `why`, made at `at`.
    pub fn rejected(why: String, at: Time) -> Prediction {
        Prediction {
            verdict: Verdict::Reject,
            why,
            start: None,
            earliest: None,
            latest: None,
            kind: None,
            waits_on: None,
            beyond: None,
            at,
        }
    }

    /// The estimated start as the forecast says it.
    pub fn estimate(&self) -> Option<Estimate> {
        match (self.kind?, self.earliest, self.start, self.latest) {
            (EstimateKind::Range, Some(earliest), Some(start), Some(latest)) => {
                Some(Estimate::Range {
                    earliest,
                    start,
                    latest,
                })
            }
            (EstimateKind::LowerBound, Some(from), ..) => Some(Estimate::AtLeast {
                from,
                why: self.waits_on.clone().unwrap_or_default(),
            }),
            (EstimateKind::BeyondHorizon, ..) => self.beyond.map(Estimate::NotWithin),
            _ => None,
        }
    }
}

/// Predict `spec` submitted to `sched` (a copy of the live state) at `now`.
pub fn predict(mut sched: Sched, spec: JobSpec, now: Time, runtimes: &Runtimes) -> Prediction {
    let share = spec.quota_share_name.clone();
    let mut out = Prediction::rejected(String::new(), now);
    let id = match sched.submit(spec, now) {
        Ok(id) => id,
        Err(r) => {
            out.why = r.to_string();
            return out;
        }
    };
    sched.pass(now);
    let events = sched.take_events();
    let mut victims = Vec::new();
    for ev in &events {
        match ev {
            Event::Started { job, borrowed, .. } if *job == id => {
                out.verdict = if *borrowed > 0 {
                    Verdict::Borrow
                } else {
                    Verdict::StartNow
                };
                out.why = match out.verdict {
                    Verdict::Borrow => format!(
                        "borrows {borrowed} GPU(s) beyond {share}'s limit{}; they can be reclaimed",
                        lenders(&sched, &share)
                    ),
                    _ => format!("within {share}'s guarantee"),
                };
                return out;
            }
            Event::Preempted {
                job,
                by: Some(by),
                reason,
            } if *by == id => {
                let name = sched.job(*job).map_or("?".to_string(), |j| {
                    format!("{} ({})", j.name(), sched.share_name(j.share))
                });
                victims.push(format!("{name}, {}", reason.as_str()));
            }
            _ => {}
        }
    }
    let grace = sched.grace_period_seconds();
    if victims.is_empty() {
        out.verdict = Verdict::Wait;
        out.why = sched.reason(id);
    } else {
        out.verdict = Verdict::Preempt;
        out.why = format!("preempts {} (up to {grace}s grace)", victims.join("; "));
    }
    let est = super::estimate::estimate_within(sched, now, runtimes, HORIZON_SECONDS);
    let e = est.of(id);
    out.kind = e.kind(now);
    out.start = e.start();
    out.earliest = e.earliest();
    out.latest = e.latest();
    match e {
        Estimate::AtLeast { why, .. } => out.waits_on = Some(why),
        Estimate::NotWithin(end) => out.beyond = Some(end),
        _ => {}
    }
    out
}

/// ` from qs2` / ` from qs2, qs3`: who lends to `share` now, as the core attributes it.
fn lenders(sched: &Sched, share: &str) -> String {
    let from: Vec<String> = sched
        .lending()
        .into_iter()
        .filter(|e| e.borrower == share)
        .map(|e| {
            e.lender
                .unwrap_or_else(|| "the unassigned pool".to_string())
        })
        .collect();
    if from.is_empty() {
        String::new()
    } else {
        format!(" from {}", from.join(", "))
    }
}
