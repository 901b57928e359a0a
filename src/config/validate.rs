//! Checking a set of documents as one unit (SPEC §5): exactly one environment, unique
//! share names, ranges, strategy rules, declared units, member syntax. Every error is
//! reported, placed on the offending field when the document's text is known.

use super::Document;
use super::error::ConfigError;
use super::parse::{Origin, SourcedDocument, at_field};
use super::suggest::hint;
use crate::model::ValidConfig;
use crate::model::{
    Devices, Executor, MAX_GRACE_SECONDS, MAX_NOTICE_SECONDS, MAX_SLICE_GIB, NodeSpec, QuotaShare,
    ServiceEnvironment, Strategy,
};
use std::collections::{BTreeMap, BTreeSet};

/// `[A-Za-z0-9_-]{1,128}`
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A unix user name or `@group`: letters, digits, `_`, `-`, `.`, not starting with `-`
/// (what useradd accepts, plus the upper case some directories use).
pub fn valid_principal(p: &str) -> bool {
    let name = p.strip_prefix('@').unwrap_or(p);
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// The texts of the files the documents came from, by file name, so that errors can be
/// placed on their field.
pub type Texts = BTreeMap<String, String>;

struct Ctx<'a> {
    texts: &'a Texts,
    errors: Vec<ConfigError>,
}

impl Ctx<'_> {
    fn err(&mut self, origin: &Origin, field: impl Into<String>, message: impl Into<String>) {
        let (field, message) = (field.into(), message.into());
        let file = origin.file.as_deref();
        let e = match file.and_then(|f| self.texts.get(f)) {
            Some(text) => at_field(text, origin.line, file, &field, message),
            None => ConfigError::new(message)
                .at(file, origin.line, None)
                .field(field),
        };
        self.errors.push(e);
    }
}

fn place(o: &Origin) -> String {
    match (&o.file, o.line) {
        (Some(f), Some(l)) => format!("{f}:{l}"),
        (Some(f), None) => f.clone(),
        _ => "an earlier document".into(),
    }
}

/// Validate a whole set of documents; on failure, every error found.
pub fn validate(docs: Vec<SourcedDocument>) -> Result<ValidConfig, Vec<ConfigError>> {
    validate_texts(docs, &Texts::new())
}

