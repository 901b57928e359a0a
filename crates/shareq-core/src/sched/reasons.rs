//! Why a RUNNABLE job waits, in words an operator understands (SPEC §2), computed on
//! demand from the current state so that only the rows on screen pay for it.

use super::Sched;
use super::accounting::Noms;
use super::rejection::{LargerThanAnyNode, Rejection};
use super::state::{Phase, StopCause};
use crate::model::{JobId, Strategy};

impl Sched {
    /// `waiting for job 12 (qs2) to reach its minimum runtime (20s left)` when the job
    /// could preempt but every victim set it has needs a job still protected by its share's
    /// minimum runtime (SPEC §11). Named: the candidate whose protection ends first, the
    /// next moment the answer can change.
    fn protection_reason(&self, id: JobId, noms: &Noms) -> Option<String> {
        if !self.protections {
            return None; // no share protects its jobs: spare the two victim searches
        }
        let job = self.job(id)?;
        let (s, u, p) = (job.share, job.unit, job.priority);
        if job.quantity > self.shares[s].lanes[u].limit
            || self.find_victims(id, s, u, noms, false).is_none()
            || self.find_victims(id, s, u, noms, true).is_some()
        {
            return None;
        }
        let share = &self.shares[s];
        let reclaim = self
            .shares
            .iter()
            .enumerate()
            .filter(|(t, sh)| *t != s && sh.lanes[u].borrowed() > 0)
            .flat_map(|(_, sh)| sh.lanes[u].running.iter());
        let in_share = share
            .in_share
            .then(|| share.lanes[u].running.iter().filter(move |k| k.prio < p))
            .into_iter()
            .flatten();
        // Ties go to the candidate the walk would take first (victim order).
        let (until, _, v) = reclaim
            .chain(in_share)
            .filter(|k| self.is_protected(JobId(k.id)))
            .filter_map(|k| Some((self.protected_until(JobId(k.id))?, *k, JobId(k.id))))
            .min()?;
        let share = self.job(v).map_or("?", |vj| self.share_name(vj.share));
        // Rounded up to whole seconds: "0s left" would read as "now".
        let left = (until - self.now).max(0);
        let secs = (left + self.clock.ticks_per_second() - 1) / self.clock.ticks_per_second();
        Some(format!(
            "waiting for job {v} ({share}) to reach its minimum runtime ({} left)",
            crate::duration::human(secs * 1000)
        ))
    }

    /// The reservation's reasons (SPEC §3): `holds the a100 reservation: no other job
    /// borrows a100 until it starts (needs 8, 5 idle)` for the job holding it, and `a100 is
    /// reserved for job 12 (vision) since 14:02` for a borrower it holds back (with
    /// `nodes`: one that has no room on the other nodes).
    fn reservation_reason(&self, id: JobId, noms: &Noms) -> Option<String> {
        let job = self.job(id)?;
        let (u, n) = (job.unit, job.quantity);
        let r = self.units[u].reservation?;
        let unit = &self.units[u];
        if r.job == id {
            let idle = match r.node {
                Some(node) => self.node_room(u, node, noms, None),
                None => unit.free(),
            };
            return Some(format!(
                "holds the {name} reservation: no other job borrows {name} until it starts (needs {n}, {idle} idle)",
                name = unit.name,
                idle = idle.max(0)
            ));
        }
        let lane = &self.shares[job.share].lanes[u];
        if lane.usage + n <= lane.limit || !self.shares[job.share].borrows() {
            return None; // not a borrower
        }
        if let Some(node) = r.node
            && self.room_max_except(u, noms, Some(node)) >= n
        {
            return None; // room elsewhere: the reservation is not what holds it back
        }
        let holder = self.job(r.job)?;
        Some(format!(
            "{} is reserved for job {} ({}) since {}",
            unit.name,
            r.job,
            self.share_name(holder.share),
            self.clock_text(r.since)
        ))
    }

    /// An instant as an operator reads it ([`super::Clock::text`]). The core has no clock
    /// of its own: the driver says how far local time is from UTC (`Sched::set_utc_offset`).
    fn clock_text(&self, t: super::Time) -> String {
        self.clock.text(t, self.utc_offset_secs)
    }

    /// `needs 8 a100 on one node; the largest node has 4` (SPEC §10), for a job larger
    /// than any node's configured devices of its unit (with `nodes` only).
    pub(crate) fn larger_than_any_node(&self, u: usize, n: u32) -> Option<LargerThanAnyNode> {
        let unit = &self.units[u];
        (self.multi_node && n > unit.largest).then(|| LargerThanAnyNode {
            quantity: n,
            unit: unit.name.clone(),
            largest: unit.largest,
        })
    }

