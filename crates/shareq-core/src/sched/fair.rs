//! Fair share among the users of a share (SPEC §12): who a share's users are, their
//! decayed usage, the penalty it adds to their jobs' submission time, and `userLimit`.
//!
//! A user's decayed usage is kept as an accumulator: its value at the instant of the last
//! change of the GPUs the user holds in the share, and those GPUs; between two changes it
//! evolves in closed form, so reading it costs O(1) and nothing is rewritten as time
//! passes. The closed holding intervals are kept too (the newest few thousand; older ones
//! are folded into one figure), so that a reload changing `halfLifeSeconds` re-weighs the
//! history.

use super::Sched;
use super::keys::{EFF_SCALE, ShareIx, Time};
use crate::model::{FairShare, JobId, QuotaShare};
use std::collections::HashMap;

/// A share's users and its policy towards them.
#[derive(Debug, Clone, Default)]
pub struct Users {
    ix: HashMap<String, u32>,
    list: Vec<UserUse>,
    /// `fairShare` in force; `None` = first come, first served.
    pub policy: Option<FairShare>,
    /// `userLimit` in force.
    pub user_limit: Option<u32>,
    /// The half-life in the driver's instants (the default when there is no policy, so
    /// that a policy added later finds the history).
    half_life: Time,
}

/// One user's usage of one share.
#[derive(Debug, Clone)]
struct UserUse {
    name: String,
    /// Decayed usage (GPU·instants) at `at`.
    acc: f64,
    at: Time,
    /// GPUs the user's attempts hold in the share now (all units).
    rate: u32,
    /// Closed holding intervals (start, release, GPUs), for a change of half-life.
    closed: Vec<(Time, Time, u32)>,
    /// Usage restored from the store: (value, instant), counted before `closed`.
    restored: Option<(f64, Time)>,
    /// The oldest closed intervals folded into one figure (value, instant) once there were
    /// [`MAX_CLOSED`]: a later change of half-life weighs them as one lump.
    folded: Option<(f64, Time)>,
    /// The penalty as of the last pass, in `EFF_SCALE` units.
    pen: i64,
}

/// Closed holding intervals kept per user for a change of half-life: beyond it the older
/// half is folded into one figure (the memory a user costs stays bounded).
const MAX_CLOSED: usize = 4096;

/// `2^(−dt/h)`.
fn decay(dt: Time, h: Time) -> f64 {
    if dt <= 0 {
        return 1.0;
    }
    (-(dt as f64) / h.max(1) as f64).exp2()
}

/// GPU·instants that `q` GPUs held over [t0, t1] count at `t` (t ≥ t1 ≥ t0).
fn interval(q: u32, t0: Time, t1: Time, t: Time, h: Time) -> f64 {
    let k = h.max(1) as f64 / std::f64::consts::LN_2;
    f64::from(q) * k * (decay(t - t1, h) - decay(t - t0, h))
}

impl UserUse {
    fn value(&self, t: Time, h: Time) -> f64 {
        let d = decay(t - self.at, h);
        let k = h.max(1) as f64 / std::f64::consts::LN_2;
        self.acc * d + f64::from(self.rate) * k * (1.0 - d)
    }
}

impl Users {
    /// The share orders or caps its queue by user: each user's jobs in a bucket of their
    /// own.
    pub fn by_user(&self) -> bool {
        self.policy.is_some() || self.user_limit.is_some()
    }

    /// The index of user `name` in this share (a new one is added).
    pub fn ix_of(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.ix.get(name) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push(UserUse {
            name: name.to_string(),
            acc: 0.0,
            at: 0,
            rate: 0,
            closed: Vec::new(),
            restored: None,
            folded: None,
            pen: 0,
        });
        self.ix.insert(name.to_string(), i);
        i
    }

    /// The index of a known user.
    pub fn find(&self, name: &str) -> Option<u32> {
        self.ix.get(name).copied()
    }

    pub fn name(&self, u: u32) -> &str {
        self.list.get(u as usize).map_or("?", |x| x.name.as_str())
    }

    /// The users, by index.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The bucket of user `u`'s jobs.
    pub fn bucket(&self, u: u32) -> u32 {
        if self.by_user() { u } else { 0 }
    }

    /// User `u`'s penalty as of the last pass (0 without `fairShare`).
    pub fn pen(&self, u: u32) -> i64 {
        if self.policy.is_none() {
            return 0;
        }
        self.list.get(u as usize).map_or(0, |x| x.pen)
    }

