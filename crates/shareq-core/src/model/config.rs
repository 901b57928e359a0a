//! The configuration documents of SPEC §1: `ServiceEnvironment` and `QuotaShare`, as serde
//! types with the exact (AWS Batch style, camelCase) field names.
//!
//! These types only describe what a document *says*; which type a YAML document is (its
//! `kind`) is read in shareq's `config::document`, and whether a set of documents makes a
//! valid configuration is decided in `config::validate`.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The machine's inventory: which GPUs exist and how many the scheduler may hand out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceEnvironment {
    pub name: String,
    pub capacity_limits: Vec<EnvCapacityLimit>,
    #[serde(default)]
    pub preemption: PreemptionSettings,
    /// A job larger than its guarantee that has been first in its share's queue for its
    /// unit this long takes the unit's reservation (SPEC §3); 0 = never.
    #[serde(default = "default_reserve_after")]
    pub reserve_after_seconds: u32,
    /// Unix users (or `@groups`) who may do anything through the control socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admins: Option<Vec<String>>,
    /// How long finished jobs are kept in the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistorySettings>,
    /// How much output an attempt may write, and the free space the logs leave (SPEC §7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs: Option<LogLimits>,
    /// Who may connect to the control socket (SPEC §9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_socket: Option<ControlSocket>,
    /// `metrics: {listen: "127.0.0.1:9400"}`: serve Prometheus metrics there (read at
    /// start; `serve --metrics` overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<MetricsSettings>,
    /// The machines (SPEC §10); absent = one implicit node with `capacityLimits[].devices`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<NodeSpec>>,
    /// What carries the decisions out; absent = the local executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<Executor>,
    /// What one user may hold of the scheduler (SPEC §9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<UserLimits>,
}

/// Per-user limits of the control socket (SPEC §9): no user can take the scheduler from
/// the others. Root and admins are exempt from the connection cap. And per job: the most
/// processes one attempt may hold (a fork bomb takes nobody else's process slots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserLimits {
    #[serde(default = "default_max_queued")]
    pub max_queued_jobs_per_user: u64,
    #[serde(default = "default_max_connections")]
    pub max_connections_per_user: u64,
    /// The most processes and threads one attempt may hold at once (its cgroup's
    /// `pids.max`, where a `pids` controller is usable).
    #[serde(default = "default_pids_per_job")]
    pub pids_per_job: u64,
    /// The most bytes (MiB) one user's jobs may hold on the state filesystem: their
    /// commands and envs in the database, and their logs.
    #[serde(rename = "maxDataMiBPerUser", default = "default_max_data_mib")]
    pub max_data_mib_per_user: u64,
}

fn default_max_data_mib() -> u64 {
    1024
}

impl Default for UserLimits {
    fn default() -> Self {
        UserLimits {
            max_queued_jobs_per_user: default_max_queued(),
            max_connections_per_user: default_max_connections(),
            pids_per_job: default_pids_per_job(),
            max_data_mib_per_user: default_max_data_mib(),
        }
    }
}

fn default_max_queued() -> u64 {
    10_000
}

fn default_max_connections() -> u64 {
    64
}

fn default_pids_per_job() -> u64 {
    4096
}

/// The least `limits.pidsPerJob` may be: a job's shell, its command and a few helpers.
pub const MIN_PIDS_PER_JOB: u64 = 8;

/// Where the scheduler serves `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsSettings {
    /// ADDR:PORT, e.g. `127.0.0.1:9400` or `0.0.0.0:9400`.
    pub listen: String,
    /// Per-user gauges (`shareq_user_usage_gpu_seconds`, labelled with user names) on the
    /// unauthenticated endpoint: off unless the admin turns them on (who uses how much is
    /// an admin's view, SPEC §9).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub user_labels: bool,
}

/// One machine of `nodes:`: its name and, per unit, which GPUs it has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSpec {
    pub name: String,
    /// Per capacity unit: `auto | [indices] | {fake: N}`. Listed in the order written.
    pub devices: NodeDevices,
}

/// A node's devices per unit, in the order the file lists the units (a unit written twice
/// is kept twice, so that validation can say so).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeDevices(pub Vec<(String, Devices)>);

impl NodeDevices {
    pub fn get(&self, unit: &str) -> Option<&Devices> {
        self.0.iter().find(|(u, _)| u == unit).map(|(_, d)| d)
    }
}

