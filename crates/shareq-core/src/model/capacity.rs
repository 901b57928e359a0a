//! What the scheduler, the config and the executor share about capacity: a validated
//! configuration, its nodes, and the devices each (node, unit) has. Here so that `sched`
//! imports no `config` and `exec` no `sched`.

use super::{Devices, Executor, NodeDevices, QuotaShare, ServiceEnvironment, Slicing};

/// The name of the one implicit node of a config without `nodes` (SPEC §10).
pub const LOCAL_NODE: &str = "local";

/// A configuration that passed validation: safe to hand to the scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidConfig {
    pub env: ServiceEnvironment,
    /// In name order.
    pub shares: Vec<QuotaShare>,
}

impl ValidConfig {
    /// Σ maxCapacity of the shares for a unit.
    pub fn guaranteed(&self, unit: &str) -> u64 {
        self.shares
            .iter()
            .flat_map(|s| &s.capacity_limits)
            .filter(|c| c.capacity_unit == unit)
            .map(|c| u64::from(c.max_capacity))
            .sum()
    }

    /// The environment lists `nodes` (SPEC §10): placement is per node and the replay
    /// says which node a job started on.
    pub fn has_nodes(&self) -> bool {
        self.env.nodes.is_some()
    }

    /// The executor the config asks for (`local` when absent).
    pub fn executor(&self) -> Executor {
        self.env.executor.clone().unwrap_or(Executor::Local)
    }

    /// The nodes in listing order with their devices per unit: without `nodes`, the one
    /// implicit node [`LOCAL_NODE`] with each unit's `capacityLimits[].devices`.
    pub fn nodes(&self) -> Vec<(String, NodeDevices)> {
        match &self.env.nodes {
            Some(nodes) => nodes
                .iter()
                .map(|n| (n.name.clone(), n.devices.clone()))
                .collect(),
            None => vec![(
                LOCAL_NODE.to_string(),
                NodeDevices(
                    self.env
                        .capacity_limits
                        .iter()
                        .map(|c| (c.capacity_unit.clone(), c.device_spec().clone()))
                        .collect(),
                ),
            )],
        }
    }

    /// Every (node, unit, devices) of the config, nodes in listing order.
    pub fn node_units(&self) -> Vec<(String, String, Devices)> {
        self.nodes()
            .into_iter()
            .flat_map(|(node, devs)| {
                devs.0
                    .into_iter()
                    .map(move |(unit, d)| (node.clone(), unit, d))
            })
            .collect()
    }

    /// The slicing of a unit sliced by memory (SPEC §15), `None` for a whole-GPU unit.
    pub fn slicing(&self, unit: &str) -> Option<Slicing> {
        self.env
            .capacity_limits
            .iter()
            .find(|c| c.capacity_unit == unit)
            .and_then(|c| c.slicing)
    }

    /// How many devices `auto` gives a unit in replay: `maxCapacity`, or for a sliced
    /// unit ceil(maxCapacity / memoryGiB) (SPEC §15).
    pub fn simulated_auto(&self, unit: &str) -> u32 {
        let max = self.max_capacity(unit);
        match self.slicing(unit) {
            Some(sl) if sl.memory_gib > 0 => max.div_ceil(sl.memory_gib),
            _ => max,
        }
    }

    /// maxCapacity of a unit (0 when it is not declared).
    pub fn max_capacity(&self, unit: &str) -> u32 {
        self.env
            .capacity_limits
            .iter()
            .find(|c| c.capacity_unit == unit)
            .map_or(0, |c| c.max_capacity)
    }
}

/// The devices one unit has on one node right now (discovered, listed or fake).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitCapacity {
    pub node: String,
    pub unit: String,
    /// Healthy device indices.
    pub devices: Vec<u32>,
}

impl UnitCapacity {
    /// Simulated devices (replay and fake GPUs): `{fake: N}` gives 0..N, a list gives those
    /// indices, `auto` gives `maxCapacity` devices numbered from 0 (a sliced unit:
    /// ceil(maxCapacity / memoryGiB)); MIG units count instances: `{fake: N, mig: P}`
    /// gives N, `{mig: P}` `maxCapacity` (SPEC §15).
    pub fn simulated(config: &ValidConfig) -> Vec<UnitCapacity> {
        config
            .node_units()
            .into_iter()
            .map(|(node, unit, d)| UnitCapacity {
                devices: match d {
                    Devices::Fake(n) | Devices::Mig { fake: Some(n), .. } => (0..n).collect(),
                    Devices::Indices(mut v) => {
                        v.sort_unstable();
                        v
                    }
                    Devices::Auto => (0..config.simulated_auto(&unit)).collect(),
                    Devices::Mig { fake: None, .. } => (0..config.max_capacity(&unit)).collect(),
                },
                node,
                unit,
            })
            .collect()
    }
}
