//! Accounting (SPEC §1.3 and the derived quantities of §3): `waiting`, `held_back` and
//! `available` (with the oversubscribed forms), nomination terms, `max(s,u)`, and the index
//! upkeep every change of a job's place goes through, which keeps those quantities
//! incremental.

use super::keys::{QKey, ShareIx, SlotIx, UnitIx};
use super::state::{Phase, StopCause, StopPlan, VictimRef};
use super::{Sched, Time};
use crate::model::{JobId, Strategy};

/// The nominations' claims, taken once per sweep step (they do not change between two
/// decisions): Σ nomination terms per unit, and what is set aside on each node for the
/// nominations tied to it (SPEC §10).
#[derive(Debug, Clone, Default)]
pub(crate) struct Noms {
    pub unit: Vec<i64>,
    /// (unit, node, Σ terms of the nominations tied to that node); few entries.
    pub aside: Vec<(UnitIx, SlotIx, i64)>,
}

impl Noms {
    pub fn aside(&self, u: UnitIx, n: SlotIx) -> i64 {
        self.aside
            .iter()
            .filter(|a| a.0 == u && a.1 == n)
            .map(|a| a.2)
            .sum()
    }
}

impl std::ops::Index<UnitIx> for Noms {
    type Output = i64;
    fn index(&self, u: UnitIx) -> &i64 {
        self.unit.get(u).unwrap_or(&0)
    }
}

/// Victims of one share taken so far in a preemption search: the GPUs they free, and the
/// (quantity, queue key) of each, back in the queue (their submission time is kept).
#[derive(Debug, Clone)]
pub(crate) struct Gone {
    pub share: ShareIx,
    pub gpus: u32,
    pub requeued: Vec<(u32, QKey)>,
}

impl Gone {
    /// What the victims of share `r` free and put back in the queue (nothing if none).
    pub fn of(gone: &[Gone], r: ShareIx) -> (u32, &[(u32, QKey)]) {
        gone.iter()
            .find(|g| g.share == r)
            .map_or((0, &[][..]), |g| (g.gpus, g.requeued.as_slice()))
    }
}

impl Sched {
    /// Recompute a lane's share of its unit's `held_back` total (SPEC §3).
    pub(crate) fn refresh_lane(&mut self, s: ShareIx, u: UnitIx) {
        let share = &self.shares[s];
        let lane = &share.lanes[u];
        let idle = lane.idle();
        let term = if !share.present {
            0
        } else if share.strategy == Strategy::Reserve {
            idle
        } else {
            let threshold = self.waiting_threshold(u, idle);
            let gangs = self.gang_waiting(s, u, idle, None, &[]);
            ((lane.waiting_upto(threshold) + gangs).min(u64::from(idle))) as u32
        };
        let old = lane.hb_term;
        self.shares[s].lanes[u].hb_term = term;
        let unit = &mut self.units[u];
        unit.hb_total = unit.hb_total + u64::from(term) - u64::from(old);
    }

    /// The gangs' part of lane (s,u)'s `waiting` (SPEC §10, §16): Σ quantity of its
    /// RUNNABLE, not nominated gangs of at most `idle` GPUs that their user's `userLimit`
    /// lets start, that come before `before` when given, and that N nodes have room for
    /// (at least their per-node quantity free, set-aside devices included) once `freed`
    /// is back. O(pending gangs × nodes); 0 at once without gangs.
    pub(crate) fn gang_waiting(
        &self,
        s: ShareIx,
        u: UnitIx,
        idle: u32,
        before: Option<QKey>,
        freed: &[(SlotIx, i64)],
    ) -> u64 {
        if self.gangs.is_empty() {
            return 0;
        }
        self.gangs
            .iter()
            .filter_map(|&id| self.job(id))
            .filter(|j| j.share == s && j.unit == u && !j.is_nominated() && j.quantity <= idle)
            .filter(|j| before.is_none_or(|b| self.qkey(j) < b))
            .filter(|j| self.user_limit_reason(j).is_none())
            .filter(|j| self.nodes_with_room(u, j.per_node(), freed) >= j.nodes as usize)
            .map(|j| u64::from(j.quantity))
            .sum()
    }