/// [`validate`], placing each error on its field's line and column using the texts.
pub fn validate_texts(
    docs: Vec<SourcedDocument>,
    texts: &Texts,
) -> Result<ValidConfig, Vec<ConfigError>> {
    let mut cx = Ctx {
        texts,
        errors: Vec::new(),
    };
    let mut envs = Vec::new();
    let mut shares: Vec<(Origin, QuotaShare)> = Vec::new();
    for d in docs {
        match d.doc {
            Document::ServiceEnvironment(e) => envs.push((d.origin, e)),
            Document::QuotaShare(s) => shares.push((d.origin, s)),
        }
    }
    if envs.is_empty() {
        cx.errors.push(ConfigError::new(
            "no ServiceEnvironment document: add one (`kind: ServiceEnvironment`) to declare the GPUs",
        ));
    }
    for (origin, _) in envs.iter().skip(1) {
        cx.err(
            origin,
            "kind",
            format!(
                "a second ServiceEnvironment (the first is at {}): exactly one is allowed",
                place(&envs[0].0)
            ),
        );
    }
    let units = envs
        .first()
        .map(|(o, e)| check_env(&mut cx, o, e))
        .unwrap_or_default();
    let declared: Vec<&str> = units.iter().map(String::as_str).collect();
    let mut seen: BTreeMap<String, Origin> = BTreeMap::new();
    for (origin, s) in &shares {
        let name = &s.quota_share_name;
        if let Some(first) = seen.get(name) {
            let msg = format!(
                "duplicate quota share `{name}` (first defined at {})",
                place(first)
            );
            cx.err(origin, "quotaShareName", msg);
        } else {
            seen.insert(name.clone(), origin.clone());
        }
        check_share(
            &mut cx,
            origin,
            s,
            (!envs.is_empty()).then_some(&declared[..]),
        );
    }
    if !cx.errors.is_empty() {
        return Err(cx.errors);
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

/// Checks the environment; returns the units it declares.
fn check_env(cx: &mut Ctx, origin: &Origin, env: &ServiceEnvironment) -> BTreeSet<String> {
    let mut units = BTreeSet::new();
    if !valid_name(&env.name) {
        cx.err(
            origin,
            "name",
            format!(
                "`{}` is not a valid name: use 1-128 of A-Z a-z 0-9 _ -",
                env.name
            ),
        );
    }
    if env.capacity_limits.is_empty() {
        cx.err(
            origin,
            "capacityLimits",
            "at least one capacity unit is needed",
        );
    }
    for (i, c) in env.capacity_limits.iter().enumerate() {
        let f = format!("capacityLimits[{i}]");
        if !valid_name(&c.capacity_unit) {
            cx.err(
                origin,
                format!("{f}.capacityUnit"),
                format!(
                    "`{}` is not a valid unit name: use 1-128 of A-Z a-z 0-9 _ -",
                    c.capacity_unit
                ),
            );
        }
        if !units.insert(c.capacity_unit.clone()) {
            cx.err(
                origin,
                format!("{f}.capacityUnit"),
                format!("unit `{}` is declared twice", c.capacity_unit),
            );
        }
        if let Some(sl) = &c.slicing
            && !(1..=MAX_SLICE_GIB).contains(&sl.memory_gib)
        {
            cx.err(
                origin,
                format!("{f}.slicing.memoryGiB"),
                format!(
                    "unit `{}`: memoryGiB is {}, must be 1..{MAX_SLICE_GIB} (the GiB each device offers, at most its real memory)",
                    c.capacity_unit, sl.memory_gib
                ),
            );
        }
        if c.slicing.is_some() && matches!(c.devices, Some(Devices::Mig { .. })) {
            cx.err(
                origin,
                format!("{f}.slicing"),
                format!(
                    "unit `{}`: MIG instances cannot be sliced by memory (each instance is already a slice of its GPU): drop `slicing` or use whole GPUs",
                    c.capacity_unit
                ),
            );
        }
        if let Some(Devices::Indices(ix)) = &c.devices {
            let set: BTreeSet<_> = ix.iter().collect();
            if set.len() != ix.len() {
                cx.err(
                    origin,
                    format!("{f}.devices"),
                    "a GPU index is listed twice",
                );
            }
        }
        if let Some(d) = &c.devices {
            let executor = env.executor.clone().unwrap_or(Executor::Local);
            check_mig(cx, origin, &format!("{f}.devices"), d, &executor);
        }
    }
    check_nodes(cx, origin, env, &units);
    check_principals(cx, origin, "admins", env.admins.as_deref());
    if let Some(m) = &env.metrics
        && m.listen.parse::<std::net::SocketAddr>().is_err()
    {
        cx.err(
            origin,
            "metrics.listen",
            format!(
                "`{}` is not ADDR:PORT (for example 127.0.0.1:9400, or 0.0.0.0:9400 for every interface)",
                m.listen
            ),
        );
    }
    if let Some(l) = &env.limits {
        for (field, v) in [
            ("limits.maxQueuedJobsPerUser", l.max_queued_jobs_per_user),
            ("limits.maxConnectionsPerUser", l.max_connections_per_user),
            ("limits.maxDataMiBPerUser", l.max_data_mib_per_user),
        ] {
            if v < 1 {
                cx.err(
                    origin,
                    field,
                    "must be at least 1, not 0 (remove it for the default)",
                );
            }
        }
        let least = crate::model::MIN_PIDS_PER_JOB;
        if l.pids_per_job < least {
            cx.err(
                origin,
                "limits.pidsPerJob",
                format!(
                    "must be at least {least}, not {} (a job's shell and command need a few; \
                     remove it for the default, 4096)",
                    l.pids_per_job
                ),
            );
        }
    }
    if let Some(g) = env.control_socket.as_ref().and_then(|c| c.group.as_deref())
        && (g.starts_with('@') || !valid_principal(g))
    {
        cx.err(
            origin,
            "controlSocket.group",
            format!("`{g}` is not a group name (letters, digits, _ - . ; no `@` here)"),
        );
    }
    units
}

/// `nodes` and `executor` (SPEC §10): unique valid node names, units declared and each
/// on some node, devices given one way only, one node for the local executor, explicit
/// devices for Slurm nodes (this machine cannot discover another machine's GPUs).
fn check_nodes(cx: &mut Ctx, origin: &Origin, env: &ServiceEnvironment, units: &BTreeSet<String>) {
    let executor = env.executor.clone().unwrap_or(Executor::Local);
    check_slurm_partition(cx, origin, &executor);
    let Some(nodes) = &env.nodes else {
        if matches!(executor, Executor::Slurm(_)) {
            cx.err(
                origin,
                "executor",
                "the Slurm executor needs `nodes`: list the Slurm nodes of the partition and their GPUs",
            );
        }
        return;
    };
    check_node_list(cx, origin, env, nodes);
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    let mut on_some_node: BTreeSet<&str> = BTreeSet::new();
    for (i, n) in nodes.iter().enumerate() {
        check_node_name(cx, origin, i, n, &mut names);
        on_some_node.extend(check_node_devices(cx, origin, i, n, units, &executor));
    }
    for unit in units {
        if !on_some_node.contains(unit.as_str()) && !nodes.is_empty() {
            cx.err(
                origin,
                "nodes",
                format!("unit `{unit}` is declared in capacityLimits but no node has it: add it to a node's devices"),
            );
        }
    }
}

/// The Slurm executor's partition: given, and a valid name.
fn check_slurm_partition(cx: &mut Ctx, origin: &Origin, executor: &Executor) {
    let Executor::Slurm(s) = executor else {
        return;
    };
    if s.partition.is_empty() {
        cx.err(
            origin,
            "executor",
            "the Slurm executor needs `partition`: the Slurm partition shareq alone schedules",
        );
    } else if !valid_name(&s.partition) {
        cx.err(
            origin,
            "executor.partition",
            format!(
                "`{}` is not a valid Slurm partition name: use 1-128 of A-Z a-z 0-9 _ -",
                s.partition
            ),
        );
    }
}

/// The `nodes` list as a whole: not empty, the only place devices are given, and one node
/// when the local executor is written out.
fn check_node_list(cx: &mut Ctx, origin: &Origin, env: &ServiceEnvironment, nodes: &[NodeSpec]) {
    if nodes.is_empty() {
        cx.err(
            origin,
            "nodes",
            "`nodes` is empty: list at least one node, or remove `nodes` to use this machine's devices",
        );
    }
    for (i, c) in env.capacity_limits.iter().enumerate() {
        if c.devices.is_some() {
            cx.err(
                origin,
                format!("capacityLimits[{i}].devices"),
                format!(
                    "unit `{}`: devices are given both here and in `nodes`: with `nodes`, each node lists its devices (remove this line)",
                    c.capacity_unit
                ),
            );
        }
    }
    // Written out: the config itself contradicts. Left out, a replay of several nodes is
    // fine, and `serve` says that it needs an executor for them.
    if nodes.len() > 1 && env.executor == Some(Executor::Local) {
        cx.err(
            origin,
            "nodes",
            format!(
                "{} nodes with the local executor, which runs jobs on this machine only: list one node, or use `executor: {{kind: slurm, partition: ...}}`",
                nodes.len()
            ),
        );
    }
}

/// Node `i`'s name: valid, and not listed before (`names`: the names so far, by index).
fn check_node_name<'a>(
    cx: &mut Ctx,
    origin: &Origin,
    i: usize,
    n: &'a NodeSpec,
    names: &mut BTreeMap<&'a str, usize>,
) {
    let f = format!("nodes[{i}]");
    if !valid_name(&n.name) {
        cx.err(
            origin,
            format!("{f}.name"),
            format!(
                "`{}` is not a valid node name: use 1-128 of A-Z a-z 0-9 _ -",
                n.name
            ),
        );
    }
    if let Some(first) = names.insert(&n.name, i) {
        cx.err(
            origin,
            format!("{f}.name"),
            format!(
                "node `{}` is listed twice (first as nodes[{first}])",
                n.name
            ),
        );
    }
}

/// Node `i`'s devices: some, each unit once and declared, each GPU index given once, no
/// `auto` for Slurm. Returns the declared units the node has.
fn check_node_devices<'a>(
    cx: &mut Ctx,
    origin: &Origin,
    i: usize,
    n: &'a NodeSpec,
    units: &BTreeSet<String>,
    executor: &Executor,
) -> Vec<&'a str> {
    let f = format!("nodes[{i}]");
    if n.devices.0.is_empty() {
        cx.err(
            origin,
            format!("{f}.devices"),
            format!("node `{}` lists no devices", n.name),
        );
    }
    let mut declared_here = Vec::new();
    let mut seen_units = BTreeSet::new();
    let mut indices: BTreeMap<u32, &str> = BTreeMap::new();
    for (unit, d) in &n.devices.0 {
        let uf = format!("{f}.devices.{unit}");
        if !seen_units.insert(unit.as_str()) {
            cx.err(
                origin,
                uf.clone(),
                format!("node `{}`: unit `{unit}` is listed twice", n.name),
            );
        }
        if !units.contains(unit) {
            let declared: Vec<&str> = units.iter().map(String::as_str).collect();
            cx.err(
                origin,
                uf.clone(),
                format!(
                    "node `{}`: unit `{unit}` is not declared in capacityLimits{} (declared: {})",
                    n.name,
                    hint(unit, &declared),
                    declared.join(", ")
                ),
            );
        } else {
            declared_here.push(unit.as_str());
        }
        check_mig(cx, origin, &uf, d, executor);
        match d {
            Devices::Indices(ix) => {
                for &x in ix {
                    if let Some(other) = indices.insert(x, unit.as_str()) {
                        let msg = if other == unit {
                            format!("node `{}`: GPU index {x} is listed twice", n.name)
                        } else {
                            format!(
                                "node `{}`: GPU index {x} is given to both `{other}` and `{unit}`",
                                n.name
                            )
                        };
                        cx.err(origin, uf.clone(), msg);
                    }
                }
            }
            Devices::Auto if matches!(executor, Executor::Slurm(_)) => cx.err(
                origin,
                uf.clone(),
                format!(
                    "node `{}`: `auto` cannot be used with the Slurm executor (shareq cannot look at another machine's GPUs): list the indices, e.g. [0, 1, 2, 3]",
                    n.name
                ),
            ),
            _ => {}
        }
    }
    declared_here
}

