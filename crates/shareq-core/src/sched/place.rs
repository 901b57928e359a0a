//! Placement on slots (SPEC §10, §15): a job's GPUs are all in one slot, a node (its free
//! devices) or a device of a unit sliced by memory (its free GiB); the slot is the best
//! fit (least room that fits, ties to the slot listed first), and in it the job takes the
//! lowest free devices (or GiB). Room set aside for a nomination in its slot fits no other
//! job. Without `nodes` a whole-GPU unit has one implicit node and these rules change
//! nothing.

use super::Sched;
use super::accounting::Noms;
use super::keys::{SlotIx, UnitIx};
use crate::model::JobId;

impl Sched {
    /// Free devices of unit u on node n that are not set aside for nominations there. A
    /// nominated job tied to n (`own`) does not count its own reserve against itself.
    pub(crate) fn node_room(&self, u: UnitIx, n: SlotIx, noms: &Noms, own: Option<JobId>) -> i64 {
        let free = self.units[u]
            .slots
            .get(n)
            .map_or(0, |s| s.free.len() as i64);
        let own_term = own.map_or(0, |k| self.nomination_aside(k, n));
        free - (noms.aside(u, n) - own_term)
    }

    /// The node job `job` (or any non-nominated job of `q` devices, when `job` is `None`)
    /// would start on now: a nominated job only on its nomination's node; otherwise the
    /// fitting node with the least room, ties to the node listed first. Costs
    /// O(log nodes + nominated nodes).
    pub(crate) fn best_fit(
        &self,
        u: UnitIx,
        q: u32,
        noms: &Noms,
        job: Option<JobId>,
    ) -> Option<SlotIx> {
        self.best_fit_except(u, q, noms, job, &[])
    }

    /// [`Sched::best_fit`] on the nodes other than `except` (a borrowed start while that
    /// node is reserved for a big job, SPEC §3).
    pub(crate) fn best_fit_except(
        &self,
        u: UnitIx,
        q: u32,
        noms: &Noms,
        job: Option<JobId>,
        except: &[SlotIx],
    ) -> Option<SlotIx> {
        if let Some(nom) = job.and_then(|k| self.job(k)).and_then(|j| j.nomination()) {
            let n = nom.slot;
            return (self.node_room(u, n, noms, job) >= i64::from(q) && !except.contains(&n))
                .then_some(n);
        }
        let unit = &self.units[u];
        // (room, listing order, node): the best entry without a set-aside ...
        let plain = unit
            .by_free
            .range((q, 0, 0)..)
            .find(|&&(_, _, n)| noms.aside(u, n) == 0 && !except.contains(&n))
            .map(|&(f, o, n)| (i64::from(f), o, n));
        // ... against the nodes where something is set aside.
        let aside = noms
            .aside
            .iter()
            .filter(|a| a.0 == u && !except.contains(&a.1))
            .filter_map(|&(_, n, _)| {
                let room = self.node_room(u, n, noms, None);
                let order = unit.slots.get(n)?.order;
                (room >= i64::from(q)).then_some((room, order, n))
            })
            .min();
        match (plain, aside) {
            (Some(a), Some(b)) => Some(a.min(b).2),
            (a, b) => a.or(b).map(|x| x.2),
        }
    }

    /// Where job `id` would start now (SPEC §10, §16): its slots, rank order (a plain
    /// job's one slot; a gang's N nodes in node order), avoiding `except` (nodes reserved
    /// for a big job, SPEC §3). `None`: it fits nowhere now.
    pub(crate) fn place(&self, id: JobId, noms: &Noms, except: &[SlotIx]) -> Option<Vec<SlotIx>> {
        let j = self.job(id)?;
        if j.is_gang() {
            return self.gang_fit(j.unit, j.per_node(), j.nodes, noms, Some(id), except, &[]);
        }
        self.best_fit_except(j.unit, j.quantity, noms, Some(id), except)
            .map(|n| vec![n])
    }

