//! What the scheduler, the config and the executor share about capacity: a validated
//! configuration and the devices each unit has. Here so that `sched` imports no `config`
//! and `exec` no `sched`.

use super::{Devices, QuotaShare, ServiceEnvironment};

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
}

/// The devices a unit has right now (discovered, listed or fake).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitCapacity {
    pub unit: String,
    /// Healthy device indices.
    pub devices: Vec<u32>,
}

impl UnitCapacity {
    /// Simulated devices (replay and fake GPUs): `{fake: N}` gives 0..N, a list gives those
    /// indices, `auto` gives `maxCapacity` devices numbered from 0.
    pub fn simulated(config: &ValidConfig) -> Vec<UnitCapacity> {
        config
            .env
            .capacity_limits
            .iter()
            .map(|c| UnitCapacity {
                unit: c.capacity_unit.clone(),
                devices: match &c.devices {
                    Devices::Fake(n) => (0..*n).collect(),
                    Devices::Indices(v) => {
                        let mut v = v.clone();
                        v.sort_unstable();
                        v
                    }
                    Devices::Auto => (0..c.max_capacity).collect(),
                },
            })
            .collect()
    }
}
