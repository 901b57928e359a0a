//! The runtime's side of the snapshot: it keeps the queue, the reason groups and the
//! running list up to date from the jobs each change touched, so that publishing a new
//! [`Snapshot`] costs O(changed jobs + shares + GPUs), whatever the queue's length.

use super::delta::{Change, ChangeLog};
use super::job_view;
use super::list::JobList;
use super::{
    ConfigStatus, GroupReason, JobView, OverMemoryView, PreemptionRecord, Reasons, Snapshot,
};
use crate::exec::gpu::telemetry::Telemetry;
use crate::model::JobId;
use crate::sched::{Event, QKey, Sched, Time};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

type Lane = (usize, usize);
/// Jobs of one lane, quantity and lane bucket (one per user where the share orders or caps
/// by user, SPEC §12) that are neither nominated nor blocked wait for the same reason (and
/// the blocked ones for another). Members are kept by base key: one bucket's jobs all have
/// the same fair-share penalty.
type GroupKey = (usize, usize, u32, u32);

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
    finished: Arc<Vec<Arc<JobView>>>,
    /// PENDING jobs and unsettled array parents (SPEC §13), rebuilt into `linked` only
    /// when one of them changed.
    pending: std::collections::BTreeMap<JobId, Arc<JobView>>,
    arrays: std::collections::BTreeMap<JobId, Arc<JobView>>,
    linked: Arc<super::Linked>,
    linked_dirty: bool,
    preemptions: Arc<Vec<PreemptionRecord>>,
    estimates: Arc<crate::forecast::Estimates>,
    /// Running jobs found over their slice (SPEC §15), by the attempt that was: the mark
    /// their row carries until that attempt ends. Reports not yet tied to an attempt wait
    /// in `over_reported` until the next publish.
    over: HashMap<JobId, (u32, OverMemoryView)>,
    over_reported: Vec<(JobId, OverMemoryView)>,
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

    /// The jobs these decisions changed.
    pub fn touch_events(&mut self, events: &[Event]) {
        for e in events {
            match e {
                Event::Submitted { job }
                | Event::Started { job, .. }
                | Event::Requeued { job, .. }
                | Event::Failed { job, .. }
                | Event::Cancelled { job, .. }
                | Event::TimedOut { job }
                | Event::Reprioritized { job, .. }
                | Event::Succeeded { job }
                | Event::Released { job } => self.touch(*job),
                Event::Preempted { job, by, .. } => {
                    self.touch(*job);
                    if let Some(by) = by {
                        self.touch(*by);
                    }
                }
                Event::OverMemory {
                    job,
                    held_gib,
                    of_gib,
                    ..
                } => {
                    self.touch(*job);
                    let view = OverMemoryView {
                        held_gib: *held_gib,
                        of_gib: *of_gib,
                    };
                    self.over_reported.push((*job, view));
                }
                Event::ConfigApplied => self.touch_all(),
                Event::Rejected { .. } | Event::ConfigRejected { .. } => {}
            }
        }
    }

    /// Anything may have changed (config applied): rebuild at the next publish.
    pub fn touch_all(&mut self) {
        self.all_touched = true;
    }

    pub fn set_finished(&mut self, finished: Arc<Vec<Arc<JobView>>>) {
        self.finished = finished;
    }

    pub fn set_preemptions(&mut self, preemptions: Arc<Vec<PreemptionRecord>>) {
        self.preemptions = preemptions;
    }

    /// The start estimates of the latest forecast (published with the next snapshot).
    pub fn set_estimates(&mut self, estimates: Arc<crate::forecast::Estimates>) {
        self.estimates = estimates;
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
        self.pending.clear();
        self.arrays.clear();
        self.linked_dirty = true;
        for id in sched.queue() {
            self.refresh(sched, id);
        }
        for j in sched.jobs().filter(|j| j.is_dependent() || j.is_parent()) {
            self.refresh_linked(sched, j.id);
        }
        for j in sched.jobs().filter(|j| j.is_holding()) {
            self.holding.insert(j.id);
        }
        self.changes = None;
    }

    /// Bring a PENDING job's or an array parent's row up to date (or drop it).
    fn refresh_linked(&mut self, sched: &Sched, id: JobId) {
        let job = sched.job(id);
        let view = |j| Arc::new(job_view(sched, j, Arc::from(sched.reason(id))));
        let changed = match job {
            Some(j) if j.is_dependent() => {
                self.arrays.remove(&id);
                self.pending.insert(id, view(j));
                true
            }
            Some(j) if j.is_parent() => {
                self.pending.remove(&id);
                self.arrays.insert(id, view(j));
                true
            }
            _ => self.pending.remove(&id).is_some() | self.arrays.remove(&id).is_some(),
        };
        self.linked_dirty |= changed;
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
        let key = j.base_key();
        let group = (!j.is_nominated()).then_some((j.share, j.unit, j.quantity, j.bucket));
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
        self.lanes
            .entry(lane)
            .or_default()
            .insert((j.submitted, id));
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
        for (&(s, u, _, bucket), g) in &self.groups {
            let pen = sched.bucket_pen(s, bucket);
            let block = sched.lane_block(s, u).map(|b| b.unshift(pen));
            let first = g.members.first().copied();
            let free = first.filter(|k| block.is_none_or(|b| *k < b));
            let reason = free.map_or_else(|| Arc::from(""), |k| Arc::from(sched.reason(k.job())));
            let blocked = block.and_then(|b| {
                use std::ops::Bound::{Excluded, Unbounded};
                let k = g.members.range((Excluded(b), Unbounded)).next()?;
                Some((
                    (b.priority(), b.eff, b.submitted, b.job()),
                    Arc::from(sched.reason(k.job())),
                ))
            });
            out.insert(g.id, GroupReason { reason, blocked });
        }
        out
    }

    /// Tie the new over-memory reports to the attempts they were about, and drop the marks
    /// of attempts that ended (the job no longer holds GPUs, or holds them again by a
    /// later attempt). O(marks).
    fn settle_over_memory(&mut self, sched: &Sched) {
        for (id, view) in std::mem::take(&mut self.over_reported) {
            if let Some(j) = sched.job(id).filter(|j| j.is_holding()) {
                self.over.insert(id, (j.attempts_started, view));
            }
        }
        self.over.retain(|id, (attempt, _)| {
            sched
                .job(*id)
                .is_some_and(|j| j.is_holding() && j.attempts_started == *attempt)
        });
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
        let mut linked = std::collections::BTreeSet::new();
        for id in std::mem::take(&mut self.touched) {
            if seen.insert(id) {
                self.refresh(sched, id);
                // A PENDING job's reason names its dependencies' states, a parent's row
                // counts its children (SPEC §13).
                linked.insert(id);
                linked.extend(sched.dependents_of(id).iter().copied());
                if let Some((parent, _)) = sched.array_of(id) {
                    linked.insert(parent);
                }
            }
        }
        for id in linked {
            if self.pending.contains_key(&id)
                || self.arrays.contains_key(&id)
                || sched
                    .job(id)
                    .is_some_and(|j| j.is_dependent() || j.is_parent())
            {
                self.refresh_linked(sched, id);
            }
        }
        if std::mem::take(&mut self.linked_dirty) {
            self.linked = Arc::new(super::Linked {
                pending: self.pending.values().cloned().collect(),
                arrays: self.arrays.values().cloned().collect(),
            });
        }
        self.settle_over_memory(sched);
        let mut running: Vec<JobView> = self
            .holding
            .iter()
            .filter_map(|&id| sched.job(id))
            .map(|j| {
                let mut v = job_view(sched, j, Arc::from(sched.reason(j.id)));
                v.over_memory = self.over.get(&j.id).map(|&(_, o)| o);
                v
            })
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
        let changes = self.changes.replace(Vec::new());
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
            linked: self.linked.clone(),
            finished: self.finished.clone(),
            preemptions: self.preemptions.clone(),
            grace_period_seconds: sched.grace_period_seconds(),
            changes: self.log.clone(),
            estimates: self.estimates.clone(),
            link_down_since: None,
            served_by: None,
            paused: None,
            disk: None,
            containment: None,
            users: Arc::new(sched.user_standings(at)),
            // The rules are the runtime's: it sets them (`Runtime::publish`).
            access: Arc::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_documents, validate};
    use crate::model::{JobSpec, UnitCapacity};
    use crate::sched::Clock;

    const CONFIG: &str = "\
kind: ServiceEnvironment
name: t
capacityLimits:
- {capacityUnit: gpu, maxCapacity: 8, devices: {fake: 8}}
preemption: {gracePeriodSeconds: 30}
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 3}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
preemptionConfiguration: {inSharePreemption: ENABLED}
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: gpu, maxCapacity: 3}]
resourceSharingConfiguration: {strategy: LEND}
---
kind: QuotaShare
quotaShareName: c
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: RESERVE}
";

    /// The same shares on an oversubscribed unit (guarantees 10 > 6 GPUs), where guaranteed
    /// jobs start in global order.
    fn oversubscribed() -> String {
        CONFIG
            .replace(
                "maxCapacity: 8, devices: {fake: 8}",
                "maxCapacity: 6, devices: {fake: 6}",
            )
            .replace(
                "capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]",
                "capacityLimits: [{capacityUnit: gpu, maxCapacity: 4}]",
            )
    }

    /// Everything a reader sees, with reasons written out.
    fn shown(
        s: &Snapshot,
    ) -> (
        Vec<JobView>,
        Vec<JobView>,
        Vec<crate::sched::ShareUnitStats>,
    ) {
        (s.queue_views(), s.running.clone(), s.shares.clone())
    }

    /// The incrementally kept picture equals one built from scratch after every step of
    /// a long random run: submits, cancels, priority changes, exits, releases (stopping
    /// jobs), passes with preemptions and nominations.
    #[test]
    fn incremental_picture_equals_a_full_build() {
        random_run(CONFIG);
    }

    #[test]
    fn incremental_picture_equals_a_full_build_when_oversubscribed() {
        let text = oversubscribed();
        assert_ne!(text, CONFIG);
        random_run(&text);
    }

    fn random_run(config: &str) {
        let cfg = validate(parse_documents(config, None).unwrap()).unwrap();
        let mut sched = Sched::new(&cfg, &UnitCapacity::simulated(&cfg), Clock::Wall);
        let mut picture = Picture::new();
        picture.rebuild(&sched);
        let none = HashMap::new();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut ids: Vec<JobId> = Vec::new();
        let (mut blocked, mut nominated, mut deltas) = (0, 0, 0);
        let mut sent: Option<Snapshot> = None;
        let mut remote = Snapshot::empty();
        for step in 0..1_500i64 {
            let now = 1_000 + step * 10;
            match rnd(10) {
                0..=4 => {
                    let share = ["a", "b", "c"][rnd(3) as usize];
                    let spec = JobSpec::new("j", share, 1 + rnd(3) as u32, rnd(4) as u32);
                    if let Ok(id) = sched.submit(spec, now) {
                        ids.push(id);
                        picture.touch(id);
                    }
                }
                5 if !ids.is_empty() => {
                    let id = ids[rnd(ids.len() as u64) as usize];
                    sched.cancel(id, "t", now);
                    picture.touch(id);
                }
                6 if !ids.is_empty() => {
                    let id = ids[rnd(ids.len() as u64) as usize];
                    let _ = sched.set_priority(id, rnd(5) as u32, now);
                    picture.touch(id);
                }
                _ => {
                    // Some holding job exits or finishes releasing.
                    let holding: Vec<JobId> = sched
                        .jobs()
                        .filter(|j| j.is_holding())
                        .map(|j| j.id)
                        .collect();
                    if !holding.is_empty() {
                        let id = holding[rnd(holding.len() as u64) as usize];
                        if sched.job(id).is_some_and(|j| j.is_stopping()) {
                            sched.gpus_released(id, now);
                        } else {
                            sched.job_exited(id, rnd(2) as i32, now);
                            sched.gpus_released(id, now);
                        }
                        picture.touch(id);
                    }
                }
            }
            sched.pass(now);
            let events = sched.take_events();
            picture.touch_events(&events);
            let live = picture.publish(&sched, now, ConfigStatus::default(), &none);
            let full = Snapshot::build(&sched, now, 0, ConfigStatus::default(), vec![], &none);
            assert_eq!(shown(&live), shown(&full), "step {step}");
            // A subscriber that applies the deltas (through JSON) sees the same.
            let update = live.update_since(sent.as_ref());
            let update: super::super::Update =
                serde_json::from_slice(&serde_json::to_vec(&update).unwrap()).unwrap();
            match update {
                super::super::Update::Full(s) => remote = *s,
                super::super::Update::Delta(d) => {
                    deltas += 1;
                    remote.apply(*d).unwrap();
                }
            }
            assert_eq!(
                shown(&remote),
                shown(&live),
                "step {step}: the subscriber's copy"
            );
            sent = Some(live.clone());
            // And both say what the scheduler says, row by row.
            assert_eq!(live.queue.ids(), sched.queue(), "step {step}");
            for j in live.queue.iter() {
                assert_eq!(
                    live.reason(j),
                    sched.reason(j.id),
                    "step {step}, job {}",
                    j.id
                );
                blocked += usize::from(sched.is_blocked(j.id));
                nominated += usize::from(j.nominated);
            }
        }
        assert!(
            blocked > 0 && nominated > 0,
            "blocked {blocked}, nominated {nominated}"
        );
        assert!(deltas > 1_000, "deltas {deltas}");
        assert!(
            sched.queue_len() > 50,
            "the queue grew: {}",
            sched.queue_len()
        );
    }
}
