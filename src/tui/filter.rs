//! The `/` filter (text, `share:NAME`, `!` negation), the `o` sort orders, and the cached
//! row order of a long job list so that a frame only touches the visible window.

use crate::snapshot::list::JobRows;
use crate::snapshot::{JobView, Snapshot};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Term {
    /// Case-insensitive substring of the name or the reason, or the job id.
    Text(String, Option<u64>),
    /// Exact share name.
    Share(String),
}

/// A parsed filter: every term must hold (a `!` term must not).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter {
    raw: String,
    terms: Vec<(bool, Term)>,
}

impl Filter {
    /// Parse `text`: whitespace-separated terms, `share:NAME`, `!` before a term negates.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let mut terms = Vec::new();
        for word in text.split_whitespace() {
            let (neg, w) = match word.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, word),
            };
            if w.is_empty() {
                return Err("`!` needs a term after it, e.g. !share:qs1".into());
            }
            let term = match w.strip_prefix("share:") {
                Some("") => return Err("`share:` needs a share name, e.g. share:qs1".into()),
                Some(name) => Term::Share(name.to_string()),
                None => Term::Text(w.to_lowercase(), w.parse().ok()),
            };
            terms.push((neg, term));
        }
        Ok(Filter {
            raw: text.trim().to_string(),
            terms,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn raw(&self) -> &str {
        &self.raw
    }

    pub fn matches(&self, j: &JobView) -> bool {
        self.matches_with_reason(j, &j.reason)
    }

    /// Match a row whose reason is `reason` (a queued row's reason is its group's).
    pub fn matches_with_reason(&self, j: &JobView, reason: &str) -> bool {
        self.terms.iter().all(|(neg, t)| {
            let hit = match t {
                Term::Share(s) => j.share == *s,
                Term::Text(t, id) => {
                    *id == Some(j.id.0) || contains_ci(&j.name, t) || contains_ci(reason, t)
                }
            };
            hit != *neg
        })
    }
}

/// ASCII case-insensitive substring test without allocating (`needle` is lowercase).
fn contains_ci(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    if n.is_empty() {
        return true;
    }
    if n.len() > h.len() {
        return false;
    }
    h.windows(n.len())
        .any(|w| w.iter().zip(n).all(|(a, b)| a.to_ascii_lowercase() == *b))
}

/// Queue orders that `o` cycles through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    #[default]
    Scheduling,
    LongestWait,
    Priority,
    Share,
    Gpus,
}

impl Sort {
    pub fn next(self) -> Sort {
        match self {
            Sort::Scheduling => Sort::LongestWait,
            Sort::LongestWait => Sort::Priority,
            Sort::Priority => Sort::Share,
            Sort::Share => Sort::Gpus,
            Sort::Gpus => Sort::Scheduling,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Sort::Scheduling => "scheduling order",
            Sort::LongestWait => "longest wait",
            Sort::Priority => "priority",
            Sort::Share => "share",
            Sort::Gpus => "GPUs",
        }
    }
}

/// The rows of one job list as shown: `None` when it is the snapshot's own order
/// unfiltered (no copy at all), else indices into the snapshot's list.
#[derive(Debug, Clone, Default)]
pub struct RowOrder {
    rows: Option<Vec<u32>>,
    len: usize,
}

