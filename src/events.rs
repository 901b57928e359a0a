//! The decision stream (`shareq events`): each decision of the live scheduler as one
//! line in the replay's format (SPEC §6: `t`, `event`, then the replay's fields), followed
//! by what only the live scheduler knows: the job's `id`, its submitter (`user`), the
//! preemptor's id (`by_id`), a gang victim's places on a `preempted` line (`devices` per
//! node then `nodes`, as a gang's `started` line has them: SPEC §16), who cancelled a job
//! (`cancelled_by`), the work lost by the preemption a `requeued` or `failed` line ends
//! (`lostGpuSeconds`, with `lostGpus`, `lastSave` and `saved`: SPEC §14), a kill from
//! outside in words (`detail`: `killed by SIGKILL (not by shareq)`) and the line's sequence
//! number (`seq`). `t` is the Unix time in seconds with milliseconds.
//!
//! The lines are built when a batch is recorded (`store::Store::record`, in the same
//! transaction as the decisions), kept in the database's `events` table for the past, and
//! fanned out to followers (`server::runtime::events`) once the batch is committed.
//!
//! Every field is one that SPEC §9 lets anyone read (ids, names, shares, users, states,
//! reasons, devices, times): never a job's command or environment.

use crate::replay::{event_name, format_event};
use crate::sched::{Event, Sched};
use serde::{Deserialize, Serialize};

/// One recorded decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventLine {
    /// The line's place in the stream (0 until stored).
    pub seq: u64,
    /// Milliseconds since the epoch.
    pub at: i64,
    /// `submitted`, `started`, `preempted`, ... (the replay's `event`).
    pub event: String,
    /// The job's id, for job events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<String>,
    /// The job's submitter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// When the job was submitted (ms): what `report` measures waits from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted: Option<i64>,
    /// GPUs of a `started` line (a gang's on all its nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantity: Option<u32>,
    /// The line without `seq` (see [`EventLine::json`]).
    pub line: String,
}

impl EventLine {
    /// The line as `events --json` prints it: the stored line with its keys' camelCase
    /// names beside the old ones ([`crate::wire::line`]) and its `seq` appended.
    pub fn json(&self) -> String {
        let line = crate::wire::line(&self.line);
        let body = line.strip_suffix('}').unwrap_or(&line);
        format!("{body},\"seq\":{}}}", self.seq)
    }

    /// The line as JSON, for reading fields.
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(&self.line).unwrap_or(serde_json::Value::Null)
    }
}

/// Every event name, for `--on` and the docs.
pub const EVENT_NAMES: &[&str] = &[
    "submitted",
    "rejected",
    "started",
    "preempted",
    "requeued",
    "failed",
    "cancelled",
    "timed_out",
    "over_memory",
    "reprioritized",
    "succeeded",
    "released",
    "config_applied",
    "config_rejected",
];