/// `{mig: PROFILE}` (SPEC §15): a profile as NVML names it, on this machine only.
fn check_mig(cx: &mut Ctx, origin: &Origin, field: &str, d: &Devices, executor: &Executor) {
    let Devices::Mig { profile, .. } = d else {
        return;
    };
    let field = format!("{field}.mig");
    let field = field.as_str();
    if profile.trim().is_empty() {
        cx.err(
            origin,
            field.to_string(),
            "the profile is empty: name one as `nvidia-smi mig -lgip` does, e.g. `1g.10gb`",
        );
    } else if !valid_mig_profile(profile) {
        cx.err(
            origin,
            field.to_string(),
            format!(
                "`{profile}` is not a MIG profile: expected `<n>g.<m>gb` as NVML names it, e.g. `1g.10gb`, `3g.40gb` or `1g.10gb+me`"
            ),
        );
    }
    if matches!(executor, Executor::Slurm(_)) {
        cx.err(
            origin,
            field.to_string(),
            "MIG instances are found on this machine only and cannot be used with the Slurm executor",
        );
    }
}

/// A MIG profile name as NVML gives it: `[<k>c.]<n>g.<m>gb` and any `+tag` / `-tag`
/// suffixes (`1g.10gb`, `2g.20gb`, `1c.3g.40gb`, `1g.10gb+me`, `1g.20gb+gfx`).
pub fn valid_mig_profile(p: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit());
    let end = p.find(['+', '-']).unwrap_or(p.len());
    let (core, tags) = p.split_at(end);
    let tags_ok = tags.is_empty()
        || tags[1..]
            .split(['+', '-'])
            .all(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_lowercase() || b == b'.'));
    let mut parts: Vec<&str> = core.split('.').collect();
    if parts.len() == 3 {
        match parts[0].strip_suffix('c') {
            Some(k) if digits(k) => {
                parts.remove(0);
            }
            _ => return false,
        }
    }
    tags_ok
        && parts.len() == 2
        && parts[0].strip_suffix('g').is_some_and(digits)
        && parts[1].strip_suffix("gb").is_some_and(digits)
}

