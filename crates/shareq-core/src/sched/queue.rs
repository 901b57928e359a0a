//! A lane's queue of RUNNABLE jobs (SPEC §3, §12): one bucket per user where the share
//! orders or caps by user, else one bucket for everyone.
//!
//! Each bucket keeps its jobs in their fixed *base* order (priority, submission, id) and
//! its user's current fair-share penalty. Everything read out of the queue is shifted by
//! that penalty (see [`QKey::shift`]), and every bound handed in is shifted back per
//! bucket, so the merged order moves as usage decays without re-sorting anything: a query
//! costs one range lookup per bucket (per quantity), O(users of the share).

use super::keys::{EFF_SCALE, QKey};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{self, Excluded, Included, Unbounded};

/// One user's (or, in a share that does not look at users, everyone's) queued jobs.
#[derive(Debug, Clone, Default)]
pub struct Bucket {
    /// RUNNABLE jobs, nominated ones included, by base key.
    pub pending: BTreeSet<QKey>,
    /// RUNNABLE, not nominated jobs by quantity: the startable candidates and `waiting`.
    pub by_qty: BTreeMap<u32, BTreeSet<QKey>>,
    /// RUNNABLE, not nominated gangs (SPEC §16) by quantity in all: members of step 2's
    /// set like any job (the level queries read them), but no candidates of the
    /// one-node searches and no part of `waiting` (the scheduler judges gangs apart).
    pub gangs: BTreeMap<u32, BTreeSet<QKey>>,
    /// GPUs the bucket's user holds on this lane (for `userLimit`).
    pub held: u32,
    /// The user's fair-share penalty as of the last pass, in `EFF_SCALE` units.
    pub pen: i64,
}

impl Bucket {
    fn is_unused(&self) -> bool {
        self.pending.is_empty() && self.held == 0
    }
}

/// A bound in shifted key space, moved into a bucket's base key space.
fn unshift(b: Bound<QKey>, pen: i64) -> Bound<QKey> {
    let back = |k: QKey| QKey {
        eff: k.eff.saturating_sub(pen),
        ..k
    };
    match b {
        Unbounded => Unbounded,
        Included(k) => Included(back(k)),
        Excluded(k) => Excluded(back(k)),
    }
}

/// The RUNNABLE jobs of one share on one unit.
#[derive(Debug, Clone, Default)]
pub struct Queue {
    buckets: BTreeMap<u32, Bucket>,
    len: usize,
    /// Base key → bucket, of each nominated job.
    nominated: BTreeMap<QKey, u32>,
    /// Non-nominated jobs per quantity over all buckets: `waiting` without a `userLimit`.
    totals: BTreeMap<u32, usize>,
    /// The first job in the share's order (shifted key), kept as jobs come and go and
    /// penalties move: the reservation's head is judged at every round of a pass.
    head: Option<QKey>,
    /// `userLimit`: GPUs of this unit one user's jobs may hold; `None` = no cap.
    pub user_limit: Option<u32>,
}

