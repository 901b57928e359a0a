//! Run-time predictions from the history (SPEC §11): the past attempts, grouped by user and
//! share, and the 25th, 50th and 75th percentile of how long an attempt that has run so
//! far runs in all (Kaplan–Meier, `forecast::km`: preempted attempts are censored). The
//! sources, in order: the user's own attempts in the share, then the share's (at least
//! [`MIN_SAMPLES`] each that ran at least as long). A job's declared runtime and its
//! timeout come before and after these (`forecast::attempt_ticks`).

use super::km::{self, RunTime};
use std::collections::HashMap;

/// How many recent attempts the history lends the forecast.
pub const LEARNED_FROM: usize = 5_000;

/// A source needs this many attempts that ran at least as long as the job has.
pub const MIN_SAMPLES: usize = 3;

/// One past attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub user: String,
    pub share: String,
    /// GPUs it held (for the size-class predictor the calibration compares).
    pub gpus: u32,
    pub ms: i64,
    /// Ended by preemption: it ran at least `ms`.
    pub censored: bool,
}

/// A finished attempt of `share` by nobody in particular, `ms` long.
impl From<(String, i64)> for Sample {
    fn from((share, ms): (String, i64)) -> Sample {
        Sample {
            user: String::new(),
            share,
            gpus: 1,
            ms,
            censored: false,
        }
    }
}

/// Which history a prediction reads (SPEC §11's is [`Predictor::User`]; the others are
/// what the calibration compares it with, docs/SEMANTICS.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Predictor {
    /// The user's own attempts in the share, then the share's.
    #[default]
    User,
    /// The share's attempts only.
    Share,
    /// The share's attempts of the same size class (1, 2–4, 5–8, ≥ 9 GPUs), then the
    /// share's.
    SizeClass,
}

/// The size class of a job of `gpus` GPUs: 1, 2–4, 5–8, ≥ 9.
fn class(gpus: u32) -> u8 {
    match gpus {
        0 | 1 => 0,
        2..=4 => 1,
        5..=8 => 2,
        _ => 3,
    }
}

/// The history's run times, sorted, per (user, share), per share and per (share, class),
/// with the percentiles of a job not started yet (run 0) worked out once.
#[derive(Debug, Clone, Default)]
pub struct Runtimes {
    by_user: HashMap<(String, String), Group>,
    by_share: HashMap<String, Group>,
    by_class: HashMap<(String, u8), Group>,
    predictor: Predictor,
    len: usize,
}

#[derive(Debug, Clone, Default)]
struct Group {
    runs: Vec<RunTime>,
    fresh: Option<[i64; 3]>,
}

impl Group {
    fn seal(&mut self) {
        km::sort(&mut self.runs);
        self.fresh = km::quantiles(&self.runs, 0, MIN_SAMPLES);
    }

    fn predict(&self, elapsed: i64) -> Option<[i64; 3]> {
        if elapsed <= 0 {
            return self.fresh;
        }
        km::quantiles(&self.runs, elapsed, MIN_SAMPLES)
    }
}

impl Runtimes {
    /// From past attempts.
    pub fn from_samples<S: Into<Sample>>(samples: impl IntoIterator<Item = S>) -> Runtimes {
        let mut r = Runtimes::default();
        for s in samples {
            let s: Sample = s.into();
            let run = RunTime {
                ms: s.ms.max(0),
                censored: s.censored,
            };
            r.by_user
                .entry((s.user, s.share.clone()))
                .or_default()
                .runs
                .push(run);
            r.by_class
                .entry((s.share.clone(), class(s.gpus)))
                .or_default()
                .runs
                .push(run);
            r.by_share.entry(s.share).or_default().runs.push(run);
            r.len += 1;
        }
        for g in r
            .by_user
            .values_mut()
            .chain(r.by_share.values_mut())
            .chain(r.by_class.values_mut())
        {
            g.seal();
        }
        r
    }