    /// Every slot of unit u with room for `q` (not set aside for others; `own`'s own
    /// set-aside counts for it) once `freed` GPUs per slot are back, outside `except`, as
    /// (room, listing order, slot), best fit first. O(slots).
    pub(crate) fn fitting_slots(
        &self,
        u: UnitIx,
        q: u32,
        noms: &Noms,
        own: Option<JobId>,
        except: &[SlotIx],
        freed: &[(SlotIx, i64)],
    ) -> Vec<(i64, usize, SlotIx)> {
        let unit = &self.units[u];
        let mut out: Vec<(i64, usize, SlotIx)> = unit
            .slots
            .iter()
            .enumerate()
            .filter(|(n, s)| !s.drained && !s.devices.is_empty() && !except.contains(n))
            .map(|(n, s)| {
                (
                    self.node_room(u, n, noms, own) + freed_on(freed, n),
                    s.order,
                    n,
                )
            })
            .filter(|&(room, _, _)| room >= i64::from(q))
            .collect();
        out.sort_unstable();
        out
    }

    /// A gang's placement (SPEC §16): `nodes` distinct slots with room for `q` each once
    /// `freed` is back, the best fits (least room first, ties in listing order), returned
    /// in listing order (its ranks). A nominated gang (`own`) only on its nomination's
    /// nodes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gang_fit(
        &self,
        u: UnitIx,
        q: u32,
        nodes: u32,
        noms: &Noms,
        own: Option<JobId>,
        except: &[SlotIx],
        freed: &[(SlotIx, i64)],
    ) -> Option<Vec<SlotIx>> {
        if let Some(nom) = own.and_then(|k| self.job(k)).and_then(|j| j.nomination()) {
            let slots: Vec<SlotIx> = nom.slots().collect();
            let ok = slots
                .iter()
                .all(|&n| !except.contains(&n) && self.node_room(u, n, noms, own) >= i64::from(q));
            return ok.then_some(slots);
        }
        let fit = self.fitting_slots(u, q, noms, None, except, freed);
        if fit.len() < nodes as usize {
            return None;
        }
        let mut chosen: Vec<(usize, SlotIx)> = fit[..nodes as usize]
            .iter()
            .map(|&(_, o, n)| (o, n))
            .collect();
        chosen.sort_unstable();
        Some(chosen.into_iter().map(|x| x.1).collect())
    }

    /// Nodes of unit u with room for `q` (set-aside room included, SPEC §10) once
    /// `freed` GPUs per slot are back: a gang's `waiting` term, and its reason (`needs 2
    /// nodes with 4 a100 free, 1 has`).
    pub(crate) fn nodes_with_room(&self, u: UnitIx, q: u32, freed: &[(SlotIx, i64)]) -> usize {
        self.units[u]
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.drained && !s.devices.is_empty())
            .filter(|&(n, s)| s.free.len() as i64 + freed_on(freed, n) >= i64::from(q))
            .count()
    }

    /// The most a non-nominated job of unit u can get on one node now.
    pub(crate) fn room_max(&self, u: UnitIx, noms: &Noms) -> u32 {
        self.room_max_except(u, noms, &[])
    }

    /// [`Sched::room_max`] on the nodes other than `except`.
    pub(crate) fn room_max_except(&self, u: UnitIx, noms: &Noms, except: &[SlotIx]) -> u32 {
        let unit = &self.units[u];
        let plain = unit
            .by_free
            .iter()
            .rev()
            .find(|&&(_, _, n)| noms.aside(u, n) == 0 && !except.contains(&n))
            .map_or(0, |&(f, _, _)| i64::from(f));
        let aside = noms
            .aside
            .iter()
            .filter(|a| a.0 == u && !except.contains(&a.1))
            .map(|&(_, n, _)| self.node_room(u, n, noms, None))
            .max()
            .unwrap_or(0);
        plain.max(aside).clamp(0, i64::from(u32::MAX)) as u32
    }

    /// With `nodes`: recompute unit u's `room_max` after a change of its free devices or
    /// nominations, and the lanes' `held_back` terms when it moved (SPEC §10: `waiting`
    /// counts only jobs some node has room for).
    pub(crate) fn refresh_room(&mut self, u: UnitIx) {
        if !self.slotted(u) {
            return;
        }
        let m = self.units[u].most_free_on_a_node();
        // Gangs' `waiting` depends on each node's free devices, not only the most on one.
        if m != self.units[u].room_max || !self.gangs.is_empty() {
            self.units[u].room_max = m;
            for s in 0..self.shares.len() {
                self.refresh_lane(s, u);
            }
        }
    }

    /// The threshold up to which a lane's waiting jobs count: its idle guarantee, and
    /// with `nodes` no more than one node has room for.
    pub(crate) fn waiting_threshold(&self, u: UnitIx, idle: u32) -> u32 {
        self.waiting_threshold_given(u, idle, self.units[u].room_max)
    }

    /// [`Sched::waiting_threshold`] when one node has room for `room` at most (with the
    /// victims of a preemption being weighed gone).
    pub(crate) fn waiting_threshold_given(&self, u: UnitIx, idle: u32, room: u32) -> u32 {
        if self.slotted(u) {
            idle.min(room)
        } else {
            idle
        }
    }

    /// Free devices of unit u on node n, set-aside ones included.
    pub(crate) fn node_free(&self, u: UnitIx, n: SlotIx) -> i64 {
        self.units[u]
            .slots
            .get(n)
            .map_or(0, |s| if s.drained { 0 } else { s.free.len() as i64 })
    }

    /// The lowest `q` free devices of unit u on node n.
    pub(crate) fn lowest_free(&self, u: UnitIx, n: SlotIx, q: u32) -> Vec<u32> {
        self.units[u].slots.get(n).map_or_else(Vec::new, |s| {
            s.free.iter().take(q as usize).copied().collect()
        })
    }

    /// With `nodes`: the free GPUs of unit u if some job waits `FRAGMENTED` there (its
    /// share's counts would let it start but no node has room for it), else 0. For the
    /// replay's summary: GPU time idle because of fragmentation. A lane counts when a job
    /// of a size between the most one node has room for and what its counts allow waits
    /// in it (on an oversubscribed unit, the counts without the ordering rule).
    pub fn fragmented_idle(&self, u: UnitIx) -> u32 {
        if u >= self.units.len() || !self.slotted(u) {
            return 0;
        }
        let noms = self.nominated_totals();
        let room_max = self.room_max(u, &noms);
        let free = self.units[u].free();
        for (s, share) in self.shares.iter().enumerate() {
            let lane = &share.lanes[u];
            if !share.present || lane.queue.is_empty() {
                continue;
            }
            let room = i64::from(lane.limit) - i64::from(lane.usage);
            let within = room.min(self.available_given(u, None, &noms, self.held_back(s, u)));
            let mut upper = within;
            if share.borrows() {
                let mut b = self.available_borrowing(s, u, None, &noms);
                if let Some(cap) = lane.cap {
                    b = b.min(i64::from(lane.limit) + i64::from(cap) - i64::from(lane.usage));
                }
                upper = upper.max(b);
            }
            let lo = i64::from(room_max) + 1;
            if upper < lo {
                continue;
            }
            let block = lane.block();
            let waits = lane
                .queue
                .first_in(
                    (
                        std::ops::Bound::Included(lo as u32),
                        std::ops::Bound::Included(upper as u32),
                    ),
                    std::ops::Bound::Unbounded,
                )
                .is_some_and(|k| block.is_none_or(|b| k < b));
            if waits {
                return free.clamp(0, i64::from(u32::MAX)) as u32;
            }
        }
        0
    }

    /// Unit indexes of the applied config's units.
    pub fn unit_indexes(&self) -> impl Iterator<Item = UnitIx> + '_ {
        (0..self.units.len()).filter(|&u| self.units[u].present)
    }
}

/// GPUs that `freed` (GPUs per slot a preemption's victims release) gives back on slot `n`.
pub(crate) fn freed_on(freed: &[(SlotIx, i64)], n: SlotIx) -> i64 {
    freed.iter().filter(|f| f.0 == n).map(|f| f.1).sum()
}