    /// Decayed usage of user `u` at `t`, in GPU·instants.
    pub fn usage(&self, u: u32, t: Time) -> f64 {
        self.list
            .get(u as usize)
            .map_or(0.0, |x| x.value(t, self.half_life))
    }

    /// `q` more GPUs held by user `u` from `t`.
    fn started(&mut self, u: u32, q: u32, t: Time) {
        let h = self.half_life;
        if let Some(x) = self.list.get_mut(u as usize) {
            x.acc = x.value(t, h);
            x.at = t;
            x.rate += q;
        }
    }

    /// `q` GPUs held by user `u` since `start` released at `t`.
    fn released(&mut self, u: u32, q: u32, start: Time, t: Time) {
        let h = self.half_life;
        if let Some(x) = self.list.get_mut(u as usize) {
            x.acc = x.value(t, h);
            x.at = t;
            x.rate = x.rate.saturating_sub(q);
            x.closed.push((start, t, q));
            if x.closed.len() > MAX_CLOSED {
                // Fold the older half into one figure at the newest of its releases.
                let half = x.closed.len() / 2;
                let at = x.closed[..half].iter().map(|c| c.1).max().unwrap_or(t);
                let mut v = x.folded.map_or(0.0, |(f, fa)| f * decay(at - fa, h));
                for &(t0, t1, q) in &x.closed[..half] {
                    v += interval(q, t0, t1, at, h);
                }
                x.closed.drain(..half);
                x.folded = Some((v, at));
            }
        }
    }

    /// User `u`'s weight under the policy (1 without one).
    pub fn weight(&self, u: u32) -> f64 {
        self.policy.as_ref().map_or(1.0, |p| p.weight(self.name(u)))
    }
}

/// One user's standing in one share, for the console, `jobs`, reports, metrics and the
/// store.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserStanding {
    pub share: String,
    pub user: String,
    /// The share has `fairShare`: the usage orders its queue.
    pub fair: bool,
    /// Decayed usage, GPU-seconds, at `at`.
    pub usage_gpu_seconds: f64,
    /// The instant the figures are for, in the driver's unit.
    pub at: Time,
    /// The user's weight (1 without `fairShare`).
    pub weight: f64,
    /// The delay the usage adds to the user's jobs' submission time, seconds (0 without
    /// `fairShare`).
    pub delay_seconds: f64,
    /// GPUs the user's jobs hold in the share now.
    pub holding: u32,
}

/// A share's user's decayed usage as of an instant, as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedUsage {
    pub share: String,
    pub user: String,
    /// GPU-seconds.
    pub usage_gpu_seconds: f64,
    /// The instant it was taken, in the driver's unit.
    pub at: Time,
}

impl Sched {
    /// Σ limit(s,u) over the units: the share's size that usage is divided by.
    fn share_size(&self, s: ShareIx) -> f64 {
        let l: u64 = self.shares[s]
            .lanes
            .iter()
            .map(|l| u64::from(l.limit))
            .sum();
        l.max(1) as f64
    }

    /// The penalty user `u` of share s has at `t`, in `EFF_SCALE` units (SPEC §12:
    /// `U / (weight × Σ limit)` seconds).
    fn penalty_at(&self, s: ShareIx, u: u32, t: Time) -> i64 {
        let users = &self.shares[s].users;
        if users.policy.is_none() {
            return 0;
        }
        let p = users.usage(u, t) / (users.weight(u) * self.share_size(s)) * EFF_SCALE as f64;
        if p.is_finite() {
            p.clamp(0.0, (i64::MAX / 4) as f64) as i64
        } else {
            0
        }
    }

    /// Re-evaluate every fair-share user's penalty at the pass's instant, and shift their
    /// buckets: O(users) per share.
    pub(crate) fn refresh_penalties(&mut self, now: Time) {
        for s in 0..self.shares.len() {
            if self.shares[s].users.policy.is_none() {
                continue;
            }
            let pens: Vec<i64> = (0..self.shares[s].users.len() as u32)
                .map(|u| self.penalty_at(s, u, now))
                .collect();
            let share = &mut self.shares[s];
            for (u, &p) in pens.iter().enumerate() {
                share.users.list[u].pen = p;
            }
            for lane in &mut share.lanes {
                lane.queue.set_pens(&pens);
            }
        }
    }

    /// The current penalty of the jobs of bucket `bucket` of share s (see
    /// the job's `bucket`), in `EFF_SCALE` units.
    pub fn bucket_pen(&self, s: ShareIx, bucket: u32) -> i64 {
        self.shares.get(s).map_or(0, |sh| {
            if sh.users.by_user() {
                sh.users.pen(bucket)
            } else {
                0
            }
        })
    }

