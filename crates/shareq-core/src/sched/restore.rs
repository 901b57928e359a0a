//! Putting jobs back after a restart (SPEC §8): the store replays what it recorded into a
//! fresh scheduler — queued jobs in their original order, adopted jobs on their devices.

use super::state::{
    ArrayLink, Checkpoint, FailReason, Job, Lane, Phase, ShareState, StopCause, UnitState,
};
use super::{Sched, Time};
use crate::model::{JobId, JobSpec, JobState, Strategy};
use std::collections::BTreeSet;

/// A job as the store recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoredJob {
    pub id: JobId,
    pub spec: JobSpec,
    /// The unit it was submitted for (the spec may leave it to the default).
    pub unit: String,
    pub submitted: Time,
    pub priority: u32,
    pub preempted_count: u32,
    pub failed_attempts: u32,
    pub attempts_started: u32,
    /// Set for a job that was being cancelled: what its end will say (`CANCELLED: by …`).
    pub fail_reason: Option<FailReason>,
    /// Adopted: still holding these devices since `started_at`.
    pub holding: Option<RestoredHolding>,
    /// The jobs it waits for (SPEC §13), resolved: a PENDING job waits again.
    pub deps: Vec<JobId>,
    /// Its place in an array; a parent's counts (children not ended, failed) as the store
    /// has them.
    pub array: Option<ArrayLink>,
    /// GPUs × ticks its preemptions lost so far (SPEC §14).
    pub lost_ticks: i64,
    /// Its latest checkpoint report (SPEC §14): the last save of an adopted attempt that
    /// made it, and what its next attempt is told.
    pub checkpoint: Option<Checkpoint>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RestoredHolding {
    /// The node the devices are on; `None`: the node that has them (the only one without
    /// `nodes`).
    pub node: Option<String>,
    pub devices: Vec<u32>,
    /// A gang's other nodes and its devices on each (SPEC §16), after `node`, in node
    /// order; empty for a plain job.
    pub more: Vec<(String, Vec<u32>)>,
    pub started_at: Time,
    pub state: JobState,
    /// It was being stopped when the scheduler went away: the stop goes on.
    pub stopping: Option<StopCause>,
}

impl Sched {
    /// Put a recorded job back. Jobs must be restored in id order. A job whose share or
    /// unit is no longer configured is kept, waiting with a reason, like after a reload.
    pub fn restore_job(&mut self, r: RestoredJob, now: Time) -> Result<(), RestoreError> {
        if self.job(r.id).is_some() {
            return Err(RestoreError::Twice(r.id));
        }
        let u = self.unit_or_ghost(&r.unit);
        let s = self.share_or_ghost(&r.spec.quota_share_name);
        let node = r.holding.as_ref().map(|h| self.node_of(u, h));
        // A gang's other nodes (SPEC §16): whole GPUs only, so each node is its slot.
        let more: Vec<(usize, Vec<u32>)> = r
            .holding
            .as_ref()
            .map(|h| {
                h.more
                    .iter()
                    .map(|(name, d)| (self.node_named(name), d.clone()))
                    .collect()
            })
            .unwrap_or_default();
        // Whole GPUs are held by one job each; a sliced device is shared (SPEC §15).
        let whole = self.units[u].slice.is_none();
        if let (Some(h), Some(n), true) = (&r.holding, node, whole) {
            let places = std::iter::once((n, &h.devices)).chain(more.iter().map(|(n, d)| (*n, d)));
            for (n, devices) in places {
                let held: BTreeSet<u32> = self
                    .jobs()
                    .filter(|j| j.unit == u)
                    .flat_map(|j| j.holdings().into_iter().filter(|(s, _)| *s == n))
                    .flat_map(|(_, d)| d.iter().copied())
                    .collect();
                if let Some(d) = devices.iter().find(|d| held.contains(d)) {
                    return Err(RestoreError::DeviceHeld {
                        job: r.id,
                        device: *d,
                    });
                }
            }
        }
        let phase = match &r.holding {
            None => Phase::Pending { nominated: None },
            Some(h) => {
                self.start_seq += 1;
                let n = node.unwrap_or(0);
                // On a sliced unit the job holds GiB of its one device: the lowest free
                // ones of that device's slot (SPEC §15).
                let unit = &self.units[u];
                let (slot, gib) = match (unit.slice, h.devices.first()) {
                    (Some(_), Some(&d)) => match unit.slot_ix.get(&(n, d)) {
                        Some(&ix) => (ix, self.lowest_free(u, ix, r.spec.quantity)),
                        None => (usize::MAX, vec![0]),
                    },
                    _ => (n, Vec::new()),
                };
                Phase::Holding {
                    slot,
                    devices: h.devices.clone(),
                    gib,
                    start_seq: self.start_seq,
                    started_at: h.started_at,
                    stopping: h.stopping.map(|c| (c, now)),
                    more: more.clone(),
                }
            }
        };
        let state = r.holding.as_ref().map_or(JobState::Runnable, |h| h.state);
        // An adopted attempt that reported keeps its last save (the victim order, §14).
        let last_save = r
            .checkpoint
            .as_ref()
            .filter(|c| c.attempt == r.attempts_started)
            .map(|c| c.at)
            .filter(|&at| r.holding.as_ref().is_some_and(|h| at >= h.started_at));
        let user = self.shares[s]
            .users
            .ix_of(crate::model::charged_user(r.spec.submitter.as_deref()));
        let mut job = Job {
            id: r.id,
            share: s,
            unit: u,
            quantity: r.spec.total_quantity(),
            nodes: r.spec.nodes(),
            priority: r.priority,
            submitted: r.submitted,
            state,
            phase,
            preempted_count: r.preempted_count,
            failed_attempts: r.failed_attempts,
            attempts_started: r.attempts_started,
            fail_reason: r.fail_reason,
            lapsed_at: None,
            reserved_start: false,
            user,
            bucket: 0,
            stop_after: 0,
            stop_delay: None,
            stop_plan: None,
            lost_ticks: r.lost_ticks,
            last_save,
            checkpoint: r.checkpoint.map(Box::new),
            finished_at: None,
            deps: r.deps.into_boxed_slice(),
            unmet: 0,
            array: r.array,
            spec: r.spec.into(),
        };
        // A stop under way goes on as its share's settings say now (SPEC §14): the
        // notice and grace it began with were not stored; the supervisor keeps its times.
        job.stop_plan = job.stop_cause().map(|c| self.plan_stop(&job, c));
        let holding = job.is_holding();
        let parent = matches!(job.array, Some(ArrayLink::Parent { .. }));
        let waits = !job.deps.is_empty() && !holding && job.attempts_started == 0;
        if let Some(ArrayLink::Parent { size, .. }) = job.array {
            self.arrays.insert(r.id.0, size);
        }
        self.insert_job(job);
        self.next_id = self.next_id.max(r.id.0 + 1);
        if holding {
            self.index_holding(r.id);
            self.usage_restored(r.id, now);
        } else if parent {
            if let Some(j) = self.job_mut(r.id) {
                j.phase = Phase::Parent;
                j.state = JobState::Pending;
            }
            self.settle_restored_parent(r.id, now);
        } else if waits {
            // PENDING again, or released (or failed) now if its dependencies ended while
            // it was away.
            self.relink(r.id, now);
        } else {
            self.index_pending(r.id);
        }
        self.settle();
        Ok(())
    }

