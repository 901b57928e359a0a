//! The queue as the snapshot holds it: job views in scheduling order, stored in shared
//! chunks so that a new snapshot shares every chunk that did not change. Cloning the list
//! costs one pointer per chunk; inserting or removing a row copies one chunk.
//!
//! The chunked list is generic over its order ([`Order`]): the snapshot's queue is kept
//! in scheduling order ([`JobList`]), and the console keeps its filtered or re-sorted
//! queue in its own order with the same code (`tui::filter::Shown`).

use super::JobView;
use crate::model::JobId;
use crate::sched::QKey;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Arc;

/// Rows per chunk when a chunk is split in two.
const CHUNK: usize = 512;

/// The scheduling-order key of a view (the same order as `Sched::queue`).
pub fn key_of(j: &JobView) -> QKey {
    QKey::new(j.priority, j.submitted, j.id)
}

/// How a [`Rows`] list orders its views: by a key worked out from each view; two views of
/// one list never share a key.
pub trait Order: Clone + Default + std::fmt::Debug + PartialEq {
    type Key: Ord;
    fn key(&self, j: &JobView) -> Self::Key;
}

/// Scheduling order (`key_of`), the snapshot's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scheduling;

impl Order for Scheduling {
    type Key = QKey;
    fn key(&self, j: &JobView) -> QKey {
        key_of(j)
    }
}

/// Job views sorted by [`key_of`], shared chunk by chunk between snapshots.
pub type JobList = Rows<Scheduling>;

/// Job views sorted by an [`Order`], in shared chunks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows<O: Order> {
    order: O,
    chunks: Vec<Arc<Vec<Arc<JobView>>>>,
    /// `ends[i]`: rows in chunks `0..=i`.
    ends: Vec<usize>,
}

impl<O: Order> Rows<O> {
    pub fn new() -> Rows<O> {
        Rows::default()
    }

    /// An empty list in `order`.
    pub fn in_order(order: O) -> Rows<O> {
        Rows {
            order,
            chunks: Vec::new(),
            ends: Vec::new(),
        }
    }

    pub fn order(&self) -> &O {
        &self.order
    }

