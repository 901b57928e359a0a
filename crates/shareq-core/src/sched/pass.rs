//! One scheduling pass (SPEC §3): guaranteed starts, borrowed starts, preemption and
//! nomination lapse, looped exactly as the spec orders them.
//!
//! A sweep visits jobs in a fixed order and evaluates each on the state left by the
//! decisions before it. Between two starts the state does not change, so the sweep is
//! implemented as "find the first job after the cursor that can start now": the lanes'
//! by-quantity indexes answer that with a few range queries, without visiting the jobs
//! that would fail.

use super::accounting::Noms;
use super::keys::{QKey, ShareIx, UnitIx};
use super::reserve::Window;
use super::{Sched, Time};
use crate::model::JobId;
use std::collections::BTreeMap;
use std::ops::Bound::{self, Excluded, Included, Unbounded};

/// A (submission, id) pair: the FIFO key of step 2.
type Fifo = (Time, u64);

impl Sched {
    /// Run one scheduling pass at `now`. Decisions go to the outbox.
    pub fn pass(&mut self, now: Time) {
        self.now = now;
        self.prune_retries(now);
        self.refresh_penalties(now);
        // Every round starts, preempts or lapses something, so a pass ends (SPEC §3); the
        // bound only guards the live scheduler against a bug turning into a hang.
        let bound = 64 * (self.jobs.len() as u64 + 16);
        let mut rounds = 0u64;
        loop {
            rounds += 1;
            debug_assert!(rounds <= bound, "a scheduling pass did not terminate");
            if rounds > bound {
                break;
            }
            self.refresh_reservations(now);
            if self.step1(now) || self.step2(now) || self.step3(now) {
                continue;
            }
            if self.lapse(now) {
                continue;
            }
            break;
        }
    }

    /// The first non-nominated job of lane (s,u) after `from` (and before the lane's
    /// block) whose quantity lies in `qty`.
    pub(super) fn first_in_lane(
        &self,
        s: ShareIx,
        u: UnitIx,
        qty: (Bound<u32>, Bound<u32>),
        from: Bound<QKey>,
    ) -> Option<QKey> {
        let lane = &self.shares[s].lanes[u];
        let mut from = from;
        loop {
            let k = lane.queue.first_in(qty, from)?;
            if lane.block().is_some_and(|b| k >= b) {
                return None;
            }
            // A gang is judged apart ([`Sched::first_gang`]): the bound that found it is
            // one node's room.
            if !self.gangs.contains(&k.job()) {
                return Some(k);
            }
            from = Excluded(k);
        }
    }

    /// The first non-nominated gang of lane (s,u) after `from` (and before the lane's
    /// block) that its user's `userLimit` lets start and that `fits(job, key)`: its
    /// counts, and its N nodes (SPEC §16). O(pending gangs).
    fn first_gang(
        &self,
        s: ShareIx,
        u: UnitIx,
        from: Bound<QKey>,
        fits: impl Fn(&super::state::Job, QKey) -> bool,
    ) -> Option<QKey> {
        if self.gangs.is_empty() {
            return None;
        }
        let block = self.shares[s].lanes[u].block();
        self.gangs
            .iter()
            .filter_map(|&id| self.job(id))
            .filter(|j| j.share == s && j.unit == u && !j.is_nominated())
            .map(|j| (j, self.qkey(j)))
            .filter(|&(_, k)| after(from, k) && block.is_none_or(|b| k < b))
            .filter(|&(j, k)| self.user_limit_reason(j).is_none() && fits(j, k))
            .map(|(_, k)| k)
            .min()
    }

