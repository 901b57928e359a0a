//! Installing a configuration (SPEC §5, §4.3): units and shares by stable index, limits
//! and borrow caps, devices and the jobs that lost theirs, device loss, and devices
//! withheld for a while.

use super::keys::{NodeIx, ShareIx, UnitIx};
use super::state::{Lane, NodeState, ShareState, Slot, UnitState};
use super::{Event, PreemptReason, Sched, Time};
use crate::model::{Devices, JobId, ShareState as Enabled, Strategy, UnitCapacity, ValidConfig};
use std::collections::BTreeSet;

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

    /// Apply `spreadSeconds` (in instants): the victim order of every running set is
    /// rebuilt under the new credit (SPEC §4.1 judges it on the config in force).
    fn set_spread(&mut self, spread: Time) {
        if spread == self.spread {
            return;
        }
        self.spread = spread;
        for s in 0..self.shares.len() {
            for u in 0..self.shares[s].lanes.len() {
                let ids: Vec<u64> = self.shares[s].lanes[u]
                    .running
                    .iter()
                    .map(|k| k.id)
                    .collect();
                let keys = ids
                    .into_iter()
                    .filter_map(|id| self.job(JobId(id)).and_then(|j| self.vkey(j)))
                    .collect();
                self.shares[s].lanes[u].running = keys;
            }
        }
    }

    /// Install a config: the environment's settings, nodes and units, shares and their
    /// fair-share policies, the free devices (jobs on vanished devices are preempted), and
    /// the nodes that stay drained.
    pub(crate) fn install_config(
        &mut self,
        config: &ValidConfig,
        capacity: &[UnitCapacity],
        now: Time,
    ) {
        self.env_name = config.env.name.clone();
        // A drained node stays drained across a reload (Slurm says when it is back).
        let drained: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| self.is_drained(&n.name))
            .map(|n| n.name.clone())
            .collect();
        self.grace = config.env.preemption.grace_period_seconds;
        self.reserve_after =
            i64::from(config.env.reserve_after_seconds) * self.clock.ticks_per_second();
        self.set_spread(
            i64::from(config.env.preemption.spread_seconds) * self.clock.ticks_per_second(),
        );
        self.install_nodes(config, capacity);
        let nunits = self.units.len();
        self.install_shares(config);
        for s in 0..self.shares.len() {
            let name = self.shares[s].name.clone();
            let q = config.shares.iter().find(|q| q.quota_share_name == name);
            self.install_fair(s, q, now);
        }
        self.protections = self.shares.iter().any(|s| s.min_runtime > 0);
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
        let mut lost = self.rebuild_free_devices();
        for u in 0..nunits {
            self.units[u].room_max = if self.multi_node {
                self.units[u].most_free_on_a_node()
            } else {
                0
            };
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
        for name in drained {
            self.node_drained(&name, true, now);
        }
    }

    /// The config's shares: new ones added, each one's strategy, flags and per-unit limits
    /// set, removed ones kept with limit 0, and every lane's borrow cap.
    fn install_shares(&mut self, config: &ValidConfig) {
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
                        grace: None,
                        notice: None,
                        lanes: vec![Lane::default(); nunits],
                        levels: Default::default(),
                        users: Default::default(),
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
            s.grace = q.preemption_configuration.grace_period_seconds;
            s.notice = q.preemption_configuration.notice;
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
                s.grace = None;
                s.notice = None;
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
    }

    /// Rebuild each unit's free devices from the jobs' holdings; the jobs (not being
    /// stopped) that hold a device the config no longer gives.
    fn rebuild_free_devices(&mut self) -> Vec<JobId> {
        let mut lost = Vec::new();
        for u in 0..self.units.len() {
            let mut free: Vec<BTreeSet<u32>> = self.units[u]
                .slots
                .iter()
                .map(|s| s.devices.iter().copied().collect())
                .collect();
            for j in self.jobs.iter().flatten() {
                if j.unit == u
                    && let Some(n) = j.node()
                {
                    for d in j.devices() {
                        let held = free.get_mut(n).is_some_and(|f| f.remove(d));
                        if !held && !j.is_stopping() && !lost.contains(&j.id) {
                            lost.push(j.id);
                        }
                    }
                }
            }
            for (slot, f) in self.units[u].slots.iter_mut().zip(free) {
                slot.free = f;
            }
            self.units[u].reindex();
        }
        lost
    }

    /// Units and nodes by stable index (by name; undeclared ones stay, with nothing
    /// usable), and each (node, unit)'s healthy devices from `capacity`.
    fn install_nodes(&mut self, config: &ValidConfig, capacity: &[UnitCapacity]) {
        self.multi_node = config.has_nodes();
        for n in &mut self.nodes {
            n.present = false;
        }
        let listed = config.nodes();
        let mut order = Vec::with_capacity(listed.len());
        for (name, _) in &listed {
            let ix = match self.node_ix.get(name) {
                Some(&ix) => ix,
                None => {
                    self.nodes.push(NodeState {
                        name: name.clone(),
                        present: true,
                    });
                    self.node_ix.insert(name.clone(), self.nodes.len() - 1);
                    self.nodes.len() - 1
                }
            };
            self.nodes[ix].present = true;
            order.push(ix);
        }
        let nnodes = self.nodes.len();
        for u in &mut self.units {
            u.present = false;
        }
        for c in &config.env.capacity_limits {
            if !self.unit_ix.contains_key(&c.capacity_unit) {
                self.units.push(UnitState::new(&c.capacity_unit));
                self.unit_ix
                    .insert(c.capacity_unit.clone(), self.units.len() - 1);
            }
            let ix = self.unit_ix[&c.capacity_unit];
            let u = &mut self.units[ix];
            u.present = true;
            u.max_capacity = c.max_capacity;
        }
        for u in &mut self.units {
            let name = u.name.clone();
            u.slots = vec![Slot::default(); nnodes];
            for (pos, (node, devs)) in listed.iter().enumerate() {
                let n = order[pos];
                let slot = &mut u.slots[n];
                slot.order = pos;
                if !u.present {
                    continue;
                }
                slot.configured = match devs.get(&name) {
                    None => 0,
                    Some(Devices::Fake(k) | Devices::Mig { fake: Some(k), .. }) => *k,
                    Some(Devices::Indices(v)) => v.len() as u32,
                    Some(Devices::Auto | Devices::Mig { fake: None, .. }) => capacity
                        .iter()
                        .find(|c| &c.node == node && c.unit == name)
                        .map_or(0, |c| c.devices.len() as u32),
                };
                let mut v: Vec<u32> = capacity
                    .iter()
                    .filter(|c| &c.node == node && c.unit == name)
                    .flat_map(|c| c.devices.iter().copied())
                    .collect();
                v.sort_unstable();
                v.dedup();
                slot.devices = v;
            }
            if !u.present {
                u.max_capacity = 0;
            }
            u.largest = u.slots.iter().map(|s| s.configured).max().unwrap_or(0);
            u.usable = u.max_capacity.min(u.healthy());
        }
    }

    /// A device stopped answering: the job on it is preempted (DEVICE_LOST) and the
    /// unit's usable capacity shrinks. `node`: the node's name (`None`: the first node
    /// that has the device, which is the only one without `nodes`).
    pub fn device_lost(&mut self, node: Option<&str>, unit: &str, device: u32, now: Time) {
        self.now = now;
        let Some((u, n)) = self.device_place(node, unit, device) else {
            return;
        };
        self.lose_devices(u, n, &[device], now);
    }

    /// The unit and node of `device` of `unit` (`node`: its name; `None`: the first node
    /// that has the device, the only one without `nodes`).
    fn device_place(&self, node: Option<&str>, unit: &str, device: u32) -> Option<(usize, usize)> {
        let &u = self.unit_ix.get(unit)?;
        let n = match node {
            Some(name) => self.node_ix.get(name).copied(),
            None => (0..self.nodes.len()).find(|&n| self.units[u].has_device(n, device)),
        }?;
        Some((u, n))
    }

    /// Something outside this scheduler holds a device for now (a process of an earlier
    /// scheduler on a recreated state directory, SPEC §8): it leaves the usable devices
    /// like a lost one (a job on it is preempted, DEVICE_LOST), and jobs that need it
    /// wait, saying `why`, until [`Sched::device_returned`].
    pub fn device_withheld(
        &mut self,
        node: Option<&str>,
        unit: &str,
        device: u32,
        why: &str,
        now: Time,
    ) {
        self.now = now;
        let Some((u, n)) = self.device_place(node, unit, device) else {
            return;
        };
        self.units[u].withheld.insert((n, device), why.to_string());
        self.lose_devices(u, n, &[device], now);
    }

    /// A withheld device is free again: it is handed out as before. False when it was
    /// not withheld.
    pub fn device_returned(&mut self, unit: &str, device: u32, now: Time) -> bool {
        self.now = now;
        let Some(&u) = self.unit_ix.get(unit) else {
            return false;
        };
        let unit = &mut self.units[u];
        let Some(&(n, _)) = unit.withheld.keys().find(|(_, d)| *d == device) else {
            return false;
        };
        unit.withheld.remove(&(n, device));
        if let Some(slot) = unit.slots.get_mut(n)
            && slot.devices.binary_search(&device).is_err()
        {
            if slot.drained {
                slot.parked.push(device);
            } else {
                slot.devices.push(device);
                slot.devices.sort_unstable();
                slot.free.insert(device);
            }
        }
        unit.reindex();
        unit.usable = unit.max_capacity.min(unit.healthy());
        self.refresh_room(u);
        for s in 0..self.shares.len() {
            self.refresh_lane(s, u);
        }
        true
    }

    /// A node went down (SPEC §10): every device of it is unhealthy, its jobs are
    /// preempted with DEVICE_LOST.
    pub fn node_lost(&mut self, node: &str, now: Time) {
        self.now = now;
        let Some(&n) = self.node_ix.get(node) else {
            return;
        };
        for u in 0..self.units.len() {
            let devs = self.units[u].slots.get(n).map(|s| s.devices.clone());
            if let Some(devs) = devs.filter(|d| !d.is_empty()) {
                self.lose_devices(u, n, &devs, now);
            }
        }
    }

    /// A node is drained (an admin empties it, SPEC §10) or back in service: drained, it
    /// takes no new jobs, its running jobs go on, and each of its devices leaves `usable`
    /// when its job releases it; back, its devices return.
    pub fn node_drained(&mut self, node: &str, drained: bool, now: Time) {
        self.now = now;
        let Some(&n) = self.node_ix.get(node) else {
            return;
        };
        for u in 0..self.units.len() {
            let unit = &mut self.units[u];
            let Some(slot) = unit.slots.get_mut(n) else {
                continue;
            };
            if slot.drained == drained {
                continue;
            }
            slot.drained = drained;
            if drained {
                let free: Vec<u32> = slot.free.iter().copied().collect();
                slot.devices.retain(|d| !free.contains(d));
                slot.parked.extend(free);
                slot.free.clear();
            } else {
                let back = std::mem::take(&mut slot.parked);
                slot.free.extend(back.iter().copied());
                slot.devices.extend(back);
                slot.devices.sort_unstable();
            }
            unit.reindex();
            unit.usable = unit.max_capacity.min(unit.healthy());
            self.refresh_room(u);
            for s in 0..self.shares.len() {
                self.refresh_lane(s, u);
            }
        }
    }

    /// Is the node drained?
    pub fn is_drained(&self, node: &str) -> bool {
        self.node_ix.get(node).is_some_and(|&n| {
            self.units
                .iter()
                .any(|u| u.slots.get(n).is_some_and(|s| s.drained))
        })
    }

    fn lose_devices(&mut self, u: UnitIx, n: NodeIx, devices: &[u32], now: Time) {
        let unit = &mut self.units[u];
        if let Some(slot) = unit.slots.get_mut(n) {
            slot.devices.retain(|d| !devices.contains(d));
            for d in devices {
                slot.free.remove(d);
            }
        }
        unit.reindex();
        unit.usable = unit.max_capacity.min(unit.healthy());
        let mut victims: Vec<JobId> = self
            .jobs
            .iter()
            .flatten()
            .filter(|j| {
                j.unit == u
                    && j.node() == Some(n)
                    && !j.is_stopping()
                    && j.devices().iter().any(|d| devices.contains(d))
            })
            .map(|j| j.id)
            .collect();
        victims.sort();
        self.refresh_room(u);
        for s in 0..self.shares.len() {
            self.refresh_lane(s, u);
        }
        for id in victims {
            self.preempt_one(id, None, PreemptReason::DeviceLost, now);
        }
    }
}
