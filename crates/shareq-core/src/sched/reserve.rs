//! Reservation for big jobs (SPEC §3): a job larger than its share's guarantee that has
//! been the first pending job of its unit in its share's queue for `reserveAfterSeconds`
//! takes the unit's reservation (one per unit; the earliest qualifying job, ties in global
//! order). While a unit is reserved, step 2 starts no other job of it (with `nodes`: none
//! on the reserved node, chosen when the reservation is taken). Steps 1 and 3 go on.
//!
//! A job that started on the reservation and is preempted takes it back as soon as it is
//! first again and the unit is free of any other reservation, without waiting anew, before
//! the jobs that qualified meanwhile; a job its userLimit holds back neither takes nor keeps
//! it.
//!
//! The state behind it is small: per lane, its first pending job and since when it has
//! been first (judged at every round of the pass loop), per job whether its latest attempt
//! started on the reservation, and per unit the reservation.
//!
//! **Backfill** under a reservation is a study (docs/SEMANTICS.md), off by default and in
//! no SPEC text: with [`Sched::set_backfill`], step 2 may start another job on a reserved
//! unit (without `nodes`, not sliced) when a [`RunGuess`] says it ends before the reserving
//! job would have its GPUs, or when it takes only GPUs that job would not need then.

use super::Sched;
use super::accounting::Noms;
use super::keys::{QKey, ShareIx, SlotIx, Time, UnitIx};
use super::state::Job;
use crate::model::JobId;
use std::ops::Bound::{self, Excluded};
use std::sync::Arc;

/// A lane's first pending job as a claimant of its unit's reservation: from when it
/// qualifies, and whether it takes the reservation back (it started on it and was
/// preempted, SPEC §3).
#[derive(Debug, Clone, Copy)]
struct Claim {
    job: JobId,
    at: Time,
    back: bool,
}

/// A unit's reservation: the job holding it, when it was taken, and with `nodes` (or on
/// a sliced unit, SPEC §15) the slot it holds: a node, or one sliced device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    pub job: JobId,
    pub since: Time,
    pub node: Option<SlotIx>,
}

/// What a backfill may know of when a job ends: no more than the live scheduler knows
/// (a declared timeout or runtime, a prediction from past attempts), never the true end.
pub trait RunGuess: Send + Sync {
    /// Ticks from `now` until the current attempt of `job` ends (a job holding GPUs), or
    /// how long its next attempt runs (a pending job); `None`: unknown.
    fn remaining(&self, sched: &Sched, job: &Job, now: Time) -> Option<Time>;
}

/// Whether, and by what guess, step 2 backfills a reserved unit (off by default).
#[derive(Clone, Default)]
pub enum Backfill {
    /// A reserved unit lends nothing to other borrowers (SPEC §3).
    #[default]
    Off,
    /// Jobs guessed to end in time (or fitting in what the reserving job leaves) may start.
    By(Arc<dyn RunGuess>),
}

impl std::fmt::Debug for Backfill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backfill::Off => "Off",
            Backfill::By(_) => "By(..)",
        })
    }
}

/// The guess from what a job declares: the earlier of its `timeoutSeconds` and its
/// `expectedRuntimeSeconds` (while it has run less), minus what it has run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Declared;

impl RunGuess for Declared {
    fn remaining(&self, sched: &Sched, job: &Job, now: Time) -> Option<Time> {
        let tps = sched.ticks_per_second();
        let ran = job.started_at().map_or(0, |t0| (now - t0).max(0));
        let ticks = |secs: u64| {
            i64::try_from(secs)
                .unwrap_or(i64::MAX / 4)
                .saturating_mul(tps)
        };
        let timeout = job.spec.timeout_seconds.map(ticks);
        let expected = job
            .spec
            .expected_runtime_seconds
            .map(ticks)
            .filter(|&e| e > ran);
        let total = match (timeout, expected) {
            (Some(t), Some(e)) => t.min(e),
            (t, e) => t.or(e)?,
        };
        Some((total - ran).max(0))
    }
}

/// How many jobs of one lane a step-2 sweep tries for a backfill before giving up on the
/// lane (as Slurm's `bf_max_job_test`): keeps a pass's work bounded by decisions.
const BACKFILL_DEPTH: usize = 64;

