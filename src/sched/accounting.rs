//! Accounting (SPEC §1.3 and the derived quantities of §3): usage, idle, borrowed, lent,
//! `waiting`, `held_back` and `available`, kept incrementally in the lanes and units, plus
//! installing a configuration and the index upkeep every state change goes through.

use super::state::{
    Lane, Phase, QKey, ShareIx, ShareState, StopCause, UnitIx, UnitState, VictimRef,
};
use super::{Event, PreemptReason, Sched, Time};
use crate::model::{JobId, ShareState as Enabled, Strategy, UnitCapacity, ValidConfig};
use std::collections::BTreeSet;

/// One share's standing on one unit, for the console, the CLI and the replay summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareUnitStats {
    pub share: String,
    pub unit: String,
    pub strategy: Strategy,
    pub present: bool,
    pub enabled: bool,
    pub in_share: bool,
    pub limit: u32,
    /// Borrow cap in GPUs (`None` = unlimited).
    pub cap: Option<u32>,
    pub usage: u32,
    pub borrowed: u32,
    pub idle: u32,
    pub lent: u32,
    pub running: usize,
    pub queued: usize,
}

/// Victims of one share taken so far in a preemption search: the GPUs they free, and the
/// (quantity, queue key) of each, back in the queue (their submission time is kept).
#[derive(Debug, Clone)]
pub(crate) struct Gone {
    pub share: ShareIx,
    pub gpus: u32,
    pub requeued: Vec<(u32, QKey)>,
}

/// `borrower` uses `gpus` GPUs of `lender`'s idle guarantee (`None`: the unassigned pool).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LendEdge {
    pub unit: String,
    pub borrower: String,
    pub lender: Option<String>,
    pub gpus: u32,
}

impl Sched {
    /// Replace the configuration (SPEC §5, §4.3): nothing queued is dropped, lowered
    /// limits kill nothing, jobs on devices that vanished are preempted (DEVICE_LOST).
    pub fn apply_config(&mut self, config: &ValidConfig, capacity: &[UnitCapacity], now: Time) {
        self.now = now;
        self.install_config(config, capacity, now);
        self.emit(Event::ConfigApplied);
    }

    /// Report a config that was refused (the previous one stays in force).
    pub fn config_rejected(&mut self, error: String, now: Time) {
        self.now = now;
        self.emit(Event::ConfigRejected { error });
    }

