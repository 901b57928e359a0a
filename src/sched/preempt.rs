//! Victim choice (SPEC §4): reclaim and in-share candidates, modes A and B, the minimal
//! set, and carrying a preemption out (stopping victims, nominating the job).

use super::accounting::Gone;
use super::state::{Phase, PreemptReason, QKey, ShareIx, StopCause, UnitIx, VKey, VictimRef};
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

/// The pending job a victim set is sought for: its share, unit, quantity and queue key,
/// and the unit's Σ nomination terms when the search began (the job itself is never
/// nominated here).
#[derive(Debug, Clone, Copy)]
struct Claim {
    s: ShareIx,
    u: UnitIx,
    n: u32,
    key: QKey,
    nominated: i64,
}

impl Sched {
    /// The victim set for pending job `j` of share s on unit u, if one exists. With
    /// `protect`, jobs still within their share's minimum runtime are no candidates (SPEC
    /// §11); without, the search says what j would take once the protections end.
    pub(crate) fn find_victims(
        &self,
        j: JobId,
        s: ShareIx,
        u: UnitIx,
        nominated: i64,
        protect: bool,
    ) -> Option<Vec<Victim>> {
        let open = |k: &VKey| !protect || !self.is_protected(JobId(k.id));
        let job = self.job(j)?;
        let (n, p) = (job.quantity, job.priority);
        let claim = Claim {
            s,
            u,
            n,
            key: job.qkey(),
            nominated,
        };
        let share = &self.shares[s];
        let lane = &share.lanes[u];
        let in_share: Vec<VKey> = if share.in_share {
            lane.running
                .iter()
                .take_while(|k| k.prio < p)
                .filter(|k| open(k))
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
                if !open(&k) {
                    continue;
                }
                let tl = &self.shares[t].lanes[u];
                if tl.usage - tl.releasing - acc.gone(t) <= tl.limit {
                    continue; // no longer borrowing
                }
                let v = JobId(k.id);
                acc.add(self, v);
                victims.push((v, PreemptReason::CrossShareReclaim));
                if self.fits(&claim, &acc, Mode::A) {
                    found = true;
                    break;
                }
            }
            if !found {
                for k in &in_share {
                    let v = JobId(k.id);
                    acc.add(self, v);
                    victims.push((v, PreemptReason::InSharePriority));
                    if self.fits(&claim, &acc, Mode::A) {
                        found = true;
                        break;
                    }
                }
            }
            if found {
                return Some(self.minimal(&claim, victims, Mode::A));
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
            if self.fits(&claim, &acc, Mode::B) {
                return Some(self.minimal(&claim, victims, Mode::B));
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
    fn minimal(&self, c: &Claim, mut victims: Vec<Victim>, mode: Mode) -> Vec<Victim> {
        if victims.len() < 2 {
            return victims;
        }
        let mut i = victims.len() - 1;
        while i > 0 {
            i -= 1;
            let mut without = victims.clone();
            without.remove(i);
            let mut acc = Freed::new(c.nominated);
            for (v, _) in &without {
                acc.add(self, *v);
            }
            if self.fits(c, &acc, mode) {
                victims = without;
            }
        }
        victims
    }

    /// Would job j (key `key`) fit once the victims in `acc` are gone and back in the
    /// queue? A start within the limit is judged as step 1 judges it, a borrowed one (mode
    /// B only) as step 2 does: on an oversubscribed unit their `held_back` differ (SPEC §3).
    fn fits(&self, c: &Claim, acc: &Freed, mode: Mode) -> bool {
        let Claim { s, u, n, key, .. } = *c;
        let freed: i64 = acc.per_share.iter().map(|x| i64::from(x.gpus)).sum();
        let free = self.units[u].free() + freed;
        let lane = &self.shares[s].lanes[u];
        let usage = i64::from(lane.usage) - i64::from(acc.gone(s));
        let (n, limit) = (i64::from(n), i64::from(lane.limit));
        let within = usage + n <= limit;
        let borrowed = !within
            && mode == Mode::B
            && self.shares[s].strategy == Strategy::LendAndBorrow
            && lane.cap.is_none_or(|c| usage + n - limit <= i64::from(c));
        if !within && !borrowed {
            return false;
        }
        let held_back = if self.units[u].oversubscribed() {
            self.oversubscribed_held_back(s, u, free, within.then_some(key), &acc.per_share)
        } else {
            self.held_back_after(s, u, acc)
        };
        n <= free - held_back - acc.nominated
    }

    /// `held_back(u, s)` once the victims in `acc` are gone and requeued, off an
    /// oversubscribed unit: only the victims' shares' terms change.
    fn held_back_after(&self, s: ShareIx, u: UnitIx, acc: &Freed) -> i64 {
        let mut held_back = self.held_back(s, u);
        for x in &acc.per_share {
            if x.share == s {
                continue;
            }
            let sh = &self.shares[x.share];
            let tl = &sh.lanes[u];
            let idle = tl.limit.saturating_sub(tl.usage - x.gpus);
            let term = if !sh.present {
                0
            } else if sh.strategy == Strategy::Reserve {
                u64::from(idle)
            } else {
                let back: u64 = x
                    .requeued
                    .iter()
                    .filter(|&&(q, _)| q <= idle)
                    .map(|&(q, _)| u64::from(q))
                    .sum();
                (tl.waiting_upto(idle) + back).min(u64::from(idle))
            };
            held_back += term as i64 - i64::from(tl.hb_term);
        }
        held_back
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
        let refs: Vec<VictimRef> = victims
            .iter()
            .map(|&(v, _)| VictimRef {
                job: v,
                attempt: self.job(v).map_or(0, |j| j.attempts_started),
            })
            .collect();
        if let Some(job) = self.job_mut(j) {
            job.phase = Phase::Pending {
                nominated: Some(refs),
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

/// The victims taken so far, per share, and the unit's Σ nomination terms.
#[derive(Debug)]
struct Freed {
    per_share: Vec<Gone>,
    nominated: i64,
}

impl Freed {
    /// `nominated`: the unit's Σ nomination terms (j itself is never nominated here).
    fn new(nominated: i64) -> Freed {
        Freed {
            per_share: Vec::new(),
            nominated,
        }
    }

    fn add(&mut self, sched: &Sched, v: JobId) {
        let Some(vj) = sched.job(v) else { return };
        let back = (vj.quantity, vj.qkey());
        match self.per_share.iter_mut().find(|x| x.share == vj.share) {
            Some(x) => {
                x.gpus += vj.quantity;
                x.requeued.push(back);
            }
            None => self.per_share.push(Gone {
                share: vj.share,
                gpus: vj.quantity,
                requeued: vec![back],
            }),
        }
    }

    fn gone(&self, t: ShareIx) -> u32 {
        self.per_share
            .iter()
            .find(|x| x.share == t)
            .map_or(0, |x| x.gpus)
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
