//! A running job's stop under way as the console and the CLI show it (SPEC §14): its
//! phase — `notice` (SIGTERM still to come), `stopping` (SIGKILL still to come), `killing`
//! (SIGKILL is due or sent; its GPUs go once its processes are gone) — and what is left
//! until the next signal, worked out here only, from when the stop began and the notice
//! and grace it began with.

use crate::sched::StopPlan;
use serde::{Deserialize, Serialize};

/// Where a stop stands at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopPhase {
    /// The notice was sent; SIGTERM follows at `termAt`.
    Notice,
    /// SIGTERM was sent; SIGKILL follows at `killAt`.
    Stopping,
    /// SIGKILL is due or sent: waiting for the processes to be gone.
    Killing,
}

/// A stop's times (ms since the epoch). Written out (`jobs --json`'s `stop`) with its
/// phase and next signal as they are when it is written: `{phase, nextSignalAt, since,
/// termAt, killAt}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopView {
    /// When the stop began: its first signal.
    pub since: i64,
    /// When SIGTERM is due: `since` plus the notice (`since` without one).
    pub term_at: i64,
    /// When SIGKILL is due: `term_at` plus the grace period.
    pub kill_at: i64,
}

impl StopView {
    /// The stop that began at `since` with `plan`'s notice and grace.
    pub fn new(since: i64, plan: StopPlan) -> StopView {
        let term_at = since + i64::from(plan.notice_seconds()) * 1000;
        StopView {
            since,
            term_at,
            kill_at: term_at + i64::from(plan.grace) * 1000,
        }
    }

    /// The phase at `now`, and when its signal is due (`None` once SIGKILL is).
    pub fn at(&self, now: i64) -> (StopPhase, Option<i64>) {
        if now < self.term_at {
            (StopPhase::Notice, Some(self.term_at))
        } else if now < self.kill_at {
            (StopPhase::Stopping, Some(self.kill_at))
        } else {
            (StopPhase::Killing, None)
        }
    }

    /// `notice: SIGTERM in 3m12s`, `stopping: SIGKILL in 40s`, `killing`.
    pub fn text(&self, now: i64) -> String {
        let left = |at: i64| crate::duration::human(round_up(at - now));
        match self.at(now) {
            (StopPhase::Notice, Some(at)) => format!("notice: SIGTERM in {}", left(at)),
            (StopPhase::Stopping, Some(at)) => format!("stopping: SIGKILL in {}", left(at)),
            _ => "killing".to_string(),
        }
    }
}

/// Whole seconds up: 400 ms left reads `1s`, not `0s`.
fn round_up(ms: i64) -> i64 {
    (ms.max(0) + 999) / 1000 * 1000
}

impl Serialize for StopView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let (phase, next) = self.at(now);
        let mut m = s.serialize_struct("StopView", 5)?;
        m.serialize_field("phase", &phase)?;
        m.serialize_field("nextSignalAt", &next)?;
        m.serialize_field("since", &self.since)?;
        m.serialize_field("termAt", &self.term_at)?;
        m.serialize_field("killAt", &self.kill_at)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Notice, NoticeSignal};

    fn plan(notice: Option<u32>, grace: u32) -> StopPlan {
        StopPlan {
            notice: notice.map(|seconds| Notice {
                signal: NoticeSignal::Usr1,
                seconds,
            }),
            grace,
        }
    }

    #[test]
    fn a_notice_then_sigterm_then_sigkill() {
        let v = StopView::new(1_000_000, plan(Some(300), 40));
        assert_eq!(v.term_at, 1_300_000);
        assert_eq!(v.kill_at, 1_340_000);
        assert_eq!(
            v.at(1_000_000 + 107_500),
            (StopPhase::Notice, Some(1_300_000))
        );
        assert_eq!(v.text(1_000_000 + 107_500), "notice: SIGTERM in 3m13s");
        assert_eq!(v.text(1_300_000), "stopping: SIGKILL in 40s");
        assert_eq!(v.at(1_339_999), (StopPhase::Stopping, Some(1_340_000)));
        assert_eq!(v.text(1_339_999), "stopping: SIGKILL in 1s");
        assert_eq!(v.at(1_340_000), (StopPhase::Killing, None));
        assert_eq!(v.text(1_400_000), "killing");
    }

    #[test]
    fn without_a_notice_the_stop_begins_with_sigterm() {
        let v = StopView::new(5_000, plan(None, 30));
        assert_eq!(v.text(5_000), "stopping: SIGKILL in 30s");
        assert_eq!(StopView::new(5_000, plan(None, 0)).text(5_000), "killing");
    }

    #[test]
    fn written_out_with_its_phase_now() {
        let far = 4_000_000_000_000;
        let v = StopView::new(far, plan(Some(60), 10));
        let json = serde_json::to_value(v).unwrap();
        assert_eq!(json["phase"], "notice");
        assert_eq!(json["nextSignalAt"], far + 60_000);
        let back: StopView = serde_json::from_value(json).unwrap();
        assert_eq!(back, v);
        let past = StopView::new(0, plan(None, 10));
        let json = serde_json::to_value(past).unwrap();
        assert_eq!(json["phase"], "killing");
        assert!(json["nextSignalAt"].is_null());
    }
}
