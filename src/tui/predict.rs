//! What the submit form predicts for a job that is not submitted yet (SPEC §2-§4), worked
//! out from the snapshot's numbers alone: free GPUs, the share's limit, usage and cap, the
//! idle capacity other shares hold back, and who is borrowing.

use crate::model::Strategy;
use crate::snapshot::{ShareView, Snapshot};

/// The expected outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Starts at once within the share's guarantee.
    StartNow,
    /// Starts at once on borrowed capacity (can be reclaimed later).
    Borrow,
    /// Starts once a running job is preempted for it.
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    pub verdict: Verdict,
    pub why: String,
}

fn p(verdict: Verdict, why: impl Into<String>) -> Prediction {
    Prediction {
        verdict,
        why: why.into(),
    }
}

/// Predict a submission of `n` GPUs at `priority` to `share` (on its first unit, or
/// `unit` when given).
pub fn predict(
    snap: &Snapshot,
    share: &str,
    unit: Option<&str>,
    n: u32,
    priority: u32,
) -> Prediction {
    let Some(s) = snap
        .shares
        .iter()
        .find(|s| s.name == share && unit.is_none_or(|u| s.unit == u))
    else {
        return p(Verdict::Reject, format!("no share named {share:?}"));
    };
    if !s.present {
        return p(
            Verdict::Reject,
            format!("{share} is no longer in the config"),
        );
    }
    if !s.enabled {
        return p(
            Verdict::Reject,
            format!("{share} is DISABLED: no new submissions"),
        );
    }
    if n == 0 {
        return p(Verdict::Reject, "a job needs at least 1 GPU");
    }
    let Some(u) = snap.units.iter().find(|u| u.name == s.unit) else {
        return p(
            Verdict::Reject,
            format!("unit {} is not configured", s.unit),
        );
    };
    let others = || {
        snap.shares
            .iter()
            .filter(|r| r.unit == s.unit && r.name != s.name)
    };
    let reserved: u32 = others()
        .filter(|r| r.strategy == Strategy::Reserve)
        .map(|r| r.limit)
        .sum();
    let borrow_cap = match (s.strategy, s.cap) {
        (Strategy::LendAndBorrow, None) => u32::MAX,
        (Strategy::LendAndBorrow, Some(c)) => c,
        _ => 0,
    };
    let max = s
        .limit
        .saturating_add(borrow_cap)
        .min(u.usable.saturating_sub(reserved));
    if n > max {
        return p(
            Verdict::Reject,
            format!("QUOTA_MANAGEMENT_LIMIT_EXCEEDED: needs {n}, {share} may hold at most {max}"),
        );
    }
    let free = u.usable.saturating_sub(u.used);
    let held_back: u32 = others().map(|r| held_back_by(snap, r)).sum();
    let available = free.saturating_sub(held_back);
    let ahead = snap
        .queue
        .iter()
        .filter(|j| j.share == s.name && j.unit == s.unit && j.priority >= priority)
        .count();
    let behind = if ahead > 0 {
        format!(" ({ahead} queued job(s) of {share} go first)")
    } else {
        String::new()
    };
    if s.usage + n <= s.limit {
        if n <= available && ahead == 0 {
            return p(
                Verdict::StartNow,
                format!(
                    "within {share}'s guarantee ({}/{} in use)",
                    s.usage, s.limit
                ),
            );
        }
        let borrowers: Vec<&ShareView> = others().filter(|r| r.borrowed > 0).collect();
        if n > available && !borrowers.is_empty() {
            let names: Vec<&str> = borrowers.iter().map(|r| r.name.as_str()).collect();
            return p(
                Verdict::Preempt,
                format!(
                    "reclaims borrowed GPUs from {} (CROSS_SHARE_RECLAIM, up to {}s grace){behind}",
                    names.join(", "),
                    snap.grace_period_seconds
                ),
            );
        }
        if n <= available {
            return p(Verdict::Wait, format!("fits its guarantee, but{behind}"));
        }
        return p(
            Verdict::Wait,
            format!("{share} is within its limit but only {available} GPU(s) are free{behind}"),
        );
    }
    // Beyond the guarantee: borrow, preempt inside the share, or wait.
    if s.in_share && lower_running(snap, s, priority) >= n.min(s.limit) && n <= s.limit {
        return p(
            Verdict::Preempt,
            format!("preempts a lower-priority {share} job (IN_SHARE_PRIORITY){behind}"),
        );
    }
    if s.strategy != Strategy::LendAndBorrow {
        return p(
            Verdict::Wait,
            format!(
                "waiting for {share} capacity ({}/{} in use); {} cannot borrow{behind}",
                s.usage,
                s.limit,
                s.strategy.as_str()
            ),
        );
    }
    let borrowed_after = (s.usage + n).saturating_sub(s.limit);
    if borrowed_after > borrow_cap {
        return p(
            Verdict::Wait,
            format!(
                "borrow cap reached ({} of {borrow_cap} borrowed){behind}",
                s.borrowed
            ),
        );
    }
    if n <= available && ahead == 0 {
        let from = lenders(snap, s);
        return p(
            Verdict::Borrow,
            format!("borrows {borrowed_after} GPU(s) from {from}; can be reclaimed"),
        );
    }
    let reserve_note = others()
        .filter(|r| r.strategy == Strategy::Reserve && r.idle > 0)
        .map(|r| format!("{} reserves {}", r.name, r.idle))
        .collect::<Vec<_>>();
    let note = if reserve_note.is_empty() {
        String::new()
    } else {
        format!(" ({})", reserve_note.join(", "))
    };
    p(
        Verdict::Wait,
        format!("no idle capacity to borrow{note}{behind}"),
    )
}

/// SPEC §3 `held_back` contribution of share `r`: RESERVE holds all its idle, lenders
/// what their own queued jobs need.
fn held_back_by(snap: &Snapshot, r: &ShareView) -> u32 {
    if r.strategy == Strategy::Reserve {
        return r.idle;
    }
    if r.idle == 0 || r.queued == 0 {
        return 0;
    }
    let waiting: u64 = snap
        .queue
        .iter()
        .filter(|j| j.share == r.name && j.unit == r.unit && !j.nominated && j.quantity <= r.idle)
        .map(|j| u64::from(j.quantity))
        .sum();
    r.idle.min(u32::try_from(waiting).unwrap_or(u32::MAX))
}

fn lower_running(snap: &Snapshot, s: &ShareView, priority: u32) -> u32 {
    snap.running
        .iter()
        .filter(|j| j.share == s.name && j.unit == s.unit && j.priority < priority)
        .filter(|j| j.stopping.is_none())
        .map(|j| j.quantity)
        .sum()
}

/// Who would lend: lenders with idle guarantee in name order, then the unassigned pool.
fn lenders(snap: &Snapshot, s: &ShareView) -> String {
    let names: Vec<&str> = snap
        .shares
        .iter()
        .filter(|r| r.unit == s.unit && r.name != s.name && r.strategy != Strategy::Reserve)
        .filter(|r| r.idle > r.lent)
        .map(|r| r.name.as_str())
        .collect();
    if names.is_empty() {
        "the unassigned pool".to_string()
    } else {
        names.join(" or ")
    }
}
