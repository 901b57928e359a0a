//! Forward simulation on a copy of the scheduler (SPEC §11): the same core, on simulated
//! time, from the live state. One machinery serves three questions:
//!
//! - [`estimate`]: when will each queued job start? (running jobs end at their
//!   `timeoutSeconds`, or at their share's typical runtime from the history; no new
//!   arrivals);
//! - [`predict`]: what would a submission do now (the console's submit form), and when
//!   would it start?
//! - [`dry_run`]: what would applying a new config do to the live state now?
//!
//! The clock is `replay::forward`, the one that `shareq replay` runs. Nothing here runs on
//! the runtime task: the runtime hands a clone of its scheduler to a blocking thread
//! (`server::forecasts`).

pub mod dry_run;
pub mod estimate;
pub mod predict;
pub mod runtimes;

pub use dry_run::{DryRun, dry_run};
pub use estimate::{Estimate, Estimates, estimate};
pub use predict::{Prediction, Verdict, predict};
pub use runtimes::Runtimes;

use crate::replay::{Forward, Observation, forward};
use crate::sched::{Job, Sched, Time};

/// How far ahead the forecast looks (7 days).
pub const HORIZON_SECONDS: i64 = 7 * 24 * 3600;

/// The most instants one forecast simulates, whatever the horizon.
pub const MAX_INSTANTS: u64 = 2_000_000;

/// Run `sched` (a copy) forward from `now` until `horizon_seconds` later, each attempt
/// ending at its timeout or its share's typical runtime (`runtimes`); `observe` sees each
/// batch of decisions. Returns the final state.
pub fn run(
    sched: Sched,
    now: Time,
    runtimes: &Runtimes,
    horizon_seconds: i64,
    observe: &mut dyn FnMut(Observation),
) -> Sched {
    let tps = sched.ticks_per_second();
    let names: Vec<String> = (0..)
        .map_while(|s| sched.share_name_checked(s).map(str::to_string))
        .collect();
    let duration = |j: &Job| attempt_ticks(j, now, tps, &names, runtimes);
    let stop_ticks = (i64::from(sched.grace_period_seconds()) * tps).max(1);
    let f = Forward {
        sched,
        from: now,
        until: now.saturating_add(horizon_seconds.saturating_mul(tps)),
        duration: &duration,
        stop_ticks,
        max_instants: MAX_INSTANTS,
    };
    forward(f, observe).0
}

/// How long an attempt of `j` runs in the forecast, in ticks from its start (SPEC §11):
/// the earlier of its `timeoutSeconds` and its typical remaining time (the median over its
/// share's past attempts that ran at least as long as it has so far, of their run time,
/// minus what it has run). With no history that applies, the timeout; with neither, a
/// running job that outlived every sample is expected to end now and a queued one has
/// no known end.
fn attempt_ticks(j: &Job, now: Time, tps: i64, names: &[String], r: &Runtimes) -> Option<i64> {
    let timeout = j
        .spec
        .timeout_seconds
        .map(|t| i64::try_from(t).unwrap_or(i64::MAX / 4).saturating_mul(tps));
    let elapsed_ms = j
        .started_at()
        .map_or(0, |t0| (now - t0).max(0) * 1000 / tps);
    let share = names.get(j.share).map_or("", String::as_str);
    let typical = r
        .typical_total(share, elapsed_ms)
        .map(|ms| ms.saturating_mul(tps) / 1000);
    match (timeout, typical) {
        (Some(t), Some(d)) => Some(t.min(d)),
        (Some(t), None) => Some(t),
        (None, Some(d)) => Some(d),
        // Outlived every sample of a history: expected to end now.
        (None, None) if !r.is_empty() => Some(elapsed_ms.saturating_mul(tps) / 1000),
        (None, None) => None,
    }
}
