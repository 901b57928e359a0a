//! The `/` filter (free text, `user:` `share:` `state:` `node:` keys, `!` negation), the `o` sort orders, and the cached
//! row order of a long job list so that a frame only touches the visible window.

use crate::model::JobId;
use crate::sched::QKey;
use crate::snapshot::list::{JobRows, Order, Rows, key_of};
use crate::snapshot::{Change, JobView, Snapshot};
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

    /// Does a match depend on a row's waiting reason (free text matches it)?
    pub fn reads_reasons(&self) -> bool {
        self.terms.iter().any(|(_, t)| matches!(t, Term::Text(..)))
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
                // A gang (SPEC §16) is on each of its nodes.
                Term::Node(n) => {
                    j.node.as_deref() == Some(n.as_str())
                        || j.placements.iter().any(|p| p.node == *n)
                }
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

/// The console's order of a filtered or re-sorted queue: the sort's own key, then the
/// scheduling order (ties keep it, as a stable sort would).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shown(pub Sort);

impl Shown {
    /// What the sort orders by, first (number, share name; the name only for
    /// [`Sort::Share`]): the one definition of each sort, for kept and indexed rows.
    fn primary(&self, j: &JobView) -> (i64, String) {
        match self.0 {
            Sort::Scheduling => (0, String::new()),
            Sort::LongestWait => (j.submitted, String::new()),
            Sort::Priority => (-i64::from(j.priority), String::new()),
            Sort::Share => (0, j.share.clone()),
            Sort::Gpus => (-i64::from(j.quantity), String::new()),
        }
    }
}

impl Order for Shown {
    /// The sort's own key, then the scheduling key.
    type Key = (i64, String, QKey);
    fn key(&self, j: &JobView) -> Self::Key {
        let (n, share) = self.primary(j);
        (n, share, key_of(j))
    }
}

/// The rows of one job list as shown, worked out once per snapshot or filter change so
/// that a frame touches only its visible window.
#[derive(Debug, Clone)]
pub struct RowOrder(Kind);

#[derive(Debug, Clone)]
enum Kind {
    /// The list's own order, unfiltered: nothing copied.
    Same(usize),
    /// Indices into the list: the running jobs, a queue with arrays folded in, or the fair
    /// order (SPEC §12), rebuilt with each snapshot (O(n log n)).
    Indexed(Vec<u32>),
    /// The plain queue filtered or re-sorted: the rows themselves, in shared chunks, which
    /// a new snapshot changes row by row ([`RowOrder::take_in`]).
    Kept(Rows<Shown>),
}

impl Default for RowOrder {
    fn default() -> RowOrder {
        RowOrder(Kind::Same(0))
    }
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
            return RowOrder(Kind::Same(jobs.row_count()));
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
            other => rows.sort_by_cached_key(|&i| Shown(other).primary(jobs[i as usize])),
        }
        RowOrder(Kind::Indexed(rows))
    }

    /// The shown order of the snapshot's plain queue (no arrays folded in): the list's own
    /// when nothing filters or re-sorts it, else its matching rows kept in the sort's
    /// order, which [`RowOrder::take_in`] keeps up to date.
    pub fn of_queue(snap: &Snapshot, filter: &Filter, sort: Sort) -> RowOrder {
        if (filter.is_empty() && sort == Sort::Scheduling) || snap.has_fair_share() {
            return RowOrder::build(snap, &snap.queue, filter, sort);
        }
        let rows = snap
            .queue
            .iter_shared()
            .filter(|j| filter.matches_with_reason(j, snap.reason(j)))
            .cloned()
            .collect();
        RowOrder(Kind::Kept(Rows::from_shared(Shown(sort), rows)))
    }

    /// Follow the plain queue from snapshot `old` to `new` by `changes` (what the queue
    /// changed between them, in order): O(changes × log n). Returns false where that
    /// cannot be done (the order is not one kept row by row, or the filter reads the
    /// waiting reasons and those changed): the caller builds it again.
    pub fn take_in(
        &mut self,
        old: &Snapshot,
        new: &Snapshot,
        changes: &[Change],
        filter: &Filter,
    ) -> bool {
        if new.has_fair_share() || old.has_fair_share() {
            return false;
        }
        let rows = match &mut self.0 {
            Kind::Same(n) => {
                *n = new.queue.len();
                return filter.is_empty();
            }
            Kind::Indexed(_) => return false,
            Kind::Kept(rows) => rows,
        };
        if filter.reads_reasons() && old.reasons != new.reasons {
            return false;
        }
        // A job's view before this change: the latest this batch gave it, else the old
        // queue's (a row is kept only when its view matched, so removing by the key of
        // a view that did not match removes nothing).
        let mut latest: HashMap<JobId, Option<&JobView>> = HashMap::new();
        for c in changes {
            let (id, before) = match c {
                // An upsert replaces the row of the same key, if there is one.
                Change::Upsert(v) => (v.id, old.queue.find(key_of(v))),
                Change::Remove((p, sub, id)) => (*id, old.queue.find(QKey::new(*p, *sub, *id))),
            };
            let before = latest.get(&id).copied().unwrap_or(before);
            if let Some(b) = before {
                rows.remove(rows.order().key(b));
            }
            let after = match c {
                Change::Upsert(v) => {
                    if filter.matches_with_reason(v, new.reason(v)) {
                        rows.upsert(v.clone());
                    }
                    Some(&**v)
                }
                Change::Remove(_) => None,
            };
            latest.insert(id, after);
        }
        true
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Kind::Same(n) => *n,
            Kind::Indexed(r) => r.len(),
            Kind::Kept(r) => r.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shown row `i` of `list` (the list this order was built from).
    pub fn job<'a, R: JobRows + ?Sized>(&'a self, i: usize, list: &'a R) -> Option<&'a JobView> {
        match &self.0 {
            Kind::Same(n) => (i < *n).then(|| list.row(i)).flatten(),
            Kind::Indexed(r) => list.row(*r.get(i)? as usize),
            Kind::Kept(r) => r.get(i),
        }
    }

    /// The shown row of the job whose current view is `j`, if shown: O(log n) for the
    /// plain queue, O(n) for an indexed order (rebuilt with each snapshot anyway).
    pub fn position<R: JobRows + ?Sized>(&self, j: &JobView, list: &R) -> Option<usize> {
        match &self.0 {
            Kind::Same(n) => list.index_of_view(j).filter(|ix| ix < n),
            Kind::Indexed(r) => {
                let ix = list.index_of(j.id)?;
                r.iter().position(|&x| x as usize == ix)
            }
            Kind::Kept(r) => r.position(&r.order().key(j)),
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
            uuids: Vec::new(),
            node: None,
            num_nodes: None,
            placements: Vec::new(),
            on_borrowed: false,
            reclaimed_first: false,
            reason: Arc::from("no idle capacity to borrow"),
            signal: None,
            reason_group: None,
            stopping: None,
            stop: None,
            over_memory: None,
            attempts: 0,
            preempted_count: 0,
            lost_gpu_ms: 0,
            nominated: false,
            submitter: None,
            estimated_start: None,
            estimated_start_earliest: None,
            estimated_start_latest: None,
            estimate_kind: None,
            estimate_note: None,
            fair_share_delay_seconds: None,
            user_usage_gpu_seconds: None,
            parent: None,
            array_index: None,
            depends_on: Vec::new(),
            array: None,
            last_checkpoint: None,
            checkpoint_every_seconds: None,
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
        // A gang (SPEC §16) is on every node it holds, not only its first.
        let mut gang = a.clone();
        gang.num_nodes = Some(2);
        gang.placements = ["gpu-1", "gpu-3"]
            .map(|n| crate::snapshot::Placement {
                node: n.into(),
                devices: vec![0],
            })
            .to_vec();
        for (q, hit) in [
            ("node:gpu-3", true),
            ("node:gpu-1", true),
            ("node:gpu-2", false),
        ] {
            assert_eq!(Filter::parse(q).unwrap().matches(&gang), hit, "{q}");
        }
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
        let id = |o: &RowOrder, i| o.job(i, &jobs).map(|j| j.id.0);
        assert_eq!((o.len(), id(&o, 2), id(&o, 3)), (3, Some(3), None));
        let o = RowOrder::build(
            &Snapshot::empty(),
            &jobs,
            &Filter::default(),
            Sort::LongestWait,
        );
        assert_eq!(
            (0..3).map(|i| id(&o, i).unwrap()).collect::<Vec<_>>(),
            vec![2, 3, 1]
        );
        let o = RowOrder::build(
            &Snapshot::empty(),
            &jobs,
            &Filter::default(),
            Sort::Priority,
        );
        assert_eq!(
            (0..3).map(|i| id(&o, i).unwrap()).collect::<Vec<_>>(),
            vec![2, 3, 1]
        );
        let o = RowOrder::build(
            &Snapshot::empty(),
            &jobs,
            &Filter::parse("share:s1").unwrap(),
            Sort::Scheduling,
        );
        assert_eq!(
            (o.len(), id(&o, 0), o.position(&jobs[2], &jobs)),
            (2, Some(2), Some(1))
        );
        assert_eq!(Sort::Gpus.next(), Sort::Scheduling);
    }

    /// The queue's kept order follows random batches of changes (new rows, moves,
    /// replacements, removals) exactly as building it again would, for every sort, with
    /// and without a filter.
    #[test]
    fn a_kept_order_follows_changes_as_a_rebuild_would() {
        use crate::snapshot::JobList;
        let mut seed = 7u64;
        let mut rand = move |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let shares = ["s1", "s2", "s3"];
        let mk = |id: u64, share: &str, prio: u32, at: i64| {
            let mut j = job(id, &format!("n{id}"), share, prio, at);
            j.quantity = 1 + (id % 4) as u32;
            Arc::new(j)
        };
        for sort in [
            Sort::Scheduling,
            Sort::LongestWait,
            Sort::Priority,
            Sort::Share,
            Sort::Gpus,
        ] {
            for filter in ["", "share:s1", "!share:s2 n1"] {
                let filter = Filter::parse(filter).unwrap();
                let mut snap = Snapshot::empty();
                snap.queue = JobList::from_views(
                    (1..=600)
                        .map(|i| {
                            (*mk(i, shares[(i % 3) as usize], (i % 5) as u32, i as i64)).clone()
                        })
                        .collect(),
                );
                let mut next_id = 601;
                let mut rows = RowOrder::of_queue(&snap, &filter, sort);
                for _ in 0..40 {
                    let mut new = snap.clone();
                    let mut changes = Vec::new();
                    for _ in 0..rand(30) {
                        let n = new.queue.len() as u64;
                        match rand(4) {
                            0 => {
                                let v = mk(
                                    next_id,
                                    shares[rand(3) as usize],
                                    rand(5) as u32,
                                    rand(900) as i64,
                                );
                                next_id += 1;
                                new.queue.upsert(v.clone());
                                changes.push(Change::Upsert(v));
                            }
                            1 if n > 0 => {
                                // A priority change: the row moves.
                                let old = new.queue.get(rand(n) as usize).unwrap().clone();
                                let k = key_of(&old);
                                new.queue.remove(k);
                                let mut moved = old.clone();
                                moved.priority = rand(5) as u32;
                                let moved = Arc::new(moved);
                                new.queue.upsert(moved.clone());
                                changes.push(Change::Remove((old.priority, old.submitted, old.id)));
                                changes.push(Change::Upsert(moved));
                            }
                            2 if n > 0 => {
                                // The same key, another share: the row is replaced.
                                let mut v = new.queue.get(rand(n) as usize).unwrap().clone();
                                v.share = shares[rand(3) as usize].to_string();
                                let v = Arc::new(v);
                                new.queue.upsert(v.clone());
                                changes.push(Change::Upsert(v));
                            }
                            3 if n > 0 => {
                                let old = new.queue.get(rand(n) as usize).unwrap().clone();
                                new.queue.remove(key_of(&old));
                                changes.push(Change::Remove((old.priority, old.submitted, old.id)));
                            }
                            _ => {}
                        }
                    }
                    new.version += 1;
                    assert!(rows.take_in(&snap, &new, &changes, &filter));
                    let want = RowOrder::of_queue(&new, &filter, sort);
                    let ids = |o: &RowOrder| -> Vec<u64> {
                        (0..o.len())
                            .map(|i| o.job(i, &new.queue).unwrap().id.0)
                            .collect()
                    };
                    assert_eq!(ids(&rows), ids(&want), "{sort:?} {}", filter.raw());
                    for i in (0..rows.len()).step_by(37) {
                        let j = rows.job(i, &new.queue).unwrap().clone();
                        assert_eq!(rows.position(&j, &new.queue), Some(i));
                    }
                    snap = new;
                }
            }
        }
    }
}