impl Queue {
    /// An empty queue under `userLimit` `user_limit`.
    pub fn with_limit(user_limit: Option<u32>) -> Queue {
        Queue {
            user_limit,
            ..Queue::default()
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The largest quantity a job of bucket `b` may start with under `userLimit`.
    pub fn cap_of(&self, b: &Bucket) -> u32 {
        self.user_limit
            .map_or(u32::MAX, |l| l.saturating_sub(b.held))
    }

    /// Queue a job (base key `key`, `q` GPUs) in bucket `b`, whose user's penalty is `pen`.
    /// A `gang` (SPEC §16) is not indexed by quantity: whether it has room is not one
    /// node's, so the scheduler judges gangs apart, `waiting` included.
    pub fn insert(&mut self, b: u32, pen: i64, key: QKey, q: u32, nominated: bool, gang: bool) {
        let bucket = self.buckets.entry(b).or_default();
        if bucket.pending.is_empty() && bucket.held == 0 {
            bucket.pen = pen;
        }
        if bucket.pending.insert(key) {
            self.len += 1;
        }
        let shifted = key.shift(bucket.pen);
        if nominated {
            self.nominated.insert(key, b);
        } else if gang {
            bucket.gangs.entry(q).or_default().insert(key);
        } else if bucket.by_qty.entry(q).or_default().insert(key) {
            *self.totals.entry(q).or_default() += 1;
        }
        if self.head.is_none_or(|h| shifted < h) {
            self.head = Some(shifted);
        }
    }

    /// Take a job out of the queue; returns whether it was nominated.
    pub fn remove(&mut self, b: u32, key: QKey, q: u32) -> bool {
        let was_nominated = self.nominated.remove(&key).is_some();
        let Some(bucket) = self.buckets.get_mut(&b) else {
            return was_nominated;
        };
        if bucket.pending.remove(&key) {
            self.len -= 1;
        }
        let shifted = key.shift(bucket.pen);
        if let Some(set) = bucket.by_qty.get_mut(&q) {
            if set.remove(&key)
                && let Some(c) = self.totals.get_mut(&q)
            {
                *c -= 1;
                if *c == 0 {
                    self.totals.remove(&q);
                }
            }
            if set.is_empty() {
                bucket.by_qty.remove(&q);
            }
        }
        if let Some(set) = bucket.gangs.get_mut(&q) {
            set.remove(&key);
            if set.is_empty() {
                bucket.gangs.remove(&q);
            }
        }
        if bucket.is_unused() {
            self.buckets.remove(&b);
        }
        if self.head == Some(shifted) {
            self.head = self.scan_first();
        }
        was_nominated
    }

    /// The bucket's user now holds `q` more (or, with `add` false, fewer) GPUs.
    pub fn hold(&mut self, b: u32, pen: i64, q: u32, add: bool) {
        let bucket = self.buckets.entry(b).or_default();
        if bucket.is_unused() {
            bucket.pen = pen;
        }
        bucket.held = if add {
            bucket.held + q
        } else {
            bucket.held.saturating_sub(q)
        };
        if bucket.is_unused() {
            self.buckets.remove(&b);
        }
    }

    /// Set every bucket's penalty from `pen` (by bucket; a pass re-evaluates every
    /// user's).
    pub fn set_pens(&mut self, pen: &[i64]) {
        for (&b, bucket) in self.buckets.iter_mut() {
            bucket.pen = pen.get(b as usize).copied().unwrap_or(0);
        }
        self.head = self.scan_first();
    }

    /// What bucket `b`'s user holds here.
    pub fn held(&self, b: u32) -> u32 {
        self.buckets.get(&b).map_or(0, |x| x.held)
    }

    /// The first RUNNABLE job (nominated ones included), in the share's order.
    pub fn first(&self) -> Option<QKey> {
        self.head
    }

    fn scan_first(&self) -> Option<QKey> {
        self.buckets
            .values()
            .filter_map(|b| b.pending.first().map(|k| k.shift(b.pen)))
            .min()
    }

    /// Every RUNNABLE job's shifted key, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = QKey> + '_ {
        self.buckets
            .values()
            .flat_map(|b| b.pending.iter().map(|k| k.shift(b.pen)))
    }

    /// The shifted key of a queued job, given its base key and bucket.
    pub fn key_of(&self, b: u32, base: QKey) -> QKey {
        base.shift(self.buckets.get(&b).map_or(0, |x| x.pen))
    }

    /// The first nominated job's key: the lane's jobs after it may not start.
    pub fn block(&self) -> Option<QKey> {
        self.nominated
            .iter()
            .map(|(k, b)| self.key_of(*b, *k))
            .min()
    }

    /// Nominated jobs' shifted keys.
    pub fn nominated(&self) -> impl Iterator<Item = QKey> + '_ {
        self.nominated.iter().map(|(k, b)| self.key_of(*b, *k))
    }

    /// The first non-nominated job after `from` whose quantity lies in `qty` and that its
    /// user's `userLimit` lets start.
    pub fn first_in(&self, qty: (Bound<u32>, Bound<u32>), from: Bound<QKey>) -> Option<QKey> {
        let mut best: Option<QKey> = None;
        let lo = match qty.0 {
            Unbounded => 0,
            Included(l) => l,
            Excluded(l) => l.saturating_add(1),
        };
        let hi = match qty.1 {
            Unbounded => u32::MAX,
            Included(h) => h,
            Excluded(0) => return None,
            Excluded(h) => h - 1,
        };
        for b in self.buckets.values() {
            let hi = hi.min(self.cap_of(b));
            if lo > hi {
                continue;
            }
            let from = unshift(from, b.pen);
            for (_, set) in b.by_qty.range(lo..=hi) {
                if let Some(&k) = set.range((from, Unbounded)).next() {
                    let k = k.shift(b.pen);
                    if best.is_none_or(|x| k < x) {
                        best = Some(k);
                    }
                }
            }
        }
        best
    }

    /// Σ quantity of RUNNABLE, not nominated jobs with quantity ≤ `threshold` that their
    /// user's `userLimit` lets start (SPEC §3 `waiting`, §12).
    pub fn waiting_upto(&self, threshold: u32) -> u64 {
        if self.user_limit.is_none() {
            return self
                .totals
                .range(..=threshold)
                .map(|(q, n)| u64::from(*q) * *n as u64)
                .sum();
        }
        self.buckets
            .values()
            .map(|b| {
                b.by_qty
                    .range(..=threshold.min(self.cap_of(b)))
                    .map(|(q, s)| u64::from(*q) * s.len() as u64)
                    .sum::<u64>()
            })
            .sum()
    }