    pub fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i` in order (O(log chunks)).
    pub fn get(&self, i: usize) -> Option<&JobView> {
        let c = self.ends.partition_point(|&e| e <= i);
        let start = if c == 0 { 0 } else { self.ends[c - 1] };
        self.chunks.get(c)?.get(i - start).map(|j| &**j)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &JobView> + '_ {
        self.chunks.iter().flat_map(|c| c.iter().map(|j| &**j))
    }

    /// The rows as the shared views they are (cloning one costs a count).
    pub fn iter_shared(&self) -> impl Iterator<Item = &Arc<JobView>> + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The chunk that holds (or would hold) `key`, and the position in it.
    fn locate(&self, key: &O::Key) -> (usize, Result<usize, usize>) {
        if self.chunks.is_empty() {
            return (0, Err(0));
        }
        // The first chunk whose last key is ≥ key; past the end: the last chunk.
        let c = self
            .chunks
            .partition_point(|ch| ch.last().is_some_and(|l| self.order.key(l) < *key))
            .min(self.chunks.len() - 1);
        (
            c,
            self.chunks[c].binary_search_by(|j| self.order.key(j).cmp(key)),
        )
    }

    /// The row with this key, if any.
    pub fn find(&self, key: O::Key) -> Option<&JobView> {
        match self.locate(&key) {
            (c, Ok(i)) => Some(&self.chunks[c][i]),
            _ => None,
        }
    }

    /// The index of the row with this key, if any (O(log n)).
    pub fn position(&self, key: &O::Key) -> Option<usize> {
        match self.locate(key) {
            (c, Ok(i)) => Some(if c == 0 { i } else { self.ends[c - 1] + i }),
            _ => None,
        }
    }

    /// Insert a view, or replace the view with the same key.
    pub fn upsert(&mut self, view: Arc<JobView>) {
        let key = self.order.key(&view);
        if self.chunks.is_empty() {
            self.chunks.push(Arc::new(Vec::with_capacity(CHUNK)));
            self.ends.push(0);
        }
        let (c, at) = self.locate(&key);
        let chunk = Arc::make_mut(&mut self.chunks[c]);
        match at {
            Ok(i) => chunk[i] = view,
            Err(i) => {
                chunk.insert(i, view);
                if chunk.len() >= 2 * CHUNK {
                    let tail = chunk.split_off(CHUNK);
                    self.chunks.insert(c + 1, Arc::new(tail));
                    self.ends.insert(c + 1, 0);
                }
                self.recount(c);
            }
        }
    }

    /// Remove the row with this key; returns whether there was one.
    pub fn remove(&mut self, key: O::Key) -> bool {
        let (c, Ok(i)) = self.locate(&key) else {
            return false;
        };
        let chunk = Arc::make_mut(&mut self.chunks[c]);
        chunk.remove(i);
        if chunk.is_empty() {
            self.chunks.remove(c);
            self.ends.remove(c);
            if c < self.chunks.len() {
                self.recount(c);
            }
        } else {
            self.recount(c);
        }
        true
    }

    /// Recompute `ends` from chunk `c` on.
    fn recount(&mut self, c: usize) {
        let mut n = if c == 0 { 0 } else { self.ends[c - 1] };
        for (ch, e) in self.chunks[c..].iter().zip(&mut self.ends[c..]) {
            n += ch.len();
            *e = n;
        }
    }

    /// Build in `order` from shared views in any order (O(n log n)).
    pub fn from_shared(order: O, mut views: Vec<Arc<JobView>>) -> Rows<O> {
        views.sort_by_cached_key(|j| order.key(j));
        let mut list = Rows::in_order(order);
        let mut it = views.into_iter().peekable();
        while it.peek().is_some() {
            let chunk: Vec<Arc<JobView>> = it.by_ref().take(CHUNK).collect();
            list.chunks.push(Arc::new(chunk));
            list.ends.push(0);
        }
        if !list.chunks.is_empty() {
            list.recount(0);
        }
        list
    }
}

impl JobList {
    /// Build from views in any order.
    pub fn from_views(views: Vec<JobView>) -> JobList {
        Rows::from_shared(Scheduling, views.into_iter().map(Arc::new).collect())
    }

    /// Is this the same list as `other`, chunk for chunk (O(chunks): one pointer each)?
    pub fn is_same(&self, other: &JobList) -> bool {
        self.chunks.len() == other.chunks.len()
            && self
                .chunks
                .iter()
                .zip(&other.chunks)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }

    /// Whether row storage is shared with `other` (no chunk was copied): for tests.
    pub fn shares_chunks_with(&self, other: &JobList) -> usize {
        self.chunks
            .iter()
            .filter(|c| other.chunks.iter().any(|o| Arc::ptr_eq(c, o)))
            .count()
    }

    /// Ids in order (tests and checks).
    pub fn ids(&self) -> Vec<JobId> {
        self.iter().map(|j| j.id).collect()
    }
}

/// A list of job views the console shows rows of: the queue or the running jobs.
pub trait JobRows {
    fn row_count(&self) -> usize;
    fn row(&self, i: usize) -> Option<&JobView>;
    /// The index of a job (O(n); on change only).
    fn index_of(&self, id: JobId) -> Option<usize> {
        (0..self.row_count()).find(|&i| self.row(i).is_some_and(|j| j.id == id))
    }
    /// The index of the row showing this job, given its current view (a sorted list
    /// finds it by its key in O(log n); others by id).
    fn index_of_view(&self, j: &JobView) -> Option<usize> {
        self.index_of(j.id)
    }
}

impl<O: Order> JobRows for Rows<O> {
    fn row_count(&self) -> usize {
        self.len()
    }
    fn row(&self, i: usize) -> Option<&JobView> {
        self.get(i)
    }
    fn index_of(&self, id: JobId) -> Option<usize> {
        self.iter().position(|j| j.id == id)
    }
    fn index_of_view(&self, j: &JobView) -> Option<usize> {
        self.position(&self.order.key(j))
    }
}

impl JobRows for [JobView] {
    fn row_count(&self) -> usize {
        self.len()
    }
    fn row(&self, i: usize) -> Option<&JobView> {
        self.get(i)
    }
}

impl JobRows for Vec<JobView> {
    fn row_count(&self) -> usize {
        self.len()
    }
    fn row(&self, i: usize) -> Option<&JobView> {
        self.get(i)
    }
}

impl<'a> IntoIterator for &'a JobList {
    type Item = &'a JobView;
    type IntoIter = Box<dyn DoubleEndedIterator<Item = &'a JobView> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl std::ops::Index<usize> for JobList {
    type Output = JobView;
    fn index(&self, i: usize) -> &JobView {
        self.get(i).expect("JobList index out of range")
    }
}

impl FromIterator<JobView> for JobList {
    fn from_iter<I: IntoIterator<Item = JobView>>(iter: I) -> JobList {
        JobList::from_views(iter.into_iter().collect())
    }
}

impl Serialize for JobList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for JobList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<JobList, D::Error> {
        Ok(JobList::from_views(Vec::<JobView>::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JobState;

    fn view(id: u64, priority: u32, submitted: i64) -> Arc<JobView> {
        Arc::new(JobView {
            id: JobId(id),
            name: format!("j{id}"),
            share: "a".into(),
            unit: "u".into(),
            quantity: 1,
            priority,
            state: JobState::Runnable,
            submitted,
            started: None,
            finished: None,
            devices: Vec::new(),
            uuids: Vec::new(),
            node: None,
            num_nodes: None,
            placements: Vec::new(),
            on_borrowed: false,
            reclaimed_first: false,
            reason: Arc::from(""),
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
        })
    }

    #[test]
    fn keeps_scheduling_order_through_inserts_and_removes() {
        let mut list = JobList::new();
        let mut model: Vec<(QKey, u64)> = Vec::new();
        // A deterministic shuffle of 5,000 jobs over 7 priorities.
        for n in 0..5_000u64 {
            let id = (n * 7919) % 5_000 + 1;
            let v = view(id, (id % 7) as u32, (id / 3) as i64);
            model.push((key_of(&v), id));
            list.upsert(v);
        }
        for id in (1..=5_000u64).filter(|i| i % 3 == 0) {
            let k = QKey::new((id % 7) as u32, (id / 3) as i64, JobId(id));
            assert!(list.remove(k));
            model.retain(|(_, i)| *i != id);
        }
        model.sort();
        let want: Vec<JobId> = model.iter().map(|(_, i)| JobId(*i)).collect();
        assert_eq!(list.ids(), want);
        assert_eq!(list.len(), want.len());
        for (i, id) in want.iter().enumerate() {
            assert_eq!(list.get(i).map(|j| j.id), Some(*id));
        }
        assert!(list.get(want.len()).is_none());
        assert!(!list.remove(QKey::new(0, 0, JobId(99_999))));
    }

    #[test]
    fn a_change_copies_one_chunk_and_shares_the_rest() {
        let list: JobList = (1..=10_000u64)
            .map(|i| (*view(i, 0, i as i64)).clone())
            .collect();
        let mut next = list.clone();
        next.upsert(view(5_000, 0, 5_000));
        let chunks = list.chunks.len();
        assert_eq!(next.shares_chunks_with(&list), chunks - 1);
        assert_eq!(list.len(), next.len());
    }
}