impl Serialize for NodeDevices {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (u, d) in &self.0 {
            m.serialize_entry(u, d)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for NodeDevices {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NodeDevices;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map from capacity unit to `auto`, [indices] or {fake: N}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeDevices, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Devices>()? {
                    out.push((k, v));
                }
                Ok(NodeDevices(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// `executor:`: which engine runs the jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Executor {
    /// Processes on this machine (one node).
    Local,
    /// Batch jobs on a Slurm partition that shareq alone schedules.
    Slurm(SlurmExecutor),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlurmExecutor {
    /// The partition shareq alone schedules (required; checked by validation so that
    /// its absence is reported on the `executor` line).
    #[serde(default)]
    pub partition: String,
    /// How an attempt is handed to Slurm (docs/SLURM.md).
    #[serde(default, skip_serializing_if = "SlurmStart::is_default")]
    pub start: SlurmStart,
}

/// `executor.start`: how the Slurm executor starts an attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SlurmStart {
    /// A batch job (`sbatch`): it outlives `serve`'s machine; Slurm starts it at its
    /// next scheduling pass (up to a second).
    #[default]
    Sbatch,
    /// A job step with its own allocation (`srun`, as the submitter, kept by `serve`'s
    /// machine for the job's life): allocated in the request, tens of milliseconds; a job
    /// whose `srun` dies with that machine is lost and run again.
    Srun,
}

impl SlurmStart {
    pub fn is_default(&self) -> bool {
        *self == SlurmStart::Sbatch
    }
}

/// `controlSocket: {group: G}`: only group G may connect (socket mode 0660).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControlSocket {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvCapacityLimit {
    pub capacity_unit: String,
    pub max_capacity: u32,
    /// Absent = `auto`; must be absent when the environment lists `nodes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Devices>,
    /// A unit sliced by memory (SPEC §15): its quantities are GiB, each device offers
    /// `memoryGiB` of them, and a job's GiB are all on one device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slicing: Option<Slicing>,
}

impl EnvCapacityLimit {
    /// The devices written here (`auto` when absent).
    pub fn device_spec(&self) -> &Devices {
        self.devices.as_ref().unwrap_or(&Devices::Auto)
    }
}

/// `slicing: {memoryGiB: 80, overuse: REPORT}` on a capacity limit (SPEC §15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Slicing {
    /// GiB each device of the unit offers (1..=MAX_SLICE_GIB).
    #[serde(rename = "memoryGiB")]
    pub memory_gib: u32,
    /// What happens to a job that holds more than its GiB (seen live only).
    #[serde(default)]
    pub overuse: Overuse,
}

/// The most GiB one sliced device may offer: larger than any GPU made so far, small
/// enough that a device's GiB are cheap to count one by one.
pub const MAX_SLICE_GIB: u32 = 4096;

/// `overuse:` of a sliced unit (SPEC §15): report a job over its GiB, or stop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Overuse {
    #[default]
    Report,
    Stop,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreemptionSettings {
    #[serde(default = "default_grace")]
    pub grace_period_seconds: u32,
    /// Each past preemption counts as this much run time in the victim order (SPEC §4.1).
    #[serde(default = "default_spread")]
    pub spread_seconds: u32,
}

fn default_grace() -> u32 {
    30
}

fn default_spread() -> u32 {
    3600
}

fn default_reserve_after() -> u32 {
    86400
}

impl Default for PreemptionSettings {
    fn default() -> Self {
        PreemptionSettings {
            grace_period_seconds: default_grace(),
            spread_seconds: default_spread(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HistorySettings {
    #[serde(default = "default_retain_days")]
    pub retain_days: u32,
}

fn default_retain_days() -> u32 {
    30
}

/// `logs:` of the service environment: each attempt's log is cut at `maxMiBPerAttempt`,
/// one user's logs together at `maxMiBPerUser`, and no log is written while the state filesystem has less than `minFreeMiB` free (so
/// the database always has room to write).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogLimits {
    #[serde(rename = "maxMiBPerAttempt", default = "default_log_cap_mib")]
    pub max_mib_per_attempt: u32,
    #[serde(rename = "minFreeMiB", default = "default_min_free_mib")]
    pub min_free_mib: u32,
    /// The most one user's logs kept on the state filesystem may hold, all their jobs'
    /// attempts together; 0: no budget.
    #[serde(rename = "maxMiBPerUser", default = "default_user_log_mib")]
    pub max_mib_per_user: u32,
}

fn default_user_log_mib() -> u32 {
    4096
}

fn default_log_cap_mib() -> u32 {
    1024
}

fn default_min_free_mib() -> u32 {
    256
}

impl Default for LogLimits {
    fn default() -> Self {
        LogLimits {
            max_mib_per_attempt: default_log_cap_mib(),
            min_free_mib: default_min_free_mib(),
            max_mib_per_user: default_user_log_mib(),
        }
    }
}

impl LogLimits {
    pub fn cap_bytes(&self) -> u64 {
        u64::from(self.max_mib_per_attempt) << 20
    }

    pub fn reserve_bytes(&self) -> u64 {
        u64::from(self.min_free_mib) << 20
    }

    /// One user's log budget in bytes; `None`: no budget.
    pub fn user_budget_bytes(&self) -> Option<u64> {
        (self.max_mib_per_user > 0).then(|| u64::from(self.max_mib_per_user) << 20)
    }
}

/// Which GPUs back a capacity unit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Devices {
    /// Discover through NVML / nvidia-smi.
    #[default]
    Auto,
    /// These GPU indices.
    Indices(Vec<u32>),
    /// N simulated devices.
    Fake(u32),
    /// Every MIG instance of `profile` (e.g. `1g.10gb`) on this machine's GPUs whose MIG
    /// mode is enabled, one unit of capacity each (SPEC §15); with `fake: Some(N)`, N
    /// simulated instances with fake UUIDs.
    Mig { profile: String, fake: Option<u32> },
}

impl Serialize for Devices {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Devices::Auto => s.serialize_str("auto"),
            Devices::Indices(v) => v.serialize(s),
            Devices::Fake(n) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("fake", n)?;
                m.end()
            }
            Devices::Mig { profile, fake } => {
                let mut m = s.serialize_map(Some(1 + usize::from(fake.is_some())))?;
                if let Some(n) = fake {
                    m.serialize_entry("fake", n)?;
                }
                m.serialize_entry("mig", profile)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Devices {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Devices;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "`auto`, a list of GPU indices such as [0, 1], {fake: N}, {mig: PROFILE} or {fake: N, mig: PROFILE}",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Devices, E> {
                if v == "auto" {
                    Ok(Devices::Auto)
                } else {
                    Err(E::custom(format!(
                        "devices: expected `auto`, a list of GPU indices, {{fake: N}} or {{mig: PROFILE}}, found `{v}`"
                    )))
                }
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Devices, A::Error> {
                let mut out = Vec::new();
                while let Some(i) = seq.next_element::<u32>()? {
                    out.push(i);
                }
                Ok(Devices::Indices(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Devices, A::Error> {
                let (mut fake, mut mig) = (None, None);
                while let Some(k) = map.next_key::<String>()? {
                    match k.as_str() {
                        "fake" if fake.is_none() => fake = Some(map.next_value::<u32>()?),
                        "mig" if mig.is_none() => mig = Some(map.next_value::<String>()?),
                        "fake" | "mig" => return Err(de::Error::duplicate_field("fake/mig")),
                        _ => return Err(de::Error::unknown_field(&k, &["fake", "mig"])),
                    }
                }
                match (fake, mig) {
                    (fake, Some(profile)) => Ok(Devices::Mig { profile, fake }),
                    (Some(n), None) => Ok(Devices::Fake(n)),
                    (None, None) => Err(de::Error::missing_field("fake")),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A team's or project's slice of the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QuotaShare {
    pub quota_share_name: String,
    pub capacity_limits: Vec<ShareCapacityLimit>,
    pub resource_sharing_configuration: ResourceSharingConfiguration,
    #[serde(default)]
    pub preemption_configuration: PreemptionConfiguration,
    #[serde(default)]
    pub state: ShareState,
    /// Unix users / `@groups` who may submit; absent = everyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<String>>,
    /// Fair share among the share's users (SPEC §12): whoever has used it least lately goes
    /// first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share: Option<FairShare>,
    /// At most this many GPUs of each unit held by one user's jobs in the share (SPEC §12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_limit: Option<u32>,
}

/// `fairShare` of a QuotaShare (SPEC §12).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FairShare {
    /// Usage this old counts half.
    #[serde(default = "default_half_life")]
    pub half_life_seconds: u32,
    /// A user's weight (default 1): a weight of 2 entitles to twice the share of others.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub weights: BTreeMap<String, f64>,
}

/// Seven days.
pub const DEFAULT_HALF_LIFE_SECONDS: u32 = 604_800;

fn default_half_life() -> u32 {
    DEFAULT_HALF_LIFE_SECONDS
}

impl FairShare {
    /// A user's weight: the configured one, else 1.
    pub fn weight(&self, user: &str) -> f64 {
        self.weights.get(user).copied().unwrap_or(1.0)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShareCapacityLimit {
    pub capacity_unit: String,
    pub max_capacity: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSharingConfiguration {
    pub strategy: Strategy,
    /// Percent of maxCapacity that may be borrowed per unit; -1 = unlimited. Only valid
    /// with LEND_AND_BORROW; `None` when not written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrow_limit: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Strategy {
    Reserve,
    Lend,
    LendAndBorrow,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Reserve => "RESERVE",
            Strategy::Lend => "LEND",
            Strategy::LendAndBorrow => "LEND_AND_BORROW",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreemptionConfiguration {
    #[serde(default)]
    pub in_share_preemption: Toggle,
    /// A running job of the share is no preemption candidate (either kind) until its
    /// current attempt has run this long (SPEC §11). 0 = no protection.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_runtime_seconds: u32,
    /// This share's stops: SIGTERM → wait → SIGKILL (SPEC §14); absent = the
    /// environment's `preemption.gracePeriodSeconds`. 0..=3600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<u32>,
    /// Warn a victim this long before SIGTERM, with this signal (SPEC §14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<Notice>,
}

impl PreemptionConfiguration {
    /// The grace period of this share's stops, given the environment's.
    pub fn grace(&self, env_grace: u32) -> u32 {
        self.grace_period_seconds.unwrap_or(env_grace)
    }
}

/// `notice: {signal, seconds}` (SPEC §14): a victim's process group gets `signal` at once,
/// SIGTERM `seconds` later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Notice {
    pub signal: NoticeSignal,
    /// 1..=3600.
    pub seconds: u32,
}

/// The signals a notice may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NoticeSignal {
    #[serde(rename = "SIGUSR1")]
    Usr1,
    #[serde(rename = "SIGUSR2")]
    Usr2,
    #[serde(rename = "SIGINT")]
    Int,
    #[serde(rename = "SIGHUP")]
    Hup,
    #[serde(rename = "SIGTERM")]
    Term,
    #[serde(rename = "SIGURG")]
    Urg,
    #[serde(rename = "SIGWINCH")]
    Winch,
}

impl NoticeSignal {
    /// Every signal a notice may send, as written in a config.
    pub const NAMES: &'static [&'static str] = &[
        "SIGUSR1", "SIGUSR2", "SIGINT", "SIGHUP", "SIGTERM", "SIGURG", "SIGWINCH",
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NoticeSignal::Usr1 => "SIGUSR1",
            NoticeSignal::Usr2 => "SIGUSR2",
            NoticeSignal::Int => "SIGINT",
            NoticeSignal::Hup => "SIGHUP",
            NoticeSignal::Term => "SIGTERM",
            NoticeSignal::Urg => "SIGURG",
            NoticeSignal::Winch => "SIGWINCH",
        }
    }

    /// The signal's number on Linux (what `kill(2)` takes).
    pub fn linux_number(self) -> i32 {
        match self {
            NoticeSignal::Usr1 => 10,
            NoticeSignal::Usr2 => 12,
            NoticeSignal::Int => 2,
            NoticeSignal::Hup => 1,
            NoticeSignal::Term => 15,
            NoticeSignal::Urg => 23,
            NoticeSignal::Winch => 28,
        }
    }
}

/// The longest notice and grace a share may set (SPEC §14).
pub const MAX_NOTICE_SECONDS: u32 = 3600;
pub const MAX_GRACE_SECONDS: u32 = 3600;

/// `ENABLED` / `DISABLED`, as AWS spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Toggle {
    Enabled,
    #[default]
    Disabled,
}

impl Toggle {
    pub fn is_enabled(self) -> bool {
        self == Toggle::Enabled
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ShareState {
    #[default]
    Enabled,
    Disabled,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::Devices;

    /// `{mig: P}` and `{fake: N, mig: P}` read and write back as written (SPEC §15).
    #[test]
    fn mig_devices_read_and_write_back() {
        let mig: Devices = serde_yaml::from_str("{mig: 1g.10gb}").unwrap();
        assert_eq!(
            mig,
            Devices::Mig {
                profile: "1g.10gb".into(),
                fake: None
            }
        );
        let fake: Devices = serde_yaml::from_str("{fake: 7, mig: 1g.10gb}").unwrap();
        assert_eq!(
            fake,
            Devices::Mig {
                profile: "1g.10gb".into(),
                fake: Some(7)
            }
        );
        for d in [mig, fake, Devices::Fake(3)] {
            let text = serde_yaml::to_string(&d).unwrap();
            assert_eq!(serde_yaml::from_str::<Devices>(&text).unwrap(), d, "{text}");
        }
        assert!(serde_yaml::from_str::<Devices>("{mig: 1g.10gb, mig: 2g.20gb}").is_err());
        assert!(serde_yaml::from_str::<Devices>("{}").is_err());
    }
}
