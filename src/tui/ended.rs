//! The `F` view's state: whether it is open and which row is selected. Its rows are the
//! jobs that ended lately (the snapshot's `finished`, newest first, the scheduler's last
//! 200) that the `/` filter lets through; each says how it ended in [`outcome`].

use crate::model::{JobId, JobState};
use crate::snapshot::{JobView, Snapshot};
use crate::tui::filter::Filter;

/// The `F` view: open or not, and the selected job (by id, so that a job ending meanwhile,
/// which comes in at the top, does not move the selection to another job).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndedView {
    /// Open: overlays opened from it (details, log, the filter prompt) come back to it.
    pub open: bool,
    /// The selected row's index, used when its job is no longer listed.
    pub sel: usize,
    pub job: Option<JobId>,
}

/// The ended jobs the filter lets through, newest first.
pub fn rows<'a>(snap: &'a Snapshot, filter: &Filter) -> Vec<&'a JobView> {
    snap.finished
        .iter()
        .map(|j| &**j)
        .filter(|j| filter.matches(j))
        .collect()
}

impl EndedView {
    /// The selected row of `rows`: the selected job's, else the last index, kept in range.
    pub fn selected(&self, rows: &[&JobView]) -> usize {
        self.job
            .and_then(|id| rows.iter().position(|j| j.id == id))
            .unwrap_or(self.sel)
            .min(rows.len().saturating_sub(1))
    }

    /// Move the selection by `delta` rows (clamped).
    pub fn step(&mut self, rows: &[&JobView], delta: isize) {
        if rows.is_empty() {
            *self = EndedView {
                open: self.open,
                ..EndedView::default()
            };
            return;
        }
        let at = self.selected(rows) as isize;
        let i = (at + delta).clamp(0, rows.len() as isize - 1) as usize;
        self.sel = i;
        self.job = Some(rows[i].id);
    }
}

/// How a job ended, in one word: `succeeded`, `cancelled`, `killed` (by a signal from
/// outside shareq), `timed out`, or `failed`.
pub fn outcome(j: &JobView) -> &'static str {
    match j.state {
        JobState::Succeeded => "succeeded",
        _ if j.signal.is_some() => "killed",
        _ if j.reason.starts_with("CANCELLED") => "cancelled",
        _ if j.reason.starts_with("TIMEOUT") => "timed out",
        _ => "failed",
    }
}

/// Why it ended: a failure's reason without the word [`outcome`] already says (`exit
/// code 3`, `by alice`, `killed by SIGKILL (not by shareq)`); nothing for a success.
pub fn why(j: &JobView) -> &str {
    if j.state == JobState::Succeeded {
        return "";
    }
    let r = &*j.reason;
    if let Some(code) = r
        .strip_prefix("NON_ZERO_EXIT (")
        .and_then(|s| s.strip_suffix(')'))
    {
        return code;
    }
    for word in ["NON_ZERO_EXIT: ", "CANCELLED: "] {
        if let Some(rest) = r.strip_prefix(word) {
            return rest;
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn ended(id: u64, state: JobState, reason: &str, signal: Option<&str>) -> JobView {
        let mut v: JobView = serde_json::from_value(serde_json::json!({
            "id": id, "name": "j", "share": "a", "unit": "gpu", "quantity": 1,
            "priority": 0, "state": state, "submitted": 0, "started": 1,
            "finished": 2, "devices": [], "on_borrowed": false, "reason": reason,
            "stopping": null, "attempts": 1, "preempted_count": 0, "nominated": false,
        }))
        .unwrap();
        v.signal = signal.map(str::to_string);
        v.reason = Arc::from(reason);
        v
    }

    #[test]
    fn each_end_reads_as_its_outcome_and_reason() {
        let cases = [
            (JobState::Succeeded, "SUCCEEDED", None, "succeeded", ""),
            (
                JobState::Failed,
                "NON_ZERO_EXIT (exit code 3)",
                None,
                "failed",
                "exit code 3",
            ),
            (
                JobState::Failed,
                "NON_ZERO_EXIT: killed by SIGKILL (not by shareq)",
                Some("SIGKILL"),
                "killed",
                "killed by SIGKILL (not by shareq)",
            ),
            (
                JobState::Failed,
                "CANCELLED: by bob",
                None,
                "cancelled",
                "by bob",
            ),
            (JobState::Failed, "TIMEOUT", None, "timed out", "TIMEOUT"),
            (
                JobState::Failed,
                "DEPENDENCY_FAILED: job 4 FAILED",
                None,
                "failed",
                "DEPENDENCY_FAILED: job 4 FAILED",
            ),
        ];
        for (state, reason, signal, word, rest) in cases {
            let j = ended(1, state, reason, signal);
            assert_eq!((outcome(&j), why(&j)), (word, rest), "{reason}");
        }
    }

    /// The selection follows its job when another ends (and comes in at the top), and
    /// stays in range when its job leaves the list.
    #[test]
    fn the_selection_follows_its_job() {
        let a = ended(1, JobState::Succeeded, "", None);
        let b = ended(2, JobState::Succeeded, "", None);
        let c = ended(3, JobState::Succeeded, "", None);
        let mut v = EndedView::default();
        v.step(&[&b, &a], 1);
        assert_eq!(v.job, Some(JobId(1)));
        assert_eq!(v.selected(&[&c, &b, &a]), 2);
        assert_eq!(v.selected(&[&c]), 0);
        v.step(&[], 1);
        assert_eq!(v.selected(&[&c, &b]), 0);
    }
}