impl RowOrder {
    /// Compute the shown order of `jobs` (O(n log n), once per snapshot or filter change).
    pub fn build<R: JobRows + ?Sized>(
        snap: &Snapshot,
        jobs: &R,
        filter: &Filter,
        sort: Sort,
    ) -> RowOrder {
        if filter.is_empty() && sort == Sort::Scheduling {
            return RowOrder {
                rows: None,
                len: jobs.row_count(),
            };
        }
        let views: Vec<&JobView> = (0..jobs.row_count()).filter_map(|i| jobs.row(i)).collect();
        let mut rows: Vec<u32> = (0..views.len() as u32)
            .filter(|&i| {
                let j = views[i as usize];
                filter.matches_with_reason(j, snap.reason(j))
            })
            .collect();
        let jobs = &views;
        // Stable sorts: ties keep scheduling order.
        match sort {
            Sort::Scheduling => {}
            Sort::LongestWait => rows.sort_by_key(|&i| jobs[i as usize].submitted),
            Sort::Priority => rows.sort_by_key(|&i| std::cmp::Reverse(jobs[i as usize].priority)),
            Sort::Share => {
                rows.sort_by(|&a, &b| jobs[a as usize].share.cmp(&jobs[b as usize].share))
            }
            Sort::Gpus => rows.sort_by_key(|&i| std::cmp::Reverse(jobs[i as usize].quantity)),
        }
        RowOrder {
            len: rows.len(),
            rows: Some(rows),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The snapshot index of shown row `i`.
    pub fn get(&self, i: usize) -> Option<usize> {
        if i >= self.len {
            return None;
        }
        match &self.rows {
            None => Some(i),
            Some(r) => r.get(i).map(|&x| x as usize),
        }
    }

    /// The shown row of snapshot index `ix` (O(n) when filtered; called on change only).
    pub fn position(&self, ix: usize) -> Option<usize> {
        match &self.rows {
            None => (ix < self.len).then_some(ix),
            Some(r) => r.iter().position(|&x| x as usize == ix),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{JobId, JobState};
    use std::sync::Arc;

    fn job(id: u64, name: &str, share: &str, prio: u32, submitted: i64) -> JobView {
        JobView {
            id: JobId(id),
            name: name.into(),
            share: share.into(),
            unit: "gpu".into(),
            quantity: 1 + (id % 3) as u32,
            priority: prio,
            state: JobState::Runnable,
            submitted,
            started: None,
            finished: None,
            devices: vec![],
            node: None,
            on_borrowed: false,
            reclaimed_first: false,
            reason: Arc::from("no idle capacity to borrow"),
            reason_group: None,
            stopping: None,
            attempts: 0,
            preempted_count: 0,
            nominated: false,
            submitter: None,
            command: String::new(),
        }
    }

    #[test]
    fn text_share_and_negation() {
        let a = job(1, "Sweep-19", "vision", 1, 0);
        let b = job(2, "eval", "nlp", 1, 0);
        let f = Filter::parse("sweep").unwrap();
        assert!(f.matches(&a) && !f.matches(&b));
        let f = Filter::parse("share:nlp").unwrap();
        assert!(!f.matches(&a) && f.matches(&b));
        let f = Filter::parse("!share:nlp").unwrap();
        assert!(f.matches(&a) && !f.matches(&b));
        let f = Filter::parse("borrow !eval").unwrap();
        assert!(f.matches(&a) && !f.matches(&b));
        let f = Filter::parse("2").unwrap();
        assert!(f.matches(&b) && !f.matches(&a));
        assert!(Filter::parse("share:").is_err());
        assert!(Filter::parse("!").is_err());
        assert!(Filter::parse("  ").unwrap().is_empty());
    }

    #[test]
    fn order_is_identity_without_filter_and_sorts_stably() {
        let jobs = vec![
            job(1, "a", "s2", 1, 30),
            job(2, "b", "s1", 5, 10),
            job(3, "c", "s1", 5, 20),
        ];
        let o = RowOrder::build(
            &Snapshot::empty(),
            &jobs,
            &Filter::default(),
            Sort::Scheduling,
        );
        assert_eq!((o.len(), o.get(2), o.get(3)), (3, Some(2), None));
        let o = RowOrder::build(
            &Snapshot::empty(),
            &jobs,
            &Filter::default(),
            Sort::LongestWait,
        );
        assert_eq!(
            (0..3).map(|i| o.get(i).unwrap()).collect::<Vec<_>>(),
            vec![1, 2, 0]
        );
        let o = RowOrder::build(
            &Snapshot::empty(),
            &jobs,
            &Filter::default(),
            Sort::Priority,
        );
        assert_eq!(
            (0..3).map(|i| o.get(i).unwrap()).collect::<Vec<_>>(),
            vec![1, 2, 0]
        );
        let o = RowOrder::build(
            &Snapshot::empty(),
            &jobs,
            &Filter::parse("share:s1").unwrap(),
            Sort::Scheduling,
        );
        assert_eq!((o.len(), o.get(0), o.position(2)), (2, Some(1), Some(1)));
        assert_eq!(Sort::Gpus.next(), Sort::Scheduling);
    }
}