/// A reserved unit's room for backfill at `now`: with the running attempts ending as
/// guessed, the reserving job would have its GPUs at `until`, with `extra` GPUs to spare.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    now: Time,
    until: Time,
    extra: i64,
}

impl Sched {
    /// Backfill under reservations (a study, off by default: docs/SEMANTICS.md).
    pub fn set_backfill(&mut self, backfill: Backfill) {
        self.backfill = backfill;
    }

    /// Per unit, the room for backfill under its reservation (empty when backfill is off).
    pub(crate) fn backfill_windows(&self, now: Time, noms: &Noms) -> Vec<Option<Window>> {
        let Backfill::By(guess) = &self.backfill else {
            return Vec::new();
        };
        (0..self.units.len())
            .map(|u| self.backfill_window(u, now, noms, guess.as_ref()))
            .collect()
    }

    /// When the reserving job of unit u would have its GPUs were every attempt holding u
    /// to end as guessed (one being stopped: after the grace period; one of unknown end:
    /// never), and how many GPUs would be left over then. `None`: no backfill (u is not
    /// reserved, or reserved on a node or a sliced device, or the known ends never free
    /// enough).
    fn backfill_window(
        &self,
        u: UnitIx,
        now: Time,
        noms: &Noms,
        guess: &dyn RunGuess,
    ) -> Option<Window> {
        let r = self.units[u].reservation?;
        if r.node.is_some() || self.slotted(u) {
            return None;
        }
        let holder = self.job(r.job)?;
        let avail = self
            .available_borrowing(holder.share, u, Some(r.job), noms)
            .max(0);
        let need = i64::from(holder.quantity) - avail;
        if need <= 0 {
            return None;
        }
        let mut ids: Vec<JobId> = self.units[u].held.values().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        let grace = i64::from(self.grace).saturating_mul(self.ticks_per_second());
        let mut ends: Vec<(Time, i64)> = ids
            .into_iter()
            .filter_map(|id| {
                let j = self.job(id)?;
                let end = match j.stopping_since() {
                    Some(since) => since.saturating_add(grace),
                    None => now.saturating_add(guess.remaining(self, j, now)?),
                };
                Some((end.max(now), i64::from(j.quantity)))
            })
            .collect();
        ends.sort_unstable();
        let mut freed = 0i64;
        let mut i = 0;
        while i < ends.len() {
            let t = ends[i].0;
            while i < ends.len() && ends[i].0 == t {
                freed += ends[i].1;
                i += 1;
            }
            if freed >= need {
                return Some(Window {
                    now,
                    until: t,
                    extra: freed - need,
                });
            }
        }
        None
    }

    /// May `job` start on the reserved room of window `w`: it is guessed to end by the time
    /// the reserving job would start, or it takes no more than the GPUs left over then?
    fn may_backfill(&self, w: &Window, job: JobId) -> bool {
        let (Backfill::By(guess), Some(j)) = (&self.backfill, self.job(job)) else {
            return false;
        };
        i64::from(j.quantity) <= w.extra
            || guess
                .remaining(self, j, w.now)
                .is_some_and(|d| w.now.saturating_add(d) <= w.until)
    }

    /// Step 2 on a reserved unit u with backfill: the first job of lane (s,u) at or after
    /// `from` whose quantity lies in `qty` and that may start on the reserved room (at most
    /// [`BACKFILL_DEPTH`] tried).
    pub(crate) fn backfill_in_lane(
        &self,
        s: ShareIx,
        u: UnitIx,
        qty: (Bound<u32>, Bound<u32>),
        from: Bound<QKey>,
        w: &Window,
    ) -> Option<QKey> {
        let mut from = from;
        for _ in 0..BACKFILL_DEPTH {
            let k = self.first_in_lane(s, u, qty, from)?;
            if self.may_backfill(w, k.job()) {
                return Some(k);
            }
            from = Excluded(k);
        }
        None
    }