    pub(crate) fn install_config(
        &mut self,
        config: &ValidConfig,
        capacity: &[UnitCapacity],
        now: Time,
    ) {
        self.env_name = config.env.name.clone();
        self.grace = config.env.preemption.grace_period_seconds;
        // Units: stable indexes by name; undeclared ones stay, with nothing usable.
        for u in &mut self.units {
            u.present = false;
        }
        for c in &config.env.capacity_limits {
            let ix = match self.unit_ix.get(&c.capacity_unit) {
                Some(&ix) => ix,
                None => {
                    let ix = self.units.len();
                    self.units.push(UnitState {
                        name: c.capacity_unit.clone(),
                        present: false,
                        max_capacity: 0,
                        devices: Vec::new(),
                        usable: 0,
                        free_devices: BTreeSet::new(),
                        used: 0,
                        hb_total: 0,
                        nominated: Vec::new(),
                        guaranteed: 0,
                    });
                    self.unit_ix.insert(c.capacity_unit.clone(), ix);
                    ix
                }
            };
            let devices = capacity
                .iter()
                .find(|d| d.unit == c.capacity_unit)
                .map(|d| {
                    let mut v = d.devices.clone();
                    v.sort_unstable();
                    v.dedup();
                    v
                })
                .unwrap_or_default();
            let u = &mut self.units[ix];
            u.present = true;
            u.max_capacity = c.max_capacity;
            u.usable = c.max_capacity.min(devices.len() as u32);
            u.devices = devices;
        }
        for u in &mut self.units {
            if !u.present {
                u.max_capacity = 0;
                u.usable = 0;
                u.devices.clear();
            }
        }
        let nunits = self.units.len();
        for s in &mut self.shares {
            s.present = false;
            s.lanes.resize_with(nunits, Lane::default);
        }
        for q in &config.shares {
            let ix = match self.share_ix.get(&q.quota_share_name) {
                Some(&ix) => ix,
                None => {
                    let ix = self.shares.len();
                    self.shares.push(ShareState {
                        name: q.quota_share_name.clone(),
                        present: true,
                        enabled: true,
                        strategy: Strategy::Lend,
                        in_share: false,
                        borrow_limit: -1,
                        min_runtime: 0,
                        lanes: vec![Lane::default(); nunits],
                        levels: Default::default(),
                    });
                    self.share_ix.insert(q.quota_share_name.clone(), ix);
                    ix
                }
            };
            let s = &mut self.shares[ix];
            s.present = true;
            s.enabled = q.state == Enabled::Enabled;
            s.strategy = q.resource_sharing_configuration.strategy;
            s.in_share = q.preemption_configuration.in_share_preemption.is_enabled();
            s.borrow_limit = q.resource_sharing_configuration.borrow_limit.unwrap_or(-1);
            s.min_runtime = q.preemption_configuration.min_runtime_seconds;
            for lane in &mut s.lanes {
                lane.limit = 0;
                lane.listed = false;
            }
            for c in &q.capacity_limits {
                if let Some(&u) = self.unit_ix.get(&c.capacity_unit) {
                    s.lanes[u].limit = c.max_capacity;
                    s.lanes[u].listed = true;
                }
            }
        }
        for s in &mut self.shares {
            if !s.present {
                // A removed share keeps its jobs; all its GPUs count as borrowed.
                s.strategy = Strategy::Lend;
                s.in_share = false;
                s.borrow_limit = 0;
                s.min_runtime = 0;
                for lane in &mut s.lanes {
                    lane.limit = 0;
                    lane.listed = false;
                }
            }
            let (strategy, bl) = (s.strategy, s.borrow_limit);
            for lane in &mut s.lanes {
                lane.cap = match strategy {
                    // A unit the share does not list: limit and borrow cap are 0 (SPEC §1.2).
                    _ if !lane.listed => Some(0),
                    Strategy::LendAndBorrow if bl < 0 => None,
                    Strategy::LendAndBorrow => Some(
                        (u64::from(lane.limit) * bl as u64 / 100).min(u64::from(u32::MAX)) as u32,
                    ),
                    _ => Some(0),
                };
            }
        }
        let mut order: Vec<ShareIx> = (0..self.shares.len()).collect();
        order.sort_by(|&a, &b| self.shares[a].name.cmp(&self.shares[b].name));
        self.share_order = order;
        for u in 0..nunits {
            self.units[u].guaranteed = self
                .shares
                .iter()
                .filter(|s| s.present)
                .map(|s| u64::from(s.lanes[u].limit))
                .sum();
        }

        // Devices: rebuild the free sets; jobs on devices that vanished lose them.
        let mut lost = Vec::new();
        for u in 0..self.units.len() {
            let mut free: BTreeSet<u32> = self.units[u].devices.iter().copied().collect();
            for j in self.jobs.iter().flatten() {
                if j.unit == u {
                    for d in j.devices() {
                        if !free.remove(d) && !j.is_stopping() && !lost.contains(&j.id) {
                            lost.push(j.id);
                        }
                    }
                }
            }
            self.units[u].free_devices = free;
        }
        for s in 0..self.shares.len() {
            for u in 0..nunits {
                self.refresh_lane(s, u);
            }
        }
        lost.sort();
        for id in lost {
            self.preempt_one(id, None, PreemptReason::DeviceLost, now);
        }
    }