    /// GPUs still held by nominated job k's victims for k's preemption: a victim that
    /// released them (and was requeued, and may have started again) no longer counts.
    pub(crate) fn held_by_victims(&self, victims: &[VictimRef]) -> u32 {
        victims
            .iter()
            .filter_map(|v| self.job(v.job).map(|j| j.releasing_for(*v)))
            .sum()
    }

    /// How many of a nomination's victims are still releasing GPUs for it.
    pub(crate) fn victims_releasing(&self, victims: &[VictimRef]) -> usize {
        victims
            .iter()
            .filter(|v| self.job(v.job).is_some_and(|j| j.releasing_for(**v) > 0))
            .count()
    }

    /// `max(0, quantity(k) − GPUs still held by k's releasing victims)` for nominated k.
    pub(crate) fn nomination_term(&self, k: JobId) -> i64 {
        let Some(job) = self.job(k) else { return 0 };
        let Some(nom) = job.nomination() else {
            return 0;
        };
        (i64::from(job.quantity) - i64::from(self.held_by_victims(&nom.victims))).max(0)
    }

    /// What nominated job k sets aside on node `n`, one of its nomination's (SPEC §10,
    /// §16): `max(0, quantity(k) on a node − GPUs still held there by k's releasing
    /// victims)`. Its victims are all on N(k) unless it was nominated by a cross-node count
    /// reclaim, or it or a victim is a gang; those elsewhere hand nothing over on `n`.
    pub(crate) fn nomination_aside(&self, k: JobId, n: SlotIx) -> i64 {
        let Some(job) = self.job(k) else { return 0 };
        let Some(nom) = job.nomination() else {
            return 0;
        };
        if !nom.slots().any(|x| x == n) {
            return 0;
        }
        let held: u32 = nom
            .victims
            .iter()
            .filter_map(|v| self.job(v.job).map(|j| j.releasing_on(*v, n)))
            .sum();
        (i64::from(job.per_node()) - i64::from(held)).max(0)
    }

    /// Σ nomination terms per unit and per node. Computed once per sweep step: between
    /// two decisions it does not change.
    pub(crate) fn nominated_totals(&self) -> Noms {
        let mut noms = Noms {
            unit: vec![0; self.units.len()],
            aside: Vec::new(),
        };
        for u in 0..self.units.len() {
            self.add_unit_noms(u, &mut noms);
        }
        noms
    }

    /// [`Sched::nominated_totals`] for one unit only (the others read 0).
    pub(crate) fn unit_noms(&self, u: UnitIx) -> Noms {
        let mut noms = Noms {
            unit: vec![0; self.units.len()],
            aside: Vec::new(),
        };
        self.add_unit_noms(u, &mut noms);
        noms
    }

    fn add_unit_noms(&self, u: UnitIx, noms: &mut Noms) {
        for &k in &self.units[u].nominated {
            noms.unit[u] += self.nomination_term(k);
            let slots: Vec<SlotIx> = self
                .job(k)
                .and_then(|j| j.nomination())
                .map(|nom| nom.slots().collect())
                .unwrap_or_default();
            for n in slots {
                let term = self.nomination_aside(k, n);
                match noms.aside.iter_mut().find(|a| a.0 == u && a.1 == n) {
                    Some(a) => a.2 += term,
                    None => noms.aside.push((u, n, term)),
                }
            }
        }
    }

    /// `held_back(u, s)`: idle guarantees of other shares that they keep for their queues.
    pub(crate) fn held_back(&self, s: ShareIx, u: UnitIx) -> i64 {
        self.units[u].hb_total as i64 - i64::from(self.shares[s].lanes[u].hb_term)
    }

    /// `held_back(u, s)` where a guaranteed start of the job with key `key` is judged
    /// (step 1, mode A). On an oversubscribed unit (SPEC §3) the other shares, RESERVE
    /// included, hold back only for their waiting jobs that are ahead of this one and could
    /// start now, so overlapping guarantees are served in global order.
    pub(crate) fn held_back_guaranteed(&self, s: ShareIx, u: UnitIx, key: QKey) -> i64 {
        let unit = &self.units[u];
        if !unit.oversubscribed() {
            return self.held_back(s, u);
        }
        self.oversubscribed_held_back(s, u, unit.free(), unit.room_max, Some(key), (&[], &[]))
    }

