//! What a subscriber is sent: the whole picture when it connects (or falls behind), and
//! after that only what changed since the version it has — queue rows added, replaced or
//! removed, plus the small parts (shares, GPUs, running jobs) whole.

use super::{ConfigStatus, JobView, PreemptionRecord, Reasons, Snapshot, UnitView};
use crate::model::JobId;
use crate::sched::ShareUnitStats;
use crate::sched::{LendEdge, QKey};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;

/// How many versions of queue changes a snapshot remembers. A subscriber further behind
/// gets the whole picture again.
const KEPT_VERSIONS: usize = 256;

/// One change to the queue, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// A row added, or the row with the same key replaced.
    Upsert(Arc<JobView>),
    /// The row with this (priority, submitted, id) left the queue (or moved: an upsert
    /// with its new key follows).
    Remove((u32, i64, JobId)),
}

/// The queue changes of the last versions. Not part of the picture: two snapshots that
/// show the same are equal whatever their logs.
#[derive(Debug, Clone, Default)]
pub struct ChangeLog(Arc<VecDeque<Version>>);

/// The queue changes from version `.0` (exclusive) to `.1` (inclusive): one version on the
/// scheduler's side, a delta's span on an attached console's (`None`: the queue was
/// rebuilt, only a full picture helps).
type Version = (u64, u64, Option<Arc<Vec<Change>>>);

impl PartialEq for ChangeLog {
    fn eq(&self, _: &ChangeLog) -> bool {
        true
    }
}

impl ChangeLog {
    /// Record what `version` changed (`None`: the queue was rebuilt).
    pub fn push(&mut self, version: u64, changes: Option<Vec<Change>>) {
        self.push_span(version.saturating_sub(1), version, changes);
    }

    /// Record what the versions after `base` up to `version` changed, as one step.
    pub fn push_span(&mut self, base: u64, version: u64, changes: Option<Vec<Change>>) {
        let log = Arc::make_mut(&mut self.0);
        log.push_back((base, version, changes.map(Arc::new)));
        while log.len() > KEPT_VERSIONS {
            log.pop_front();
        }
    }

    /// The changes from `base` (exclusive) to `to` (inclusive), in order, if the log holds
    /// every step between them (it forgets the oldest, and a rebuilt queue breaks it).
    pub fn between(&self, base: u64, to: u64) -> Option<Vec<Change>> {
        let mut at = base;
        let mut out = Vec::new();
        for (from, v, c) in self.0.iter() {
            if at == to {
                break;
            }
            if *v <= base {
                continue;
            }
            if *from != at || *v > to {
                return None;
            }
            out.extend(c.as_ref()?.iter().cloned());
            at = *v;
        }
        (at == to).then_some(out)
    }
}

/// One message of the `subscribe` stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Update {
    Full(Box<Snapshot>),
    Delta(Box<Delta>),
}

/// What changed from version `base` to `version`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    pub base: u64,
    pub version: u64,
    pub at: i64,
    pub env_name: String,
    pub config: ConfigStatus,
    pub units: Vec<UnitView>,
    pub shares: Vec<ShareUnitStats>,
    pub lending: Vec<LendEdge>,
    pub reasons: Arc<Reasons>,
    pub running: Vec<JobView>,
    /// PENDING jobs and array parents (SPEC §13), only when they changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linked: Option<Arc<super::Linked>>,
    /// Only when they changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<Arc<Vec<Arc<JobView>>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<Arc<Vec<PreemptionRecord>>>,
    pub grace_period_seconds: u32,
    pub queue: Vec<Change>,
    /// Who may do what (SPEC §9); small, so always sent.
    #[serde(default)]
    pub access: Arc<crate::access::Access>,
    /// Only when a new forecast came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimates: Option<Arc<crate::forecast::Estimates>>,
    /// Why scheduling is paused, while it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<String>,
    /// Whose data fills the state filesystem, while it is short of space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
    /// Jobs not contained or GPUs not isolated, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<String>,
    /// The users' standings (O(users); always sent).
    #[serde(default)]
    pub users: Arc<Vec<crate::sched::UserStanding>>,
}