    /// Usage upkeep: job `id` started holding its GPUs at `now`.
    pub(crate) fn usage_started(&mut self, id: JobId, now: Time) {
        if let Some(j) = self.job(id) {
            let (s, u, q) = (j.share, j.user, j.quantity);
            self.shares[s].users.started(u, q, now);
        }
    }

    /// Usage upkeep: job `id` released its GPUs at `now`.
    pub(crate) fn usage_released(&mut self, id: JobId, now: Time) {
        if let Some(j) = self.job(id)
            && let Some(start) = j.started_at()
        {
            let (s, u, q) = (j.share, j.user, j.quantity);
            self.shares[s].users.released(u, q, start, now);
        }
    }

    /// Install a share's fair-share policy and `userLimit` (SPEC §12). A new half-life
    /// re-weights the whole history; a change of whether the share looks at users at all
    /// re-buckets its queue.
    pub(crate) fn install_fair(&mut self, s: ShareIx, q: Option<&QuotaShare>, now: Time) {
        let policy = q.and_then(|q| q.fair_share.clone());
        let user_limit = q.and_then(|q| q.user_limit);
        let tps = self.clock.ticks_per_second();
        let h = i64::from(
            policy
                .as_ref()
                .map_or(crate::model::DEFAULT_HALF_LIFE_SECONDS, |p| {
                    p.half_life_seconds
                }),
        ) * tps;
        let was_by_user = self.shares[s].users.by_user();
        if h != self.shares[s].users.half_life {
            self.reweigh(s, h, now);
        }
        let users = &mut self.shares[s].users;
        let fair = policy.is_some();
        users.policy = policy;
        users.user_limit = user_limit;
        for lane in &mut self.shares[s].lanes {
            lane.queue.user_limit = user_limit;
            if !fair {
                // No penalties without a policy (a reload that removes `fairShare` but
                // keeps `userLimit` keeps the buckets).
                lane.queue.set_pens(&[]);
            }
        }
        if was_by_user != self.shares[s].users.by_user() {
            self.rebucket(s);
        }
    }

    /// Recompute every user's usage of share s under half-life `h`, from the history.
    fn reweigh(&mut self, s: ShareIx, h: Time, now: Time) {
        let mut open: Vec<(u32, u32, Time)> = Vec::new();
        for j in self.jobs.iter().flatten() {
            if j.share == s
                && let Some(start) = j.started_at()
            {
                open.push((j.user, j.quantity, start));
            }
        }
        let users = &mut self.shares[s].users;
        users.half_life = h;
        for (i, x) in users.list.iter_mut().enumerate() {
            // A figure restored from the store counts as used at its instant.
            let since = x.restored.map_or(Time::MIN, |r| r.1);
            let mut v = x.restored.map_or(0.0, |(r, at)| r * decay(now - at, h))
                + x.folded.map_or(0.0, |(f, at)| f * decay(now - at, h));
            for &(t0, t1, q) in &x.closed {
                v += interval(q, t0.max(since), t1.max(since), now, h);
            }
            for &(u, q, start) in &open {
                if u as usize == i {
                    v += interval(q, start.max(since), now, now, h);
                }
            }
            x.acc = v;
            x.at = now;
        }
    }

    /// Re-index share s's queued and holding jobs into the buckets its policy asks for.
    fn rebucket(&mut self, s: ShareIx) {
        let ids: Vec<JobId> = self
            .jobs
            .iter()
            .flatten()
            .filter(|j| j.share == s && (j.is_pending() || j.is_holding()))
            .map(|j| j.id)
            .collect();
        let users = self.shares[s].users.clone();
        for lane in &mut self.shares[s].lanes {
            lane.queue = super::queue::Queue::with_limit(users.user_limit);
        }
        for id in ids {
            let Some(j) = self.job_mut(id) else { continue };
            let b = users.bucket(j.user);
            j.bucket = b;
            let (u, q, key, pending, nominated, gang) = (
                j.unit,
                j.quantity,
                j.base_key(),
                j.is_pending(),
                j.is_nominated(),
                j.is_gang(),
            );
            let pen = users.pen(j.user);
            let queue = &mut self.shares[s].lanes[u].queue;
            if pending {
                queue.insert(b, pen, key, q, nominated, gang);
            } else {
                queue.hold(b, pen, q, true);
            }
        }
        for u in 0..self.shares[s].lanes.len() {
            self.refresh_lane(s, u);
        }
    }