    /// `held_back(u, s)` where a borrowed start is judged (step 2). On an oversubscribed
    /// unit, RESERVE shares keep their whole idle guarantee, other shares only what their
    /// waiting jobs that could start now ask for (SPEC §3).
    pub(crate) fn held_back_borrowing(&self, s: ShareIx, u: UnitIx) -> i64 {
        let unit = &self.units[u];
        if !unit.oversubscribed() {
            return self.held_back(s, u);
        }
        self.oversubscribed_held_back(s, u, unit.free(), unit.room_max, None, (&[], &[]))
    }

    /// `held_back(u, s)` on an oversubscribed unit with `free` GPUs free, at most `room` on
    /// one node (with `nodes`), and the victims `gone` (of a preemption being weighed)
    /// gone and back in the queue. With `ahead_of`
    /// (a guaranteed start of that job): every other share's waiting jobs ahead of it that
    /// could start now; without (a borrowed start): RESERVE shares' whole idle guarantee,
    /// other shares' waiting jobs that could start now (SPEC §3).
    pub(crate) fn oversubscribed_held_back(
        &self,
        s: ShareIx,
        u: UnitIx,
        free: i64,
        room: u32,
        ahead_of: Option<QKey>,
        (gone, freed): (&[Gone], &[(SlotIx, i64)]),
    ) -> i64 {
        let free = free.max(0).min(i64::from(u32::MAX)) as u32;
        let mut total = 0i64;
        for (r, sh) in self.shares.iter().enumerate() {
            if r == s || !sh.present {
                continue;
            }
            let lane = &sh.lanes[u];
            let (gpus, requeued) = Gone::of(gone, r);
            let idle = lane.limit.saturating_sub(lane.usage - gpus);
            let threshold = self.waiting_threshold_given(u, idle.min(free), room);
            let back = |ahead: Option<QKey>| -> u64 {
                requeued
                    .iter()
                    .filter(|&&(q, k)| q <= threshold && ahead.is_none_or(|a| k < a))
                    .map(|&(q, _)| u64::from(q))
                    .sum()
            };
            let gangs = |ahead| self.gang_waiting(r, u, idle.min(free), ahead, freed);
            let term = match ahead_of {
                Some(key) => {
                    u64::from(lane.waiting_ahead_upto(threshold, key, idle))
                        + back(Some(key))
                        + gangs(Some(key))
                }
                None if sh.strategy == Strategy::Reserve => u64::from(idle),
                None => lane.waiting_upto(threshold) + back(None) + gangs(None),
            };
            total += term.min(u64::from(idle)) as i64;
        }
        total
    }

    /// `available(s, u)` with a given `held_back`, for a job of share s, given the unit's
    /// nomination totals `noms`; `job` is the job itself when it is nominated (its own
    /// reserve is not subtracted).
    pub(crate) fn available_given(
        &self,
        u: UnitIx,
        job: Option<JobId>,
        noms: &Noms,
        held_back: i64,
    ) -> i64 {
        let own = job.map_or(0, |k| {
            if self.job(k).is_some_and(|j| j.is_nominated() && j.unit == u) {
                self.nomination_term(k)
            } else {
                0
            }
        });
        self.units[u].free() - held_back - (noms[u] - own)
    }

    /// `available(s, u)` for a guaranteed start of the job with key `key` (step 1).
    pub(crate) fn available_guaranteed(
        &self,
        s: ShareIx,
        u: UnitIx,
        key: QKey,
        job: Option<JobId>,
        noms: &Noms,
    ) -> i64 {
        self.available_given(u, job, noms, self.held_back_guaranteed(s, u, key))
    }

    /// `available(s, u)` for a borrowed start (step 2).
    pub(crate) fn available_borrowing(
        &self,
        s: ShareIx,
        u: UnitIx,
        job: Option<JobId>,
        noms: &Noms,
    ) -> i64 {
        self.available_given(u, job, noms, self.held_back_borrowing(s, u))
    }

