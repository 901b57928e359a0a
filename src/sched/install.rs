//! Installing a configuration (SPEC §5, §4.3): units and shares by stable index, limits
//! and borrow caps, devices and the jobs that lost theirs, and device loss.

use super::state::{Lane, ShareIx, ShareState, UnitState};
use super::{Event, PreemptReason, Sched, Time};
use crate::model::{ShareState as Enabled, Strategy, UnitCapacity, ValidConfig};
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
                    self.units.push(UnitState::new(&c.capacity_unit));
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
}