    /// Every user's standing in every share at `now` (users with no usage left and
    /// holding nothing are left out), by share name then heaviest first: O(users).
    pub fn user_standings(&self, now: Time) -> Vec<UserStanding> {
        let tps = self.clock.ticks_per_second() as f64;
        let mut out = Vec::new();
        for &s in &self.share_order {
            let share = &self.shares[s];
            let fair = share.users.policy.is_some();
            let first = out.len();
            for u in 0..share.users.len() as u32 {
                let usage = share.users.usage(u, now);
                let holding = share.users.list.get(u as usize).map_or(0, |x| x.rate);
                if usage <= 1e-9 && holding == 0 {
                    continue;
                }
                let weight = share.users.weight(u);
                out.push(UserStanding {
                    share: share.name.clone(),
                    user: share.users.name(u).to_string(),
                    fair,
                    usage_gpu_seconds: usage / tps,
                    at: now,
                    weight,
                    delay_seconds: if fair {
                        usage / (weight * self.share_size(s)) / tps
                    } else {
                        0.0
                    },
                    holding,
                });
            }
            out[first..].sort_by(|a, b| {
                b.usage_gpu_seconds
                    .total_cmp(&a.usage_gpu_seconds)
                    .then_with(|| a.user.cmp(&b.user))
            });
        }
        out
    }

    /// The fair-share policy of share `name`, if it has one.
    pub fn fair_share_policy(&self, name: &str) -> Option<&FairShare> {
        let &s = self.share_ix.get(name)?;
        self.shares[s].users.policy.as_ref()
    }

    /// The `userLimit` of share `name`, if it has one.
    pub fn user_limit(&self, name: &str) -> Option<u32> {
        let &s = self.share_ix.get(name)?;
        self.shares[s].users.user_limit
    }

    /// Bring back usage saved from [`Sched::user_standings`] after a restart, once the jobs are
    /// restored: each user's figure decays from its instant, and the jobs still holding
    /// GPUs count from then on (what they held before it is in the figure).
    pub fn restore_usage(&mut self, saved: &[SavedUsage], now: Time) {
        let tps = self.clock.ticks_per_second() as f64;
        for r in saved {
            let Some(&s) = self.share_ix.get(&r.share) else {
                continue;
            };
            let u = self.shares[s].users.ix_of(&r.user);
            let h = self.shares[s].users.half_life;
            // The restored holders were counted from their start; the figure already
            // holds what they used up to its instant.
            let mut overlap = 0.0;
            for j in self.jobs.iter().flatten() {
                if j.share == s
                    && j.user == u
                    && let Some(start) = j.started_at()
                    && start < r.at
                {
                    overlap += interval(j.quantity, start, r.at.min(now), now, h);
                }
            }
            let x = &mut self.shares[s].users.list[u as usize];
            let v = x.value(now, h) - overlap + r.usage_gpu_seconds * tps * decay(now - r.at, h);
            x.acc = v.max(0.0);
            x.at = now;
            x.restored = Some((r.usage_gpu_seconds * tps, r.at));
        }
    }

    /// Charge a restored holding job to its user from its start (`restore_usage` takes off
    /// what a saved figure already holds).
    pub(crate) fn usage_restored(&mut self, id: JobId, now: Time) {
        if let Some(j) = self.job(id)
            && let Some(start) = j.started_at()
        {
            let (s, u, q) = (j.share, j.user, j.quantity);
            let users = &mut self.shares[s].users;
            let h = users.half_life;
            if let Some(x) = users.list.get_mut(u as usize) {
                x.acc = x.value(now, h) + interval(q, start, now, now, h);
                x.at = now;
                x.rate += q;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_history_stays_bounded_and_folding_changes_no_figure() {
        let mut u = Users {
            half_life: 3600,
            ..Users::default()
        };
        let a = u.ix_of("alice");
        let mut t = 0;
        for _ in 0..10_000 {
            u.started(a, 1, t);
            u.released(a, 1, t, t + 10);
            t += 20;
        }
        let x = &u.list[a as usize];
        assert!(x.closed.len() <= MAX_CLOSED, "{}", x.closed.len());
        assert!(x.folded.is_some());
        // The accumulator is exact whatever was folded: 10 s of every 20 for 200,000 s.
        let k = 3600.0 / std::f64::consts::LN_2;
        let exact: f64 = (0..10_000)
            .map(|i| {
                let t0 = i as f64 * 20.0;
                k * ((-(t as f64 - t0 - 10.0) / 3600.0).exp2() - (-(t as f64 - t0) / 3600.0).exp2())
            })
            .sum();
        assert!(
            (u.usage(a, t) - exact).abs() < 1e-6 * exact,
            "{} vs {exact}",
            u.usage(a, t)
        );
    }
}