    /// Step 1, one sweep (repeated here while it starts jobs, which is what "go to 1"
    /// does when the sweep started something). Returns whether anything started.
    fn step1(&mut self, now: Time) -> bool {
        let mut started = false;
        let mut cursor: Bound<QKey> = Unbounded;
        loop {
            let noms = self.nominated_totals();
            let mut best: Option<QKey> = None;
            for s in 0..self.shares.len() {
                if !self.shares[s].present {
                    continue;
                }
                for u in 0..self.units.len() {
                    let lane = &self.shares[s].lanes[u];
                    if lane.queue.is_empty() || self.units[u].free() <= 0 {
                        continue;
                    }
                    let room = i64::from(lane.limit) - i64::from(lane.usage);
                    if room <= 0 {
                        continue;
                    }
                    if let Some(k) = self.step1_candidate(s, u, room, cursor, &noms)
                        && best.is_none_or(|b| k < b)
                    {
                        best = Some(k);
                    }
                    let fits = |j: &super::state::Job, k: QKey| {
                        i64::from(j.quantity)
                            <= room.min(self.available_guaranteed(s, u, k, None, &noms))
                            && self.place(j.id, &noms, &[]).is_some()
                    };
                    if let Some(k) = self.first_gang(s, u, cursor, fits)
                        && best.is_none_or(|b| k < b)
                    {
                        best = Some(k);
                    }
                    // The lane's first nominated job may start too, with its own reserve.
                    if let Some(k) = self.shares[s].lanes[u].block()
                        && after(cursor, k)
                        && best.is_none_or(|b| k < b)
                        && let Some(j) = self.job(k.job())
                        && self.user_limit_reason(j).is_none()
                        && i64::from(j.quantity)
                            <= room.min(self.available_guaranteed(s, u, k, Some(j.id), &noms))
                        && self.place(j.id, &noms, &[]).is_some()
                    {
                        best = Some(k);
                    }
                }
            }
            let Some(k) = best else { break };
            self.start(k.job(), now);
            started = true;
            cursor = Excluded(k);
        }
        started
    }

    /// The first non-nominated job of lane (s,u) after `cursor` that step 1 can start now.
    ///
    /// Off an oversubscribed unit `available` is the same for every job of the lane, so one
    /// range query per quantity finds it. On an oversubscribed unit `held_back` counts only
    /// the other shares' waiting jobs ahead of the job judged, so `available` can only fall
    /// along the lane: each job found above the bound lowers the bound below its own
    /// quantity, and the search goes on from there (at most `room` rounds).
    fn step1_candidate(
        &self,
        s: ShareIx,
        u: UnitIx,
        room: i64,
        cursor: Bound<QKey>,
        noms: &Noms,
    ) -> Option<QKey> {
        // No job larger than what one node has room for can start (SPEC §10); without
        // `nodes` the one node always has room for what the counts allow.
        let room = room.min(i64::from(self.room_max(u, noms)));
        if !self.units[u].oversubscribed() {
            let bound = room.min(self.available_given(u, None, noms, self.held_back(s, u)));
            if bound < 1 {
                return None;
            }
            return self.first_in_lane(s, u, (Included(1), Included(bound as u32)), cursor);
        }
        // held_back ≥ 0, so free − nominations bounds `available` for every job.
        let mut bound = room.min(self.available_given(u, None, noms, 0));
        let mut from = cursor;
        while bound >= 1 {
            let k = self.first_in_lane(s, u, (Included(1), Included(bound as u32)), from)?;
            let q = self.job(k.job()).map_or(u32::MAX, |j| j.quantity);
            let avail = self.available_guaranteed(s, u, k, None, noms);
            if i64::from(q) <= avail {
                return Some(k);
            }
            bound = room.min(avail);
            from = Excluded(k);
        }
        None
    }