    /// `max(s,u)`: the most a job of s may ever ask for on u (SPEC §2).
    pub(crate) fn max_request(&self, s: ShareIx, u: UnitIx) -> i64 {
        // Withheld devices come back (SPEC §8): a request for them waits, it is not refused.
        self.max_request_of(s, u, self.units[u].usable_to_come())
    }

    /// [`Sched::max_request`] were `usable` devices of unit `u` usable.
    pub(crate) fn max_request_of(&self, s: ShareIx, u: UnitIx, usable: u32) -> i64 {
        let lane = &self.shares[s].lanes[u];
        let own = match lane.cap {
            None => i64::MAX,
            Some(c) => i64::from(lane.limit) + i64::from(c),
        };
        let reserved: i64 = self
            .shares
            .iter()
            .enumerate()
            .filter(|(r, sh)| *r != s && sh.present && sh.strategy == Strategy::Reserve)
            .map(|(_, sh)| i64::from(sh.lanes[u].limit))
            .sum();
        own.min(i64::from(usable) - reserved)
    }

    // ---- index upkeep: every change of a job's place goes through these ----

    pub(crate) fn index_pending(&mut self, id: JobId) {
        let Some(j) = self.job(id) else { return };
        let (s, u, q, key, nominated, user, gang) = (
            j.share,
            j.unit,
            j.quantity,
            j.base_key(),
            j.is_nominated(),
            j.user,
            j.is_gang(),
        );
        if gang {
            self.gangs.insert(id);
        }
        let share = &mut self.shares[s];
        let (b, pen) = (share.users.bucket(user), share.users.pen(user));
        share.lanes[u].queue.insert(b, pen, key, q, nominated, gang);
        if nominated {
            self.units[u].nominated.push(id);
        }
        *share.levels.entry(key.priority()).or_default() += 1;
        if let Some(j) = self.job_mut(id) {
            j.bucket = b;
        }
        self.refresh_lane(s, u);
        if nominated {
            self.refresh_room(u);
        }
    }

    pub(crate) fn unindex_pending(&mut self, id: JobId) {
        let Some(j) = self.job(id) else { return };
        let (s, u, q, key, b) = (j.share, j.unit, j.quantity, j.base_key(), j.bucket);
        self.gangs.remove(&id);
        let share = &mut self.shares[s];
        let was_nominated = share.lanes[u].queue.remove(b, key, q);
        if was_nominated {
            self.units[u].nominated.retain(|&k| k != id);
        }
        if let Some(c) = share.levels.get_mut(&key.priority()) {
            *c -= 1;
            if *c == 0 {
                share.levels.remove(&key.priority());
            }
        }
        self.refresh_lane(s, u);
        if was_nominated {
            self.refresh_room(u);
        }
    }

    /// Take a job's GPUs into account (it starts, or is restored holding them).
    pub(crate) fn index_holding(&mut self, id: JobId) {
        let Some(j) = self.job(id) else { return };
        let (s, u, q, vkey, stopping) =
            (j.share, j.unit, j.quantity, self.vkey(j), j.is_stopping());
        let held: Vec<(SlotIx, Vec<u32>)> = j
            .holdings()
            .into_iter()
            .map(|(n, d)| (n, d.to_vec()))
            .collect();
        let users = &self.shares[s].users;
        let (b, pen) = (users.bucket(j.user), users.pen(j.user));
        if let Some(j) = self.job_mut(id) {
            j.bucket = b;
        }
        let lane = &mut self.shares[s].lanes[u];
        lane.queue.hold(b, pen, q, true);
        lane.usage += q;
        if stopping {
            lane.releasing += q;
            lane.stopping += 1;
        } else if let Some(k) = vkey {
            lane.running.insert(k);
        }
        let unit = &mut self.units[u];
        unit.used += q;
        for (node, devs) in held {
            unit.take(node, &devs);
            unit.held.extend(devs.iter().map(|&d| ((node, d), id)));
        }
        self.refresh_lane(s, u);
        self.refresh_room(u);
    }

