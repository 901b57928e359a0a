//! Typical runtimes learned from the history (SPEC §11): per share, the run times of
//! recent attempts that ended by themselves. A running job is expected to run for the
//! median of the attempts that ran at least as long as it has so far (it has already
//! outlived the shorter ones), and a job not started yet for the share's median. A share
//! with no history borrows the whole machine's; with no history at all, a job without a
//! timeout has no known end.

use std::collections::HashMap;

/// How many recent attempts the history lends the forecast.
pub const LEARNED_FROM: usize = 5_000;

/// Run times in ms, sorted, per share and over all shares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Runtimes {
    per_share: HashMap<String, Vec<i64>>,
    all: Vec<i64>,
}

impl Runtimes {
    /// From (share, ms) samples.
    pub fn from_samples(samples: impl IntoIterator<Item = (String, i64)>) -> Runtimes {
        let mut r = Runtimes::default();
        for (share, ms) in samples {
            let ms = ms.max(0);
            r.per_share.entry(share).or_default().push(ms);
            r.all.push(ms);
        }
        for v in r.per_share.values_mut() {
            v.sort_unstable();
        }
        r.all.sort_unstable();
        r
    }

    /// The share's typical runtime (ms), if the history knows one.
    pub fn typical(&self, share: &str) -> Option<i64> {
        median_from(self.samples(share), 0)
    }

    /// How long an attempt of `share` that has run `elapsed` ms runs in all (ms): the
    /// median of the share's attempts that ran at least as long (its typical remaining
    /// time is this minus `elapsed`); `None` when no attempt of the history ran that long.
    pub fn typical_total(&self, share: &str, elapsed: i64) -> Option<i64> {
        median_from(self.samples(share), elapsed).map(|m| m.max(elapsed))
    }

    /// How long an attempt of `share` that has run `elapsed` ms runs in all (ms).
    pub fn expected_total(&self, share: &str, elapsed: i64) -> Option<i64> {
        let v = self.samples(share);
        if v.is_empty() {
            return None;
        }
        Some(median_from(v, elapsed).unwrap_or(elapsed).max(elapsed))
    }

    fn samples(&self, share: &str) -> &[i64] {
        match self.per_share.get(share) {
            Some(v) if !v.is_empty() => v,
            _ => &self.all,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}

/// The median of the sorted samples that are at least `at_least`.
fn median_from(sorted: &[i64], at_least: i64) -> Option<i64> {
    let from = sorted.partition_point(|&x| x < at_least);
    let rest = &sorted[from..];
    if rest.is_empty() {
        return None;
    }
    Some(rest[(rest.len() - 1) / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_per_share_conditional_and_fallback() {
        let r = Runtimes::from_samples([
            ("a".to_string(), 10),
            ("a".to_string(), 20),
            ("a".to_string(), 300),
            ("b".to_string(), 1000),
        ]);
        assert_eq!(r.typical("a"), Some(20));
        assert_eq!(r.expected_total("a", 0), Some(20));
        // Outlived 10 and 20: the remaining sample says 300.
        assert_eq!(r.expected_total("a", 25), Some(300));
        // Longer than every sample: expected to end now.
        assert_eq!(r.expected_total("a", 400), Some(400));
        // No history of its own: the whole machine's.
        assert_eq!(r.typical("c"), Some(20));
        assert_eq!(Runtimes::default().expected_total("a", 5), None);
    }
}
