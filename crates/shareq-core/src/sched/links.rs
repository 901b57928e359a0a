//! Dependencies and array jobs (SPEC §13): who waits for whom, the release of a PENDING
//! job when the last of its dependencies succeeds, the failure of its dependents (down
//! the chain, in the same batch of events as the failure), and array parents, whose state
//! summarises their children.
//!
//! A PENDING job is in no queue and no index: it costs a pass nothing. Each job that others
//! wait for lists its dependents (`Sched::dependents`), so an end touches only the jobs
//! that wait for it. Jobs the scheduler has forgotten (ended and archived) are known by
//! their id: every id below `next_id` was a job, and the ids that SUCCEEDED are kept in a
//! bit set, so a dependency on an old job is judged without the store.

use super::rejection::Rejection;
use super::state::{ArrayLink, FailReason, Job, Phase};
use super::{Event, Sched, Time};
use crate::model::{
    DependencyType, JobId, JobRef, JobSpec, JobState, MAX_ARRAY_SIZE, MAX_DEPENDENCIES,
};
use std::sync::Arc;

/// Where a job a dependency names stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepStatus {
    /// Not ended yet (its state).
    Waiting(JobState),
    Succeeded,
    Failed,
}

/// The links of a submission, checked: what each job it makes waits for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// Whole jobs every job of the submission waits for.
    plain: Vec<JobId>,
    /// N_TO_N: child i waits for child i of these arrays.
    each: Vec<JobId>,
    /// SEQUENTIAL: child i waits for child i − 1.
    sequential: bool,
    /// The number of children (an array), or `None`.
    size: Option<u32>,
}

/// Child `i` of array `parent` (its id: see [`JobRef::id`]).
pub fn child(parent: JobId, i: u32) -> JobId {
    JobRef {
        job: parent,
        index: Some(i),
    }
    .id()
}

/// Counts of an array's children by state, in [`JobState::ALL`] order.
pub type ArrayCounts = [u32; 8];

/// What an array parent's state is, from its children's (SPEC §13): RUNNING while any
/// runs, SUCCEEDED when all did, FAILED when any failed and none is left to run;
/// otherwise RUNNABLE while any is queued, else PENDING.
pub fn array_state(counts: &ArrayCounts) -> JobState {
    let n = |s: JobState| counts[s.ordinal()];
    let holding = n(JobState::Scheduled) + n(JobState::Starting) + n(JobState::Running);
    let left = counts.iter().sum::<u32>() - n(JobState::Succeeded) - n(JobState::Failed);
    if holding > 0 {
        JobState::Running
    } else if left == 0 && n(JobState::Failed) > 0 {
        JobState::Failed
    } else if left == 0 {
        JobState::Succeeded
    } else if n(JobState::Runnable) > 0 {
        JobState::Runnable
    } else {
        JobState::Pending
    }
}