    /// Would the first pending job of lane (s,u) qualify for a reservation once it has
    /// been first long enough: it asks for more than its share's guarantee, its share may
    /// borrow, and its request can be met at all (no `..._LIMIT_EXCEEDED`, not larger than
    /// every node), and its userLimit does not hold it back? Returns its claim: the instant
    /// it qualifies is `reserveAfterSeconds` after it became first, or that very moment for
    /// a job whose preempted attempt had started on the reservation.
    fn reservation_candidate(&self, s: ShareIx, u: UnitIx) -> Option<Claim> {
        if self.reserve_after <= 0 {
            return None;
        }
        let share = &self.shares[s];
        let lane = share.lanes.get(u)?;
        let (key, since) = lane.head?;
        let job = self.job(key)?;
        let n = job.quantity;
        let ok = share.borrows()
            && lane.listed
            && self.units[u].present
            && !job.is_nominated()
            && n > lane.limit
            && i64::from(n) <= self.max_request(s, u)
            && self.larger_than_any_node(u, job.per_node()).is_none()
            && self.gang_never_fits(u, job.per_node(), job.nodes).is_none()
            // Waiting for its own user's jobs (SPEC §12), not for borrowers.
            && self.user_limit_reason(job).is_none();
        // Pending again after an attempt on the reservation: a preempted one (a failed
        // attempt clears the mark).
        let back = job.reserved_start;
        ok.then_some(Claim {
            job: job.id,
            at: if back {
                since
            } else {
                since + self.reserve_after
            },
            back,
        })
    }

    /// Judge the reservations at a round of the pass loop (SPEC §3): record each lane's
    /// first pending job, end the reservations whose job stopped qualifying, and give each
    /// free unit to a job taking it back, else to the earliest qualifying job (ties in
    /// global order).
    pub(crate) fn refresh_reservations(&mut self, now: Time) {
        for s in 0..self.shares.len() {
            for u in 0..self.shares[s].lanes.len() {
                let lane = &mut self.shares[s].lanes[u];
                let first = lane.queue.first().map(|k| k.job());
                if lane.head.map(|h| h.0) != first {
                    lane.head = first.map(|k| (k, now));
                }
            }
        }
        for u in 0..self.units.len() {
            if let Some(r) = self.units[u].reservation {
                let still = self.job(r.job).is_some_and(|j| {
                    self.reservation_candidate(j.share, u)
                        .is_some_and(|c| c.job == r.job && c.at <= now)
                });
                if !still {
                    self.units[u].reservation = None;
                    self.units[u].reserved_more.clear();
                }
            }
            if self.units[u].reservation.is_some() || self.reserve_after <= 0 {
                continue;
            }
            let best = (0..self.shares.len())
                .filter_map(|s| self.reservation_candidate(s, u))
                .filter(|c| c.at <= now)
                .filter_map(|c| Some((!c.back, c.at, self.qkey(self.job(c.job)?), c.job)))
                .min();
            if let Some((_, _, _, id)) = best {
                let (n, nodes) = self.job(id).map_or((0, 1), |j| (j.per_node(), j.nodes));
                let mut held = Vec::new();
                if self.slotted(u) {
                    held = self.reserved_nodes(u, n, nodes);
                    if held.is_empty() {
                        continue; // no healthy node(s) can ever hold it now
                    }
                }
                self.units[u].reservation = Some(Reservation {
                    job: id,
                    since: now,
                    node: held.first().copied(),
                });
                self.units[u].reserved_more = held.split_off(held.len().min(1));
            }
        }
    }