    /// Give a job's GPUs back (it ended, or its processes are gone after a stop).
    pub(crate) fn unindex_holding(&mut self, id: JobId) {
        let Some(j) = self.job(id) else { return };
        let (s, u, q, vkey, stopping) =
            (j.share, j.unit, j.quantity, self.vkey(j), j.is_stopping());
        let b = j.bucket;
        let held: Vec<(SlotIx, Vec<u32>)> = j
            .holdings()
            .into_iter()
            .map(|(n, d)| (n, d.to_vec()))
            .collect();
        // Room of the slot's own kind only: a reload that sliced the unit (or stopped
        // slicing it) gave the slots a new meaning, and the old holding is gone with them.
        let same_kind = matches!(&j.phase, Phase::Holding { gib, .. }
            if gib.is_empty() == self.units[u].slice.is_none());
        let lane = &mut self.shares[s].lanes[u];
        lane.queue.hold(b, 0, q, false);
        lane.usage -= q;
        if stopping {
            lane.releasing -= q;
            lane.stopping -= 1;
        } else if let Some(k) = vkey {
            lane.running.remove(&k);
        }
        let unit = &mut self.units[u];
        unit.used -= q;
        for (node, devs) in held {
            if same_kind {
                unit.give(node, &devs);
            }
            for d in &devs {
                unit.held.remove(&(node, *d));
            }
        }
        self.refresh_lane(s, u);
        self.refresh_room(u);
    }

    /// A cancel during a live preemption's notice cuts the notice short (SPEC §14: a
    /// cancel never waits on a notice, and an operator who cancels means now): the stop
    /// goes on from SIGTERM at `now` with its grace, and true is returned so that the
    /// runtime sends SIGTERM. On simulated time nothing changes: the replay's release keeps
    /// §6's `stopAfter`, counted from the first signal.
    pub(crate) fn cut_notice_short(&mut self, id: JobId, now: Time) -> bool {
        if self.clock.acts_at_once() {
            return false;
        }
        let tps = self.clock.ticks_per_second();
        let Some(job) = self.job_mut(id) else {
            return false;
        };
        let Some(plan) = job.stop_plan else {
            return false;
        };
        let Phase::Holding {
            stopping: Some((_, since)),
            ..
        } = &mut job.phase
        else {
            return false;
        };
        let in_notice = plan
            .notice
            .is_some_and(|n| now < *since + i64::from(n.seconds) * tps);
        if !in_notice {
            return false;
        }
        *since = now;
        job.stop_plan = Some(StopPlan {
            notice: None,
            grace: plan.grace,
        });
        true
    }

    /// Mark a holding job as being stopped: it stops being a victim candidate. A job that
    /// is already being stopped (a cancel during a preemption) keeps the instant its stop
    /// began and its stop delay: the stop is the same, only its cause changes.
    pub(crate) fn mark_stopping(&mut self, id: JobId, cause: StopCause, now: Time) {
        let Some(j) = self.job(id) else { return };
        let (s, u, q, vkey) = (j.share, j.unit, j.quantity, self.vkey(j));
        let was_stopping = j.is_stopping();
        let plan = self.plan_stop(j, cause);
        // Replay: `stopAfter` counts from the first signal, and the release comes at the
        // latest when the notice and the grace have run out (SPEC §6, §14).
        let delay = j.stop_after.min(plan.longest());
        if let Some(job) = self.job_mut(id)
            && let Phase::Holding { stopping, .. } = &mut job.phase
        {
            let since = stopping.map_or(now, |(_, since)| since);
            *stopping = Some((cause, since));
            if !was_stopping {
                job.stop_delay = Some(delay);
                job.stop_plan = Some(plan);
            }
        }
        if !was_stopping {
            let lane = &mut self.shares[s].lanes[u];
            if let Some(k) = vkey {
                lane.running.remove(&k);
            }
            lane.releasing += q;
            lane.stopping += 1;
            // Replay: a job that declares how often it saves saves at once on a notice
            // (SPEC §14), before a release that may come at once.
            let saves_on_notice = self.clock.acts_at_once()
                && self.job(id).is_some_and(|j| {
                    j.spec.checkpoint_every_seconds.is_some()
                        && j.stop_plan.is_some_and(|p| p.notice.is_some())
                });
            if saves_on_notice {
                let attempt = self.job(id).map_or(0, |j| j.attempts_started);
                self.checkpoint(id, attempt, now);
            }
        }
    }
}
