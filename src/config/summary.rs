//! What a valid configuration amounts to, for people: capacity per unit, each share's
//! terms, and the warnings worth an operator's attention (SPEC §1.2, §5).

use crate::model::ValidConfig;
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
    /// A unit sliced by memory (SPEC §15): each device's GiB; its counts are GiB.
    pub slice_gib: Option<u32>,
}

pub fn units(cfg: &ValidConfig) -> Vec<UnitSummary> {
    cfg.env
        .capacity_limits
        .iter()
        .map(|c| {
            // A sliced unit counts GiB: each device brings memoryGiB of them.
            let per = c.slicing.map_or(1, |s| s.memory_gib);
            let spec = |d: &Devices| match d {
                Devices::Auto => ("auto".to_string(), c.max_capacity, true),
                Devices::Fake(n) => (format!("fake: {n}"), n.saturating_mul(per), false),
                Devices::Mig {
                    profile,
                    fake: Some(n),
                } => (format!("fake: {n}, mig: {profile}"), *n, false),
                // The instances are only known at run time, as for `auto`.
                Devices::Mig {
                    profile,
                    fake: None,
                } => (format!("mig: {profile}"), c.max_capacity, true),
                Devices::Indices(v) => {
                    let list: Vec<String> = v.iter().map(u32::to_string).collect();
                    let n = (v.len() as u32).saturating_mul(per);
                    (format!("[{}]", list.join(", ")), n, false)
                }
            };
            // With nodes: each node's devices of the unit, summed.
            let (devices, count, auto) = if cfg.has_nodes() {
                let per: Vec<(String, (String, u32, bool))> = cfg
                    .node_units()
                    .into_iter()
                    .filter(|(_, u, _)| *u == c.capacity_unit)
                    .map(|(n, _, d)| (n, spec(&d)))
                    .collect();
                let text: Vec<String> = per
                    .iter()
                    .map(|(n, (t, _, _))| format!("{n} {t}"))
                    .collect();
                (
                    text.join("; "),
                    per.iter().map(|(_, (_, k, _))| k).sum(),
                    per.iter().any(|(_, (_, _, a))| *a),
                )
            } else {
                spec(c.device_spec())
            };
            UnitSummary {
                unit: c.capacity_unit.clone(),
                max_capacity: c.max_capacity,
                devices,
                usable: c.max_capacity.min(count),
                auto,
                guaranteed: cfg.guaranteed(&c.capacity_unit),
                slice_gib: c.slicing.map(|s| s.memory_gib),
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

/// What a minimum runtime (SPEC §11) and the stop settings (§14) mean for the shares: how
/// long their own jobs are protected, and, per lending share, how long taking its lent
/// GPUs back may take at most (the slowest share that may borrow them: its minimum runtime
/// + its notice + its grace period).
pub fn min_runtime_notes(cfg: &ValidConfig) -> Vec<String> {
    let env_grace = cfg.env.preemption.grace_period_seconds;
    let min_of = |s: &QuotaShare| s.preemption_configuration.min_runtime_seconds;
    let notice_of = |s: &QuotaShare| s.preemption_configuration.notice.map_or(0, |n| n.seconds);
    let grace_of = |s: &QuotaShare| s.preemption_configuration.grace(env_grace);
    let longest =
        |s: &QuotaShare| u64::from(min_of(s)) + u64::from(notice_of(s)) + u64::from(grace_of(s));
    let mut out = Vec::new();
    for s in &cfg.shares {
        if min_of(s) > 0 {
            out.push(format!(
                "share `{}`: its running jobs cannot be preempted during the first {} s of an attempt (minRuntimeSeconds; DEVICE_LOST ignores it)",
                s.quota_share_name,
                min_of(s)
            ));
        }
    }
    for l in &cfg.shares {
        if l.resource_sharing_configuration.strategy == Strategy::Reserve {
            continue;
        }
        let slowest = cfg
            .shares
            .iter()
            .filter(|b| b.quota_share_name != l.quota_share_name)
            .filter(|b| b.resource_sharing_configuration.strategy == Strategy::LendAndBorrow)
            .max_by_key(|b| (longest(b), std::cmp::Reverse(b.quota_share_name.clone())));
        let Some(b) = slowest else { continue };
        let pc = &b.preemption_configuration;
        // Only the environment's grace: nothing worth a note.
        if min_of(b) == 0 && pc.notice.is_none() && pc.grace_period_seconds.is_none() {
            continue;
        }
        let mut terms = Vec::new();
        if min_of(b) > 0 {
            terms.push(format!("minRuntimeSeconds {}", min_of(b)));
        }
        if let Some(n) = pc.notice {
            terms.push(format!("notice {} s ({})", n.seconds, n.signal.as_str()));
        }
        terms.push(format!("gracePeriodSeconds {}", grace_of(b)));
        out.push(format!(
            "share `{}` lends its idle GPUs: taking them back may take up to {} s ({}'s {})",
            l.quota_share_name,
            longest(b),
            b.quota_share_name,
            terms.join(" + ")
        ));
    }
    out
}

/// Things that are allowed but probably not what the operator wants.
pub fn warnings(cfg: &ValidConfig) -> Vec<String> {
    let mut out = Vec::new();
    if cfg.shares.is_empty() {
        out.push(
            "no QuotaShare in this config: every submission will be refused until one is added \
             (put the shares' YAML files in this directory or a subfolder of it, e.g. teams/)"
                .to_string(),
        );
    }
    for u in units(cfg) {
        if !u.auto
            && u.usable < u.max_capacity
            && let Some(gib) = u.slice_gib
        {
            out.push(format!(
                "unit `{}`: maxCapacity is {} GiB but the listed devices offer {} GiB ({gib} each), so {} are usable",
                u.unit, u.max_capacity, u.usable, u.usable
            ));
        } else if !u.auto && u.usable < u.max_capacity {
            out.push(format!(
                "unit `{}`: maxCapacity is {} but only {} devices are listed, so {} are usable",
                u.unit, u.max_capacity, u.usable, u.usable
            ));
        }
        if u.guaranteed > u64::from(u.usable) {
            out.push(format!(
                "unit `{}` is oversubscribed: the shares are guaranteed {} GPUs, {} {} usable; guarantees may wait for capacity. \
                 Guarantees overlap, so a share's guaranteed job can wait while other shares use their own guarantees: \
                 guaranteed jobs are then served in global order (priority, then submission), RESERVE shares keep \
                 their idle GPUs only from borrowers, and no GPU is left idle while a guaranteed job that fits waits",
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

/// What a slice guarantees, per unit sliced by memory (SPEC §15): its quantities are GiB,
/// all of a job's on one device, and they are accounted, not enforced; and whether overuse
/// can be seen (fake devices report no memory).
pub fn slice_notes(cfg: &ValidConfig) -> Vec<String> {
    let places = cfg.node_units();
    cfg.env
        .capacity_limits
        .iter()
        .filter_map(|c| {
            let sl = c.slicing?;
            let mut on = places.iter().filter(|(_, u, _)| *u == c.capacity_unit).peekable();
            let fake = on.peek().is_some()
                && on.all(|(_, _, d)| matches!(d, crate::model::Devices::Fake(_)));
            let seen = if fake {
                "fake devices report no memory: overuse cannot be seen"
            } else {
                "overuse is watched where NVML reports per-process memory (a job over its GiB + 1 on two samples in a row is OVER_MEMORY)"
            };
            Some(format!(
                "unit `{}` is sliced by memory: quantities are GiB ({} GiB per device, all of a job's GiB on one device); \
                 GiB are accounted, not enforced: nothing stops a job from using more of its device's memory than it asked for (overuse: {}); {seen}",
                c.capacity_unit,
                sl.memory_gib,
                match sl.overuse {
                    crate::model::Overuse::Report => "REPORT",
                    crate::model::Overuse::Stop => "STOP",
                }
            ))
        })
        .collect()
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

/// How a share orders and caps its users (SPEC §12), in words: `fair share (half-life 7d;
/// weights alice 2), userLimit 4`, or `first come, first served`.
pub fn user_policy_text(s: &QuotaShare) -> String {
    let mut parts = Vec::new();
    match &s.fair_share {
        Some(fs) => {
            let mut t = format!(
                "fair share (half-life {}",
                crate::duration::short(i64::from(fs.half_life_seconds) * 1000)
            );
            if !fs.weights.is_empty() {
                let w: Vec<String> = fs.weights.iter().map(|(u, w)| format!("{u} {w}")).collect();
                t.push_str(&format!("; weights {}", w.join(", ")));
            }
            t.push(')');
            parts.push(t);
        }
        None => parts.push("first come, first served".to_string()),
    }
    if let Some(l) = s.user_limit {
        parts.push(format!("userLimit {l}"));
    }
    parts.join(", ")
}

/// A share's terms as `field → value`, for diffs.
fn share_terms(s: &QuotaShare) -> Vec<(String, String)> {
    let rsc = &s.resource_sharing_configuration;
    let mut out: Vec<(String, String)> = s
        .capacity_limits
        .iter()
        .map(|c| (c.capacity_unit.clone(), c.max_capacity.to_string()))
        .collect();
    out.push(("strategy".into(), rsc.strategy.as_str().into()));
    out.push((
        "borrowLimit".into(),
        rsc.borrow_limit.unwrap_or(-1).to_string(),
    ));
    let toggle = |on: bool| if on { "ENABLED" } else { "DISABLED" };
    out.push((
        "inSharePreemption".into(),
        toggle(s.preemption_configuration.in_share_preemption.is_enabled()).into(),
    ));
    out.push((
        "minRuntimeSeconds".into(),
        s.preemption_configuration.min_runtime_seconds.to_string(),
    ));
    // SPEC §14, only where the share sets them.
    if let Some(g) = s.preemption_configuration.grace_period_seconds {
        out.push(("gracePeriodSeconds".into(), g.to_string()));
    }
    if let Some(n) = s.preemption_configuration.notice {
        out.push((
            "notice".into(),
            format!("{} {} s before SIGTERM", n.signal.as_str(), n.seconds),
        ));
    }
    out.push((
        "state".into(),
        toggle(s.state == ShareState::Enabled).into(),
    ));
    out.push((
        "members".into(),
        s.members
            .as_ref()
            .map_or("everyone".into(), |m| format!("[{}]", m.join(", "))),
    ));
    out.push(("users".into(), user_policy_text(s)));
    out
}

fn env_terms(cfg: &ValidConfig) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = units(cfg)
        .into_iter()
        .map(|u| (u.unit, format!("{} ({})", u.max_capacity, u.devices)))
        .collect();
    out.push((
        "gracePeriodSeconds".into(),
        cfg.env.preemption.grace_period_seconds.to_string(),
    ));
    out.push((
        "spreadSeconds".into(),
        cfg.env.preemption.spread_seconds.to_string(),
    ));
    out.push((
        "reserveAfterSeconds".into(),
        cfg.env.reserve_after_seconds.to_string(),
    ));
    out
}

fn diff(owner: &str, old: &[(String, String)], new: &[(String, String)], out: &mut Vec<String>) {
    for (k, v) in new {
        match old.iter().find(|(ok, _)| ok == k) {
            Some((_, ov)) if ov != v => out.push(format!("{owner} {k} {ov} -> {v}")),
            Some(_) => {}
            None => out.push(format!("{owner} {k} {v}")),
        }
    }
    for (k, _) in old
        .iter()
        .filter(|(k, _)| !new.iter().any(|(nk, _)| nk == k))
    {
        out.push(format!("{owner} {k} removed"));
    }
}

/// What changed from `old` to `new`, one short phrase each (`vision gpu 3 -> 2`,
/// `added share qs4`), in a stable order.
pub fn changes(old: &ValidConfig, new: &ValidConfig) -> Vec<String> {
    let mut out = Vec::new();
    diff("environment", &env_terms(old), &env_terms(new), &mut out);
    for s in &new.shares {
        let name = &s.quota_share_name;
        match old.shares.iter().find(|o| &o.quota_share_name == name) {
            Some(o) => diff(name, &share_terms(o), &share_terms(s), &mut out),
            None => out.push(format!("added share {name}")),
        }
    }
    for o in &old.shares {
        if !new
            .shares
            .iter()
            .any(|s| s.quota_share_name == o.quota_share_name)
        {
            out.push(format!("removed share {}", o.quota_share_name));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_documents, validate};

    fn cfg(text: &str) -> ValidConfig {
        validate(parse_documents(text, None).expect("parse")).expect("valid")
    }

    const BASE: &str = "kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 4, devices: {fake: 4}}]
---
kind: QuotaShare
quotaShareName: a
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW, borrowLimit: 50}
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND}
";

    #[test]
    fn changes_name_each_difference() {
        let old = cfg(BASE);
        assert_eq!(changes(&old, &old), Vec::<String>::new());
        let new = cfg(&BASE
            .replace(
                "maxCapacity: 4, devices: {fake: 4}",
                "maxCapacity: 4, devices: {fake: 3}",
            )
            .replace("maxCapacity: 2}]", "maxCapacity: 3}]")
            .replace("quotaShareName: b", "quotaShareName: c")
            .replace(
                "{strategy: LEND}",
                "{strategy: RESERVE}\nstate: DISABLED\nmembers: [x]",
            ));
        assert_eq!(
            changes(&old, &new),
            [
                "environment gpu 4 (fake: 4) -> 4 (fake: 3)",
                "a gpu 2 -> 3",
                "added share c",
                "removed share b"
            ]
        );
        assert_eq!(one_line(&new), "2 shares; gpu 4/3 guaranteed");
        assert_eq!(borrow_cap(&new.shares[0], 3), Some(1));
        assert_eq!(borrow_cap_text(&new.shares[0]), "+1 gpu (50%)");
        assert!(warnings(&new).iter().any(|w| w.contains("oversubscribed")));
        assert!(warnings(&new).iter().any(|w| w.contains("`c` is DISABLED")));
    }

    #[test]
    fn min_runtime_notes_say_how_long_a_reclaim_may_take() {
        let c = cfg("kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}]
preemption: {gracePeriodSeconds: 15}
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
preemptionConfiguration: {minRuntimeSeconds: 600}
---
kind: QuotaShare
quotaShareName: l
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND}
");
        assert_eq!(
            min_runtime_notes(&c),
            vec![
                "share `b`: its running jobs cannot be preempted during the first 600 s of an attempt (minRuntimeSeconds; DEVICE_LOST ignores it)".to_string(),
                "share `l` lends its idle GPUs: taking them back may take up to 615 s (b's minRuntimeSeconds 600 + gracePeriodSeconds 15)".to_string(),
            ]
        );
        assert!(min_runtime_notes(&cfg(BASE)).is_empty());
    }

    #[test]
    fn the_reclaim_note_adds_the_borrowers_notice_and_grace() {
        let c = cfg("kind: ServiceEnvironment
name: t
capacityLimits: [{capacityUnit: gpu, maxCapacity: 3, devices: {fake: 3}}]
preemption: {gracePeriodSeconds: 15}
---
kind: QuotaShare
quotaShareName: b
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
preemptionConfiguration: {minRuntimeSeconds: 600, gracePeriodSeconds: 120, notice: {signal: SIGUSR1, seconds: 300}}
---
kind: QuotaShare
quotaShareName: c
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
preemptionConfiguration: {notice: {signal: SIGUSR2, seconds: 60}}
---
kind: QuotaShare
quotaShareName: l
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND}
");
        let notes = min_runtime_notes(&c);
        assert_eq!(
            notes[1..],
            [
                "share `b` lends its idle GPUs: taking them back may take up to 75 s (c's notice 60 s (SIGUSR2) + gracePeriodSeconds 15)".to_string(),
                "share `c` lends its idle GPUs: taking them back may take up to 1020 s (b's minRuntimeSeconds 600 + notice 300 s (SIGUSR1) + gracePeriodSeconds 120)".to_string(),
                "share `l` lends its idle GPUs: taking them back may take up to 1020 s (b's minRuntimeSeconds 600 + notice 300 s (SIGUSR1) + gracePeriodSeconds 120)".to_string(),
            ]
        );
    }
}