    /// Step 2, one sweep: borrowed starts, FIFO between LEND_AND_BORROW shares.
    ///
    /// The merge "share whose next untried job was submitted earliest goes next" visits a
    /// share's jobs in blocks: a job is reached at the running maximum `K` of the FIFO keys
    /// of its share's jobs up to it. So the visiting order is (K, queue order), and the
    /// next job to start is the candidate with the smallest K.
    fn step2(&mut self, now: Time) -> bool {
        let shares: Vec<ShareIx> = (0..self.shares.len())
            .filter(|&s| self.shares[s].borrows())
            .filter(|&s| self.shares[s].lanes.iter().any(|l| !l.queue.is_empty()))
            .collect();
        if shares.is_empty() {
            return false;
        }
        // Membership is fixed when the step begins: jobs that would exceed the limit.
        let room0: Vec<Vec<i64>> = shares
            .iter()
            .map(|&s| {
                self.shares[s]
                    .lanes
                    .iter()
                    .map(|l| i64::from(l.limit) - i64::from(l.usage))
                    .collect()
            })
            .collect();
        let mut lo: Vec<Bound<QKey>> = vec![Unbounded; shares.len()];
        // Each share's level maxima, taken when first needed (jobs started before are in
        // `gone`, which every use of them takes into account).
        let mut levels: Vec<Option<Levels>> = vec![None; shares.len()];
        // The largest FIFO key each share's started jobs had: they left the indexes, but
        // they were ahead of everything still to be visited there.
        let mut gone: Vec<Option<Fifo>> = vec![None; shares.len()];
        // The latest job started from another share, whose K the share's cursor has not
        // been moved past yet: K only grows from one start to the next, so the latest
        // alone counts, and it is worked out only when the share next has a candidate
        // (a share with none needs no cursor), so that one borrowing share costs no K.
        let mut behind: Vec<Option<Chosen>> = vec![None; shares.len()];
        let mut started = false;
        loop {
            let noms = self.nominated_totals();
            let windows = self.backfill_windows(now, &noms);
            let mut cands: Vec<(usize, QKey)> = Vec::new();
            for (i, &s) in shares.iter().enumerate() {
                let Some(mut k) = self.step2_candidate(s, &room0[i], lo[i], &noms, &windows) else {
                    continue;
                };
                if let Some(c) = behind[i].take() {
                    let kstar = self.k_of_chosen(&c, &shares, &room0, &mut levels);
                    let lv = levels[i].get_or_insert_with(|| self.levels(s, &room0[i]));
                    let b = self.boundary(s, lv, &room0[i], gone[i], kstar);
                    lo[i] = max_bound(lo[i], b);
                    match self.step2_candidate(s, &room0[i], lo[i], &noms, &windows) {
                        Some(k2) => k = k2,
                        None => continue,
                    }
                }
                cands.push((i, k));
            }
            let (chosen, key) = match cands.as_slice() {
                [] => break,
                [(i, k)] => (*i, *k),
                _ => {
                    let mut best: Option<(Fifo, usize, QKey)> = None;
                    for &(i, k) in &cands {
                        let lv = levels[i].get_or_insert_with(|| self.levels(shares[i], &room0[i]));
                        let kk = self.k_of(shares[i], lv, &room0[i], gone[i], &k);
                        if best.is_none_or(|(b, _, _)| kk < b) {
                            best = Some((kk, i, k));
                        }
                    }
                    let Some((_, i, k)) = best else { break };
                    (i, k)
                }
            };
            let c = Chosen {
                share: chosen,
                key,
                gone: gone[chosen],
            };
            for (i, b) in behind.iter_mut().enumerate() {
                if i != chosen {
                    *b = Some(c);
                }
            }
            lo[chosen] = Excluded(key);
            gone[chosen] = gone[chosen].max(Some(key.fifo()));
            let except = self
                .job(key.job())
                .map(|j| self.reserved_node_of(j.unit, j.id))
                .unwrap_or_default();
            self.start_except(key.job(), now, &except);
            started = true;
        }
        started
    }

    /// K of a job started in this step, worked out later: its share's jobs up to it are
    /// still queued but for those started before it (`c.gone`); those started after it
    /// come after it in its share's order.
    fn k_of_chosen(
        &self,
        c: &Chosen,
        shares: &[ShareIx],
        room0: &[Vec<i64>],
        levels: &mut [Option<Levels>],
    ) -> Fifo {
        let s = shares[c.share];
        let lv = levels[c.share].get_or_insert_with(|| self.levels(s, &room0[c.share]));
        self.k_of(s, lv, &room0[c.share], c.gone, &c.key)
    }

