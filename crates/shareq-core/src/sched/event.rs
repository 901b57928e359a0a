//! What the scheduler decides and reports: the output side of the state machine.
//! The replay prints these as JSON lines; the live runtime persists and carries them out.

use super::state::{FailReason, Lost, PreemptReason};
use crate::model::JobId;

impl Event {
    /// The devices a `Started` names on all its nodes (a gang's on each, SPEC §16).
    pub fn devices_started(&self) -> Option<u32> {
        match self {
            Event::Started { devices, more, .. } => {
                Some(devices.len() as u32 + more.iter().map(|(_, d)| d.len() as u32).sum::<u32>())
            }
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Submitted {
        job: JobId,
    },
    /// A submission refused at the door; no job was created.
    Rejected {
        name: String,
        share: String,
        error: String,
    },
    /// Start the job on these devices. `borrowed`: how many of its GPUs are beyond its
    /// share's limit. `node`: the node the devices are on, when the config lists `nodes`.
    Started {
        job: JobId,
        node: Option<String>,
        devices: Vec<u32>,
        borrowed: u32,
        /// A gang's other nodes and their devices (SPEC §16), after `node` in node order:
        /// `node`/`devices` are rank 0's. Empty for a plain job.
        more: Vec<(String, Vec<u32>)>,
    },
    /// Stop the victim (SIGTERM, grace, SIGKILL); its GPUs stay in use until released.
    Preempted {
        job: JobId,
        by: Option<JobId>,
        reason: PreemptReason,
    },
    /// Back to RUNNABLE after a preemption or a failed attempt that will be retried.
    /// `lost`: the work the preemption it ends lost (SPEC §14); `None` after a failed
    /// attempt.
    Requeued {
        job: JobId,
        lost: Option<Lost>,
    },
    /// `lost`: set when a preemption ends the job (`PREEMPTION_RETRIES_EXHAUSTED`).
    Failed {
        job: JobId,
        reason: FailReason,
        lost: Option<Lost>,
    },
    /// Cancelled; `stop` when processes must now be stopped: it was running, or it was
    /// in a live preemption's notice, which the cancel cuts short (SIGTERM now).
    Cancelled {
        job: JobId,
        stop: bool,
    },
    /// A running job passed its timeout and must be stopped.
    TimedOut {
        job: JobId,
    },
    /// A sliced job's processes held `held_gib` GiB of its `of_gib` on two samples in a row
    /// (SPEC §15); `stop` when its unit says `overuse: STOP` and it must now be stopped.
    OverMemory {
        job: JobId,
        held_gib: u64,
        of_gib: u64,
        stop: bool,
    },
    Reprioritized {
        job: JobId,
        priority: u32,
        /// Who asked, when a person did (the live scheduler's socket or console).
        by: Option<String>,
    },
    Succeeded {
        job: JobId,
    },
    /// A PENDING job's dependencies have all succeeded: it is RUNNABLE now (SPEC §13).
    Released {
        job: JobId,
    },
    ConfigApplied,
    ConfigRejected {
        error: String,
    },
}