/// `t` of a live line: epoch seconds with milliseconds.
pub fn seconds(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// The lines of a batch of decisions made at `now` (ms), read against the scheduler as it
/// stands after them (finished jobs are still in its tables then).
pub fn lines(now: i64, events: &[Event], sched: &Sched) -> Vec<EventLine> {
    let t = seconds(now);
    events
        .iter()
        .map(|ev| {
            let mut line = String::with_capacity(192);
            format_event(sched, ev, &t, &mut line);
            line.pop(); // the closing brace: the live fields follow
            let job_id = job_of(ev);
            let job = job_id.and_then(|id| sched.job(id));
            let user = job.and_then(|j| j.spec.submitter.as_ref().map(|s| s.name.clone()));
            if let Some(id) = job_id {
                line.push_str(&format!(",\"id\":{}", id.0));
            }
            if let Some(u) = &user {
                line.push_str(",\"user\":");
                line.push_str(&serde_json::to_string(u).unwrap_or_default());
            }
            if let Event::Failed {
                reason: crate::sched::FailReason::DependencyFailed { job: dep, label },
                ..
            } = ev
            {
                line.push_str(&format!(",\"dependency_id\":{}", dep.0));
                line.push_str(",\"dependency_label\":");
                line.push_str(&serde_json::to_string(label).unwrap_or_default());
            }
            // A kill from outside says so in words, as `jobs` does.
            if let Event::Failed {
                reason: why @ crate::sched::FailReason::Signalled(_),
                ..
            } = ev
            {
                line.push_str(",\"detail\":");
                let words = why.to_string();
                let words = words.strip_prefix("NON_ZERO_EXIT: ").unwrap_or(&words);
                line.push_str(&serde_json::to_string(words).unwrap_or_default());
            }
            if let Some((parent, index)) = job_id.and_then(|id| sched.array_of(id)) {
                line.push_str(&format!(",\"parent\":{},\"arrayIndex\":{index}", parent.0));
            }
            if let Event::Preempted { by: Some(b), .. } = ev {
                line.push_str(&format!(",\"by_id\":{}", b.0));
            }
            // A gang victim is stopped on every node (SPEC §16): they are named as its
            // `started` line names them, devices per node then the nodes.
            if let (Event::Preempted { .. }, Some(j)) = (ev, job)
                && j.is_gang()
            {
                gang_fields(&mut line, &sched.job_places(j));
            }
            if let Event::Requeued { lost: Some(l), .. } | Event::Failed { lost: Some(l), .. } = ev
            {
                lost_fields(&mut line, l, sched.ticks_per_second());
            }
            // Who cancelled: the user the job's end names (`CANCELLED: by bob`).
            if let (Event::Cancelled { .. }, Some(j)) = (ev, job)
                && let Some(crate::sched::FailReason::Cancelled(by)) = &j.fail_reason
            {
                line.push_str(",\"cancelled_by\":");
                line.push_str(&serde_json::to_string(by).unwrap_or_default());
            }
            if let Event::Reprioritized { by: Some(by), .. } = ev {
                line.push_str(",\"reprioritized_by\":");
                line.push_str(&serde_json::to_string(by).unwrap_or_default());
            }
            line.push('}');
            let share = match ev {
                Event::Rejected { share, .. } => Some(share.clone()),
                _ => job.map(|j| sched.share_name(j.share).to_string()),
            };
            EventLine {
                seq: 0,
                at: now,
                event: event_name(ev).to_string(),
                job: job_id.map(|j| j.0),
                share,
                user,
                submitted: job.map(|j| j.submitted),
                quantity: ev.devices_started(),
                line,
            }
        })
        .collect()
}

/// The work lost by the preemption a line ends (SPEC §14), in seconds of a clock of `tps`
/// ticks a second (the live clock's milliseconds): `lostGpuSeconds` (its GPUs × the span),
/// `lostGpus`, `lastSave` (epoch seconds, the attempt's last checkpoint report or its
/// start) and `saved` (it was a report).
fn lost_fields(line: &mut String, l: &crate::sched::Lost, tps: i64) {
    let secs = |ticks: i64| match tps {
        1000 => seconds(ticks),
        1 => ticks.to_string(),
        _ => (ticks as f64 / tps as f64).to_string(),
    };
    line.push_str(&format!(
        ",\"lostGpuSeconds\":{},\"lostGpus\":{},\"lastSave\":{},\"saved\":{}",
        secs(l.gpu_ticks()),
        l.gpus,
        secs(l.since),
        l.checkpointed
    ));
}

/// `"devices":[[0,1],[0,1]],"nodes":["gpu1","gpu2"]`: a gang's places, in rank order.
fn gang_fields(line: &mut String, places: &[(String, Vec<u32>)]) {
    let devices: Vec<&Vec<u32>> = places.iter().map(|(_, d)| d).collect();
    let nodes: Vec<&String> = places.iter().map(|(n, _)| n).collect();
    line.push_str(",\"devices\":");
    line.push_str(&serde_json::to_string(&devices).unwrap_or_default());
    line.push_str(",\"nodes\":");
    line.push_str(&serde_json::to_string(&nodes).unwrap_or_default());
}

/// The job an event is about.
pub fn job_of(ev: &Event) -> Option<crate::model::JobId> {
    match *ev {
        Event::Submitted { job }
        | Event::Started { job, .. }
        | Event::Preempted { job, .. }
        | Event::Requeued { job, .. }
        | Event::Failed { job, .. }
        | Event::Cancelled { job, .. }
        | Event::TimedOut { job }
        | Event::OverMemory { job, .. }
        | Event::Reprioritized { job, .. }
        | Event::Succeeded { job }
        | Event::Released { job } => Some(job),
        Event::Rejected { .. } | Event::ConfigApplied | Event::ConfigRejected { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_keep_milliseconds() {
        assert_eq!(seconds(1_764_610_000_123), "1764610000.123");
        assert_eq!(seconds(5), "0.005");
    }

    #[test]
    fn json_appends_the_sequence_number() {
        let l = EventLine {
            seq: 7,
            at: 0,
            event: "config_applied".into(),
            job: None,
            share: None,
            user: None,
            submitted: None,
            quantity: None,
            line: "{\"t\":0.000,\"event\":\"config_applied\"}".into(),
        };
        let v: serde_json::Value = serde_json::from_str(&l.json()).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["event"], "config_applied");
    }

    /// A job over its slice (SPEC §15) is an `over_memory` line with what it held.
    #[test]
    fn over_memory_is_a_line_of_the_stream() {
        use crate::config::{parse_documents, validate};
        use crate::model::{JobSpec, UnitCapacity};
        use crate::sched::Clock;
        let yaml = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: mem, maxCapacity: 80, devices: {fake: 1}, slicing: {memoryGiB: 80, overuse: STOP}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: mem, maxCapacity: 80}]
resourceSharingConfiguration: {strategy: LEND}
";
        let cfg = validate(parse_documents(yaml, None).unwrap()).unwrap();
        let mut s = Sched::new(&cfg, &UnitCapacity::simulated(&cfg), Clock::Wall);
        let id = s.submit(JobSpec::new("j", "a", 20, 0), 0).unwrap();
        s.pass(0);
        s.take_events();
        s.over_memory(id, 27, 20, true, 1000);
        let ls = lines(1000, &s.take_events(), &s);
        assert_eq!(ls.len(), 1);
        assert_eq!(ls[0].event, "over_memory");
        assert!(EVENT_NAMES.contains(&ls[0].event.as_str()));
        assert_eq!(ls[0].job, Some(id.0));
        assert_eq!(ls[0].share.as_deref(), Some("a"));
        let v = ls[0].value();
        assert_eq!(
            (v["heldGiB"].as_u64(), v["ofGiB"].as_u64()),
            (Some(27), Some(20))
        );
        assert_eq!(v["stop"], true);
    }
}