    /// The first job of share s at or after `from` in the step-2 set that can start now.
    fn step2_candidate(
        &self,
        s: ShareIx,
        room0: &[i64],
        from: Bound<QKey>,
        noms: &Noms,
        windows: &[Option<Window>],
    ) -> Option<QKey> {
        let share = &self.shares[s];
        let mut best: Option<QKey> = None;
        for (u, lane) in share.lanes.iter().enumerate() {
            if lane.queue.is_empty() || self.units[u].free() <= 0 {
                continue;
            }
            let min_q = member_min(room0[u]);
            let avail = self.available_borrowing(s, u, None, noms);
            let cap_room = lane.cap.map_or(i64::MAX, |cap| {
                i64::from(lane.limit) + i64::from(cap) - i64::from(lane.usage)
            });
            let upper = avail.min(i64::from(self.room_max(u, noms))).min(cap_room);
            let mut found = None;
            if upper >= i64::from(min_q) {
                let qty = (Included(min_q), Included(upper as u32));
                found = self.first_in_lane(s, u, qty, from);
            }
            // While u is reserved for a big job (SPEC §3), no other job borrows it; with
            // `nodes`, the others borrow only on the other nodes; with backfill (a study,
            // off by default), the jobs guessed to leave the reserving job's start alone.
            if let Some(r) = self.units[u].reservation
                && let Some(k0) = found.filter(|k| k.job() != r.job)
            {
                found = None;
                if let Some(w) = windows.get(u).copied().flatten() {
                    let qty = (Included(min_q), Included(upper as u32));
                    found = self.backfill_in_lane(s, u, qty, Included(k0), &w);
                } else if r.node.is_some() {
                    let reserved = self.reserved_nodes_of_unit(u);
                    let upper = avail
                        .min(i64::from(self.room_max_except(u, noms, &reserved)))
                        .min(cap_room);
                    if upper >= i64::from(min_q) {
                        let qty = (Included(min_q), Included(upper as u32));
                        found = self.first_in_lane(s, u, qty, from);
                    }
                }
            }
            if let Some(k) = found
                && best.is_none_or(|b| k < b)
            {
                best = Some(k);
            }
            // Gangs, judged apart: their counts as above, their N nodes outside the
            // reserved ones (SPEC §3, §16).
            let fits = |j: &super::state::Job, _: QKey| {
                let q = i64::from(j.quantity);
                q >= i64::from(min_q)
                    && q <= avail
                    && q <= cap_room
                    && self.gang_borrow_place(j, noms, &[]).is_some()
            };
            if let Some(k) = self.first_gang(s, u, from, fits)
                && best.is_none_or(|b| k < b)
            {
                best = Some(k);
            }
        }
        // Each lane's first nominated job, if it is in the set and can start with its own
        // reserve.
        for (u, lane) in share.lanes.iter().enumerate() {
            if let Some(k) = lane.block()
                && after(from, k)
                && best.is_none_or(|b| k < b)
                && let Some(j) = self.job(k.job())
                && self.user_limit_reason(j).is_none()
            {
                let q = i64::from(j.quantity);
                let fits_cap = lane.cap.is_none_or(|c| {
                    i64::from(lane.usage) + q - i64::from(lane.limit) <= i64::from(c)
                });
                let slotted = self.slotted(u);
                let allowed = match j.nomination() {
                    Some(nom) if slotted => nom
                        .slots()
                        .all(|n| self.borrow_allowed(u, Some(j.id), Some(n))),
                    _ => self.borrow_allowed(u, Some(j.id), None),
                };
                if q > room0[u]
                    && q <= self.available_borrowing(s, u, Some(j.id), noms)
                    && fits_cap
                    && allowed
                    && self.place(j.id, noms, &[]).is_some()
                {
                    best = Some(k);
                }
            }
        }
        best
    }

    /// The per-priority-level maxima of share s's step-2 set, for computing K.
    fn levels(&self, s: ShareIx, room0: &[i64]) -> Levels {
        let share = &self.shares[s];
        let mut last: BTreeMap<u32, Fifo> = BTreeMap::new(); // keyed by inv_prio
        for &prio in share.levels.keys() {
            let inv = QKey::new(prio, 0, JobId(0)).inv_prio;
            let mut m: Option<Fifo> = None;
            for (u, lane) in share.lanes.iter().enumerate() {
                m = m.max(lane.queue.level_max(
                    inv,
                    member_min(room0[u]),
                    self.nominated_member(room0[u]),
                ));
            }
            if let Some(m) = m {
                last.insert(inv, m);
            }
        }
        let mut out = Vec::with_capacity(last.len());
        let mut above: Option<Fifo> = None;
        for (inv, m) in last {
            out.push(Level {
                inv_prio: inv,
                above,
                last: m,
            });
            above = above.max(Some(m));
        }
        Levels(out)
    }