    /// The same history read by another predictor.
    pub fn with_predictor(mut self, p: Predictor) -> Runtimes {
        self.predictor = p;
        self
    }

    /// How long in all (ms) an attempt of `user`'s in `share` on `gpus` GPUs that has run
    /// `elapsed` ms runs: the 25th, 50th and 75th percentile (each at least `elapsed`), or
    /// `None` when no source has enough attempts that ran that long.
    pub fn predict(&self, user: &str, share: &str, gpus: u32, elapsed: i64) -> Option<[i64; 3]> {
        let first = match self.predictor {
            Predictor::User => self
                .by_user
                .get(&(user.to_string(), share.to_string()))
                .and_then(|g| g.predict(elapsed)),
            Predictor::SizeClass => self
                .by_class
                .get(&(share.to_string(), class(gpus)))
                .and_then(|g| g.predict(elapsed)),
            Predictor::Share => None,
        };
        first
            .or_else(|| self.by_share.get(share).and_then(|g| g.predict(elapsed)))
            .map(|q| q.map(|t| t.max(elapsed)))
    }

    /// How many attempts it learned from.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(user: &str, share: &str, ms: i64, censored: bool) -> Sample {
        Sample {
            user: user.to_string(),
            share: share.to_string(),
            gpus: 1,
            ms,
            censored,
        }
    }

    #[test]
    fn the_users_own_history_then_the_shares_never_another_shares() {
        let r = Runtimes::from_samples([
            s("ann", "a", 10, false),
            s("ann", "a", 20, false),
            s("ann", "a", 30, false),
            s("ann", "a", 40, false),
            s("bob", "a", 1000, false),
            s("bob", "a", 2000, false),
            s("bob", "b", 5, false),
        ]);
        // Ann has 4 of her own: hers.
        assert_eq!(r.predict("ann", "a", 1, 0), Some([10, 20, 30]));
        // Bob has only 2 in a: the share's 6.
        assert_eq!(r.predict("bob", "a", 1, 0), Some([20, 30, 1000]));
        // Having run 35, Ann has one left above it (fewer than 3): the share's 3.
        assert_eq!(r.predict("ann", "a", 1, 35), Some([40, 1000, 2000]));
        // Share b has 1 attempt, share c none: no prediction (no whole-machine fallback).
        assert_eq!(r.predict("bob", "b", 1, 0), None);
        assert_eq!(r.predict("bob", "c", 1, 0), None);
        // Having outlived the whole history: none either.
        assert_eq!(r.predict("ann", "a", 1, 3000), None);
        // The share-only predictor skips Ann's own.
        let share = r.clone().with_predictor(Predictor::Share);
        assert_eq!(share.predict("ann", "a", 1, 0), Some([20, 30, 1000]));
    }

    #[test]
    fn preempted_attempts_are_censored() {
        let r = Runtimes::from_samples([
            s("ann", "a", 10, false),
            s("ann", "a", 20, true),
            s("ann", "a", 20, true),
            s("ann", "a", 100, false),
        ]);
        assert_eq!(r.predict("ann", "a", 1, 0), Some([10, 100, 100]));
    }

    #[test]
    fn size_classes_keep_big_jobs_apart() {
        let mut v = Vec::new();
        for ms in [10, 20, 30] {
            v.push(Sample {
                gpus: 1,
                ..s("x", "a", ms, false)
            });
            v.push(Sample {
                gpus: 8,
                ..s("x", "a", ms * 100, false)
            });
        }
        let r = Runtimes::from_samples(v).with_predictor(Predictor::SizeClass);
        assert_eq!(r.predict("y", "a", 1, 0), Some([10, 20, 30]));
        assert_eq!(r.predict("y", "a", 6, 0), Some([1000, 2000, 3000]));
        // No class of its own (16 GPUs): the share's.
        assert_eq!(r.predict("y", "a", 16, 0), Some([20, 30, 2000]));
    }
}
