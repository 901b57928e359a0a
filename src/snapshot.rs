//! An immutable picture of the scheduler for the console and the control socket: shares,
//! lending, queue with reasons, running jobs, GPUs, preemption log and config state.
//! Built by the runtime after each change and shared as `Arc<Snapshot>`; readers never
//! touch the live scheduler.

use crate::model::{JobId, JobState, Strategy, Submitter};
use crate::sched::{LendEdge, Phase, Sched, StopCause, Time};
use crate::server::auth::Access;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// The config as the runtime last saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigStatus {
    /// The config directory.
    pub source: String,
    /// When the config in force was applied (ms since the epoch).
    pub applied_at: Option<i64>,
    /// Hash of the applied files.
    pub hash: Option<String>,
    /// The last rejected edit, while it is the newest news: "file:line:col: what".
    pub error: Option<String>,
    pub error_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareView {
    pub name: String,
    pub unit: String,
    pub strategy: Strategy,
    /// In the applied config (false: removed, jobs left over).
    pub present: bool,
    pub enabled: bool,
    pub in_share: bool,
    pub limit: u32,
    /// Borrow cap in GPUs, `None` = unlimited.
    pub cap: Option<u32>,
    pub usage: u32,
    pub borrowed: u32,
    pub lent: u32,
    pub idle: u32,
    pub running: usize,
    pub queued: usize,
    /// Submission time of the oldest queued job (ms since the epoch).
    pub oldest_queued: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceView {
    pub index: u32,
    pub job: Option<JobId>,
    pub job_name: Option<String>,
    pub share: Option<String>,
    /// Utilisation percent and memory (MiB), where NVML reports them.
    pub util: Option<u32>,
    pub mem_used: Option<u64>,
    pub mem_total: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitView {
    pub name: String,
    pub usable: u32,
    pub used: u32,
    /// Σ maxCapacity of the shares.
    pub guaranteed: u64,
    pub devices: Vec<DeviceView>,
}

impl UnitView {
    pub fn oversubscribed(&self) -> bool {
        self.guaranteed > u64::from(self.usable)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    pub id: JobId,
    pub name: String,
    pub share: String,
    pub unit: String,
    pub quantity: u32,
    pub priority: u32,
    pub state: JobState,
    pub submitted: i64,
    pub started: Option<i64>,
    pub finished: Option<i64>,
    pub devices: Vec<u32>,
    /// How many of its GPUs are beyond its share's limit right now (running jobs).
    pub on_borrowed: bool,
    /// Why it waits (queued), or what it is doing.
    pub reason: Arc<str>,
    /// Being stopped: why, and since when (ms).
    pub stopping: Option<(String, i64)>,
    pub attempts: u32,
    pub preempted_count: u32,
    pub nominated: bool,
    /// Who submitted it (SPEC §9); `None` only for jobs stored before shareq knew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter: Option<Arc<Submitter>>,
}

/// One line of the preemption log (SPEC §4.4 item 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptionRecord {
    pub at: i64,
    pub victim: JobId,
    pub victim_name: String,
    pub victim_share: String,
    pub by: Option<JobId>,
    pub by_name: Option<String>,
    pub by_share: Option<String>,
    pub reason: String,
    pub gpus: u32,
    /// How long the victim had run (ms).
    pub ran_for: i64,
    /// "requeued", "failed (PREEMPTION_RETRIES_EXHAUSTED)", ... once known.
    pub outcome: Option<String>,
    /// The victim's submitter, and the preempting job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub victim_user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_user: Option<String>,
}

/// GPU telemetry for one device, where NVML answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Telemetry {
    pub util: u32,
    pub mem_used: u64,
    pub mem_total: u64,
}

/// Everything a reader needs, at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When it was taken (ms since the epoch).
    pub at: i64,
    /// Bumped on every change.
    pub version: u64,
    pub env_name: String,
    pub config: ConfigStatus,
    pub units: Vec<UnitView>,
    pub shares: Vec<ShareView>,
    pub lending: Vec<LendEdge>,
    /// RUNNABLE jobs in scheduling order.
    pub queue: Vec<JobView>,
    /// Jobs holding GPUs.
    pub running: Vec<JobView>,
    /// Recently finished jobs, newest first.
    pub finished: Vec<JobView>,
    /// Newest first.
    pub preemptions: Vec<PreemptionRecord>,
    pub grace_period_seconds: u32,
    /// Who may do what (SPEC §9), so that a console can refuse before it asks.
    #[serde(default)]
    pub access: Arc<Access>,
}

impl Snapshot {
    /// An empty picture (before the first config is applied).
    pub fn empty() -> Snapshot {
        Snapshot {
            at: 0,
            version: 0,
            env_name: String::new(),
            config: ConfigStatus::default(),
            units: Vec::new(),
            shares: Vec::new(),
            lending: Vec::new(),
            queue: Vec::new(),
            running: Vec::new(),
            finished: Vec::new(),
            preemptions: Vec::new(),
            grace_period_seconds: 30,
            access: Arc::default(),
        }
    }