    /// Is a nominated job (base key) in the step-2 set of a lane whose room was `room0`?
    fn nominated_member(&self, room0: i64) -> impl Fn(QKey) -> bool + '_ {
        move |k: QKey| {
            self.job(k.job())
                .is_some_and(|j| i64::from(j.quantity) > room0)
        }
    }

    /// K of a job of share s in the step-2 set: the running maximum of the FIFO keys up to
    /// it in its share's order. Jobs at higher priority come from the levels taken when the
    /// step began; at its own level, each bucket's last job up to it (a bucket's base order
    /// is FIFO within a level); `gone`: the share's jobs started in this step.
    fn k_of(
        &self,
        s: ShareIx,
        levels: &Levels,
        room0: &[i64],
        gone: Option<Fifo>,
        k: &QKey,
    ) -> Fifo {
        let above = levels.above(k.inv_prio);
        let mut m = above.max(gone).max(Some(k.fifo()));
        for (u, lane) in self.shares[s].lanes.iter().enumerate() {
            m = m.max(lane.queue.level_max_upto(
                *k,
                member_min(room0[u]),
                self.nominated_member(room0[u]),
            ));
        }
        m.unwrap_or(k.fifo())
    }

    /// The first position of share s's step-2 set whose K is at least `kstar`: everything
    /// before it has been visited once the merge reaches `kstar`.
    fn boundary(
        &self,
        s: ShareIx,
        levels: &Levels,
        room0: &[i64],
        gone: Option<Fifo>,
        kstar: Fifo,
    ) -> Bound<QKey> {
        if gone.is_some_and(|g| g >= kstar) {
            // Everything after the started jobs has K ≥ kstar.
            return Unbounded;
        }
        for l in &levels.0 {
            if l.above.is_some_and(|a| a >= kstar) {
                return Included(QKey::level_bounds(l.inv_prio).0);
            }
            if l.last >= kstar {
                let first = self.shares[s]
                    .lanes
                    .iter()
                    .enumerate()
                    .filter_map(|(u, lane)| {
                        lane.queue.level_first_from(
                            l.inv_prio,
                            kstar,
                            member_min(room0[u]),
                            self.nominated_member(room0[u]),
                        )
                    })
                    .min();
                if let Some(f) = first {
                    return Included(f);
                }
            }
        }
        // Every job of this share comes before kstar.
        Excluded(QKey {
            inv_prio: u32::MAX,
            eff: i64::MAX,
            submitted: Time::MAX,
            id: u64::MAX,
        })
    }

    /// Step 3: the first pending job (global order) for which a victim set exists gets it.
    fn step3(&mut self, now: Time) -> bool {
        // Within one lane and quantity, a job with a higher priority has every victim
        // set a lower one has, so only the first eligible job of each (lane, quantity)
        // needs to be tried.
        let mut reps: Vec<(QKey, ShareIx, UnitIx)> = Vec::new();
        for s in 0..self.shares.len() {
            let share = &self.shares[s];
            if !share.present {
                continue;
            }
            for (u, lane) in share.lanes.iter().enumerate() {
                if lane.queue.is_empty() || lane.limit == 0 {
                    continue;
                }
                let block = lane.block();
                let modea = lane.usage < lane.limit;
                let in_share_room = share.in_share && !lane.running.is_empty();
                if !modea && !in_share_room {
                    continue;
                }
                let lapsed = |k: QKey| self.job(k.job()).is_some_and(|j| j.lapsed_at == Some(now));
                // A gang's victim sets are not a plain job's of its total: each is tried.
                let skip = |k: QKey| lapsed(k) || self.gangs.contains(&k.job());
                for k in lane.queue.firsts_per_qty(lane.limit, block, skip) {
                    reps.push((k, s, u));
                }
                for j in self.gangs.iter().filter_map(|&id| self.job(id)) {
                    if j.share != s || j.unit != u || j.is_nominated() {
                        continue;
                    }
                    let k = self.qkey(j);
                    if block.is_none_or(|b| k < b)
                        && j.quantity <= lane.limit
                        && j.lapsed_at != Some(now)
                        && self.user_limit_reason(j).is_none()
                    {
                        reps.push((k, s, u));
                    }
                }
            }
        }
        reps.sort_unstable_by_key(|r| r.0);
        if reps.is_empty() {
            return false;
        }
        let noms = self.nominated_totals();
        for (k, s, u) in reps {
            if let Some(found) = self.find_victims(k.job(), s, u, &noms, true) {
                self.apply_preemption(k.job(), found, now);
                return true;
            }
        }
        false
    }

    /// Step 4: nominations none of whose victims is still releasing GPUs for them, and
    /// that did not start, lapse. A victim that released its GPUs (and was requeued, and
    /// may even have started again) no longer counts (SPEC §3).
    fn lapse(&mut self, now: Time) -> bool {
        let mut lapsed = Vec::new();
        for unit in &self.units {
            for &k in &unit.nominated {
                let Some(job) = self.job(k) else { continue };
                if let Some(nom) = job.nomination()
                    && self.victims_releasing(&nom.victims) == 0
                {
                    lapsed.push(k);
                }
            }
        }
        for &id in &lapsed {
            self.unindex_pending(id);
            if let Some(j) = self.job_mut(id) {
                j.phase = super::state::Phase::Pending { nominated: None };
                j.lapsed_at = Some(now);
            }
            self.index_pending(id);
            self.note_lapse(id, now);
        }
        !lapsed.is_empty()
    }
}

