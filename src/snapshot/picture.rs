//! The runtime's side of the snapshot: it keeps the queue, the reason groups and the
//! running list up to date from the jobs each change touched, so that publishing a new
//! [`Snapshot`] costs O(changed jobs + shares + GPUs), whatever the queue's length.

use super::delta::{Change, ChangeLog};
use super::list::JobList;
use super::{ConfigStatus, GroupReason, JobView, PreemptionRecord, Reasons, Snapshot, Telemetry};
use super::job_view;
use crate::model::JobId;
use crate::sched::{QKey, Sched, Time};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

type Lane = (usize, usize);
/// Jobs of one lane and quantity that are neither nominated nor blocked wait for the
/// same reason.
type GroupKey = (usize, usize, u32);

/// Where a queued job sits in the picture.
#[derive(Debug, Clone, Copy)]
struct Row {
    key: QKey,
    group: Option<GroupKey>,
    lane: Lane,
    submitted: Time,
}

#[derive(Debug, Default)]
struct Group {
    id: u32,
    members: BTreeSet<QKey>,
}

/// The incrementally kept picture. Tell it which jobs changed ([`Picture::touch`]), or
/// that everything may have ([`Picture::touch_all`], after a config change), then
/// [`Picture::publish`].
#[derive(Debug, Default)]
pub struct Picture {
    version: u64,
    queue: JobList,
    rows: HashMap<JobId, Row>,
    groups: HashMap<GroupKey, Group>,
    next_group: u32,
    /// Queued jobs per lane by submission time (for a share's oldest queued job).
    lanes: HashMap<Lane, BTreeSet<(Time, JobId)>>,
    holding: BTreeSet<JobId>,
    /// Queued jobs that are nominated: their reasons change without their job changing.
    nominated: BTreeSet<JobId>,
    touched: Vec<JobId>,
    all_touched: bool,
    /// Queue changes since the last publish; `None` once the queue was rebuilt.
    changes: Option<Vec<Change>>,
    log: ChangeLog,
    finished: Arc<Vec<JobView>>,
    preemptions: Arc<Vec<PreemptionRecord>>,
}

impl Picture {
    pub fn new() -> Picture {
        Picture {
            changes: Some(Vec::new()),
            ..Picture::default()
        }
    }

    /// This job may have changed (state, place, priority, attempts...).
    pub fn touch(&mut self, id: JobId) {
        self.touched.push(id);
    }

    /// Anything may have changed (config applied): rebuild at the next publish.
    pub fn touch_all(&mut self) {
        self.all_touched = true;
    }

    pub fn set_finished(&mut self, finished: Arc<Vec<JobView>>) {
        self.finished = finished;
    }

