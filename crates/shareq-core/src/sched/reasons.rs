//! Why a RUNNABLE job waits, in words an operator understands (SPEC §2), computed on
//! demand from the current state so that only the rows on screen pay for it.

use super::Sched;
use super::accounting::Noms;
use super::keys::Time;
use super::rejection::{LargerThanAnyNode, Rejection};
use super::state::{Job, Nomination, Phase, StopCause};
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
        if r.node.is_some() && self.room_max_except(u, noms, &self.reserved_nodes_of_unit(u)) >= n {
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
    fn clock_text(&self, t: Time) -> String {
        self.clock.text(t, self.utc_offset_secs)
    }

    /// `needs 8 a100 on one node; the largest node has 4` (SPEC §10), for a job larger
    /// than any node's configured devices of its unit (with `nodes` only).
    pub(crate) fn larger_than_any_node(&self, u: usize, n: u32) -> Option<LargerThanAnyNode> {
        let unit = &self.units[u];
        if let Some(gib) = unit.slice {
            return (n > gib).then(|| LargerThanAnyNode {
                quantity: n,
                unit: unit.name.clone(),
                largest: gib,
                sliced: true,
            });
        }
        (self.multi_node && n > unit.largest).then(|| LargerThanAnyNode {
            quantity: n,
            unit: unit.name.clone(),
            largest: unit.largest,
            sliced: false,
        })
    }

    /// A gang more nodes than the environment could ever hold it on (SPEC §16): `needs 4
    /// nodes with 8 a100; 3 nodes have 8`. `None` for a plain job.
    pub(crate) fn gang_never_fits(&self, u: usize, q: u32, nodes: u32) -> Option<String> {
        if nodes < 2 {
            return None;
        }
        let unit = &self.units[u];
        let have = unit.slots.iter().filter(|s| s.configured >= q).count();
        (have < nodes as usize).then(|| {
            let (count, verb) = match have {
                1 => ("1 node".to_string(), "has"),
                k => (format!("{k} nodes"), "have"),
            };
            format!(
                "needs {nodes} nodes with {q} {}; {count} {verb} {q}",
                unit.name
            )
        })
    }

    /// The reason a job waits, or what it is doing when it is not waiting.
    pub fn reason(&self, id: JobId) -> String {
        let Some(job) = self.job(id) else {
            return "unknown job".to_string();
        };
        match &job.phase {
            Phase::Done => ended_reason(job),
            Phase::Holding { stopping, .. } => self.holding_reason(job, stopping),
            Phase::Pending {
                nominated: Some(nom),
            } => self.nominated_reason(job.unit, nom),
            Phase::Dependent => self.pending_reason(job),
            Phase::Parent => self.array_reason(id),
            Phase::Pending { nominated: None } => self.runnable_reason(id, job),
        }
    }

    /// What a job holding GPUs is doing: running (on borrowed GPUs or not), or why it is
    /// being stopped.
    fn holding_reason(&self, job: &Job, stopping: &Option<(StopCause, Time)>) -> String {
        let share = &self.shares[job.share];
        let lane = &share.lanes[job.unit];
        match stopping {
            None if lane.usage > lane.limit => format!(
                "running; {} of {}'s GPUs are borrowed",
                lane.borrowed(),
                share.name
            ),
            None => "running".to_string(),
            Some((StopCause::Cancel, _)) => "cancelled: stopping".to_string(),
            Some((StopCause::Timeout, _)) => "timed out: stopping".to_string(),
            Some((StopCause::OverMemory, _)) => "over its GPU memory: stopping".to_string(),
            Some((StopCause::Preempt { by, reason }, _)) => match by {
                Some(b) => format!("preempted by job {b} ({}): stopping", reason.as_str()),
                None => format!("preempted ({}): stopping", reason.as_str()),
            },
        }
    }

    /// A nominated job (SPEC §4.4): how many of its victims are still releasing GPUs, and
    /// on which node with `nodes`.
    fn nominated_reason(&self, u: usize, nom: &Nomination) -> String {
        let releasing = self.victims_releasing(&nom.victims);
        if self.slotted(u) {
            return format!(
                "preempting: waiting for {releasing} job(s) to release their GPUs on {}",
                self.slot_name(u, nom.slot)
            );
        }
        format!("preempting: waiting for {releasing} job(s) to release their GPUs")
    }

    /// An array's parent (SPEC §13): its size and how many children are in each state.
    fn array_reason(&self, id: JobId) -> String {
        let counts = self.array_counts(id);
        format!(
            "array of {}: {}",
            counts.iter().sum::<u32>(),
            super::counts_text(&counts)
        )
    }

    /// Why a RUNNABLE job that is not nominated waits: the first that applies of the
    /// config's, its userLimit's, its queue's, the reservation's, the minimum runtime's and
    /// capacity's reasons.
    fn runnable_reason(&self, id: JobId, job: &Job) -> String {
        if let Some(why) = self.config_reason(job) {
            return why;
        }
        if let Some(why) = self.withheld_reason(job) {
            return why;
        }
        if let Some(why) = self.user_limit_reason(job) {
            return why;
        }
        if let Some(why) = self.blocked_reason(job) {
            return why;
        }
        let noms = self.nominated_totals();
        if let Some(why) = self.reservation_reason(id, &noms) {
            return why;
        }
        if let Some(why) = self.protection_reason(id, &noms) {
            return why;
        }
        if let Some(why) = self.fragmented_reason(job, &noms) {
            return why;
        }
        let lane = &self.shares[job.share].lanes[job.unit];
        if lane.usage + job.quantity <= lane.limit {
            self.guaranteed_wait_reason(job, &noms)
        } else {
            self.borrow_wait_reason(job, &noms)
        }
    }

    /// The config's reasons (SPEC §2, §5, §10): the share removed, the unit no longer
    /// declared or no longer listed by the share, a request over what the share may ever
    /// hold (`..._LIMIT_EXCEEDED`), or larger than any node.
    fn config_reason(&self, job: &Job) -> Option<String> {
        let (s, u, n) = (job.share, job.unit, job.quantity);
        let share = &self.shares[s];
        let unit = &self.units[u];
        if !share.present {
            return Some("quota share removed".to_string());
        }
        if !unit.present {
            return Some(format!("capacity unit {} is no longer declared", unit.name));
        }
        if !share.lanes[u].listed {
            return Some(format!(
                "{} no longer lists {}: its jobs of that unit wait until a config lists it again",
                share.name, unit.name
            ));
        }
        if unit.slice.is_some()
            && let Some(why) = self.larger_than_any_node(u, n)
        {
            return Some(why.to_string()); // before any count, as at submission (SPEC §15)
        }
        let max = self.max_request(s, u);
        if i64::from(n) > max {
            // The words of the rejection (SPEC §2): a job that can never fit is flagged.
            let why = Rejection::LimitExceeded {
                quantity: n,
                share: share.name.clone(),
                max,
            };
            return Some(why.to_string());
        }
        if let Some(why) = self.larger_than_any_node(u, job.per_node()) {
            return Some(why.to_string());
        }
        self.gang_never_fits(u, job.per_node(), job.nodes)
    }

    /// `waits for a100 GPU 0: a process of an earlier scheduler holds it (…)`: the job
    /// asks for more than its share could hold without the devices withheld from this
    /// scheduler (SPEC §8); it starts once they are given back.
    fn withheld_reason(&self, job: &Job) -> Option<String> {
        let unit = &self.units[job.unit];
        let ((_, device), why) = unit.withheld.iter().next()?;
        let now = self.max_request_of(job.share, job.unit, unit.usable);
        (i64::from(job.quantity) > now).then(|| {
            let more = match unit.withheld.len() {
                1 => String::new(),
                k => format!(" (and {} more)", k - 1),
            };
            format!("waits for {} GPU {device}{more}: {why}", unit.name)
        })
    }

    /// The userLimit reason of a job its user's holdings keep waiting (SPEC §12), if so.
    pub(crate) fn user_limit_reason(&self, j: &Job) -> Option<String> {
        let share = &self.shares[j.share];
        let limit = share.users.user_limit?;
        let held = share.lanes[j.unit].queue.held(j.bucket);
        (held + j.quantity > limit).then(|| {
            format!(
                "{} holds {held}/{limit} of {}'s {} (userLimit)",
                share.users.name(j.user),
                share.name,
                self.units[j.unit].name
            )
        })
    }

    /// `behind job 12 in vision (a100), which is taking GPUs back`: a nominated job ahead
    /// of this one in its lane blocks the lane's later jobs (SPEC §4.4).
    fn blocked_reason(&self, job: &Job) -> Option<String> {
        let share = &self.shares[job.share];
        let b = share.lanes[job.unit].block()?;
        (b < self.qkey(job)).then(|| {
            format!(
                "behind job {} in {} ({}), which is taking GPUs back",
                b.id, share.name, self.units[job.unit].name
            )
        })
    }

    /// `FRAGMENTED: 3 a100 free, at most 2 on one node` (SPEC §10): with `nodes`, enough
    /// GPUs are available to the job but no one node has room for it.
    fn fragmented_reason(&self, job: &Job, noms: &Noms) -> Option<String> {
        if !self.slotted(job.unit) {
            return None;
        }
        let (s, u, n) = (job.share, job.unit, job.quantity);
        let share = &self.shares[s];
        let lane = &share.lanes[u];
        let unit = &self.units[u];
        let within = lane.usage + n <= lane.limit;
        let counts = if within {
            self.available_guaranteed(s, u, self.qkey(job), None, noms)
        } else if share.strategy == Strategy::LendAndBorrow
            && lane.cap.is_none_or(|c| lane.usage + n <= lane.limit + c)
        {
            self.available_borrowing(s, u, None, noms)
        } else {
            -1
        };
        if job.is_gang() {
            // `FRAGMENTED: needs 2 nodes with 4 a100 free, 1 has` (SPEC §16).
            let q = job.per_node();
            let fits = self
                .gang_fit(u, q, job.nodes, noms, Some(job.id), &[], &[])
                .is_some();
            return (counts >= i64::from(n) && !fits).then(|| {
                let have = self.nodes_with_room(u, q, &[]);
                format!(
                    "FRAGMENTED: needs {} nodes with {q} {} free, {have} {}",
                    job.nodes,
                    unit.name,
                    if have == 1 { "has" } else { "have" }
                )
            });
        }
        let room = self.room_max(u, noms);
        (counts >= i64::from(n) && room < n).then(|| match unit.slice {
            // `FRAGMENTED: 30 GiB free, at most 18 on one a100-mem device` (SPEC §15).
            Some(_) => format!(
                "FRAGMENTED: {} GiB free, at most {room} on one {} device",
                unit.free().max(0),
                unit.name
            ),
            None => format!(
                "FRAGMENTED: {} {} free, at most {room} on one node",
                unit.free().max(0),
                unit.name
            ),
        })
    }

    /// `waiting for free GPUs: …` for a job within its share's guarantee (SPEC §3): too few
    /// free GPUs, GPUs held back for other shares, or an oversubscribed unit's global order.
    fn guaranteed_wait_reason(&self, job: &Job, noms: &Noms) -> String {
        let (s, u, n) = (job.share, job.unit, job.quantity);
        let unit = &self.units[u];
        let free = unit.free().max(0);
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
            .available_guaranteed(s, u, self.qkey(job), None, noms)
            .max(0);
        if free >= i64::from(n) {
            return format!(
                "waiting for free GPUs: needs {n}, {avail} available ({} held back for other shares' queued or reserved work)",
                (free - avail).max(0)
            );
        }
        format!(
            "waiting for free GPUs: needs {n}, {free} free of {} ({} in use, others are borrowed or releasing)",
            unit.usable, unit.used
        )
    }

    /// `waiting for qs1 capacity (2/2 in use)` for a job beyond its share's guarantee, and
    /// for a share that borrows, why it cannot (borrow cap, no idle capacity, RESERVE
    /// shares keeping theirs) (SPEC §1.2, §2).
    fn borrow_wait_reason(&self, job: &Job, noms: &Noms) -> String {
        let (s, u, n) = (job.share, job.unit, job.quantity);
        let share = &self.shares[s];
        let lane = &share.lanes[u];
        let in_use = format!(
            "waiting for {} capacity ({}/{} in use)",
            share.name, lane.usage, lane.limit
        );
        if share.strategy != Strategy::LendAndBorrow {
            return in_use;
        }
        if let Some(cap) = lane.cap
            && lane.usage + n > lane.limit + cap
        {
            return format!("{in_use}; borrow cap reached ({cap})");
        }
        let avail = self.available_borrowing(s, u, None, noms).max(0);
        let reserve: Vec<String> = self
            .share_order
            .iter()
            .map(|&r| &self.shares[r])
            .filter(|r| r.present && r.strategy == Strategy::Reserve && r.lanes[u].idle() > 0)
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
}

/// What an ended job's reason says: why it FAILED, or SUCCEEDED.
fn ended_reason(job: &Job) -> String {
    match &job.fail_reason {
        Some(r) => r.to_string(),
        None => job.state.as_str().to_string(),
    }
}
