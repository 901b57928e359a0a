//! The `/` filter (free text, `user:` `share:` `state:` `node:` keys, `!` negation), the `o` sort orders, and the cached
//! row order of a long job list so that a frame only touches the visible window.

use crate::model::JobId;
use crate::snapshot::list::JobRows;
use crate::snapshot::{JobView, Snapshot};
use std::collections::HashMap;

/// The keys a `/` filter term may carry, with what each matches (shown in `?` help).
pub const KEYS: &[(&str, &str)] = &[
    ("word", "name user share cmd state"),
    ("user:NAME", "submitted by NAME"),
    ("share:NAME", "in share NAME"),
    ("state:S", "e.g. state:running"),
    ("node:NAME", "on node NAME"),
    ("!term", "not matching term"),
    ("a b", "every term holds"),
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Term {
    /// Case-insensitive substring of the name, user, share, command, state or reason,
    /// or the job id.
    Text(String, Option<u64>),
    /// Exact submitter name.
    User(String),
    /// Exact share name.
    Share(String),
    /// State, case-insensitive prefix of its AWS name (`run` matches RUNNING and RUNNABLE).
    State(String),
    /// Exact node name.
    Node(String),
}

/// A parsed filter: every term must hold (a `!` term must not).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter {
    raw: String,
    terms: Vec<(bool, Term)>,
}

impl Filter {
    /// Parse `text`: whitespace-separated terms, each free text or `KEY:VALUE` with KEY one
    /// of `user`, `share`, `state`, `node`; `!` before a term negates. An unknown key is
    /// an error naming the known ones.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let mut terms = Vec::new();
        for word in text.split_whitespace() {
            let (neg, w) = match word.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, word),
            };
            if w.is_empty() {
                return Err("`!` needs a term after it, e.g. !user:bob".into());
            }
            let term = match w.split_once(':') {
                Some((key, value)) => {
                    let key = key.to_ascii_lowercase();
                    if value.is_empty() {
                        return Err(format!(
                            "`{key}:` needs a value, e.g. {key}:{}",
                            example(&key)
                        ));
                    }
                    match key.as_str() {
                        "user" => Term::User(value.to_string()),
                        "share" => Term::Share(value.to_string()),
                        "state" => Term::State(value.to_ascii_uppercase()),
                        "node" => Term::Node(value.to_string()),
                        _ => {
                            return Err(format!(
                                "unknown filter key `{key}:` (known: user: share: state: node:)"
                            ));
                        }
                    }
                }
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
        let user = j.submitter.as_ref().map_or("", |s| s.name.as_str());
        self.terms.iter().all(|(neg, t)| {
            let hit = match t {
                Term::User(u) => user == u,
                Term::Share(s) => j.share == *s,
                Term::State(s) => j.state.as_str().starts_with(s.as_str()),
                Term::Node(n) => j.node.as_deref() == Some(n.as_str()),
                Term::Text(t, id) => {
                    *id == Some(j.id.0)
                        || contains_ci(&j.name, t)
                        || contains_ci(user, t)
                        || contains_ci(&j.share, t)
                        || contains_ci(&j.command, t)
                        || contains_ci(j.state.as_str(), t)
                        || contains_ci(reason, t)
                }
            };
            hit != *neg
        })
    }
}

fn example(key: &str) -> &'static str {
    match key {
        "user" => "bob",
        "state" => "running",
        "node" => "gpu-1",
        _ => "vision",
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
        // With fair share the stored order is not the scheduling order (SPEC §12).
        let fair = sort == Sort::Scheduling && snap.has_fair_share();
        if filter.is_empty() && sort == Sort::Scheduling && !fair {
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
            Sort::Scheduling if fair => {
                let mut shown: Vec<&JobView> = rows.iter().map(|&i| jobs[i as usize]).collect();
                snap.scheduling_order(&mut shown);
                let at: HashMap<JobId, u32> = views
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (v.id, i as u32))
                    .collect();
                rows = shown
                    .iter()
                    .filter_map(|v| at.get(&v.id).copied())
                    .collect();
            }
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
            estimated_start: None,
            estimate_note: None,
            fair_share_delay_seconds: None,
            user_usage_gpu_seconds: None,
            parent: None,
            array_index: None,
            depends_on: Vec::new(),
            array: None,
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

    fn owned(mut j: JobView, user: &str, node: &str, command: &str, state: JobState) -> JobView {
        j.submitter = Some(Arc::new(crate::model::Submitter {
            name: user.into(),
            uid: 1000,
        }));
        j.node = Some(node.into());
        j.command = command.into();
        j.state = state;
        j
    }

    #[test]
    fn free_text_finds_people_shares_commands_and_states() {
        let a = owned(
            job(1, "sweep", "vision", 1, 0),
            "ncbob",
            "gpu-1",
            "python train.py",
            JobState::Running,
        );
        let b = owned(
            job(2, "eval", "nlp", 1, 0),
            "alice",
            "gpu-2",
            "sleep 60",
            JobState::Runnable,
        );
        let hits = |q: &str| {
            let f = Filter::parse(q).unwrap();
            (f.matches(&a), f.matches(&b))
        };
        assert_eq!(hits("vision"), (true, false));
        assert_eq!(hits("ncbob"), (true, false));
        assert_eq!(hits("!ncbob"), (false, true));
        assert_eq!(hits("train.py"), (true, false));
        assert_eq!(hits("running"), (true, false));
        assert_eq!(hits("user:ncbob"), (true, false));
        assert_eq!(hits("user:ncb"), (false, false), "user: is exact");
        assert_eq!(hits("!user:ncbob"), (false, true));
        assert_eq!(hits("state:running"), (true, false));
        assert_eq!(hits("state:run"), (true, true), "a state prefix");
        assert_eq!(hits("STATE:Runnable"), (false, true));
        assert_eq!(hits("node:gpu-2"), (false, true));
        assert_eq!(hits("share:vision user:alice"), (false, false));
    }

    #[test]
    fn unknown_or_empty_keys_are_errors_naming_the_known_ones() {
        let e = Filter::parse("owner:bob").unwrap_err();
        assert!(e.contains("unknown filter key `owner:`"), "{e}");
        assert!(e.contains("user: share: state: node:"), "{e}");
        let e = Filter::parse("user:").unwrap_err();
        assert!(e.contains("`user:` needs a value"), "{e}");
        assert!(Filter::parse("!node:").is_err());
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