    pub fn set_preemptions(&mut self, preemptions: Arc<Vec<PreemptionRecord>>) {
        self.preemptions = preemptions;
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    /// Rebuild every part from the scheduler (O(jobs)).
    pub fn rebuild(&mut self, sched: &Sched) {
        self.queue = JobList::new();
        self.rows.clear();
        self.groups.clear();
        self.lanes.clear();
        self.holding.clear();
        self.nominated.clear();
        self.touched.clear();
        self.all_touched = false;
        for id in sched.queue() {
            self.refresh(sched, id);
        }
        for j in sched.jobs().filter(|j| j.is_holding()) {
            self.holding.insert(j.id);
        }
        self.changes = None;
    }

    /// Bring one job's rows up to date.
    fn refresh(&mut self, sched: &Sched, id: JobId) {
        let job = sched.job(id);
        let old = self.rows.get(&id).copied();
        self.holding.remove(&id);
        self.nominated.remove(&id);
        let Some(j) = job.filter(|j| j.is_pending()) else {
            if let Some(row) = old {
                self.unqueue(id, row);
            }
            if job.is_some_and(|j| j.is_holding()) {
                self.holding.insert(id);
            }
            return;
        };
        let lane = (j.share, j.unit);
        let key = j.qkey();
        let group = (!j.is_nominated()).then_some((j.share, j.unit, j.quantity));
        let mut view = match group {
            Some(_) => job_view(sched, j, Arc::from("")),
            None => {
                self.nominated.insert(id);
                job_view(sched, j, Arc::from(sched.reason(id)))
            }
        };
        if let Some(row) = old {
            if row.key == key && row.group == group {
                view.reason_group = group.and_then(|g| self.groups.get(&g)).map(|e| e.id);
                if self.queue.find(key).is_some_and(|v| *v == view) {
                    return; // touched, but nothing shown changed
                }
            }
            self.unqueue(id, row);
        }
        if let Some(g) = group {
            let next = &mut self.next_group;
            let entry = self.groups.entry(g).or_insert_with(|| {
                *next += 1;
                Group {
                    id: *next,
                    members: BTreeSet::new(),
                }
            });
            entry.members.insert(key);
            view.reason_group = Some(entry.id);
        }
        self.lanes.entry(lane).or_default().insert((j.submitted, id));
        self.rows.insert(
            id,
            Row {
                key,
                group,
                lane,
                submitted: j.submitted,
            },
        );
        let view = Arc::new(view);
        self.queue.upsert(view.clone());
        if let Some(c) = &mut self.changes {
            c.push(Change::Upsert(view));
        }
    }

    fn unqueue(&mut self, id: JobId, row: Row) {
        self.rows.remove(&id);
        self.queue.remove(row.key);
        if let Some(c) = &mut self.changes {
            c.push(Change::Remove((row.key.priority(), row.key.submitted, id)));
        }
        if let Some(g) = row.group
            && let Some(entry) = self.groups.get_mut(&g)
        {
            entry.members.remove(&row.key);
            if entry.members.is_empty() {
                self.groups.remove(&g);
            }
        }
        if let Some(l) = self.lanes.get_mut(&row.lane) {
            l.remove(&(row.submitted, id));
            if l.is_empty() {
                self.lanes.remove(&row.lane);
            }
        }
    }

    /// Why each reason group waits, from one representative job each (O(groups)).
    fn reasons(&self, sched: &Sched) -> Reasons {
        let mut out = HashMap::with_capacity(self.groups.len());
        for (&(s, _, _), g) in &self.groups {
            let block = sched.share_block(s);
            let first = g.members.first().copied();
            let free = first.filter(|k| block.is_none_or(|b| *k < b));
            let reason = free.map_or_else(|| Arc::from(""), |k| Arc::from(sched.reason(k.job())));
            let blocked = block.and_then(|b| {
                use std::ops::Bound::{Excluded, Unbounded};
                let k = g.members.range((Excluded(b), Unbounded)).next()?;
                Some((
                    (b.priority(), b.submitted, b.job()),
                    Arc::from(sched.reason(k.job())),
                ))
            });
            out.insert(g.id, GroupReason { reason, blocked });
        }
        out
    }

    /// Take in the touched jobs and publish a new picture.
    pub fn publish(
        &mut self,
        sched: &Sched,
        at: Time,
        config: ConfigStatus,
        telemetry: &HashMap<(String, u32), Telemetry>,
    ) -> Snapshot {
        if self.all_touched {
            self.rebuild(sched);
        }
        // A nominated job's reason counts its victims; a nomination may also lapse.
        self.touched.extend(self.nominated.iter().copied());
        let mut seen = HashSet::with_capacity(self.touched.len());
        for id in std::mem::take(&mut self.touched) {
            if seen.insert(id) {
                self.refresh(sched, id);
            }
        }
        let mut running: Vec<JobView> = self
            .holding
            .iter()
            .filter_map(|&id| sched.job(id))
            .map(|j| job_view(sched, j, Arc::from(sched.reason(j.id))))
            .collect();
        running.sort_by_key(|j| (j.started, j.id));
        let oldest: HashMap<(String, String), i64> = self
            .lanes
            .iter()
            .filter_map(|(&(s, u), set)| {
                let (t, _) = set.first()?;
                let names = (
                    sched.share_name(s).to_string(),
                    sched.unit_name(u).to_string(),
                );
                Some((names, *t))
            })
            .collect();
        let (shares, units) = Snapshot::standing(sched, &oldest, telemetry);
        self.version += 1;
        let changes = std::mem::replace(&mut self.changes, Some(Vec::new()));
        self.log.push(self.version, changes);
        Snapshot {
            at,
            version: self.version,
            env_name: sched.env_name().to_string(),
            config,
            units,
            shares,
            lending: sched.lending(),
            queue: self.queue.clone(),
            reasons: Arc::new(self.reasons(sched)),
            running,
            finished: self.finished.clone(),
            preemptions: self.preemptions.clone(),
            grace_period_seconds: sched.grace_period_seconds(),
            changes: self.log.clone(),
        }
    }
}