    /// The node a restored holding is on: the named one (kept, with no devices, when the
    /// config no longer lists it), or the first whose devices include the job's.
    fn node_of(&mut self, u: usize, h: &RestoredHolding) -> usize {
        match &h.node {
            Some(name) => self.node_named(name),
            None => (0..self.nodes.len())
                .find(|&n| {
                    h.devices
                        .first()
                        .is_some_and(|&d| self.units[u].has_device(n, d))
                })
                .unwrap_or(0),
        }
    }

    /// The node called `name`: kept, with no devices, when the config no longer lists it.
    fn node_named(&mut self, name: &str) -> usize {
        if let Some(&n) = self.node_ix.get(name) {
            return n;
        }
        self.nodes.push(super::state::NodeState {
            name: name.to_string(),
            present: false,
        });
        self.node_ix.insert(name.to_string(), self.nodes.len() - 1);
        let n = self.nodes.len() - 1;
        for unit in self.units.iter_mut().filter(|u| u.slice.is_none()) {
            unit.slots.resize_with(n + 1, || super::state::Slot {
                node: n,
                ..Default::default()
            });
        }
        n
    }

    fn unit_or_ghost(&mut self, name: &str) -> usize {
        if let Some(&u) = self.unit_ix.get(name) {
            return u;
        }
        let u = self.units.len();
        self.units.push(UnitState::new(name));
        self.unit_ix.insert(name.to_string(), u);
        for s in &mut self.shares {
            s.lanes.resize_with(u + 1, Lane::default);
        }
        u
    }

    fn share_or_ghost(&mut self, name: &str) -> usize {
        if let Some(&s) = self.share_ix.get(name) {
            return s;
        }
        let s = self.shares.len();
        self.shares.push(ShareState {
            name: name.to_string(),
            present: false,
            enabled: false,
            strategy: Strategy::Lend,
            in_share: false,
            borrow_limit: 0,
            min_runtime: 0,
            grace: None,
            notice: None,
            lanes: vec![
                Lane {
                    cap: Some(0),
                    ..Lane::default()
                };
                self.units.len()
            ],
            levels: Default::default(),
            users: Default::default(),
        });
        self.share_ix.insert(name.to_string(), s);
        let mut order: Vec<usize> = (0..self.shares.len()).collect();
        order.sort_by(|&a, &b| self.shares[a].name.cmp(&self.shares[b].name));
        self.share_order = order;
        s
    }
}

/// Why a recorded job cannot be put back (`Sched::restore_job`): a database that
/// contradicts itself. Its `Display` names the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreError {
    /// The job was restored already.
    Twice(JobId),
    /// Another restored job holds one of its devices.
    DeviceHeld { job: JobId, device: u32 },
}

impl std::fmt::Display for RestoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            RestoreError::Twice(id) => write!(f, "job {id} is restored twice"),
            RestoreError::DeviceHeld { job, device } => write!(
                f,
                "job {job}: device {device} is already held by another restored job"
            ),
        }
    }
}

impl std::error::Error for RestoreError {}