/// `8 running, 30 queued, 12 succeeded`: an array's children by state, as `jobs` and the
/// console show them (states with no child left out).
pub fn counts_text(counts: &ArrayCounts) -> String {
    let n = |s: JobState| counts[s.ordinal()];
    let parts = [
        (
            n(JobState::Scheduled) + n(JobState::Starting) + n(JobState::Running),
            "running",
        ),
        (n(JobState::Submitted) + n(JobState::Runnable), "queued"),
        (n(JobState::Pending), "pending"),
        (n(JobState::Succeeded), "succeeded"),
        (n(JobState::Failed), "failed"),
    ];
    parts
        .iter()
        .filter(|(c, _)| *c > 0)
        .map(|(c, w)| format!("{c} {w}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Sched {
    /// Where the job `id` stands, for a dependency on it; `None`: no such job.
    pub fn dep_status(&self, id: JobId) -> Option<DepStatus> {
        if id.0 == 0 || id.0 >= self.next_id {
            return None;
        }
        Some(match self.job(id) {
            Some(j) if j.state == JobState::Succeeded => DepStatus::Succeeded,
            Some(j) if j.state == JobState::Failed => DepStatus::Failed,
            Some(j) if j.is_parent() => DepStatus::Waiting(self.parent_state(j)),
            Some(j) => DepStatus::Waiting(j.state),
            None if self.has_succeeded(id) => DepStatus::Succeeded,
            None => DepStatus::Failed,
        })
    }

    fn has_succeeded(&self, id: JobId) -> bool {
        let (w, b) = ((id.0 / 64) as usize, id.0 % 64);
        self.succeeded.get(w).is_some_and(|x| x & (1 << b) != 0)
    }

    fn mark_succeeded(&mut self, id: JobId) {
        let (w, b) = ((id.0 / 64) as usize, id.0 % 64);
        if self.succeeded.len() <= w {
            self.succeeded.resize(w + 1, 0);
        }
        self.succeeded[w] |= 1 << b;
    }

    /// After a restart, before any job is restored: the jobs that ended SUCCEEDED and the
    /// arrays (parent id, size) the store has, so that dependencies on them are judged as
    /// before.
    pub fn restore_history(
        &mut self,
        succeeded: impl IntoIterator<Item = JobId>,
        arrays: impl IntoIterator<Item = (JobId, u32)>,
    ) {
        for id in succeeded {
            self.mark_succeeded(id);
        }
        for (id, size) in arrays {
            self.arrays.insert(id.0, size);
        }
    }

    /// A submission refused before it reached the scheduler's own checks (the replay's
    /// `dependsOn` naming a job it does not know): reported as any rejection is.
    pub fn reject(&mut self, name: &str, share: &str, error: String, now: Time) {
        self.now = now;
        self.emit(Event::Rejected {
            name: name.to_string(),
            share: share.to_string(),
            error,
        });
    }

    /// A job's name in the replay's output: an array child is `<name>:<i>` (SPEC §13).
    pub fn replay_name(&self, id: JobId) -> std::borrow::Cow<'_, str> {
        let Some(j) = self.job(id) else {
            return "?".into();
        };
        match j.array {
            Some(ArrayLink::Child { index, .. }) => format!("{}:{index}", j.name()).into(),
            _ => j.name().into(),
        }
    }

    /// How users name job `id`: `12`, or `12:3` for an array's child (also for jobs the
    /// scheduler has forgotten).
    pub fn label(&self, id: JobId) -> String {
        match self.array_of(id) {
            Some((parent, index)) => format!("{parent}:{index}"),
            None => id.to_string(),
        }
    }

    /// The parent and index of an array child (also for children already forgotten).
    pub fn array_of(&self, id: JobId) -> Option<(JobId, u32)> {
        let (&p, &size) = self.arrays.range(..id.0).next_back()?;
        (id.0 <= p + u64::from(size)).then(|| (JobId(p), (id.0 - p - 1) as u32))
    }

    /// The id of what a user names: a job, or child `index` of an array.
    pub fn resolve(&self, r: JobRef) -> Result<JobId, UnknownRef> {
        let Some(index) = r.index else {
            return match self.dep_status(r.job) {
                Some(_) => Ok(r.job),
                None => Err(UnknownRef::NoJob(r.job)),
            };
        };
        match self.arrays.get(&r.job.0) {
            Some(&size) if index < size => Ok(r.id()),
            Some(&size) => Err(UnknownRef::NoChild {
                array: r.job,
                size,
                index,
            }),
            None if self.dep_status(r.job).is_some() => Err(UnknownRef::NotAnArray(r.job)),
            None => Err(UnknownRef::NoJob(r.job)),
        }
    }

    /// Check a submission's `dependsOn` and `arrayProperties` (SPEC §13).
    pub(crate) fn check_links(&self, spec: &JobSpec) -> Result<Plan, Rejection> {
        let bad = |why: String| Err(Rejection::Links(why));
        let size = match spec.array_properties {
            Some(a) if !(2..=MAX_ARRAY_SIZE).contains(&a.size) => {
                return bad(format!(
                    "arrayProperties.size is {}; it must be 2..{MAX_ARRAY_SIZE}",
                    a.size
                ));
            }
            Some(a) => Some(a.size),
            None => None,
        };
        if spec.depends_on.len() > MAX_DEPENDENCIES {
            return bad(format!(
                "{} dependencies; at most {MAX_DEPENDENCIES} per job",
                spec.depends_on.len()
            ));
        }
        let mut plan = Plan {
            size,
            ..Plan::default()
        };
        for d in &spec.depends_on {
            match (d.job_id, d.kind) {
                (None, Some(DependencyType::Sequential)) if size.is_some() => {
                    plan.sequential = true;
                }
                (None, Some(DependencyType::Sequential)) => {
                    return bad("a SEQUENTIAL dependency without a jobId is for arrays \
                         (arrayProperties)"
                        .into());
                }
                (None, _) => return bad("a dependency needs a jobId".into()),
                (Some(r), Some(DependencyType::NToN)) => {
                    let Some(n) = size else {
                        return bad(format!(
                            "an N_TO_N dependency (on {r}) is for arrays (arrayProperties)"
                        ));
                    };
                    let other = self
                        .resolve(r)
                        .map_err(|e| Rejection::Links(e.to_string()))?;
                    match self.arrays.get(&other.0) {
                        Some(&m) if r.index.is_none() && m == n => plan.each.push(other),
                        Some(&m) if r.index.is_none() => {
                            return bad(format!(
                                "N_TO_N needs two arrays of one size: job {r} has {m} \
                                 children, this one {n}"
                            ));
                        }
                        _ => return bad(format!("N_TO_N on job {r}: it is not an array")),
                    }
                }
                (Some(r), _) => {
                    let id = self
                        .resolve(r)
                        .map_err(|e| Rejection::Links(e.to_string()))?;
                    if !plan.plain.contains(&id) {
                        plan.plain.push(id);
                    }
                }
            }
        }
        Ok(plan)
    }

    /// Make the jobs of an accepted submission: one job, or a parent and its children, each
    /// RUNNABLE or PENDING as its dependencies stand. Returns the (first) job's id.
    pub(crate) fn create(
        &mut self,
        spec: JobSpec,
        plan: Plan,
        (share, unit): (usize, usize),
        stop_after: u32,
        now: Time,
    ) -> JobId {
        // One user for the parent and every child (SPEC §12: the submitter's).
        let user = self.shares[share]
            .users
            .ix_of(crate::model::charged_user(spec.submitter.as_deref()));
        let new = |id: JobId, spec: Arc<JobSpec>, array: Option<ArrayLink>| Job {
            id,
            share,
            unit,
            quantity: spec.total_quantity(),
            nodes: spec.nodes(),
            priority: spec.scheduling_priority,
            submitted: now,
            state: JobState::Runnable,
            phase: Phase::Pending { nominated: None },
            preempted_count: 0,
            failed_attempts: 0,
            attempts_started: 0,
            fail_reason: None,
            lapsed_at: None,
            reserved_start: false,
            user,
            bucket: 0,
            stop_after,
            stop_delay: None,
            stop_plan: None,
            last_save: None,
            lost_ticks: 0,
            checkpoint: None,
            finished_at: None,
            deps: Box::new([]),
            unmet: 0,
            array,
            spec,
        };
        let Some(size) = plan.size else {
            let id = self.alloc_id();
            self.insert_job(new(id, spec.into(), None));
            self.emit(Event::Submitted { job: id });
            self.link(id, plan.plain, now);
            return id;
        };
        let parent = self.alloc_id();
        // The children share one spec: the parent's, less what only the parent is.
        let mut child_spec = spec.clone();
        child_spec.depends_on.clear();
        child_spec.array_properties = None;
        child_spec.client_token = None;
        let child_spec = Arc::new(child_spec);
        let mut job = new(parent, spec.into(), None);
        job.phase = Phase::Parent;
        job.state = JobState::Pending;
        job.array = Some(ArrayLink::Parent {
            size,
            left: size,
            failed: 0,
        });
        self.insert_job(job);
        self.arrays.insert(parent.0, size);
        self.emit(Event::Submitted { job: parent });
        for index in 0..size {
            let id = self.alloc_id();
            self.insert_job(new(
                id,
                child_spec.clone(),
                Some(ArrayLink::Child { parent, index }),
            ));
            self.emit(Event::Submitted { job: id });
            let mut deps = plan.plain.clone();
            deps.extend(plan.each.iter().map(|p| child(*p, index)));
            if plan.sequential && index > 0 {
                deps.push(JobId(id.0 - 1));
            }
            self.link(id, deps, now);
        }
        parent
    }

    /// Give a new job its dependencies: RUNNABLE (queued) when all have succeeded, PENDING
    /// when some have not, FAILED at once when one already failed.
    fn link(&mut self, id: JobId, deps: Vec<JobId>, now: Time) {
        let mut unmet = 0;
        let mut failed = None;
        for &d in &deps {
            match self.dep_status(d) {
                Some(DepStatus::Succeeded) => {}
                Some(DepStatus::Waiting(_)) => {
                    unmet += 1;
                    self.dependents.entry(d.0).or_default().push(id);
                }
                Some(DepStatus::Failed) | None => failed = failed.or(Some(d)),
            }
        }
        let Some(j) = self.job_mut(id) else { return };
        j.deps = deps.into_boxed_slice();
        j.unmet = unmet;
        if let Some(d) = failed {
            j.phase = Phase::Dependent;
            j.state = JobState::Pending;
            self.dependency_failed(id, d, now);
        } else if unmet > 0 {
            j.phase = Phase::Dependent;
            j.state = JobState::Pending;
        } else {
            self.index_pending(id);
        }
    }

    /// After a restart: put back a PENDING job's wait (its dependencies are restored
    /// already, having lower ids). Returns whether it is still PENDING.
    pub(crate) fn relink(&mut self, id: JobId, now: Time) -> bool {
        let deps = self.job(id).map(|j| j.deps.to_vec()).unwrap_or_default();
        if let Some(j) = self.job_mut(id) {
            j.phase = Phase::Pending { nominated: None };
            j.state = JobState::Runnable;
        }
        self.link(id, deps, now);
        let pending = self.job(id).is_some_and(|j| j.is_dependent());
        if self.job(id).is_some_and(|j| j.is_pending()) {
            self.emit(Event::Released { job: id });
        }
        pending
    }

    fn dependency_failed(&mut self, id: JobId, dep: JobId, now: Time) {
        let reason = FailReason::DependencyFailed {
            job: dep,
            label: self.label(dep),
        };
        self.finish(id, JobState::Failed, Some(reason.clone()), now);
        self.emit(Event::Failed {
            job: id,
            reason,
            lost: None,
        });
    }

    /// A job ended: count it in its parent's summary and, once the batch's events for it
    /// are out, let its dependents go on ([`Sched::settle`]).
    pub(crate) fn ended(&mut self, id: JobId) {
        self.settling.push_back(id);
    }

    /// Carry the ends of jobs over to those that wait for them, until nothing more
    /// changes: dependents released or failed, array parents settled.
    pub(crate) fn settle(&mut self) {
        if self.draining {
            return;
        }
        self.draining = true;
        while let Some(id) = self.settling.pop_front() {
            let Some(j) = self.job(id) else { continue };
            let (state, parent, now) = (j.state, j.parent(), self.now);
            if state == JobState::Succeeded {
                self.mark_succeeded(id);
            }
            for d in self.dependents.remove(&id.0).unwrap_or_default() {
                let Some(dj) = self.job_mut(d) else { continue };
                if !dj.is_dependent() {
                    continue;
                }
                if state == JobState::Succeeded {
                    dj.unmet = dj.unmet.saturating_sub(1);
                    if dj.unmet == 0 {
                        dj.phase = Phase::Pending { nominated: None };
                        dj.state = JobState::Runnable;
                        self.index_pending(d);
                        self.emit(Event::Released { job: d });
                    }
                } else {
                    self.dependency_failed(d, id, now);
                }
            }
            if let Some(p) = parent {
                self.child_ended(p, state == JobState::Failed, now);
            }
        }
        self.draining = false;
    }

    fn child_ended(&mut self, parent: JobId, failed: bool, now: Time) {
        let Some(p) = self.job_mut(parent) else {
            return;
        };
        let Some(ArrayLink::Parent {
            size,
            left,
            failed: f,
        }) = &mut p.array
        else {
            return;
        };
        *left = left.saturating_sub(1);
        *f += u32::from(failed);
        let (size, left, f) = (*size, *left, *f);
        if left > 0 || !p.is_parent() {
            return;
        }
        self.settle_parent(parent, size, f, now);
    }

    fn settle_parent(&mut self, parent: JobId, size: u32, failed: u32, now: Time) {
        if failed == 0 {
            self.finish(parent, JobState::Succeeded, None, now);
            self.emit(Event::Succeeded { job: parent });
        } else {
            let reason = self
                .job(parent)
                .and_then(|j| j.fail_reason.clone())
                .unwrap_or(FailReason::ChildrenFailed { failed, size });
            self.finish(parent, JobState::Failed, Some(reason.clone()), now);
            self.emit(Event::Failed {
                job: parent,
                reason,
                lost: None,
            });
        }
    }

    /// After a restart, a parent whose children had all ended settles now.
    pub(crate) fn settle_restored_parent(&mut self, parent: JobId, now: Time) {
        if let Some(ArrayLink::Parent {
            size,
            left: 0,
            failed,
        }) = self.job(parent).and_then(|j| j.array)
        {
            self.settle_parent(parent, size, failed, now);
        }
    }

    /// Cancel an array: every child not ended yet (SPEC §13). The parent ends when its
    /// last child has, FAILED with `CANCELLED: by <user>`.
    pub(crate) fn cancel_array(&mut self, parent: JobId, by: &str, now: Time) -> bool {
        let Some(size) = self.job(parent).and_then(Job::array_size) else {
            return false;
        };
        if let Some(p) = self.job_mut(parent) {
            p.fail_reason = Some(FailReason::Cancelled(by.to_string()));
        }
        // One action (SPEC §13): every child not yet ended is cancelled before any end is
        // carried over, so a SEQUENTIAL sibling reads `cancelled`, not DEPENDENCY_FAILED;
        // jobs outside the array that wait for a child fail after.
        let outer = std::mem::replace(&mut self.draining, true);
        let mut any = false;
        for i in 0..size {
            any |= self.cancel(child(parent, i), by, now);
        }
        self.draining = outer;
        self.settle();
        any
    }

    /// The children of an array parent, by state. Costs the array's size.
    pub fn array_counts(&self, parent: JobId) -> ArrayCounts {
        let mut counts = [0; 8];
        let Some(size) = self
            .job(parent)
            .and_then(Job::array_size)
            .or_else(|| self.arrays.get(&parent.0).copied())
        else {
            return counts;
        };
        for i in 0..size {
            let id = child(parent, i);
            let state = match self.job(id) {
                Some(j) => j.state,
                None if self.has_succeeded(id) => JobState::Succeeded,
                None => JobState::Failed,
            };
            counts[state.ordinal()] += 1;
        }
        counts
    }

    /// An array parent's state, from its children's.
    pub fn parent_state(&self, j: &Job) -> JobState {
        if j.state.is_finished() {
            return j.state;
        }
        array_state(&self.array_counts(j.id))
    }

    /// `waiting for job 12 (RUNNING) and 14 (RUNNABLE)`: a PENDING job's reason.
    pub(crate) fn pending_reason(&self, j: &Job) -> String {
        let waits: Vec<String> = j
            .deps
            .iter()
            .filter_map(|&d| match self.dep_status(d)? {
                DepStatus::Waiting(s) => Some(format!("{} ({s})", self.label(d))),
                _ => None,
            })
            .collect();
        let list = match waits.as_slice() {
            [] => return "waiting for its dependencies".to_string(),
            [one] => one.clone(),
            [init @ .., last] => format!("{} and {last}", init.join(", ")),
        };
        format!("waiting for job {list}")
    }

    /// The PENDING jobs that wait for `id`.
    pub fn dependents_of(&self, id: JobId) -> &[JobId] {
        self.dependents.get(&id.0).map_or(&[], Vec::as_slice)
    }

    /// The jobs `id` waits for, with where each stands (for the details popup).
    pub fn dependencies(&self, id: JobId) -> Vec<(JobId, String, Option<DepStatus>)> {
        self.job(id)
            .map(|j| {
                j.deps
                    .iter()
                    .map(|&d| (d, self.label(d), self.dep_status(d)))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Why a job reference names no job the scheduler knows (`Sched::resolve`). Its
/// `Display` is the submitter's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnknownRef {
    /// No job with this id, finished or not.
    NoJob(JobId),
    /// The array has `size` children, none at `index`.
    NoChild { array: JobId, size: u32, index: u32 },
    /// A child was named of a job that is not an array.
    NotAnArray(JobId),
}

impl std::fmt::Display for UnknownRef {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            UnknownRef::NoJob(id) => write!(f, "job {id} does not exist"),
            UnknownRef::NoChild { array, size, index } => write!(
                f,
                "array {array} has {size} children (0..{}), no child {index}",
                size.saturating_sub(1)
            ),
            UnknownRef::NotAnArray(id) => write!(f, "job {id} is not an array"),
        }
    }
}

impl std::error::Error for UnknownRef {}
