//! The queue pane's list with arrays folded (SPEC §13): an array's queued children stand
//! behind one parent row (its children's counts), where its first queued child would be,
//! until the user unfolds it (enter or space); PENDING jobs follow the queue. Without
//! arrays or PENDING jobs the pane shows the snapshot's queue itself (no copy).

use crate::model::JobId;
use crate::snapshot::list::JobRows;
use crate::snapshot::{JobView, Snapshot};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One shown row: an index into the snapshot's queue, its array parents or its PENDING
/// jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    Queued(u32),
    Parent(u32),
    Pending(u32),
}

/// The queue as the pane lists it.
#[derive(Debug, Clone)]
pub struct QueueList {
    snap: Arc<Snapshot>,
    rows: Vec<Row>,
}

impl QueueList {
    /// `None` when nothing folds or follows: the pane shows `snap.queue` as it is.
    /// Costs the queue's length (row indices only) when there is something to fold.
    pub fn build(snap: &Arc<Snapshot>, unfolded: &HashSet<JobId>) -> Option<QueueList> {
        let linked = &snap.linked;
        if linked.arrays.is_empty() && linked.pending.is_empty() {
            return None;
        }
        let parents: HashMap<JobId, u32> = linked
            .arrays
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id, i as u32))
            .collect();
        let mut placed = HashSet::new();
        let mut rows = Vec::with_capacity(snap.queue.len() + linked.pending.len());
        let mut place = |rows: &mut Vec<Row>, parent: JobId| -> bool {
            let Some(&p) = parents.get(&parent) else {
                return true; // its parent has ended: the child stands alone
            };
            if placed.insert(parent) {
                rows.push(Row::Parent(p));
            }
            unfolded.contains(&parent)
        };
        for (i, j) in snap.queue.iter().enumerate() {
            let shown = j.parent.is_none_or(|p| place(&mut rows, p));
            if shown {
                rows.push(Row::Queued(i as u32));
            }
        }
        for (i, j) in linked.pending.iter().enumerate() {
            let shown = j.parent.is_none_or(|p| place(&mut rows, p));
            if shown {
                rows.push(Row::Pending(i as u32));
            }
        }
        Some(QueueList {
            snap: snap.clone(),
            rows,
        })
    }
}

impl JobRows for QueueList {
    fn row_count(&self) -> usize {
        self.rows.len()
    }

    fn row(&self, i: usize) -> Option<&JobView> {
        let linked = &self.snap.linked;
        match *self.rows.get(i)? {
            Row::Queued(q) => self.snap.queue.get(q as usize),
            Row::Parent(p) => linked.arrays.get(p as usize).map(|v| &**v),
            Row::Pending(p) => linked.pending.get(p as usize).map(|v| &**v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{ArrayView, JobList, Linked};

    fn view(id: u64, parent: Option<u64>) -> JobView {
        let mut v: JobView = serde_json::from_value(serde_json::json!({
            "id": id, "name": "j", "share": "a", "unit": "gpu", "quantity": 1,
            "priority": 0, "state": "RUNNABLE", "submitted": id, "started": null,
            "finished": null, "devices": [], "on_borrowed": false, "reason": "",
            "stopping": null, "attempts": 0, "preempted_count": 0, "nominated": false,
        }))
        .unwrap();
        v.parent = parent.map(JobId);
        v.array_index = parent.map(|p| (id - p - 1) as u32);
        v
    }

    #[test]
    fn an_array_folds_behind_its_parent_until_unfolded() {
        let mut snap = Snapshot::empty();
        snap.queue = JobList::from_views(vec![view(1, None), view(3, Some(2)), view(4, Some(2))]);
        let mut parent = view(2, None);
        parent.array = Some(ArrayView {
            size: 3,
            counts: Default::default(),
        });
        snap.linked = Arc::new(Linked {
            pending: vec![Arc::new(view(5, Some(2))), Arc::new(view(6, None))],
            arrays: vec![Arc::new(parent)],
        });
        let snap = Arc::new(snap);
        let ids = |l: &QueueList| -> Vec<u64> {
            (0..l.row_count()).map(|i| l.row(i).unwrap().id.0).collect()
        };
        let folded = QueueList::build(&snap, &HashSet::new()).unwrap();
        assert_eq!(ids(&folded), vec![1, 2, 6]);
        let open = QueueList::build(&snap, &HashSet::from([JobId(2)])).unwrap();
        assert_eq!(ids(&open), vec![1, 2, 3, 4, 5, 6]);
        // Nothing to fold: the pane shows the queue itself.
        assert!(QueueList::build(&Arc::new(Snapshot::empty()), &HashSet::new()).is_none());
    }
}
