//! What a valid configuration amounts to, for people: capacity per unit, each share's
//! terms, and the warnings worth an operator's attention (SPEC §1.2, §5).

use super::validate::ValidConfig;
use crate::model::{Devices, QuotaShare, ShareState, Strategy};

/// One unit's capacity as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitSummary {
    pub unit: String,
    pub max_capacity: u32,
    /// Devices as written: `auto`, `[0, 1]`, `fake: 8`.
    pub devices: String,
    /// `min(maxCapacity, devices)`; for `auto` the devices are only known at run time,
    /// so this is `maxCapacity` (an upper bound).
    pub usable: u32,
    pub auto: bool,
    /// Σ maxCapacity of the shares.
    pub guaranteed: u64,
}

pub fn units(cfg: &ValidConfig) -> Vec<UnitSummary> {
    cfg.env
        .capacity_limits
        .iter()
        .map(|c| {
            let (devices, count, auto) = match &c.devices {
                Devices::Auto => ("auto".to_string(), c.max_capacity, true),
                Devices::Fake(n) => (format!("fake: {n}"), *n, false),
                Devices::Indices(v) => {
                    let list: Vec<String> = v.iter().map(u32::to_string).collect();
                    (format!("[{}]", list.join(", ")), v.len() as u32, false)
                }
            };
            UnitSummary {
                unit: c.capacity_unit.clone(),
                max_capacity: c.max_capacity,
                devices,
                usable: c.max_capacity.min(count),
                auto,
                guaranteed: cfg.guaranteed(&c.capacity_unit),
            }
        })
        .collect()
}

/// The most a share may borrow on a unit beyond its limit: `Some(n)` GPUs, `None` for no
/// cap; `Some(0)` for shares that never borrow.
pub fn borrow_cap(share: &QuotaShare, max_capacity: u32) -> Option<u64> {
    let rsc = &share.resource_sharing_configuration;
    if rsc.strategy != Strategy::LendAndBorrow {
        return Some(0);
    }
    match rsc.borrow_limit.unwrap_or(-1) {
        -1 => None,
        p => Some(u64::from(max_capacity) * u64::try_from(p).unwrap_or(0) / 100),
    }
}

/// `borrow cap` as the table shows it.
pub fn borrow_cap_text(share: &QuotaShare) -> String {
    let rsc = &share.resource_sharing_configuration;
    if rsc.strategy != Strategy::LendAndBorrow {
        return "never borrows".into();
    }
    match rsc.borrow_limit.unwrap_or(-1) {
        -1 => "unlimited".into(),
        p => {
            let per_unit: Vec<String> = share
                .capacity_limits
                .iter()
                .map(|c| {
                    let n = borrow_cap(share, c.max_capacity).unwrap_or(0);
                    format!("+{n} {}", c.capacity_unit)
                })
                .collect();
            format!("{} ({p}%)", per_unit.join(", "))
        }
    }
}

/// Things that are allowed but probably not what the operator wants.
pub fn warnings(cfg: &ValidConfig) -> Vec<String> {
    let mut out = Vec::new();
    for u in units(cfg) {
        if !u.auto && u.usable < u.max_capacity {
            out.push(format!(
                "unit `{}`: maxCapacity is {} but only {} devices are listed, so {} are usable",
                u.unit, u.max_capacity, u.usable, u.usable
            ));
        }
        if u.guaranteed > u64::from(u.usable) {
            out.push(format!(
                "unit `{}` is oversubscribed: the shares are guaranteed {} GPUs, {} {} usable; guarantees may wait for capacity",
                u.unit,
                u.guaranteed,
                if u.auto { "at most" } else { "only" },
                u.usable
            ));
        }
        if u.guaranteed == 0 {
            out.push(format!(
                "unit `{}` is used by no share: its {} GPUs can only be borrowed",
                u.unit, u.usable
            ));
        }
    }
    for s in &cfg.shares {
        let name = &s.quota_share_name;
        if s.members.as_ref().is_some_and(Vec::is_empty) {
            out.push(format!(
                "share `{name}`: `members: []`, so no one can submit to it (remove `members` to let everyone)"
            ));
        }
        if s.state == ShareState::Disabled {
            out.push(format!(
                "share `{name}` is DISABLED: it refuses new submissions (its queue still runs)"
            ));
        }
        let rsc = &s.resource_sharing_configuration;
        if rsc.strategy == Strategy::LendAndBorrow && rsc.borrow_limit == Some(0) {
            out.push(format!(
                "share `{name}`: borrowLimit 0 means it can never borrow (the same as LEND)"
            ));
        }
        for c in &s.capacity_limits {
            let usable = units(cfg)
                .into_iter()
                .find(|u| u.unit == c.capacity_unit)
                .map_or(0, |u| u.usable);
            if c.max_capacity > usable {
                out.push(format!(
                    "share `{name}`: maxCapacity {} for `{}` is more than the {usable} usable GPUs",
                    c.max_capacity, c.capacity_unit
                ));
            }
        }
    }
    out
}

/// One line: `4 shares; gpu 6/8 guaranteed`.
pub fn one_line(cfg: &ValidConfig) -> String {
    let units: Vec<String> = units(cfg)
        .iter()
        .map(|u| format!("{} {}/{} guaranteed", u.unit, u.guaranteed, u.usable))
        .collect();
    let n = cfg.shares.len();
    format!(
        "{n} share{}; {}",
        if n == 1 { "" } else { "s" },
        units.join(", ")
    )
}
