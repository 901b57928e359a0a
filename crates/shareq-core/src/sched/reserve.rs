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

use super::Sched;
use super::keys::{ShareIx, SlotIx, Time, UnitIx};
use crate::model::JobId;

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

impl Sched {
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

    /// The nodes that borrowed starts of jobs other than the reserving one must avoid.
    pub(crate) fn reserved_node_of(&self, u: UnitIx, job: JobId) -> Vec<SlotIx> {
        match self.units[u].reservation {
            Some(r) if r.job != job => self.reserved_nodes_of_unit(u),
            _ => Vec::new(),
        }
    }
}