    /// With `nodes`: among the nodes with at least `n` healthy devices of unit u that take
    /// new jobs, the `count` with the most free devices (a gang's N, SPEC §16; one for a
    /// plain job), ties to the node listed first (a sliced unit: the device with the most
    /// unassigned GiB, ties to the lowest index); empty when fewer can ever hold it.
    /// Returned in listing order.
    fn reserved_nodes(&self, u: UnitIx, n: u32, count: u32) -> Vec<SlotIx> {
        let mut c: Vec<_> = self.units[u]
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.drained && s.devices.len() as u32 >= n)
            .map(|(ix, s)| (std::cmp::Reverse(s.free.len()), s.order, ix))
            .collect();
        if c.len() < count as usize {
            return Vec::new();
        }
        c.sort_unstable();
        let mut held: Vec<(usize, SlotIx)> =
            c[..count as usize].iter().map(|x| (x.1, x.2)).collect();
        held.sort_unstable();
        held.into_iter().map(|x| x.1).collect()
    }

    /// Every node unit u's reservation holds (a gang's reservation holds N, SPEC §16).
    pub(crate) fn reserved_nodes_of_unit(&self, u: UnitIx) -> Vec<SlotIx> {
        let unit = &self.units[u];
        unit.reservation
            .and_then(|r| r.node)
            .into_iter()
            .chain(unit.reserved_more.iter().copied())
            .collect()
    }

    /// The reservation of the unit named `unit`, if it has one.
    pub fn reservation_of(&self, unit: &str) -> Option<Reservation> {
        self.reservation(*self.unit_ix.get(unit)?)
    }

    /// The reservation of unit u, if it has one.
    pub fn reservation(&self, u: UnitIx) -> Option<Reservation> {
        self.units.get(u)?.reservation
    }

    /// The next instant after `now` at which a lane's first job qualifies for a
    /// reservation (SPEC §3: that moment makes an instant).
    pub(crate) fn next_reservation_moment(&self, now: Time) -> Option<Time> {
        if self.reserve_after <= 0 {
            return None;
        }
        (0..self.shares.len())
            .flat_map(|s| (0..self.units.len()).map(move |u| (s, u)))
            .filter_map(|(s, u)| self.reservation_candidate(s, u))
            .map(|c| c.at)
            .filter(|&at| at > now)
            .min()
    }

    /// Step 2 and mode B under a reservation: may a borrowed start of `job` (None: any job
    /// but the reserving one) of unit u go on node `node` (None: without `nodes`)? While u
    /// is reserved, only the reserving job may, except on the other nodes.
    pub(crate) fn borrow_allowed(
        &self,
        u: UnitIx,
        job: Option<JobId>,
        node: Option<SlotIx>,
    ) -> bool {
        match self.units[u].reservation {
            None => true,
            Some(r) if job == Some(r.job) => true,
            Some(r) => match (r.node, node) {
                (Some(_), Some(n)) => !self.reserved_nodes_of_unit(u).contains(&n),
                _ => false,
            },
        }
    }

    /// Where gang `j` would start borrowing (SPEC §3, §16) once `freed` GPUs per node are
    /// back: its N nodes outside those reserved for another job; none while another job
    /// holds the reservation of a unit without `nodes`. The gang's twin of
    /// [`Sched::borrow_allowed`].
    pub(crate) fn gang_borrow_place(
        &self,
        j: &super::state::Job,
        noms: &super::accounting::Noms,
        freed: &[(SlotIx, i64)],
    ) -> Option<Vec<SlotIx>> {
        let except = self.reserved_node_of(j.unit, j.id);
        let held_elsewhere = self.units[j.unit]
            .reservation
            .is_some_and(|r| r.job != j.id);
        if held_elsewhere && except.is_empty() {
            return None;
        }
        self.gang_fit(j.unit, j.per_node(), j.nodes, noms, None, &except, freed)
    }

    /// The nodes that borrowed starts of jobs other than the reserving one must avoid.
    pub(crate) fn reserved_node_of(&self, u: UnitIx, job: JobId) -> Vec<SlotIx> {
        match self.units[u].reservation {
            Some(r) if r.job != job => self.reserved_nodes_of_unit(u),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{JobSpec, UnitCapacity};
    use crate::sched::Clock;

    /// 4 GPUs; v, w and x may each hold 1 and borrow; a big job waits a minute for the
    /// reservation.
    const TWO: &str = "
kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 4, devices: {fake: 4}}]
reserveAfterSeconds: 60
---
kind: QuotaShare
quotaShareName: v
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: w
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: x
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
";

    fn job(name: &str, share: &str, n: u32, timeout: Option<u64>) -> JobSpec {
        let mut j = JobSpec::new(name, share, n, 0);
        j.timeout_seconds = timeout;
        j
    }

    /// w1 (2 GPUs, timeout 100) and x0 (1 GPU, no timeout: x's guarantee) run; big (3
    /// GPUs) reserves the unit at 70 with one GPU idle; at 80 three 1-GPU borrowers of x are queued: w3 (ends by 140), w2 (by 90), w4
    /// (no timeout). Returns the scheduler after the pass at 80 and the ids.
    fn reserved(backfill: Backfill) -> (Sched, [JobId; 5]) {
        let c = crate::sched::tests::config(TWO);
        let mut s = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Simulated);
        s.set_backfill(backfill);
        let w1 = s.submit(job("w1", "w", 2, Some(100)), 0).unwrap();
        s.submit(job("x0", "x", 1, None), 0).unwrap();
        s.pass(0);
        let big = s.submit(job("big", "v", 3, None), 10).unwrap();
        s.pass(10);
        s.pass(70);
        assert_eq!(s.reservation(0).map(|r| r.job), Some(big));
        let w3 = s.submit(job("w3", "x", 1, Some(60)), 80).unwrap();
        let w2 = s.submit(job("w2", "x", 1, Some(10)), 80).unwrap();
        let w4 = s.submit(job("w4", "x", 1, None), 80).unwrap();
        s.pass(80);
        (s, [w1, big, w3, w2, w4])
    }

    #[test]
    fn without_backfill_a_reserved_unit_lends_nothing() {
        let (s, [_, _, w3, w2, w4]) = reserved(Backfill::Off);
        for j in [w3, w2, w4] {
            assert!(s.job(j).unwrap().is_pending());
        }
    }

    #[test]
    fn backfill_starts_only_a_job_declared_to_end_before_the_reserving_job_could_start() {
        let (mut s, [w1, big, w3, w2, w4]) = reserved(Backfill::By(Arc::new(Declared)));
        // big needs the GPU idle and w1's two, at 100 (w1's timeout): w2 (ends by 90)
        // starts on the idle GPU; w3 (by 140) and w4 (unknown end) are passed over.
        assert!(s.job(w2).unwrap().is_holding());
        assert!(s.job(w3).unwrap().is_pending());
        assert!(s.job(w4).unwrap().is_pending());
        assert_eq!(s.reservation(0).map(|r| r.job), Some(big));
        // w2 ends: its GPU is idle again, but w3 would still run past 100.
        s.job_exited(w2, 0, 90);
        s.pass(90);
        assert!(s.job(w3).unwrap().is_pending());
        // w1 ends at its guessed end: big starts as it would have without backfill.
        s.job_exited(w1, 0, 100);
        s.pass(100);
        assert!(s.job(big).unwrap().is_holding());
    }

    #[test]
    fn a_job_that_fits_in_what_the_reserving_job_leaves_over_starts_whatever_its_length() {
        // big asks for 2: when w1 ends at 100 one GPU is left over, so w4 (no known end)
        // may take the idle one now.
        let c = crate::sched::tests::config(TWO);
        let mut s = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Simulated);
        s.set_backfill(Backfill::By(Arc::new(Declared)));
        let w1 = s.submit(job("w1", "w", 2, Some(100)), 0).unwrap();
        s.submit(job("x0", "x", 1, None), 0).unwrap();
        s.pass(0);
        let big = s.submit(job("big", "v", 2, None), 10).unwrap();
        s.pass(10);
        s.pass(70);
        assert_eq!(s.reservation(0).map(|r| r.job), Some(big));
        let w4 = s.submit(job("w4", "x", 1, None), 80).unwrap();
        s.pass(80);
        assert!(s.job(w4).unwrap().is_holding());
        s.job_exited(w1, 0, 100);
        s.pass(100);
        assert!(s.job(big).unwrap().is_holding());
    }

    #[test]
    fn the_declared_guess_is_the_earlier_of_timeout_and_expected_runtime_less_the_run() {
        let c = crate::sched::tests::config(TWO);
        let mut s = Sched::new(&c, &UnitCapacity::simulated(&c), Clock::Simulated);
        let mut spec = job("a", "v", 1, Some(100));
        spec.expected_runtime_seconds = Some(30);
        let a = s.submit(spec, 0).unwrap();
        let b = s.submit(job("b", "w", 1, None), 0).unwrap();
        assert_eq!(Declared.remaining(&s, s.job(a).unwrap(), 0), Some(30));
        assert_eq!(Declared.remaining(&s, s.job(b).unwrap(), 0), None);
        s.pass(0);
        assert_eq!(Declared.remaining(&s, s.job(a).unwrap(), 20), Some(10));
        // Past its expected runtime, only the timeout bounds it.
        assert_eq!(Declared.remaining(&s, s.job(a).unwrap(), 40), Some(60));
    }
}
