//! Victim choice (SPEC §4): reclaim and in-share candidates, modes A and B, the minimal
//! set, and carrying a preemption out (stopping victims, nominating the job).

use super::state::{Phase, PreemptReason, ShareIx, StopCause, UnitIx, VKey};
use super::{Event, Sched, Time};
use crate::model::{JobId, Strategy};
use std::collections::btree_set;
use std::iter::Peekable;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Back within the guarantee: `usage + n ≤ limit` and `n ≤ available`.
    A,
    /// Room inside the share: j could start under step 1 or step 2.
    B,
}

type Victim = (JobId, PreemptReason);

impl Sched {
    /// The victim set for pending job `j` of share s on unit u, if one exists.
    pub(crate) fn find_victims(
        &self,
        j: JobId,
        s: ShareIx,
        u: UnitIx,
        nominated: i64,
    ) -> Option<Vec<Victim>> {
        let job = self.job(j)?;
        let (n, p) = (job.quantity, job.priority);
        let share = &self.shares[s];
        let lane = &share.lanes[u];
        let in_share: Vec<VKey> = if share.in_share {
            lane.running
                .iter()
                .take_while(|k| k.prio < p)
                .copied()
                .collect()
        } else {
            Vec::new()
        };
        // Mode A can only end within the limit if the in-share candidates free enough.
        let in_share_gpus: u64 = in_share
            .iter()
            .filter_map(|k| self.job(JobId(k.id)))
            .map(|v| u64::from(v.quantity))
            .sum();
        let mode_a_possible = lane.usage < lane.limit
            && u64::from(lane.usage) + u64::from(n) <= u64::from(lane.limit) + in_share_gpus;
        if mode_a_possible {
            let mut victims: Vec<Victim> = Vec::new();
            let mut acc = Freed::new(nominated);
            let mut found = false;
            for (k, t) in self.reclaim_candidates(s, u) {
                let tl = &self.shares[t].lanes[u];
                if tl.usage - tl.releasing - acc.gone(t) <= tl.limit {
                    continue; // no longer borrowing
                }
                let v = JobId(k.id);
                acc.add(self, v);
                victims.push((v, PreemptReason::CrossShareReclaim));
                if self.fits(s, u, n, &acc, Mode::A) {
                    found = true;
                    break;
                }
            }
            if !found {
                for k in &in_share {
                    let v = JobId(k.id);
                    acc.add(self, v);
                    victims.push((v, PreemptReason::InSharePriority));
                    if self.fits(s, u, n, &acc, Mode::A) {
                        found = true;
                        break;
                    }
                }
            }
            if found {
                return Some(self.minimal(s, u, n, victims, Mode::A, nominated));
            }
        }
        if in_share.is_empty() {
            return None;
        }
        let mut victims: Vec<Victim> = Vec::new();
        let mut acc = Freed::new(nominated);
        for k in &in_share {
            let v = JobId(k.id);
            acc.add(self, v);
            victims.push((v, PreemptReason::InSharePriority));
            if self.fits(s, u, n, &acc, Mode::B) {
                return Some(self.minimal(s, u, n, victims, Mode::B, nominated));
            }
        }
        None
    }