    /// A device stopped answering: the job on it is preempted (DEVICE_LOST) and the
    /// unit's usable capacity shrinks.
    pub fn device_lost(&mut self, unit: &str, device: u32, now: Time) {
        self.now = now;
        let Some(&u) = self.unit_ix.get(unit) else {
            return;
        };
        let unit_state = &mut self.units[u];
        unit_state.devices.retain(|&d| d != device);
        unit_state.free_devices.remove(&device);
        unit_state.usable = unit_state.max_capacity.min(unit_state.devices.len() as u32);
        let victim = self
            .jobs
            .iter()
            .flatten()
            .find(|j| j.unit == u && j.devices().contains(&device) && !j.is_stopping())
            .map(|j| j.id);
        if let Some(id) = victim {
            self.preempt_one(id, None, PreemptReason::DeviceLost, now);
        }
    }

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
            (lane.waiting_upto(idle).min(u64::from(idle))) as u32
        };
        let old = lane.hb_term;
        self.shares[s].lanes[u].hb_term = term;
        let unit = &mut self.units[u];
        unit.hb_total = unit.hb_total + u64::from(term) - u64::from(old);
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
        let Phase::Pending {
            nominated: Some(victims),
        } = &job.phase
        else {
            return 0;
        };
        (i64::from(job.quantity) - i64::from(self.held_by_victims(victims))).max(0)
    }

    /// Σ nomination terms per unit. Computed once per sweep step: between two decisions
    /// it does not change.
    pub(crate) fn nominated_totals(&self) -> Vec<i64> {
        self.units
            .iter()
            .map(|unit| {
                unit.nominated
                    .iter()
                    .map(|&k| self.nomination_term(k))
                    .sum()
            })
            .collect()
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
        self.oversubscribed_held_back(s, u, unit.free(), Some(key), &[])
    }

    /// `held_back(u, s)` where a borrowed start is judged (step 2). On an oversubscribed
    /// unit, RESERVE shares keep their whole idle guarantee, other shares only what their
    /// waiting jobs that could start now ask for (SPEC §3).
    pub(crate) fn held_back_borrowing(&self, s: ShareIx, u: UnitIx) -> i64 {
        let unit = &self.units[u];
        if !unit.oversubscribed() {
            return self.held_back(s, u);
        }
        self.oversubscribed_held_back(s, u, unit.free(), None, &[])
    }

    /// `held_back(u, s)` on an oversubscribed unit with `free` GPUs free and the victims
    /// `gone` (of a preemption being weighed) gone and back in the queue. With `ahead_of`
    /// (a guaranteed start of that job): every other share's waiting jobs ahead of it that
    /// could start now; without (a borrowed start): RESERVE shares' whole idle guarantee,
    /// other shares' waiting jobs that could start now (SPEC §3).
    pub(crate) fn oversubscribed_held_back(
        &self,
        s: ShareIx,
        u: UnitIx,
        free: i64,
        ahead_of: Option<QKey>,
        gone: &[Gone],
    ) -> i64 {
        let free = free.max(0).min(i64::from(u32::MAX)) as u32;
        let mut total = 0i64;
        for (r, sh) in self.shares.iter().enumerate() {
            if r == s || !sh.present {
                continue;
            }
            let lane = &sh.lanes[u];
            let (gpus, requeued) = gone
                .iter()
                .find(|g| g.share == r)
                .map_or((0, &[][..]), |g| (g.gpus, g.requeued.as_slice()));
            let idle = lane.limit.saturating_sub(lane.usage - gpus);
            let threshold = idle.min(free);
            let back = |ahead: Option<QKey>| -> u64 {
                requeued
                    .iter()
                    .filter(|&&(q, k)| q <= threshold && ahead.is_none_or(|a| k < a))
                    .map(|&(q, _)| u64::from(q))
                    .sum()
            };
            let term = match ahead_of {
                Some(key) => {
                    u64::from(lane.waiting_ahead_upto(threshold, key, idle)) + back(Some(key))
                }
                None if sh.strategy == Strategy::Reserve => u64::from(idle),
                None => lane.waiting_upto(threshold) + back(None),
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
        noms: &[i64],
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
        noms: &[i64],
    ) -> i64 {
        self.available_given(u, job, noms, self.held_back_guaranteed(s, u, key))
    }

    /// `available(s, u)` for a borrowed start (step 2).
    pub(crate) fn available_borrowing(
        &self,
        s: ShareIx,
        u: UnitIx,
        job: Option<JobId>,
        noms: &[i64],
    ) -> i64 {
        self.available_given(u, job, noms, self.held_back_borrowing(s, u))
    }

    /// `max(s,u)`: the most a job of s may ever ask for on u (SPEC §2).
    pub(crate) fn max_request(&self, s: ShareIx, u: UnitIx) -> i64 {
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
        own.min(i64::from(self.units[u].usable) - reserved)
    }

    // ---- index upkeep: every change of a job's place goes through these ----

    pub(crate) fn index_pending(&mut self, id: JobId) {
        let Some(j) = self.job(id) else { return };
        let (s, u, q, key, nominated) = (j.share, j.unit, j.quantity, j.qkey(), j.is_nominated());
        let share = &mut self.shares[s];
        share.lanes[u].pending.insert(key);
        if nominated {
            share.lanes[u].nominated.insert(key);
            self.units[u].nominated.push(id);
        } else {
            share.lanes[u].by_qty.entry(q).or_default().insert(key);
        }
        *share.levels.entry(key.priority()).or_default() += 1;
        self.refresh_lane(s, u);
    }

    pub(crate) fn unindex_pending(&mut self, id: JobId) {
        let Some(j) = self.job(id) else { return };
        let (s, u, q, key) = (j.share, j.unit, j.quantity, j.qkey());
        let share = &mut self.shares[s];
        let lane = &mut share.lanes[u];
        lane.pending.remove(&key);
        if let Some(set) = lane.by_qty.get_mut(&q) {
            set.remove(&key);
            if set.is_empty() {
                lane.by_qty.remove(&q);
            }
        }
        if lane.nominated.remove(&key) {
            self.units[u].nominated.retain(|&k| k != id);
        }
        if let Some(c) = share.levels.get_mut(&key.priority()) {
            *c -= 1;
            if *c == 0 {
                share.levels.remove(&key.priority());
            }
        }
        self.refresh_lane(s, u);
    }

    /// Take a job's GPUs into account (it starts, or is restored holding them).
    pub(crate) fn index_holding(&mut self, id: JobId) {
        let Some(j) = self.job(id) else { return };
        let (s, u, q, vkey, stopping) = (j.share, j.unit, j.quantity, j.vkey(), j.is_stopping());
        let devs: Vec<u32> = j.devices().to_vec();
        let lane = &mut self.shares[s].lanes[u];
        lane.usage += q;
        if stopping {
            lane.releasing += q;
            lane.stopping += 1;
        } else if let Some(k) = vkey {
            lane.running.insert(k);
        }
        let unit = &mut self.units[u];
        unit.used += q;
        for d in devs {
            unit.free_devices.remove(&d);
        }
        self.refresh_lane(s, u);
    }

    /// Give a job's GPUs back (it ended, or its processes are gone after a stop).
    pub(crate) fn unindex_holding(&mut self, id: JobId) {
        let Some(j) = self.job(id) else { return };
        let (s, u, q, vkey, stopping) = (j.share, j.unit, j.quantity, j.vkey(), j.is_stopping());
        let devs: Vec<u32> = j.devices().to_vec();
        let lane = &mut self.shares[s].lanes[u];
        lane.usage -= q;
        if stopping {
            lane.releasing -= q;
            lane.stopping -= 1;
        } else if let Some(k) = vkey {
            lane.running.remove(&k);
        }
        let unit = &mut self.units[u];
        unit.used -= q;
        for d in devs {
            if unit.devices.binary_search(&d).is_ok() {
                unit.free_devices.insert(d);
            }
        }
        self.refresh_lane(s, u);
    }

    /// Mark a holding job as being stopped: it stops being a victim candidate. A job that
    /// is already being stopped (a cancel during a preemption) keeps the instant its stop
    /// began and its stop delay: the stop is the same, only its cause changes.
    pub(crate) fn mark_stopping(&mut self, id: JobId, cause: StopCause, now: Time) {
        let Some(j) = self.job(id) else { return };
        let (s, u, q, vkey) = (j.share, j.unit, j.quantity, j.vkey());
        let was_stopping = j.is_stopping();
        let delay = j.stop_after.min(self.grace);
        if let Some(job) = self.job_mut(id)
            && let Phase::Holding { stopping, .. } = &mut job.phase
        {
            let since = stopping.map_or(now, |(_, since)| since);
            *stopping = Some((cause, since));
            if !was_stopping {
                job.stop_delay = Some(delay);
            }
        }
        if !was_stopping {
            let lane = &mut self.shares[s].lanes[u];
            if let Some(k) = vkey {
                lane.running.remove(&k);
            }
            lane.releasing += q;
            lane.stopping += 1;
        }
    }

    // ---- reports ----

    /// Per share and unit standing, shares in name order, including removed shares that
    /// still have jobs.
    pub fn share_stats(&self) -> Vec<ShareUnitStats> {
        let mut out = Vec::new();
        for u in 0..self.units.len() {
            if !self.units[u].present && self.units[u].used == 0 {
                continue;
            }
            let lent = self.lent_on(u);
            for &s in &self.share_order {
                let sh = &self.shares[s];
                let lane = &sh.lanes[u];
                if !sh.present && lane.is_empty() {
                    continue;
                }
                if sh.present && lane.limit == 0 && lane.is_empty() {
                    continue;
                }
                out.push(ShareUnitStats {
                    share: sh.name.clone(),
                    unit: self.units[u].name.clone(),
                    strategy: sh.strategy,
                    present: sh.present,
                    enabled: sh.enabled,
                    in_share: sh.in_share,
                    limit: lane.limit,
                    cap: lane.cap,
                    usage: lane.usage,
                    borrowed: lane.borrowed(),
                    idle: lane.idle(),
                    lent: lent[s],
                    running: lane.running.len() + lane.stopping as usize,
                    queued: lane.pending.len(),
                });
            }
        }
        out
    }

    /// Lent GPUs per share on unit u: borrowed GPUs attributed to lenders' idle guarantees
    /// in name order, then to the unassigned pool (SPEC §1.3).
    pub(crate) fn lent_on(&self, u: UnitIx) -> Vec<u32> {
        let mut lent = vec![0u32; self.shares.len()];
        let mut borrowed: u64 = self
            .shares
            .iter()
            .map(|s| u64::from(s.lanes[u].borrowed()))
            .sum();
        for &s in &self.share_order {
            if borrowed == 0 {
                break;
            }
            let sh = &self.shares[s];
            if !sh.present || sh.strategy == Strategy::Reserve {
                continue;
            }
            let give = u64::from(sh.lanes[u].idle()).min(borrowed);
            lent[s] = give as u32;
            borrowed -= give;
        }
        lent
    }

    /// Who borrows how many GPUs from whom, per unit: borrowers in name order take from
    /// lenders in name order, then from the unassigned pool.
    pub fn lending(&self) -> Vec<LendEdge> {
        let mut out = Vec::new();
        for u in 0..self.units.len() {
            let lent = self.lent_on(u);
            let mut lenders: Vec<(ShareIx, u32)> = self
                .share_order
                .iter()
                .filter(|&&s| lent[s] > 0)
                .map(|&s| (s, lent[s]))
                .collect();
            let mut li = 0;
            for &b in &self.share_order {
                let mut need = self.shares[b].lanes[u].borrowed();
                while need > 0 {
                    if li < lenders.len() {
                        let take = need.min(lenders[li].1);
                        push_edge(&mut out, self, u, b, Some(lenders[li].0), take);
                        lenders[li].1 -= take;
                        need -= take;
                        if lenders[li].1 == 0 {
                            li += 1;
                        }
                    } else {
                        push_edge(&mut out, self, u, b, None, need);
                        need = 0;
                    }
                }
            }
        }
        out
    }

    /// (usage, limit) of a share on a unit, by index.
    pub fn share_stats_for(&self, s: ShareIx, u: UnitIx) -> Option<(u32, u32)> {
        let lane = self.shares.get(s)?.lanes.get(u)?;
        Some((lane.usage, lane.limit))
    }

    /// The key of a lane's first nominated job: its pending jobs after it are blocked.
    pub fn lane_block(&self, s: ShareIx, u: UnitIx) -> Option<crate::sched::QKey> {
        self.shares.get(s)?.lanes.get(u)?.block()
    }

    /// Is a pending job behind a nominated job of its share and unit (so it may not start)?
    pub fn is_blocked(&self, id: JobId) -> bool {
        self.job(id).is_some_and(|j| {
            j.is_pending()
                && !j.is_nominated()
                && self.shares[j.share].lanes[j.unit]
                    .block()
                    .is_some_and(|b| b < j.qkey())
        })
    }

    /// Is the unit oversubscribed (Σ guarantees > usable)? By name.
    pub fn oversubscribed(&self, unit: &str) -> bool {
        self.unit_ix
            .get(unit)
            .is_some_and(|&u| self.units[u].present && self.units[u].oversubscribed())
    }

    /// Usable GPUs of a unit (min(maxCapacity, healthy devices)), by name.
    pub fn usable(&self, unit: &str) -> u32 {
        self.unit_ix.get(unit).map_or(0, |&u| self.units[u].usable)
    }

    /// GPUs of a unit held by jobs, by name.
    pub fn used(&self, unit: &str) -> u32 {
        self.unit_ix.get(unit).map_or(0, |&u| self.units[u].used)
    }

    /// Per unit: (name, usable, used, Σ guarantees of present shares).
    pub fn unit_totals(&self) -> Vec<(String, u32, u32, u64)> {
        self.units
            .iter()
            .enumerate()
            .filter(|(_, u)| u.present)
            .map(|(ix, u)| {
                let g: u64 = self
                    .shares
                    .iter()
                    .filter(|s| s.present)
                    .map(|s| u64::from(s.lanes[ix].limit))
                    .sum();
                (u.name.clone(), u.usable, u.used, g)
            })
            .collect()
    }

    /// Which job holds each device of a unit (None: free).
    pub fn device_map(&self, unit: &str) -> Vec<(u32, Option<JobId>)> {
        let Some(&u) = self.unit_ix.get(unit) else {
            return Vec::new();
        };
        let mut holders: std::collections::BTreeMap<u32, JobId> = Default::default();
        for j in self.jobs.iter().flatten() {
            if j.unit == u {
                for d in j.devices() {
                    holders.insert(*d, j.id);
                }
            }
        }
        let mut out: Vec<(u32, Option<JobId>)> = self.units[u]
            .devices
            .iter()
            .map(|d| (*d, holders.get(d).copied()))
            .collect();
        for (d, j) in holders {
            if self.units[u].devices.binary_search(&d).is_err() {
                out.push((d, Some(j)));
            }
        }
        out
    }
}

fn push_edge(
    out: &mut Vec<LendEdge>,
    sched: &Sched,
    u: UnitIx,
    borrower: ShareIx,
    lender: Option<ShareIx>,
    gpus: u32,
) {
    let unit = sched.units[u].name.clone();
    let borrower = sched.shares[borrower].name.clone();
    let lender = lender.map(|l| sched.shares[l].name.clone());
    if let Some(e) = out
        .iter_mut()
        .find(|e| e.unit == unit && e.borrower == borrower && e.lender == lender)
    {
        e.gpus += gpus;
    } else {
        out.push(LendEdge {
            unit,
            borrower,
            lender,
            gpus,
        });
    }
}