fn check_principals(cx: &mut Ctx, origin: &Origin, field: &str, list: Option<&[String]>) {
    for (i, p) in list.unwrap_or_default().iter().enumerate() {
        if !valid_principal(p) {
            cx.err(
                origin,
                format!("{field}[{i}]"),
                format!(
                    "`{p}` is not a user name or `@group` (letters, digits, _ - . ; not starting with -)"
                ),
            );
        }
    }
}

fn check_share(cx: &mut Ctx, origin: &Origin, s: &QuotaShare, declared: Option<&[&str]>) {
    let name = &s.quota_share_name;
    if !valid_name(name) {
        cx.err(
            origin,
            "quotaShareName",
            format!("`{name}` is not a valid name: use 1-128 of A-Z a-z 0-9 _ -"),
        );
    }
    let n = s.capacity_limits.len();
    if !(1..=5).contains(&n) {
        cx.err(
            origin,
            "capacityLimits",
            format!("share `{name}` has {n} entries: a share lists 1 to 5 capacity units"),
        );
    }
    let mut share_units = BTreeSet::new();
    for (i, c) in s.capacity_limits.iter().enumerate() {
        let f = format!("capacityLimits[{i}]");
        if c.max_capacity < 1 {
            cx.err(
                origin,
                format!("{f}.maxCapacity"),
                format!(
                    "share `{name}`: maxCapacity is {}, must be at least 1 (remove the entry to give no {} GPUs)",
                    c.max_capacity, c.capacity_unit
                ),
            );
        }
        if !share_units.insert(c.capacity_unit.as_str()) {
            cx.err(
                origin,
                format!("{f}.capacityUnit"),
                format!("share `{name}`: unit `{}` is listed twice", c.capacity_unit),
            );
        }
        if let Some(units) = declared.filter(|u| !u.contains(&c.capacity_unit.as_str())) {
            cx.err(
                origin,
                format!("{f}.capacityUnit"),
                format!(
                    "share `{name}`: unit `{}` is not declared by the ServiceEnvironment{} (declared: {})",
                    c.capacity_unit,
                    hint(&c.capacity_unit, units),
                    units.join(", ")
                ),
            );
        }
    }
    let rsc = &s.resource_sharing_configuration;
    let field = "resourceSharingConfiguration.borrowLimit";
    match rsc.borrow_limit {
        Some(_) if rsc.strategy != Strategy::LendAndBorrow => cx.err(
            origin,
            field,
            format!(
                "share `{name}`: borrowLimit is only valid with strategy LEND_AND_BORROW (this share is {}): remove it or change the strategy",
                rsc.strategy.as_str()
            ),
        ),
        Some(b) if b < -1 => cx.err(
            origin,
            field,
            format!("share `{name}`: {b} is out of range: a percentage >= 0, or -1 for no cap"),
        ),
        _ => {}
    }
    check_principals(cx, origin, "members", s.members.as_deref());
    if let Some(fs) = &s.fair_share {
        if fs.half_life_seconds < 60 {
            cx.err(
                origin,
                "fairShare.halfLifeSeconds",
                format!(
                    "share `{name}`: halfLifeSeconds is {}, must be at least 60",
                    fs.half_life_seconds
                ),
            );
        }
        for (user, w) in &fs.weights {
            let f = format!("fairShare.weights.{user}");
            if user.starts_with('@') || !valid_principal(user) {
                cx.err(
                    origin,
                    &f,
                    format!(
                        "share `{name}`: `{user}` is not a user name (letters, digits, _ - . ; not starting with -)"
                    ),
                );
            }
            if !(w.is_finite() && *w > 0.0) {
                cx.err(
                    origin,
                    &f,
                    format!("share `{name}`: {user}'s weight is {w}, must be a number > 0"),
                );
            }
        }
    }
    check_stop_settings(cx, origin, s);
    if s.user_limit == Some(0) {
        cx.err(
            origin,
            "userLimit",
            format!("share `{name}`: userLimit is 0, must be at least 1 (remove it for no cap)"),
        );
    }
}

