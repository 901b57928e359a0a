//! Forward simulation on a copy of the scheduler (SPEC §11): the same core, on simulated
//! time, from the live state. One machinery serves three questions:
//!
//! - [`estimate`]: when will each queued job start? (each attempt ends at the earlier of
//!   its timeout and its predicted run time, `runtimes`; no new arrivals; run once per
//!   percentile of the predictions, so every estimate is a range);
//! - [`predict`]: what would a submission do now (the console's submit form), and when
//!   would it start?
//! - [`dry_run`]: what would applying a new config do to the live state now?
//!
//! [`backfill`] lends the same predictions to the backfill study (docs/SEMANTICS.md).
//!
//! The clock is `replay::forward`, the one that `shareq replay` runs. Nothing here runs on
//! the runtime task: the runtime hands a clone of its scheduler to a blocking thread
//! (`server::forecasts`).

pub mod backfill;
pub mod dry_run;
pub mod estimate;
pub mod km;
pub mod predict;
pub mod replayed;
pub mod runtimes;

pub use dry_run::{DryRun, dry_run};
pub use estimate::{Estimate, EstimateKind, Estimates, Start, estimate, local_utc_offset};
pub use predict::{Prediction, Verdict, predict};
pub use runtimes::{Predictor, Runtimes, Sample};

use crate::replay::{Forward, Observation, forward};
use crate::sched::{Job, Sched, Time};

/// How far ahead the forecast looks (7 days).
pub const HORIZON_SECONDS: i64 = 7 * 24 * 3600;

/// The most instants one forecast simulates, whatever the horizon.
pub const MAX_INSTANTS: u64 = 2_000_000;

/// Which run of the forecast: the percentile of the predictions every attempt runs with
/// (0, 1, 2: the 25th, 50th, 75th), and what an attempt with no known end does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guess {
    pub quantile: usize,
    /// An attempt with no known end ends at once (the run that tells a lower bound from
    /// "beyond the horizon") instead of running for ever.
    pub unknown_ends_now: bool,
}

impl Guess {
    /// The median run, unknown ends running for ever.
    pub const MEDIAN: Guess = Guess {
        quantile: 1,
        unknown_ends_now: false,
    };
}

/// Run `sched` (a copy) forward from `now` until `horizon_seconds` later, each attempt
/// ending as [`attempt_ticks`] says for `guess`; `observe` sees each batch of decisions.
/// Returns the final state.
pub fn run(
    sched: Sched,
    now: Time,
    runtimes: &Runtimes,
    guess: Guess,
    horizon_seconds: i64,
    observe: &mut dyn FnMut(Observation),
) -> Sched {
    let tps = sched.ticks_per_second();
    let names: Vec<String> = (0..)
        .map_while(|s| sched.share_name_checked(s).map(str::to_string))
        .collect();
    let duration = |j: &Job| {
        attempt_ticks(j, now, tps, &names, runtimes, guess.quantile).or_else(|| {
            guess.unknown_ends_now.then(|| {
                j.started_at()
                    .map_or(1, |t0| (now - t0).max(0).saturating_add(1))
            })
        })
    };
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
/// the earlier of its `timeoutSeconds` and its predicted run time, from the first source
/// that has one: its own `expectedRuntimeSeconds` while it has run less; the `quantile`-th
/// of the history's percentiles (its user's in its share, then the share's, of attempts
/// that ran at least as long as it has so far). `None`: no source at all (no timeout
/// either): its end is unknown.
pub fn attempt_ticks(
    j: &Job,
    now: Time,
    tps: i64,
    names: &[String],
    r: &Runtimes,
    quantile: usize,
) -> Option<i64> {
    let to_ticks = |secs: u64| {
        i64::try_from(secs)
            .unwrap_or(i64::MAX / 4)
            .saturating_mul(tps)
    };
    let timeout = j.spec.timeout_seconds.map(to_ticks);
    let elapsed_ms = j
        .started_at()
        .map_or(0, |t0| (now - t0).max(0).saturating_mul(1000) / tps);
    let declared = j
        .spec
        .expected_runtime_seconds
        .filter(|&e| i64::try_from(e).is_ok_and(|e| e.saturating_mul(1000) > elapsed_ms))
        .map(to_ticks);
    let predicted = declared.or_else(|| {
        let share = names.get(j.share).map_or("", String::as_str);
        let user = j.spec.submitter.as_ref().map_or("", |s| s.name.as_str());
        r.predict(user, share, j.spec.quantity, elapsed_ms)
            .map(|q| q[quantile.min(2)].saturating_mul(tps) / 1000)
    });
    match (timeout, predicted) {
        (Some(t), Some(d)) => Some(t.min(d)),
        (t, d) => t.or(d),
    }
}
