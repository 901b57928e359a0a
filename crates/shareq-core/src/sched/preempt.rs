//! Victim choice (SPEC §4): reclaim and in-share candidates, modes A and B, the minimal
//! set, and carrying a preemption out (stopping victims, nominating the job).

use super::accounting::{Gone, Noms};
use super::keys::{QKey, ShareIx, SlotIx, UnitIx};
use super::state::{Nomination, Phase, PreemptReason, StopCause, VKey, VictimRef};
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
    /// A cross-node count reclaim (SPEC §10, "When some node already fits j"): every
    /// node's candidates are walked together, the fit is judged on the counts alone, and
    /// the job is nominated on this node, where placement would put it now.
    counts_only: Option<SlotIx>,
    /// A gang's per-node quantity and node count (SPEC §16): one set from every node's
    /// candidates, fitting when N nodes have room once its victims are gone.
    gang: Option<(u32, u32)>,
}

/// The one set a gang's walk gathers (it is on no single node).
const GANG_SET: SlotIx = SlotIx::MAX;

impl Sched {
    /// The victim set for pending job `j` of share s on unit u, and the node it frees
    /// room on, if one exists. With `protect`, jobs still within their share's minimum
    /// runtime are no candidates (SPEC §11); without, the search says what j would take
    /// once the protections end.
    ///
    /// The walk of SPEC §4.2 runs per node on that node's candidates (SPEC §10), all
    /// nodes at once in one pass over the candidates; the node whose set is reached
    /// earliest in the walk order wins (the last victim of a minimal set is the one at
    /// which its walk fitted). A node answers with its mode-A set when it has one.
    pub(crate) fn find_victims(
        &self,
        j: JobId,
        s: ShareIx,
        u: UnitIx,
        noms: &Noms,
        protect: bool,
    ) -> Option<(SlotIx, Vec<Victim>)> {
        let open = |k: &VKey| !protect || !self.is_protected(JobId(k.id));
        let job = self.job(j)?;
        let (n, p) = (job.quantity, job.priority);
        let gang = job.is_gang().then_some((job.per_node(), job.nodes));
        // Some node already fits j: only the counts are short (SPEC §10). A gang's fit is
        // judged on its N nodes at every step of its one walk instead.
        let counts_only = if self.slotted(u) && gang.is_none() {
            self.best_fit(u, n, noms, None)
        } else {
            None
        };
        let claim = Claim {
            s,
            u,
            n,
            key: self.qkey(job),
            nominated: noms[u],
            counts_only,
            gang,
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
        let walk_a = |skip: &[SlotIx], only: Option<SlotIx>| {
            let reclaim = self
                .reclaim_candidates(s, u)
                .filter(|(k, _)| open(k))
                .map(|(k, _)| (k, PreemptReason::CrossShareReclaim));
            let own = in_share
                .iter()
                .map(|&k| (k, PreemptReason::InSharePriority));
            self.walk(&claim, noms, Mode::A, reclaim.chain(own), skip, only)
        };
        let walk_b = |skip: &[SlotIx]| {
            let own = in_share
                .iter()
                .map(|&k| (k, PreemptReason::InSharePriority));
            self.walk(&claim, noms, Mode::B, own, skip, None)
        };
        let a = if mode_a_possible {
            walk_a(&[], None)
        } else {
            None
        };
        if in_share.is_empty() || (a.is_some() && (!self.slotted(u) || counts_only.is_some())) {
            return a;
        }
        if gang.is_some() {
            return a.or_else(|| walk_b(&[])); // one walk over every node
        }
        if counts_only.is_some() {
            return walk_b(&[]); // one walk over every node: no per-node comparison
        }
        let Some(a) = a else {
            return walk_b(&[]); // no node has a mode-A set
        };
        // A node's mode-B set beats `a` only if it comes earlier in the walk order and
        // that node has no mode-A set of its own.
        let mut skip = vec![a.0];
        loop {
            let Some(b) = walk_b(&skip) else {
                return Some(a);
            };
            if self.walk_position(&b.1) > self.walk_position(&a.1) {
                return Some(a);
            }
            if walk_a(&[], Some(b.0)).is_none() {
                return Some(b);
            }
            skip.push(b.0);
        }
    }

    /// One walk (SPEC §4.2) of the candidates in order, per node: each candidate adds to
    /// its own node's set, and the first node whose set fits wins, made minimal. `skip`:
    /// nodes not walked; `only`: walk that node alone.
    fn walk(
        &self,
        c: &Claim,
        noms: &Noms,
        mode: Mode,
        candidates: impl Iterator<Item = (VKey, PreemptReason)>,
        skip: &[SlotIx],
        only: Option<SlotIx>,
    ) -> Option<(SlotIx, Vec<Victim>)> {
        let mut sets: Vec<(Freed, Vec<Victim>)> = Vec::new();
        for (k, reason) in candidates {
            let v = JobId(k.id);
            let Some(vj) = self.job(v) else { continue };
            // A cross-node count reclaim, and a gang's walk, gather every node's victims
            // in one set; otherwise a victim joins the set of each node it runs on (a gang
            // victim runs on several, SPEC §16).
            let nodes: Vec<SlotIx> = match (c.gang, c.counts_only) {
                (Some(_), _) => vec![GANG_SET],
                (None, Some(n)) => vec![n],
                (None, None) => {
                    let mut on: Vec<SlotIx> = vj.holdings().iter().map(|h| h.0).collect();
                    on.retain(|n| !skip.contains(n) && only.is_none_or(|o| o == *n));
                    on
                }
            };
            let mut fitted: Vec<usize> = Vec::new();
            for node in nodes {
                let ix = match sets.iter().position(|(f, _)| f.node == node) {
                    Some(ix) => ix,
                    None => {
                        let room = if node == GANG_SET {
                            0
                        } else {
                            self.node_room(c.u, node, noms, None)
                        };
                        sets.push((Freed::new(c.nominated, node, room), Vec::new()));
                        sets.len() - 1
                    }
                };
                let (acc, victims) = &mut sets[ix];
                if reason == PreemptReason::CrossShareReclaim {
                    let tl = &self.shares[vj.share].lanes[c.u];
                    if tl.usage - tl.releasing - acc.gone(vj.share) <= tl.limit {
                        continue; // no longer borrowing
                    }
                }
                acc.add(self, v);
                victims.push((v, reason));
                if self.fits(c, noms, acc, mode) {
                    fitted.push(ix);
                }
            }
            // Sets reached at the same victim (a gang victim's nodes): the node placement
            // would choose once they are gone wins — the least room left, then listing
            // order (SPEC §16).
            let best = fitted.into_iter().min_by_key(|&ix| {
                let acc = &sets[ix].0;
                let order = self.units[c.u]
                    .slots
                    .get(acc.node)
                    .map_or(usize::MAX, |s| s.order);
                (acc.room + acc.freed_on(acc.node), order)
            });
            if let Some(ix) = best {
                let (acc, victims) = &mut sets[ix];
                let (node, room) = (acc.node, acc.room);
                let set = std::mem::take(victims);
                return Some((node, self.minimal(c, noms, set, mode, node, room)));
            }
        }
        None
    }

    /// Where a set's last victim comes in the walk order: reclaim candidates before
    /// in-share ones, each in victim order (SPEC §4.1, §10).
    fn walk_position(&self, set: &[Victim]) -> Option<(bool, VKey)> {
        set.iter()
            .filter_map(|&(v, reason)| {
                let key = self.vkey(self.job(v)?)?;
                Some((reason != PreemptReason::CrossShareReclaim, key))
            })
            .max()
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
        c: &Claim,
        noms: &Noms,
        mut victims: Vec<Victim>,
        mode: Mode,
        node: SlotIx,
        room: i64,
    ) -> Vec<Victim> {
        if victims.len() < 2 {
            return victims;
        }
        let mut i = victims.len() - 1;
        while i > 0 {
            i -= 1;
            let mut without = victims.clone();
            without.remove(i);
            let mut acc = Freed::new(c.nominated, node, room);
            for (v, _) in &without {
                acc.add(self, *v);
            }
            if self.fits(c, noms, &acc, mode) {
                victims = without;
            }
        }
        victims
    }

    /// Would job j (key `key`) fit once the victims in `acc` are gone and back in the
    /// queue? A start within the limit is judged as step 1 judges it, a borrowed one (mode
    /// B only) as step 2 does: on an oversubscribed unit their `held_back` differ (SPEC §3).
    fn fits(&self, c: &Claim, noms: &Noms, acc: &Freed, mode: Mode) -> bool {
        let Claim { s, u, n, key, .. } = *c;
        let freed: i64 = acc.per_share.iter().map(|x| i64::from(x.gpus)).sum();
        let free = self.units[u].free() + freed;
        let lane = &self.shares[s].lanes[u];
        let usage = i64::from(lane.usage) - i64::from(acc.gone(s));
        let (n, limit) = (i64::from(n), i64::from(lane.limit));
        let within = usage + n <= limit;
        // A borrowed start that a reservation forbids is no fit either (SPEC §3): a gang
        // borrows outside the nodes reserved for another job (§16).
        let allowed = || match c.gang {
            Some(_) => self
                .job(key.job())
                .is_some_and(|j| self.gang_borrow_place(j, noms, &acc.per_node).is_some()),
            None => self.borrow_allowed(u, Some(key.job()), self.slotted(u).then_some(acc.node)),
        };
        let borrowed = !within
            && mode == Mode::B
            && self.shares[s].strategy == Strategy::LendAndBorrow
            && lane.cap.is_none_or(|c| usage + n - limit <= i64::from(c))
            && allowed();
        if !within && !borrowed {
            return false;
        }
        // A gang needs N nodes with room once its victims are gone (SPEC §16).
        if let Some((q, nodes)) = c.gang
            && self
                .gang_fit(u, q, nodes, noms, None, &[], &acc.per_node)
                .is_none()
        {
            return false;
        }
        // The job's node must have room once its victims there are gone; a cross-node
        // count reclaim judges the counts alone (its node fits j already).
        if c.gang.is_none() && c.counts_only.is_none() && acc.room + acc.freed_on(acc.node) < n {
            return false;
        }
        let held_back = if self.units[u].oversubscribed() {
            let room = self.room_with_victims_gone(u, acc);
            self.oversubscribed_held_back(
                s,
                u,
                free,
                room,
                within.then_some(key),
                (&acc.per_share, &acc.per_node),
            )
        } else {
            self.held_back_after(s, u, acc)
        };
        n <= free - held_back - acc.nominated
    }

    /// `held_back(u, s)` once the victims in `acc` are gone and requeued, off an
    /// oversubscribed unit: only the victims' shares' terms change.
    fn held_back_after(&self, s: ShareIx, u: UnitIx, acc: &Freed) -> i64 {
        if self.slotted(u) {
            return self.held_back_after_nodes(s, u, acc);
        }
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
                let gangs = self.gang_waiting(x.share, u, idle, None, &acc.per_node);
                (tl.waiting_upto(idle) + back + gangs).min(u64::from(idle))
            };
            held_back += term as i64 - i64::from(tl.hb_term);
        }
        held_back
    }

    /// [`Sched::held_back_after`] with `nodes`: the most one node has room for changes
    /// with the victims gone (they free room on theirs), and with it every lane's count of
    /// waiting jobs (SPEC §10), so every other share's term is recomputed.
    fn held_back_after_nodes(&self, s: ShareIx, u: UnitIx, acc: &Freed) -> i64 {
        let room_max = self.room_with_victims_gone(u, acc);
        let mut total = 0i64;
        for (r, sh) in self.shares.iter().enumerate() {
            if r == s || !sh.present {
                continue;
            }
            let tl = &sh.lanes[u];
            let (gpus, requeued) = Gone::of(&acc.per_share, r);
            let idle = tl.limit.saturating_sub(tl.usage - gpus);
            let term = if sh.strategy == Strategy::Reserve {
                u64::from(idle)
            } else {
                let threshold = idle.min(room_max);
                let back: u64 = requeued
                    .iter()
                    .filter(|&&(q, _)| q <= threshold)
                    .map(|&(q, _)| u64::from(q))
                    .sum();
                let gangs = self.gang_waiting(r, u, idle, None, &acc.per_node);
                (tl.waiting_upto(threshold) + back + gangs).min(u64::from(idle))
            };
            total += term as i64;
        }
        total
    }

    /// With `nodes`: the most free devices one node has once the victims in `acc` (all on
    /// `acc.node`, but for a cross-node reclaim) are gone, set-aside devices included: the room `waiting` is judged on
    /// (SPEC §10).
    fn room_with_victims_gone(&self, u: UnitIx, acc: &Freed) -> u32 {
        let room = acc
            .per_node
            .iter()
            .map(|&(n, freed)| self.node_free(u, n) + freed)
            .max()
            .unwrap_or(0)
            .clamp(0, i64::from(u32::MAX)) as u32;
        self.units[u].room_max.max(room)
    }

    /// Stop the victims and nominate the job for their node (SPEC §4.4, §10).
    pub(crate) fn apply_preemption(
        &mut self,
        j: JobId,
        (node, victims): (SlotIx, Vec<Victim>),
        now: Time,
    ) {
        // A gang is nominated on the nodes placement chooses now if it already fits (only
        // the counts were short), else on those it would choose once its victims are gone
        // (SPEC §16).
        let gang_slots = self.job(j).filter(|g| g.is_gang()).map(|g| {
            let (u, q, nodes) = (g.unit, g.per_node(), g.nodes);
            let noms = self.unit_noms(u);
            let mut gone = Freed::new(0, GANG_SET, 0);
            for &(v, _) in &victims {
                gone.add(self, v);
            }
            self.gang_fit(u, q, nodes, &noms, None, &[], &[])
                .or_else(|| self.gang_fit(u, q, nodes, &noms, None, &[], &gone.per_node))
                .unwrap_or_default()
        });
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
                nominated: Some(match gang_slots {
                    Some(slots) if !slots.is_empty() => Nomination {
                        victims: refs,
                        slot: slots[0],
                        more: slots[1..].to_vec(),
                    },
                    _ => Nomination {
                        victims: refs,
                        slot: node,
                        more: Vec::new(),
                    },
                }),
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

/// The victims taken so far on one node, per share, the unit's Σ nomination terms, and
/// the node's room before the victims go.
#[derive(Debug)]
struct Freed {
    per_share: Vec<Gone>,
    /// GPUs the victims free per node (all on `node`, but for a cross-node reclaim).
    per_node: Vec<(SlotIx, i64)>,
    nominated: i64,
    node: SlotIx,
    room: i64,
}

impl Freed {
    /// `nominated`: the unit's Σ nomination terms (j itself is never nominated here);
    /// `room`: the node's free devices not set aside for nominations.
    fn new(nominated: i64, node: SlotIx, room: i64) -> Freed {
        Freed {
            per_share: Vec::new(),
            per_node: Vec::new(),
            nominated,
            node,
            room,
        }
    }

    fn add(&mut self, sched: &Sched, v: JobId) {
        let Some(vj) = sched.job(v) else { return };
        for (on, parts) in vj.holdings() {
            let gpus = parts.len() as i64;
            match self.per_node.iter_mut().find(|x| x.0 == on) {
                Some(x) => x.1 += gpus,
                None => self.per_node.push((on, gpus)),
            }
        }
        let back = (vj.quantity, sched.qkey(vj));
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

    /// What the victims free on slot `n`.
    fn freed_on(&self, n: SlotIx) -> i64 {
        super::place::freed_on(&self.per_node, n)
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