    /// Running jobs of unit u of other shares that borrow, lowest priority first, then
    /// most recently started first.
    fn reclaim_candidates(&self, s: ShareIx, u: UnitIx) -> ReclaimIter<'_> {
        let heads = self
            .shares
            .iter()
            .enumerate()
            .filter(|(t, sh)| *t != s && sh.lanes[u].borrowed() > 0)
            .map(|(t, sh)| (t, sh.lanes[u].running.iter().peekable()))
            .collect();
        ReclaimIter { heads }
    }

    /// Put back, from the second-to-last victim to the first, every victim without whom
    /// the job still fits.
    fn minimal(
        &self,
        s: ShareIx,
        u: UnitIx,
        n: u32,
        mut victims: Vec<Victim>,
        mode: Mode,
        nominated: i64,
    ) -> Vec<Victim> {
        if victims.len() < 2 {
            return victims;
        }
        let mut i = victims.len() - 1;
        while i > 0 {
            i -= 1;
            let mut without = victims.clone();
            without.remove(i);
            let mut acc = Freed::new(nominated);
            for (v, _) in &without {
                acc.add(self, *v);
            }
            if self.fits(s, u, n, &acc, mode) {
                victims = without;
            }
        }
        victims
    }

    /// Would job j fit once the victims in `acc` are gone and back in the queue?
    fn fits(&self, s: ShareIx, u: UnitIx, n: u32, acc: &Freed, mode: Mode) -> bool {
        let per_share = &acc.0;
        let freed: i64 = per_share.iter().map(|x| i64::from(x.1)).sum();
        let free = self.units[u].free() + freed;
        let mut held_back = self.held_back(s, u);
        let lane = &self.shares[s].lanes[u];
        let mut usage = i64::from(lane.usage);
        for (t, gone, qtys) in per_share {
            if *t == s {
                usage -= i64::from(*gone);
                continue;
            }
            let sh = &self.shares[*t];
            let tl = &sh.lanes[u];
            let idle = tl.limit.saturating_sub(tl.usage - gone);
            let term = if !sh.present {
                0
            } else if sh.strategy == Strategy::Reserve {
                u64::from(idle)
            } else {
                let requeued: u64 = qtys
                    .iter()
                    .filter(|&&q| q <= idle)
                    .map(|&q| u64::from(q))
                    .sum();
                (tl.waiting_upto(idle) + requeued).min(u64::from(idle))
            };
            held_back += term as i64 - i64::from(tl.hb_term);
        }
        let available = free - held_back - acc.1;
        let n = i64::from(n);
        let limit = i64::from(lane.limit);
        if n > available {
            return false;
        }
        match mode {
            Mode::A => usage + n <= limit,
            Mode::B => {
                usage + n <= limit
                    || (self.shares[s].strategy == Strategy::LendAndBorrow
                        && lane.cap.is_none_or(|c| usage + n - limit <= i64::from(c)))
            }
        }
    }

    /// Stop the victims and nominate the job (SPEC §4.4).
    pub(crate) fn apply_preemption(&mut self, j: JobId, victims: Vec<Victim>, now: Time) {
        for &(v, reason) in &victims {
            self.mark_stopping(
                v,
                StopCause::Preempt {
                    by: Some(j),
                    reason,
                },
                now,
            );
            self.emit(Event::Preempted {
                job: v,
                by: Some(j),
                reason,
            });
        }
        self.unindex_pending(j);
        if let Some(job) = self.job_mut(j) {
            job.phase = Phase::Pending {
                nominated: Some(victims.iter().map(|v| v.0).collect()),
            };
        }
        self.index_pending(j);
        for (v, _) in victims {
            if self.releases_at_once(v) {
                self.gpus_released(v, now);
            }
        }
    }
}

/// The victims taken so far, per share: GPUs freed and the quantities requeued.
#[derive(Debug)]
struct Freed(Vec<(ShareIx, u32, Vec<u32>)>, i64);

impl Freed {
    /// `nominated`: the unit's Σ nomination terms (j itself is never nominated here).
    fn new(nominated: i64) -> Freed {
        Freed(Vec::new(), nominated)
    }

    fn add(&mut self, sched: &Sched, v: JobId) {
        let Some(vj) = sched.job(v) else { return };
        match self.0.iter_mut().find(|x| x.0 == vj.share) {
            Some(x) => {
                x.1 += vj.quantity;
                x.2.push(vj.quantity);
            }
            None => self.0.push((vj.share, vj.quantity, vec![vj.quantity])),
        }
    }

    fn gone(&self, t: ShareIx) -> u32 {
        self.0.iter().find(|x| x.0 == t).map_or(0, |x| x.1)
    }
}

/// A k-way merge of the borrowing shares' running jobs in victim order.
struct ReclaimIter<'a> {
    heads: Vec<(ShareIx, Peekable<btree_set::Iter<'a, VKey>>)>,
}

impl Iterator for ReclaimIter<'_> {
    type Item = (VKey, ShareIx);
    fn next(&mut self) -> Option<(VKey, ShareIx)> {
        let mut best: Option<(usize, VKey)> = None;
        for (i, (_, it)) in self.heads.iter_mut().enumerate() {
            if let Some(&&k) = it.peek()
                && best.is_none_or(|(_, b)| k < b)
            {
                best = Some((i, k));
            }
        }
        let (i, k) = best?;
        self.heads[i].1.next();
        Some((k, self.heads[i].0))
    }
}
