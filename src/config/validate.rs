//! Checking a set of documents as one unit (SPEC §5): exactly one environment, unique
//! share names, ranges, strategy rules, declared units. Every error is reported.

use super::error::ConfigError;
use super::parse::{Origin, SourcedDocument};
use crate::model::{Document, QuotaShare, ServiceEnvironment, Strategy};
use std::collections::{BTreeMap, BTreeSet};

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

/// `[A-Za-z0-9_-]{1,128}`
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn err(origin: &Origin, field: String, message: String) -> ConfigError {
    ConfigError::new(message)
        .at(origin.file.as_deref(), origin.line, None)
        .field(field)
}

/// Validate a whole set of documents; on failure, every error found.
pub fn validate(docs: Vec<SourcedDocument>) -> Result<ValidConfig, Vec<ConfigError>> {
    let mut errors = Vec::new();
    let mut envs = Vec::new();
    let mut shares: Vec<(Origin, QuotaShare)> = Vec::new();
    for d in docs {
        match d.doc {
            Document::ServiceEnvironment(e) => envs.push((d.origin, e)),
            Document::QuotaShare(s) => shares.push((d.origin, s)),
        }
    }
    if envs.is_empty() {
        errors.push(ConfigError::new(
            "no ServiceEnvironment document: exactly one is needed to declare the GPUs",
        ));
    } else if envs.len() > 1 {
        let places: Vec<String> = envs
            .iter()
            .map(|(o, e)| match (&o.file, o.line) {
                (Some(f), Some(l)) => format!("{} ({f}:{l})", e.name),
                (Some(f), None) => format!("{} ({f})", e.name),
                _ => e.name.clone(),
            })
            .collect();
        errors.push(err(
            &envs[1].0,
            "kind".into(),
            format!(
                "{} ServiceEnvironment documents ({}): exactly one is allowed",
                envs.len(),
                places.join(", ")
            ),
        ));
    }
    let mut units = BTreeSet::new();
    if let Some((origin, env)) = envs.first() {
        if !valid_name(&env.name) {
            errors.push(err(
                origin,
                "name".into(),
                format!(
                    "`{}` is not a valid name: use 1-128 of A-Z a-z 0-9 _ -",
                    env.name
                ),
            ));
        }
        if env.capacity_limits.is_empty() {
            errors.push(err(
                origin,
                "capacityLimits".into(),
                "at least one capacity unit is needed".into(),
            ));
        }
        for (i, c) in env.capacity_limits.iter().enumerate() {
            let f = format!("capacityLimits[{i}]");
            if !valid_name(&c.capacity_unit) {
                errors.push(err(
                    origin,
                    format!("{f}.capacityUnit"),
                    format!("`{}` is not a valid unit name", c.capacity_unit),
                ));
            }
            if !units.insert(c.capacity_unit.clone()) {
                errors.push(err(
                    origin,
                    format!("{f}.capacityUnit"),
                    format!("unit `{}` is declared twice", c.capacity_unit),
                ));
            }
            if let crate::model::Devices::Indices(ix) = &c.devices {
                let set: BTreeSet<_> = ix.iter().collect();
                if set.len() != ix.len() {
                    errors.push(err(
                        origin,
                        format!("{f}.devices"),
                        "a GPU index is listed twice".into(),
                    ));
                }
            }
        }
    }
    let mut seen: BTreeMap<String, Origin> = BTreeMap::new();
    for (origin, s) in &shares {
        let name = &s.quota_share_name;
        if !valid_name(name) {
            errors.push(err(
                origin,
                "quotaShareName".into(),
                format!("`{name}` is not a valid name: use 1-128 of A-Z a-z 0-9 _ -"),
            ));
        }
        if let Some(first) = seen.get(name) {
            let where_ = match (&first.file, first.line) {
                (Some(f), Some(l)) => format!(" (first defined at {f}:{l})"),
                (Some(f), None) => format!(" (first defined in {f})"),
                _ => String::new(),
            };
            errors.push(err(
                origin,
                "quotaShareName".into(),
                format!("duplicate quota share `{name}`{where_}"),
            ));
        } else {
            seen.insert(name.clone(), origin.clone());
        }
        let n = s.capacity_limits.len();
        if !(1..=5).contains(&n) {
            errors.push(err(
                origin,
                format!("{name}.capacityLimits"),
                format!("{n} entries: a share lists 1 to 5 capacity units"),
            ));
        }
        let mut share_units = BTreeSet::new();
        for (i, c) in s.capacity_limits.iter().enumerate() {
            let f = format!("{name}.capacityLimits[{i}]");
            if c.max_capacity < 1 {
                errors.push(err(
                    origin,
                    format!("{f}.maxCapacity"),
                    "must be at least 1".into(),
                ));
            }
            if !share_units.insert(c.capacity_unit.as_str()) {
                errors.push(err(
                    origin,
                    format!("{f}.capacityUnit"),
                    format!("unit `{}` is listed twice in this share", c.capacity_unit),
                ));
            }
            if !envs.is_empty() && !units.contains(&c.capacity_unit) {
                let declared: Vec<&str> = units.iter().map(String::as_str).collect();
                errors.push(err(
                    origin,
                    format!("{f}.capacityUnit"),
                    format!(
                        "unit `{}` is not declared by the ServiceEnvironment (declared: {})",
                        c.capacity_unit,
                        declared.join(", ")
                    ),
                ));
            }
        }
        let rsc = &s.resource_sharing_configuration;
        if let Some(b) = rsc.borrow_limit {
            if rsc.strategy != Strategy::LendAndBorrow {
                errors.push(err(
                    origin,
                    format!("{name}.resourceSharingConfiguration.borrowLimit"),
                    format!(
                        "borrowLimit is only valid with strategy LEND_AND_BORROW (this share is {}): remove it or change the strategy",
                        rsc.strategy.as_str()
                    ),
                ));
            } else if b < -1 {
                errors.push(err(
                    origin,
                    format!("{name}.resourceSharingConfiguration.borrowLimit"),
                    format!("{b} is out of range: a percentage >= 0, or -1 for no cap"),
                ));
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let env = envs
        .into_iter()
        .next()
        .map(|(_, e)| e)
        .ok_or_else(Vec::new)?;
    let mut shares: Vec<QuotaShare> = shares.into_iter().map(|(_, s)| s).collect();
    shares.sort_by(|a, b| a.quota_share_name.cmp(&b.quota_share_name));
    Ok(ValidConfig { env, shares })
}
