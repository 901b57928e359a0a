//! Read-only reports of the scheduler's standing for the console, the CLI, the snapshot
//! and the replay summary: per share and unit, lending edges, units and devices.

use super::keys::{ShareIx, UnitIx};
use super::{Sched, Time};
use crate::model::{JobId, Strategy};

/// One share's standing on one unit: the one record of it for the snapshot (the console
/// and the control socket, where docs/API.md calls it `ShareView`), the CLI, the forecast
/// and the replay summary. Its serde shape is the wire's.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShareUnitStats {
    #[serde(rename = "name")]
    pub share: String,
    pub unit: String,
    pub strategy: Strategy,
    /// In the applied config (false: removed, jobs left over).
    pub present: bool,
    pub enabled: bool,
    pub in_share: bool,
    pub limit: u32,
    /// Borrow cap in GPUs (`None` = unlimited).
    pub cap: Option<u32>,
    pub usage: u32,
    pub borrowed: u32,
    pub lent: u32,
    pub idle: u32,
    pub running: usize,
    pub queued: usize,
    /// Submission time of the oldest queued job (ms since the epoch). The core leaves it
    /// `None` (finding it would walk the queue); the snapshot's picture, which keeps each
    /// lane's queued jobs by submission time, fills it in.
    pub oldest_queued: Option<Time>,
    /// The share orders its queue by fair share among its users (SPEC §12).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fair_share: bool,
    /// `userLimit`: GPUs of each unit one user's jobs may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_limit: Option<u32>,
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
                    lent: lent[s],
                    idle: lane.idle(),
                    running: lane.running.len() + lane.stopping as usize,
                    queued: lane.queue.len(),
                    oldest_queued: None,
                    fair_share: sh.users.policy.is_some(),
                    user_limit: sh.users.user_limit,
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
                    .is_some_and(|b| b < self.qkey(j))
        })
    }

    /// Would a reclaim of its share's borrowed GPUs take this running job? Walking the
    /// lane's running jobs in victim order (SPEC §4.1), jobs are taken while the share is
    /// still borrowing after the ones taken before (and the ones already stopping).
    pub fn reclaimed_first(&self, id: JobId) -> bool {
        let Some(j) = self.job(id) else { return false };
        if !j.is_holding() || j.is_stopping() {
            return false;
        }
        let lane = &self.shares[j.share].lanes[j.unit];
        let mut excess = i64::from(lane.usage) - i64::from(lane.releasing) - i64::from(lane.limit);
        for k in &lane.running {
            if excess <= 0 {
                return false;
            }
            if k.id == id.0 {
                return true;
            }
            excess -= self.job(JobId(k.id)).map_or(0, |v| i64::from(v.quantity));
        }
        false
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

    /// Which job holds each device of a unit (None: free), node by node in listing
    /// order: (node, device, holder). Held devices that are no longer healthy come last
    /// on their node.
    pub fn device_map(&self, unit: &str) -> Vec<(String, u32, Option<JobId>)> {
        let Some(&u) = self.unit_ix.get(unit) else {
            return Vec::new();
        };
        let unit = &self.units[u];
        let holders = &unit.held;
        if unit.slice.is_some() {
            return self.sliced_device_map(u);
        }
        let mut nodes: Vec<usize> = (0..self.nodes.len()).collect();
        nodes.sort_by_key(|&n| {
            (
                !self.nodes[n].present,
                unit.slots.get(n).map_or(0, |s| s.order),
            )
        });
        let mut out = Vec::new();
        for n in nodes {
            let name = &self.nodes[n].name;
            if let Some(slot) = unit.slots.get(n) {
                for &d in &slot.devices {
                    out.push((name.clone(), d, holders.get(&(n, d)).copied()));
                }
            }
            for (&(hn, d), &j) in holders.range((n, 0)..=(n, u32::MAX)) {
                if hn == n && !unit.has_device(n, d) {
                    out.push((name.clone(), d, Some(j)));
                }
            }
        }
        out
    }

    /// [`Sched::device_map`] of a unit sliced by memory (SPEC §15): each device in
    /// listing order once per job holding GiB of it (in job id order), or once with `None`
    /// when no job does.
    fn sliced_device_map(&self, u: UnitIx) -> Vec<(String, u32, Option<JobId>)> {
        let unit = &self.units[u];
        let mut slots: Vec<usize> = (0..unit.slots.len())
            .filter(|&s| unit.slots[s].order != usize::MAX)
            .collect();
        slots.sort_by_key(|&s| unit.slots[s].order);
        let mut out = Vec::new();
        for s in slots {
            let (slot, name) = (&unit.slots[s], self.node_name(unit.slots[s].node));
            let d = slot.device.unwrap_or(0);
            let jobs: std::collections::BTreeSet<JobId> = unit
                .held
                .range((s, 0)..=(s, u32::MAX))
                .map(|(_, &j)| j)
                .collect();
            if jobs.is_empty() {
                out.push((name.to_string(), d, None));
            }
            out.extend(jobs.into_iter().map(|j| (name.to_string(), d, Some(j))));
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