/// Is `k` strictly after the cursor?
fn after(cursor: Bound<QKey>, k: QKey) -> bool {
    match cursor {
        Unbounded => true,
        Excluded(c) => k > c,
        Included(c) => k >= c,
    }
}

/// The later of two lower bounds.
fn max_bound(a: Bound<QKey>, b: Bound<QKey>) -> Bound<QKey> {
    match (a, b) {
        (Unbounded, x) | (x, Unbounded) => x,
        (Excluded(x), Included(y)) if y > x => Included(y),
        (Excluded(x), Included(_)) => Excluded(x),
        (Included(x), Excluded(y)) if x > y => Included(x),
        (Included(_), Excluded(y)) => Excluded(y),
        (Excluded(x), Excluded(y)) => Excluded(x.max(y)),
        (Included(x), Included(y)) => Included(x.max(y)),
    }
}

/// A job started in step 2: its share (index into the step's shares), its key, and the
/// largest FIFO key of its share's jobs started before it in the step.
#[derive(Debug, Clone, Copy)]
struct Chosen {
    share: usize,
    key: QKey,
    gone: Option<Fifo>,
}

#[derive(Debug, Clone)]
struct Level {
    inv_prio: u32,
    /// The largest FIFO key of the set's jobs at higher priorities.
    above: Option<Fifo>,
    /// The largest FIFO key of the set's jobs at this priority.
    last: Fifo,
}

/// A share's step-2 set summarised by priority level (highest first).
#[derive(Debug, Clone)]
struct Levels(Vec<Level>);

impl Levels {
    /// The largest FIFO key of the set's jobs at priorities above level `inv_prio`.
    fn above(&self, inv_prio: u32) -> Option<Fifo> {
        self.0
            .iter()
            .find(|l| l.inv_prio == inv_prio)
            .and_then(|l| l.above)
            .or_else(|| {
                self.0
                    .iter()
                    .filter(|l| l.inv_prio < inv_prio)
                    .map(|l| l.last)
                    .max()
            })
    }
}

/// The smallest quantity in a lane's step-2 set: jobs that would exceed the limit.
fn member_min(room0: i64) -> u32 {
    (room0.max(0) + 1).min(i64::from(u32::MAX)) as u32
}