    /// `min(cap, waiting_ahead)`: as [`Queue::waiting_upto`], only jobs before `before`.
    pub fn waiting_ahead_upto(&self, threshold: u32, before: QKey, cap: u32) -> u32 {
        let mut sum = 0u64;
        for b in self.buckets.values() {
            let before = unshift(Excluded(before), b.pen);
            for (q, set) in b.by_qty.range(..=threshold.min(self.cap_of(b))) {
                for _ in set.range((Unbounded, before)) {
                    sum += u64::from(*q);
                    if sum >= u64::from(cap) {
                        return cap;
                    }
                }
            }
        }
        sum as u32
    }

    /// For each quantity up to `max_q`, the first job (over all buckets) before `block`
    /// that `skip` does not rule out and its user's `userLimit` lets start: the step-3
    /// representatives (of one lane and quantity, the job first in the share's order has
    /// every victim set a later one has).
    pub fn firsts_per_qty(
        &self,
        max_q: u32,
        block: Option<QKey>,
        skip: impl Fn(QKey) -> bool,
    ) -> Vec<QKey> {
        let mut best: BTreeMap<u32, QKey> = BTreeMap::new();
        for b in self.buckets.values() {
            let hi = max_q.min(self.cap_of(b));
            if hi < 1 {
                continue;
            }
            for (&q, set) in b.by_qty.range(1..=hi) {
                for &k in set {
                    let k = k.shift(b.pen);
                    if block.is_some_and(|x| k > x) || best.get(&q).is_some_and(|x| k > *x) {
                        break;
                    }
                    if !skip(k) {
                        best.insert(q, k);
                        break;
                    }
                }
            }
        }
        best.into_values().collect()
    }

    /// The largest FIFO key (submission, id) among the jobs of quantity ≥ `min_q` at
    /// priority level `inv_prio`, nominated ones included when `nominated_too` says so.
    pub fn level_max(
        &self,
        inv_prio: u32,
        min_q: u32,
        nominated_too: impl Fn(QKey) -> bool,
    ) -> Option<(i64, u64)> {
        let (lo, hi) = QKey::level_bounds(inv_prio);
        let mut m = None;
        for b in self.buckets.values() {
            for (_, set) in b.by_qty.range(min_q..).chain(b.gangs.range(min_q..)) {
                if let Some(k) = set.range(lo..=hi).next_back() {
                    m = m.max(Some(k.fifo()));
                }
            }
        }
        for (k, _) in self.nominated.range(lo..=hi) {
            if nominated_too(*k) {
                m = m.max(Some(k.fifo()));
            }
        }
        m
    }

    /// The largest FIFO key among the jobs of quantity ≥ `min_q` at `k`'s priority level
    /// that come at or before `k` in the share's order: within a bucket and level the
    /// base order is the FIFO order, so each bucket's last such job is its largest.
    pub fn level_max_upto(
        &self,
        k: QKey,
        min_q: u32,
        nominated_too: impl Fn(QKey) -> bool,
    ) -> Option<(i64, u64)> {
        let (lo, _) = QKey::level_bounds(k.inv_prio);
        let mut m = None;
        for b in self.buckets.values() {
            let Included(upto) = unshift(Included(k), b.pen) else {
                continue;
            };
            if upto < lo {
                continue;
            }
            for (_, set) in b.by_qty.range(min_q..).chain(b.gangs.range(min_q..)) {
                if let Some(x) = set.range(lo..=upto).next_back() {
                    m = m.max(Some(x.fifo()));
                }
            }
        }
        for (x, b) in &self.nominated {
            if x.inv_prio == k.inv_prio && self.key_of(*b, *x) <= k && nominated_too(*x) {
                m = m.max(Some(x.fifo()));
            }
        }
        m
    }

    /// The first job (shifted key) of quantity ≥ `min_q` at priority level `inv_prio`
    /// whose FIFO key is at least `fifo`, nominated ones included when `nominated_too`.
    pub fn level_first_from(
        &self,
        inv_prio: u32,
        fifo: (i64, u64),
        min_q: u32,
        nominated_too: impl Fn(QKey) -> bool,
    ) -> Option<QKey> {
        let (_, hi) = QKey::level_bounds(inv_prio);
        let from = QKey {
            inv_prio,
            eff: fifo.0.saturating_mul(EFF_SCALE),
            submitted: fifo.0,
            id: fifo.1,
        };
        let mut best: Option<QKey> = None;
        for b in self.buckets.values() {
            for (_, set) in b.by_qty.range(min_q..).chain(b.gangs.range(min_q..)) {
                if let Some(x) = set.range(from..=hi).next() {
                    let x = x.shift(b.pen);
                    if best.is_none_or(|y| x < y) {
                        best = Some(x);
                    }
                }
            }
        }
        for (x, b) in &self.nominated {
            if x.inv_prio == inv_prio && x.fifo() >= fifo && nominated_too(*x) {
                let x = self.key_of(*b, *x);
                if best.is_none_or(|y| x < y) {
                    best = Some(x);
                }
            }
        }
        best
    }
}
