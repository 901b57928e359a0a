//! The runtime's one set of timers: grace periods, job timeouts, the executor's looks at
//! what runs, the held-back publish and history pruning. The runtime owns it and sleeps
//! until its next deadline alongside its input channel, so any timer can be replaced or
//! cancelled (an attempt that ends takes its timers with it).

use crate::model::JobId;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::time::Instant;

/// What is due when a timer fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Timer {
    /// An attempt's grace period after SIGTERM is over: SIGKILL it.
    Grace { job: JobId, attempt: u32 },
    /// An attempt ran past its job's `timeoutSeconds`.
    Timeout { job: JobId, attempt: u32 },
    /// Publish the changes held back by the publish rate limit.
    Flush,
    /// Prune old history.
    Prune,
    /// The next end of a minimum-runtime protection: a pass runs then (SPEC §11).
    ProtectionEnd,
    /// The next instant the scheduler asks for itself (`Sched::next_wakeup`: a lapsed
    /// nomination's retry, SPEC §3): a pass runs then.
    Wakeup,
    /// Estimate the queue's start times again (SPEC §11, `server::forecasts`).
    Forecast,
    /// The backend's next look at what runs (adopted supervisors, the batch system).
    Watch,
    /// Store the state labels held back (`Runtime::record`): at most [`LABELS_HELD`]
    /// after the first of them.
    Labels,
}

/// How long a batch of state labels only (SCHEDULED → STARTING → RUNNING) may wait for the
/// next write instead of a commit of its own.
pub(crate) const LABELS_HELD: Duration = Duration::from_secs(1);

impl Timer {
    #[cfg(test)]
    fn attempt(&self) -> Option<(JobId, u32)> {
        match *self {
            Timer::Grace { job, attempt } | Timer::Timeout { job, attempt } => Some((job, attempt)),
            Timer::Flush
            | Timer::Prune
            | Timer::ProtectionEnd
            | Timer::Wakeup
            | Timer::Forecast
            | Timer::Watch
            | Timer::Labels => None,
        }
    }
}

/// Timers by deadline; at most one of each [`Timer`] value is set.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    by_deadline: BTreeMap<(Instant, u64), Timer>,
    set: HashMap<Timer, (Instant, u64)>,
    seq: u64,
}

impl Timers {
    /// Set `timer` to fire after `after`, replacing it if it was set.
    pub(crate) fn set(&mut self, timer: Timer, after: Duration) {
        self.cancel(timer);
        self.seq += 1;
        let at = (Instant::now() + after, self.seq);
        self.by_deadline.insert(at, timer);
        self.set.insert(timer, at);
    }

    pub(crate) fn is_set(&self, timer: Timer) -> bool {
        self.set.contains_key(&timer)
    }

    pub(crate) fn cancel(&mut self, timer: Timer) {
        if let Some(at) = self.set.remove(&timer) {
            self.by_deadline.remove(&at);
        }
    }

    /// Cancel every timer of one attempt (it ended).
    pub(crate) fn cancel_attempt(&mut self, job: JobId, attempt: u32) {
        for t in [
            Timer::Grace { job, attempt },
            Timer::Timeout { job, attempt },
        ] {
            self.cancel(t);
        }
    }

    /// Wait until the earliest deadline (forever when none is set). Cancel-safe: it
    /// only sleeps.
    pub(crate) async fn expired(&self) {
        match self.by_deadline.first_key_value() {
            Some((&(at, _), _)) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    /// Take every timer whose deadline has passed, earliest first.
    pub(crate) fn take_due(&mut self) -> Vec<Timer> {
        let now = Instant::now();
        let mut due = Vec::new();
        while let Some(entry) = self.by_deadline.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let timer = entry.remove();
            self.set.remove(&timer);
            due.push(timer);
        }
        due
    }

    /// How many attempt timers are set (tests).
    #[cfg(test)]
    fn attempts(&self) -> usize {
        self.set.keys().filter(|t| t.attempt().is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn fires_in_deadline_order_and_cancels() {
        let mut t = Timers::default();
        let (a, b) = (JobId(1), JobId(2));
        t.set(
            Timer::Timeout { job: a, attempt: 1 },
            Duration::from_secs(5),
        );
        t.set(Timer::Grace { job: b, attempt: 1 }, Duration::from_secs(2));
        t.set(Timer::Flush, Duration::from_secs(3));
        // Replacing moves the deadline rather than adding a second timer.
        t.set(Timer::Flush, Duration::from_secs(1));
        t.cancel_attempt(a, 1);
        assert_eq!(t.attempts(), 1);
        t.expired().await;
        assert_eq!(t.take_due(), vec![Timer::Flush]);
        t.expired().await;
        assert_eq!(t.take_due(), vec![Timer::Grace { job: b, attempt: 1 }]);
        assert!(t.take_due().is_empty());
        assert!(!t.is_set(Timer::Timeout { job: a, attempt: 1 }));
        // Nothing set: waiting never ends.
        let idle = tokio::time::timeout(Duration::from_secs(3600), t.expired()).await;
        assert!(idle.is_err());
    }
}