    /// Build from the live scheduler. `telemetry` is keyed by (unit, device index).
    pub fn build(
        sched: &Sched,
        at: Time,
        version: u64,
        config: ConfigStatus,
        preemptions: Vec<PreemptionRecord>,
        telemetry: &HashMap<(String, u32), Telemetry>,
    ) -> Snapshot {
        let mut queue = Vec::new();
        let mut running = Vec::new();
        let mut finished = Vec::new();
        // Jobs of one lane and quantity that are neither nominated nor blocked wait for the
        // same reason: compute it once.
        let mut memo: HashMap<(usize, usize, u32, bool), Arc<str>> = HashMap::new();
        let order = sched.queue();
        let mut oldest: HashMap<(String, String), i64> = HashMap::new();
        for id in order {
            let Some(j) = sched.job(id) else { continue };
            let blocked = sched.is_blocked(id);
            let reason = if j.is_nominated() {
                Arc::from(sched.reason(id))
            } else {
                memo.entry((j.share, j.unit, j.quantity, blocked))
                    .or_insert_with(|| Arc::from(sched.reason(id)))
                    .clone()
            };
            let key = (
                sched.share_name(j.share).to_string(),
                sched.unit_name(j.unit).to_string(),
            );
            let e = oldest.entry(key).or_insert(j.submitted);
            *e = (*e).min(j.submitted);
            queue.push(job_view(sched, j, reason));
        }
        for j in sched.jobs() {
            match j.phase {
                Phase::Holding { .. } => {
                    running.push(job_view(sched, j, Arc::from(sched.reason(j.id))))
                }
                Phase::Done => finished.push(job_view(sched, j, Arc::from(sched.reason(j.id)))),
                Phase::Pending { .. } => {}
            }
        }
        running.sort_by_key(|j| (j.started, j.id));
        finished.sort_by_key(|j| std::cmp::Reverse((j.finished, j.id)));
        finished.truncate(200);
        let shares = sched
            .share_stats()
            .into_iter()
            .map(|s| ShareView {
                oldest_queued: oldest.get(&(s.share.clone(), s.unit.clone())).copied(),
                name: s.share,
                unit: s.unit,
                strategy: s.strategy,
                present: s.present,
                enabled: s.enabled,
                in_share: s.in_share,
                limit: s.limit,
                cap: s.cap,
                usage: s.usage,
                borrowed: s.borrowed,
                lent: s.lent,
                idle: s.idle,
                running: s.running,
                queued: s.queued,
            })
            .collect();
        let units = sched
            .unit_totals()
            .into_iter()
            .map(|(name, usable, used, guaranteed)| {
                let devices = sched
                    .device_map(&name)
                    .into_iter()
                    .map(|(index, job)| {
                        let j = job.and_then(|id| sched.job(id));
                        let t = telemetry.get(&(name.clone(), index));
                        DeviceView {
                            index,
                            job,
                            job_name: j.map(|j| j.name().to_string()),
                            share: j.map(|j| sched.share_name(j.share).to_string()),
                            util: t.map(|t| t.util),
                            mem_used: t.map(|t| t.mem_used),
                            mem_total: t.map(|t| t.mem_total),
                        }
                    })
                    .collect();
                UnitView {
                    name,
                    usable,
                    used,
                    guaranteed,
                    devices,
                }
            })
            .collect();
        Snapshot {
            at,
            version,
            env_name: sched.env_name().to_string(),
            config,
            units,
            shares,
            lending: sched.lending(),
            queue,
            running,
            finished,
            preemptions,
            grace_period_seconds: sched.grace_period_seconds(),
            access: Arc::default(),
        }
    }
}

fn job_view(sched: &Sched, j: &crate::sched::Job, reason: Arc<str>) -> JobView {
    let lane_borrowing = sched
        .share_stats_for(j.share, j.unit)
        .is_some_and(|(usage, limit)| usage > limit);
    JobView {
        id: j.id,
        name: j.name().to_string(),
        share: sched.share_name(j.share).to_string(),
        unit: sched.unit_name(j.unit).to_string(),
        quantity: j.quantity,
        priority: j.priority,
        state: j.state,
        submitted: j.submitted,
        started: j.started_at(),
        finished: j.finished_at,
        devices: j.devices().to_vec(),
        on_borrowed: j.is_holding() && lane_borrowing,
        reason,
        stopping: j.stop_cause().map(|c| {
            let what = match c {
                StopCause::Cancel => "cancelled".to_string(),
                StopCause::Timeout => "timed out".to_string(),
                StopCause::Preempt { reason, .. } => format!("preempted ({})", reason.as_str()),
            };
            (what, j.stopping_since().unwrap_or(0))
        }),
        attempts: j.attempts_started,
        preempted_count: j.preempted_count,
        nominated: j.is_nominated(),
        submitter: j.spec.submitter.clone(),
    }
}

impl Snapshot {
    /// Every job the scheduler remembers, finished ones included, in id order (for
    /// `shareq jobs --all`; the snapshot itself keeps only the newest finished jobs).
    pub fn all_jobs(sched: &Sched) -> Vec<JobView> {
        sched
            .jobs()
            .map(|j| job_view(sched, j, Arc::from(sched.reason(j.id))))
            .collect()
    }

    /// One job's view, if the scheduler still has it.
    pub fn job(sched: &Sched, id: JobId) -> Option<JobView> {
        sched
            .job(id)
            .map(|j| job_view(sched, j, Arc::from(sched.reason(id))))
    }
}