/// SPEC §14: a share's own grace period (0..=3600 s) and its notice (1..=3600 s; the
/// signal's name is checked with the document's shape).
fn check_stop_settings(cx: &mut Ctx, origin: &Origin, s: &QuotaShare) {
    let name = &s.quota_share_name;
    let pc = &s.preemption_configuration;
    if let Some(g) = pc.grace_period_seconds
        && g > MAX_GRACE_SECONDS
    {
        cx.err(
            origin,
            "preemptionConfiguration.gracePeriodSeconds",
            format!("share `{name}`: gracePeriodSeconds is {g}, must be 0..{MAX_GRACE_SECONDS}"),
        );
    }
    if let Some(n) = pc.notice
        && !(1..=MAX_NOTICE_SECONDS).contains(&n.seconds)
    {
        cx.err(
            origin,
            "preemptionConfiguration.notice.seconds",
            format!(
                "share `{name}`: notice.seconds is {}, must be 1..{MAX_NOTICE_SECONDS} (remove the notice for none)",
                n.seconds
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::valid_mig_profile;

    #[test]
    fn mig_profiles_are_those_nvml_names() {
        for p in [
            "1g.10gb",
            "2g.20gb",
            "3g.40gb",
            "7g.80gb",
            "1g.12gb",
            "1c.3g.40gb",
            "1g.10gb+me",
            "1g.20gb+gfx",
            "1g.10gb+me.all",
            "1g.24gb-me",
        ] {
            assert!(valid_mig_profile(p), "{p}");
        }
        for p in [
            "",
            "1g",
            "10gb",
            "1g.10",
            "g.10gb",
            "1g.gb",
            "1g.10gb+",
            "1g.10gb+ME",
            "x.1g.10gb",
            "1g.10gb ",
            "1g..10gb",
        ] {
            assert!(!valid_mig_profile(p), "{p}");
        }
    }
}
