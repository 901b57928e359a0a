//! Percentiles of run times with censoring (SPEC §11): the Kaplan–Meier estimate of the
//! run-time distribution, where an attempt that ended by itself is an event at its run time
//! and an attempt ended by preemption is censored (it ran *at least* that long).

/// One past attempt: how long it ran (ms) and whether it was cut short (preempted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RunTime {
    pub ms: i64,
    /// Ended by preemption: it would have gone on.
    pub censored: bool,
}

/// The quantiles the forecast runs with: the 25th, 50th and 75th percentile.
pub const QUANTILES: [f64; 3] = [0.25, 0.5, 0.75];

/// Sort samples as [`quantiles`] wants them: by run time, a finished one before a censored
/// one of the same time (censored at t is still at risk at t).
pub fn sort(samples: &mut [RunTime]) {
    samples.sort_unstable();
}

/// The 25th, 50th and 75th percentile (ms) of the Kaplan–Meier estimate built from the
/// sorted `samples` that ran at least `at_least` ms, when at least `min` of them did.
/// A percentile is the first run time at which the estimated share still running drops
/// to 1 − q or below. Where censoring leaves the estimate above 1 − q to the end (every
/// long attempt was preempted), the percentile is the longest run time seen: the honest
/// "at least".
pub fn quantiles(samples: &[RunTime], at_least: i64, min: usize) -> Option<[i64; 3]> {
    let from = samples.partition_point(|s| s.ms < at_least);
    let rest = &samples[from..];
    if rest.len() < min.max(1) {
        return None;
    }
    let last = rest[rest.len() - 1].ms;
    let mut out = [last; 3];
    let mut found = 0usize;
    let mut survival = 1.0f64;
    let mut at_risk = rest.len() as f64;
    let mut i = 0;
    while i < rest.len() && found < QUANTILES.len() {
        let t = rest[i].ms;
        let (mut events, mut gone) = (0.0f64, 0.0f64);
        while i < rest.len() && rest[i].ms == t {
            if !rest[i].censored {
                events += 1.0;
            }
            gone += 1.0;
            i += 1;
        }
        if events > 0.0 {
            survival *= 1.0 - events / at_risk;
            while found < QUANTILES.len() && survival <= 1.0 - QUANTILES[found] + 1e-12 {
                out[found] = t;
                found += 1;
            }
        }
        at_risk -= gone;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(ms: i64) -> RunTime {
        RunTime {
            ms,
            censored: false,
        }
    }
    fn cut(ms: i64) -> RunTime {
        RunTime { ms, censored: true }
    }
    fn sorted(mut v: Vec<RunTime>) -> Vec<RunTime> {
        sort(&mut v);
        v
    }

    #[test]
    fn without_censoring_the_percentiles_are_the_empirical_ones() {
        let v = sorted((1..=8).map(|i| done(i * 10)).collect());
        // S drops by 1/8 per sample: ≤ 0.75 at 20, ≤ 0.5 at 40, ≤ 0.25 at 60.
        assert_eq!(quantiles(&v, 0, 3), Some([20, 40, 60]));
        // Conditional on having run 45: 50, 60, 70, 80 remain.
        assert_eq!(quantiles(&v, 45, 3), Some([50, 60, 70]));
        // Fewer than `min` ran that long: no prediction.
        assert_eq!(quantiles(&v, 65, 3), None);
        assert_eq!(quantiles(&v, 65, 2), Some([70, 70, 80]));
        assert_eq!(quantiles(&[], 0, 1), None);
    }

    #[test]
    fn preempted_attempts_count_as_ran_at_least() {
        // Two finished at 10 and 100, two preempted at 20: treated as finished at 20 they
        // would make the median 20; censored, the mass they carry moves to 100.
        let v = sorted(vec![done(10), cut(20), cut(20), done(100)]);
        // S(10) = 3/4; at 20 nothing ends (censored); S(100) = 0.
        assert_eq!(quantiles(&v, 0, 3), Some([10, 100, 100]));
        let plain = sorted(vec![done(10), done(20), done(20), done(100)]);
        assert_eq!(quantiles(&plain, 0, 3), Some([10, 20, 20]));
    }

    #[test]
    fn censoring_to_the_end_gives_the_longest_run_seen() {
        // Only one finished run; the rest were preempted after long runs: the estimate
        // never drops below 3/4 after 5, so p50 and p75 are "at least the longest".
        let v = sorted(vec![done(5), cut(50), cut(60), cut(70)]);
        assert_eq!(quantiles(&v, 0, 3), Some([5, 70, 70]));
    }

    #[test]
    fn a_censored_run_at_an_event_time_is_still_at_risk_then() {
        // At 10: one event among 4 at risk (the censored 10 included): S = 3/4.
        let v = sorted(vec![cut(10), done(10), done(30), done(40)]);
        assert_eq!(v[0], done(10));
        // Then 2 at risk: S(30) = 3/8 ≤ 1/2, S(40) = 0.
        assert_eq!(quantiles(&v, 0, 3), Some([10, 30, 40]));
    }
}
