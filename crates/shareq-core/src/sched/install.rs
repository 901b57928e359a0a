//! Installing a configuration (SPEC §5, §4.3): units and shares by stable index, limits
//! and borrow caps, devices and the jobs that lost theirs, device loss, and devices
//! withheld for a while.

use super::keys::{NodeIx, ShareIx, SlotIx, UnitIx};
use super::state::{Lane, NodeState, Phase, ShareState, Slot, UnitState};
use super::{Event, PreemptReason, Sched, Time};
use crate::model::{
    Devices, JobId, NodeDevices, ShareState as Enabled, Strategy, UnitCapacity, ValidConfig,
};
use std::collections::{BTreeMap, BTreeSet};

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
            self.units[u].room_max = if self.slotted(u) {
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

    /// Rebuild each unit's free room from the jobs' holdings; the jobs (not being
    /// stopped) that hold room the config no longer gives (a device gone, a unit sliced
    /// or no longer sliced, fewer GiB per device).
    fn rebuild_free_devices(&mut self) -> Vec<JobId> {
        let mut lost = Vec::new();
        for u in 0..self.units.len() {
            let sliced = self.units[u].slice.is_some();
            if sliced {
                self.renumber_gib(u, &mut lost);
                continue;
            }
            let mut free: Vec<BTreeSet<u32>> = self.units[u]
                .slots
                .iter()
                .map(|s| s.devices.iter().copied().collect())
                .collect();
            for j in self.jobs.iter().flatten().filter(|j| j.unit == u) {
                let kind_ok = match &j.phase {
                    Phase::Holding { gib, .. } => gib.is_empty() != sliced,
                    _ => true,
                };
                // Every node a gang holds devices on (SPEC §16).
                for (n, parts) in j.holdings() {
                    for d in parts {
                        let held = kind_ok && free.get_mut(n).is_some_and(|f| f.remove(d));
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

    /// A sliced unit's GiB handed out again on each device, to its holders in order (those
    /// being stopped first, then by id), so that no job depends on which GiB of its device
    /// it held (SPEC §15): a device with fewer GiB than its holders' (lowered
    /// `memoryGiB`, a device gone) takes the rest off theirs, as does a holding of the
    /// other kind (a unit sliced by this reload). Those hold nothing on the slot any more.
    fn renumber_gib(&mut self, u: UnitIx, lost: &mut Vec<JobId>) {
        let mut per_slot: BTreeMap<SlotIx, Vec<(bool, JobId, usize)>> = BTreeMap::new();
        for j in self.jobs.iter().flatten().filter(|j| j.unit == u) {
            let Phase::Holding { slot, gib, .. } = &j.phase else {
                continue;
            };
            if gib.is_empty() || *slot >= self.units[u].slots.len() {
                if !j.is_stopping() {
                    lost.push(j.id);
                }
                continue;
            }
            per_slot
                .entry(*slot)
                .or_default()
                .push((!j.is_stopping(), j.id, j.quantity as usize));
        }
        let unit = &mut self.units[u];
        unit.held.clear();
        for slot in &mut unit.slots {
            slot.free = slot.devices.iter().copied().collect();
        }
        let mut given: Vec<(JobId, Vec<u32>)> = Vec::new();
        for (n, mut holders) in per_slot {
            holders.sort();
            let slot = &mut unit.slots[n];
            for (running, id, q) in holders {
                let gib: Vec<u32> = if slot.free.len() >= q {
                    slot.free.iter().take(q).copied().collect()
                } else {
                    if running {
                        lost.push(id);
                    }
                    Vec::new()
                };
                for g in &gib {
                    slot.free.remove(g);
                    unit.held.insert((n, *g), id);
                }
                given.push((id, gib));
            }
        }
        unit.reindex();
        // A job left without GiB holds nothing on its device: its release gives nothing back.
        for (id, new) in given {
            if let Some(Phase::Holding { gib, .. }) = self.job_mut(id).map(|j| &mut j.phase) {
                *gib = new;
            }
        }
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
            let slice = config.slicing(&name).map(|sl| sl.memory_gib);
            if slice != u.slice {
                // Slots change kind: holders on the old ones lose them.
                u.slot_ix.clear();
                u.slots.clear();
            }
            u.slice = slice;
            u.overuse = config
                .slicing(&name)
                .map(|sl| sl.overuse)
                .unwrap_or_default();
            match slice.filter(|_| u.present) {
                None => install_node_slots(u, &name, &listed, &order, nnodes, capacity),
                Some(gib) => install_device_slots(u, &name, &listed, &order, gib, capacity),
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
        self.lose_device(u, n, device, now);
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
        self.lose_device(u, n, device, now);
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
        let (ix, parts) = match unit.slice {
            None => (n, vec![device]),
            Some(gib) => match unit.slot_ix.get(&(n, device)) {
                Some(&ix) => (ix, (0..gib).collect()),
                None => return true,
            },
        };
        if let Some(slot) = unit.slots.get_mut(ix) {
            for d in parts {
                if slot.devices.binary_search(&d).is_ok() {
                    continue;
                }
                if slot.drained {
                    slot.parked.push(d);
                } else {
                    slot.devices.push(d);
                    slot.free.insert(d);
                }
            }
            slot.devices.sort_unstable();
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
            for ix in self.units[u].slots_on(n) {
                let devs = self.units[u].slots[ix].devices.clone();
                if !devs.is_empty() {
                    self.lose_devices(u, ix, &devs, now);
                }
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
            let mut changed = false;
            for ix in unit.slots_on(n) {
                let slot = &mut unit.slots[ix];
                if slot.drained == drained {
                    continue;
                }
                changed = true;
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
            }
            if !changed {
                continue;
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
                .any(|u| u.slots_on(n).iter().any(|&ix| u.slots[ix].drained))
        })
    }

    /// Device `device` of node `n` is gone: its room leaves its slot.
    fn lose_device(&mut self, u: UnitIx, n: NodeIx, device: u32, now: Time) {
        if let Some((ix, parts)) = self.units[u].slot_of(n, device) {
            self.lose_devices(u, ix, &parts, now);
        }
    }

    /// Room `devices` of slot `n` is gone: the jobs holding any of it are preempted.
    fn lose_devices(&mut self, u: UnitIx, n: SlotIx, devices: &[u32], now: Time) {
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
                // A gang loses all of itself with any node's devices (SPEC §16).
                j.unit == u
                    && !j.is_stopping()
                    && j.holdings()
                        .iter()
                        .any(|(on, parts)| *on == n && parts.iter().any(|d| devices.contains(d)))
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

/// The devices the config gives a unit on one node (`auto`: those discovered), and the
/// healthy ones among them, sorted.
fn node_devices(
    name: &str,
    node: &str,
    devs: &NodeDevices,
    capacity: &[UnitCapacity],
) -> (Vec<u32>, Vec<u32>) {
    let mut healthy: Vec<u32> = capacity
        .iter()
        .filter(|c| c.node == node && c.unit == name)
        .flat_map(|c| c.devices.iter().copied())
        .collect();
    healthy.sort_unstable();
    healthy.dedup();
    let configured = match devs.get(name) {
        None => Vec::new(),
        Some(Devices::Fake(k) | Devices::Mig { fake: Some(k), .. }) => (0..*k).collect(),
        Some(Devices::Indices(v)) => v.clone(),
        Some(Devices::Auto | Devices::Mig { fake: None, .. }) => healthy.clone(),
    };
    (configured, healthy)
}

/// A whole-GPU unit: one slot per node (by node index), its room the node's devices.
fn install_node_slots(
    u: &mut UnitState,
    name: &str,
    listed: &[(String, NodeDevices)],
    order: &[NodeIx],
    nnodes: usize,
    capacity: &[UnitCapacity],
) {
    u.slots = (0..nnodes)
        .map(|n| Slot {
            node: n,
            ..Slot::default()
        })
        .collect();
    for (pos, (node, devs)) in listed.iter().enumerate() {
        let slot = &mut u.slots[order[pos]];
        slot.order = pos;
        if !u.present {
            continue;
        }
        let (configured, healthy) = node_devices(name, node, devs, capacity);
        slot.configured = configured.len() as u32;
        slot.devices = healthy;
    }
}

/// A unit sliced by memory (SPEC §15): one slot per device (node, index), kept at its
/// index across reloads, its room the device's `gib` GiB while it is healthy. Slots
/// the config no longer gives stay, with no room.
fn install_device_slots(
    u: &mut UnitState,
    name: &str,
    listed: &[(String, NodeDevices)],
    order: &[NodeIx],
    gib: u32,
    capacity: &[UnitCapacity],
) {
    for slot in &mut u.slots {
        slot.configured = 0;
        slot.devices.clear();
        slot.order = usize::MAX;
        slot.drained = false;
        slot.parked.clear();
    }
    let mut next = 0;
    for (pos, (node, devs)) in listed.iter().enumerate() {
        let n = order[pos];
        let (mut configured, healthy) = node_devices(name, node, devs, capacity);
        configured.extend(healthy.iter().copied());
        configured.sort_unstable();
        configured.dedup();
        for d in configured {
            let ix = match u.slot_ix.get(&(n, d)) {
                Some(&ix) => ix,
                None => {
                    u.slots.push(Slot::default());
                    u.slot_ix.insert((n, d), u.slots.len() - 1);
                    u.slots.len() - 1
                }
            };
            let slot = &mut u.slots[ix];
            slot.node = n;
            slot.device = Some(d);
            slot.order = next;
            next += 1;
            slot.configured = gib;
            if healthy.binary_search(&d).is_ok() {
                slot.devices = (0..gib).collect();
            }
        }
    }
}