impl Update {
    /// The update as `viewer` may see it (SPEC §9: others' commands hidden).
    pub fn for_viewer(self, viewer: super::Viewer) -> Update {
        if viewer.admin {
            return self;
        }
        match self {
            Update::Full(mut snap) => {
                let views: Vec<JobView> =
                    snap.queue.iter().cloned().map(|j| viewer.view(j)).collect();
                snap.queue = super::JobList::from_views(views);
                snap.running = std::mem::take(&mut snap.running)
                    .into_iter()
                    .map(|j| viewer.view(j))
                    .collect();
                snap.finished = Arc::new(
                    snap.finished
                        .iter()
                        .cloned()
                        .map(|j| viewer.view_arc(j))
                        .collect(),
                );
                snap.linked = Arc::new(snap.linked.for_viewer(viewer));
                Update::Full(snap)
            }
            Update::Delta(mut d) => {
                d.queue = std::mem::take(&mut d.queue)
                    .into_iter()
                    .map(|c| match c {
                        Change::Upsert(v) => Change::Upsert(viewer.view_arc(v)),
                        other => other,
                    })
                    .collect();
                d.running = std::mem::take(&mut d.running)
                    .into_iter()
                    .map(|j| viewer.view(j))
                    .collect();
                d.finished = d
                    .finished
                    .map(|f| Arc::new(f.iter().cloned().map(|j| viewer.view_arc(j)).collect()));
                d.linked = d.linked.map(|l| Arc::new(l.for_viewer(viewer)));
                Update::Delta(d)
            }
        }
    }
}

impl Snapshot {
    /// What a subscriber holding `base` needs to reach this snapshot: a delta when the
    /// change log reaches back to it, else the whole picture.
    pub fn update_since(&self, base: Option<&Snapshot>) -> Update {
        let delta = base.and_then(|b| {
            let queue = self.changes.between(b.version, self.version)?;
            Some(Delta {
                base: b.version,
                version: self.version,
                at: self.at,
                env_name: self.env_name.clone(),
                config: self.config.clone(),
                units: self.units.clone(),
                shares: self.shares.clone(),
                lending: self.lending.clone(),
                reasons: self.reasons.clone(),
                running: self.running.clone(),
                linked: (!Arc::ptr_eq(&self.linked, &b.linked)).then(|| self.linked.clone()),
                finished: (!Arc::ptr_eq(&self.finished, &b.finished))
                    .then(|| self.finished.clone()),
                preemptions: (!Arc::ptr_eq(&self.preemptions, &b.preemptions))
                    .then(|| self.preemptions.clone()),
                grace_period_seconds: self.grace_period_seconds,
                queue,
                access: self.access.clone(),
                estimates: (!Arc::ptr_eq(&self.estimates, &b.estimates))
                    .then(|| self.estimates.clone()),
                paused: self.paused.clone(),
                disk: self.disk.clone(),
                containment: self.containment.clone(),
                users: self.users.clone(),
            })
        });
        match delta {
            Some(d) => Update::Delta(Box::new(d)),
            None => Update::Full(Box::new(self.clone())),
        }
    }

    /// Apply a delta made against this snapshot's version.
    pub fn apply(&mut self, d: Delta) -> Result<(), StaleDelta> {
        if d.base != self.version {
            return Err(StaleDelta {
                base: d.base,
                version: self.version,
            });
        }
        // Kept, so that a console taking in this snapshot touches only what changed.
        self.changes
            .push_span(d.base, d.version, Some(d.queue.clone()));
        for c in d.queue {
            match c {
                Change::Upsert(v) => {
                    self.queue.upsert(v);
                }
                Change::Remove((p, s, id)) => {
                    self.queue.remove(QKey::new(p, s, id));
                }
            }
        }
        self.version = d.version;
        self.at = d.at;
        self.env_name = d.env_name;
        self.config = d.config;
        self.units = d.units;
        self.shares = d.shares;
        self.lending = d.lending;
        self.reasons = d.reasons;
        self.running = d.running;
        if let Some(f) = d.finished {
            self.finished = f;
        }
        if let Some(l) = d.linked {
            self.linked = l;
        }
        if let Some(p) = d.preemptions {
            self.preemptions = p;
        }
        self.grace_period_seconds = d.grace_period_seconds;
        self.paused = d.paused;
        self.disk = d.disk;
        self.containment = d.containment;
        self.users = d.users;
        self.access = d.access;
        if let Some(e) = d.estimates {
            self.estimates = e;
        }
        Ok(())
    }
}

impl Update {
    /// The version this message brings a subscriber to.
    pub fn version(&self) -> u64 {
        match self {
            Update::Full(s) => s.version,
            Update::Delta(d) => d.version,
        }
    }
}

/// A delta made against another version than the snapshot's: the stream is out of step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a delta from version {base} cannot apply to version {version}")]
pub struct StaleDelta {
    pub base: u64,
    pub version: u64,
}