    /// The reason a job waits, or what it is doing when it is not waiting.
    pub fn reason(&self, id: JobId) -> String {
        let Some(job) = self.job(id) else {
            return "unknown job".to_string();
        };
        let (s, u, n) = (job.share, job.unit, job.quantity);
        let share = &self.shares[s];
        let lane = &share.lanes[u];
        let unit = &self.units[u];
        match &job.phase {
            Phase::Done => {
                return match &job.fail_reason {
                    Some(r) => r.to_string(),
                    None => job.state.as_str().to_string(),
                };
            }
            Phase::Holding { stopping, .. } => {
                return match stopping {
                    None if lane.usage > lane.limit => format!(
                        "running; {} of {}'s GPUs are borrowed",
                        lane.borrowed(),
                        share.name
                    ),
                    None => "running".to_string(),
                    Some((StopCause::Cancel, _)) => "cancelled: stopping".to_string(),
                    Some((StopCause::Timeout, _)) => "timed out: stopping".to_string(),
                    Some((StopCause::Preempt { by, reason }, _)) => match by {
                        Some(b) => format!("preempted by job {b} ({}): stopping", reason.as_str()),
                        None => format!("preempted ({}): stopping", reason.as_str()),
                    },
                };
            }
            Phase::Pending {
                nominated: Some(nom),
            } => {
                let releasing = self.victims_releasing(&nom.victims);
                if self.multi_node {
                    return format!(
                        "preempting: waiting for {releasing} job(s) to release their GPUs on {}",
                        self.node_name(nom.node)
                    );
                }
                return format!("preempting: waiting for {releasing} job(s) to release their GPUs");
            }
            Phase::Dependent => return self.pending_reason(job),
            Phase::Parent => {
                let counts = self.array_counts(id);
                return format!(
                    "array of {}: {}",
                    counts.iter().sum::<u32>(),
                    super::counts_text(&counts)
                );
            }
            Phase::Pending { nominated: None } => {}
        }
        if !share.present {
            return "quota share removed".to_string();
        }
        if !unit.present {
            return format!("capacity unit {} is no longer declared", unit.name);
        }
        if !lane.listed {
            return format!(
                "{} no longer lists {}: its jobs of that unit wait until a config lists it again",
                share.name, unit.name
            );
        }
        let max = self.max_request(s, u);
        if i64::from(n) > max {
            // The words of the rejection (SPEC §2): a job that can never fit is flagged.
            let why = Rejection::LimitExceeded {
                quantity: n,
                share: share.name.clone(),
                max,
            };
            return why.to_string();
        }
        if let Some(why) = self.larger_than_any_node(u, n) {
            return why.to_string();
        }
        if let Some(why) = self.user_limit_reason(job) {
            return why;
        }
        if let Some(b) = lane.block()
            && b < self.qkey(job)
        {
            return format!(
                "behind job {} in {} ({}), which is taking GPUs back",
                b.id, share.name, unit.name
            );
        }
        let noms = self.nominated_totals();
        if let Some(why) = self.reservation_reason(id, &noms) {
            return why;
        }
        if let Some(why) = self.protection_reason(id, &noms) {
            return why;
        }
        let free = unit.free().max(0);
        if self.multi_node {
            let within = lane.usage + n <= lane.limit;
            let counts = if within {
                self.available_guaranteed(s, u, self.qkey(job), None, &noms)
            } else if share.strategy == Strategy::LendAndBorrow
                && lane.cap.is_none_or(|c| lane.usage + n <= lane.limit + c)
            {
                self.available_borrowing(s, u, None, &noms)
            } else {
                -1
            };
            let room = self.room_max(u, &noms);
            if counts >= i64::from(n) && room < n {
                return format!(
                    "FRAGMENTED: {free} {} free, at most {room} on one node",
                    unit.name
                );
            }
        }
        if lane.usage + n <= lane.limit {
            if unit.oversubscribed() {
                // Position-dependent: say what the rule is, not a count that differs per job.
                let over = format!(
                    "{} is oversubscribed (guarantees {} > {} usable GPUs), so guaranteed jobs start in global order",
                    unit.name, unit.guaranteed, unit.usable
                );
                if free >= i64::from(n) {
                    return format!(
                        "waiting for free GPUs: needs {n}, {free} free; {over}, and earlier jobs of other shares or GPUs being freed for a preemption come first"
                    );
                }
                return format!(
                    "waiting for free GPUs: needs {n}, {free} free of {} ({} in use); {over}: a guarantee can wait for capacity",
                    unit.usable, unit.used
                );
            }
            let avail = self
                .available_guaranteed(s, u, self.qkey(job), None, &noms)
                .max(0);
            if free >= i64::from(n) {
                return format!(
                    "waiting for free GPUs: needs {n}, {avail} available ({} held back for other shares' queued or reserved work)",
                    (free - avail).max(0)
                );
            }
            return format!(
                "waiting for free GPUs: needs {n}, {free} free of {} ({} in use, others are borrowed or releasing)",
                unit.usable, unit.used
            );
        }
        let avail = self.available_borrowing(s, u, None, &noms).max(0);
        let in_use = format!(
            "waiting for {} capacity ({}/{} in use)",
            share.name, lane.usage, lane.limit
        );
        match share.strategy {
            Strategy::LendAndBorrow => {
                if let Some(cap) = lane.cap
                    && lane.usage + n > lane.limit + cap
                {
                    return format!("{in_use}; borrow cap reached ({cap})");
                }
                let reserve: Vec<String> = self
                    .share_order
                    .iter()
                    .map(|&r| &self.shares[r])
                    .filter(|r| {
                        r.present && r.strategy == Strategy::Reserve && r.lanes[u].idle() > 0
                    })
                    .map(|r| format!("{} reserves {}", r.name, r.lanes[u].idle()))
                    .collect();
                if reserve.is_empty() {
                    format!("no idle capacity to borrow (needs {n}, {avail} available)")
                } else {
                    format!(
                        "no idle capacity to borrow (needs {n}, {avail} available; {})",
                        reserve.join(", ")
                    )
                }
            }
            _ => in_use,
        }
    }
}
