//! GPU discovery: NVML first (loaded at run time), then `nvidia-smi`, and how the
//! environment's `devices: auto | [indices] | {fake: N} | {mig: P}` turn into each unit's
//! devices (a MIG unit's devices are its instances, [`super::mig`]).

use super::mig::{self, GpuMig, MigUnits};
use crate::model::Devices;
use crate::model::UnitCapacity;
use crate::model::ValidConfig;
use std::collections::BTreeSet;

/// One GPU that was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub memory_mib: u64,
}

/// How the GPUs were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Nvml,
    NvidiaSmi,
    /// Neither answered: there is no usable driver on this machine.
    None,
}

/// The result of looking for GPUs, with the reason each way failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    pub method: Method,
    pub gpus: Vec<GpuInfo>,
    /// Why NVML or nvidia-smi did not answer, in words.
    pub notes: Vec<String>,
    /// Each GPU's MIG mode and instances, as NVML listed them (empty without NVML).
    pub mig: Vec<GpuMig>,
}

impl Discovery {
    /// Look for GPUs: NVML, then nvidia-smi.
    pub fn run() -> Discovery {
        let mut notes = Vec::new();
        match nvml_gpus() {
            Ok((gpus, mig)) => {
                return Discovery {
                    method: Method::Nvml,
                    gpus,
                    notes,
                    mig,
                };
            }
            Err(e) => notes.push(format!("NVML: {e}")),
        }
        match smi_gpus() {
            Ok(gpus) => Discovery {
                method: Method::NvidiaSmi,
                gpus,
                notes,
                mig: Vec::new(),
            },
            Err(e) => {
                notes.push(format!("nvidia-smi: {e}"));
                Discovery {
                    method: Method::None,
                    gpus: Vec::new(),
                    notes,
                    mig: Vec::new(),
                }
            }
        }
    }

    /// A discovery that found nothing (for configs that use only fake devices).
    pub fn skipped() -> Discovery {
        Discovery {
            method: Method::None,
            gpus: Vec::new(),
            notes: vec!["not looked for: the config uses only fake devices".to_string()],
            mig: Vec::new(),
        }
    }

    /// Each (node, unit)'s healthy devices, plus a warning for every unit that gets fewer
    /// devices than its `maxCapacity`. Discovery sees this machine only: it answers for
    /// the local executor's one node (`auto` is refused for Slurm nodes by validation).
    pub fn capacity(&self, config: &ValidConfig) -> (Vec<UnitCapacity>, Vec<String>) {
        if !crate::exec::choice::runs_here(&config.executor()) {
            return (UnitCapacity::simulated(config), Vec::new());
        }
        let found: BTreeSet<u32> = self.gpus.iter().map(|g| g.index).collect();
        // A GPU in MIG mode is used through its instances only, never whole.
        let partitioned: BTreeSet<u32> = self
            .mig
            .iter()
            .filter(|g| g.state == mig::MigState::Enabled)
            .map(|g| g.index)
            .collect();
        let specs = config.node_units();
        let mut warnings = Vec::new();
        let mut out = Vec::new();
        let mut nodes: Vec<&str> = specs.iter().map(|(n, _, _)| n.as_str()).collect();
        nodes.dedup();
        for node in nodes {
            // GPUs named explicitly by some unit are not also handed out by `auto`.
            let listed: BTreeSet<u32> = specs
                .iter()
                .filter(|(n, _, _)| n == node)
                .filter_map(|(_, _, d)| match d {
                    Devices::Indices(v) => Some(v.iter().copied()),
                    _ => None,
                })
                .flatten()
                .collect();
            let mut auto_left: Vec<u32> = found
                .difference(&listed)
                .filter(|i| !partitioned.contains(i))
                .copied()
                .collect();
            for (_, unit, d) in specs.iter().filter(|(n, _, _)| n == node) {
                let devices: Vec<u32> = match d {
                    Devices::Fake(n) | Devices::Mig { fake: Some(n), .. } => (0..*n).collect(),
                    Devices::Mig {
                        profile,
                        fake: None,
                    } => match self.mig_instances(profile) {
                        Ok(v) => (0..v.len() as u32).collect(),
                        Err(why) => {
                            warnings.push(format!("unit `{unit}`: {why}"));
                            Vec::new()
                        }
                    },
                    Devices::Indices(v) => {
                        let missing: Vec<u32> =
                            v.iter().copied().filter(|i| !found.contains(i)).collect();
                        if !missing.is_empty() {
                            warnings.push(format!(
                                "unit `{unit}`: GPU index {missing:?} not found ({})",
                                self.describe()
                            ));
                        }
                        v.iter().copied().filter(|i| found.contains(i)).collect()
                    }
                    Devices::Auto => std::mem::take(&mut auto_left),
                };
                out.push(UnitCapacity {
                    node: node.to_string(),
                    unit: unit.clone(),
                    devices,
                });
            }
        }
        for c in &config.env.capacity_limits {
            let n: usize = out
                .iter()
                .filter(|u| u.unit == c.capacity_unit)
                .map(|u| u.devices.len())
                .sum();
            if (n as u64) < u64::from(c.max_capacity) {
                warnings.push(format!(
                    "unit `{}`: maxCapacity {} but only {n} usable device(s) ({})",
                    c.capacity_unit,
                    c.max_capacity,
                    self.describe()
                ));
            }
        }
        (out, warnings)
    }

    /// The MIG instances of `profile` on this machine, or why there are none.
    pub fn mig_instances(&self, profile: &str) -> Result<Vec<mig::MigInstance>, String> {
        if self.method != Method::Nvml {
            return Err(format!(
                "no {profile} MIG instance: MIG instances are found through NVML only ({})",
                self.describe()
            ));
        }
        mig::select(profile, &self.mig, std::path::Path::new(mig::CAPS_ROOT))
    }

    /// Each MIG unit's instances on this machine (fake ones for `{fake: N, mig: P}`), in
    /// the order [`Discovery::capacity`] numbers them.
    pub fn mig_units(&self, config: &ValidConfig) -> MigUnits {
        let mut out = MigUnits::default();
        if !crate::exec::choice::runs_here(&config.executor()) {
            return out;
        }
        for (_, unit, d) in config.node_units() {
            let Devices::Mig { profile, fake } = d else {
                continue;
            };
            let instances = match fake {
                Some(n) => mig::fake_instances(&unit, &profile, n),
                None => self.mig_instances(&profile).unwrap_or_else(|why| {
                    out.1.insert(unit.clone(), why);
                    Vec::new()
                }),
            };
            out.0.insert(unit, instances);
        }
        out
    }

    /// One line: how the GPUs were found, or why none were.
    pub fn describe(&self) -> String {
        match self.method {
            Method::Nvml => format!("{} GPU(s) found through NVML", self.gpus.len()),
            Method::NvidiaSmi => format!(
                "{} GPU(s) found through nvidia-smi ({})",
                self.gpus.len(),
                self.notes.join("; ")
            ),
            Method::None => format!("no GPU found: {}", self.notes.join("; ")),
        }
    }
}

/// Does any unit of the config need real devices?
pub fn needs_discovery(config: &ValidConfig) -> bool {
    config
        .node_units()
        .iter()
        .any(|(_, _, d)| !matches!(d, Devices::Fake(_) | Devices::Mig { fake: Some(_), .. }))
}

/// The GPUs and their MIG partitions; a GPU whose partition NVML cannot list is kept
/// with the reason as its MIG state.
fn nvml_gpus() -> Result<(Vec<GpuInfo>, Vec<GpuMig>), String> {
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| nvml_error(&e))?;
    let count = nvml.device_count().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for i in 0..count {
        let d = nvml.device_by_index(i).map_err(|e| e.to_string())?;
        out.push(GpuInfo {
            index: i,
            uuid: d.uuid().unwrap_or_default(),
            name: d.name().unwrap_or_default(),
            memory_mib: d.memory_info().map_or(0, |m| m.total / (1024 * 1024)),
        });
    }
    let partitions = mig::nvml_partitions(&nvml).unwrap_or_else(|e| {
        out.iter()
            .map(|g| GpuMig {
                index: g.index,
                state: mig::MigState::Unknown(e.clone()),
                instances: Vec::new(),
            })
            .collect()
    });
    Ok((out, partitions))
}

/// NVML's failure in an operator's words.
pub fn nvml_error(e: &nvml_wrapper::error::NvmlError) -> String {
    use nvml_wrapper::error::NvmlError;
    match e {
        NvmlError::LibloadingError(_) => {
            "libnvidia-ml.so.1 not found (no NVIDIA driver installed)".to_string()
        }
        NvmlError::DriverNotLoaded => "the NVIDIA driver is not loaded".to_string(),
        NvmlError::NoPermission => "no permission to query the NVIDIA driver".to_string(),
        other => other.to_string(),
    }
}

fn smi_gpus() -> Result<Vec<GpuInfo>, String> {
    let out = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=index,uuid,name,memory.total",
            "--format=csv,noheader,nounits",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "not installed".to_string(),
            _ => e.to_string(),
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or("").trim();
        return Err(format!("failed ({}): {first}", out.status));
    }
    parse_smi(&String::from_utf8_lossy(&out.stdout))
}

/// Parse `index, uuid, name, memory.total` lines.
pub fn parse_smi(text: &str) -> Result<Vec<GpuInfo>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() < 4 {
            return Err(format!("unexpected output line `{line}`"));
        }
        let index = f[0]
            .parse()
            .map_err(|_| format!("bad GPU index in `{line}`"))?;
        out.push(GpuInfo {
            index,
            uuid: f[1].to_string(),
            name: f[2..f.len() - 1].join(","),
            memory_mib: f[f.len() - 1].parse().unwrap_or(0),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_documents, validate};

    fn cfg(env_units: &str) -> ValidConfig {
        let text = format!(
            "kind: ServiceEnvironment\nname: t\ncapacityLimits:\n{env_units}---\nkind: QuotaShare\nquotaShareName: a\ncapacityLimits: [{{capacityUnit: a100-1g, maxCapacity: 1}}]\nresourceSharingConfiguration: {{strategy: LEND_AND_BORROW}}\n"
        );
        validate(parse_documents(&text, None).expect("parse")).expect("valid")
    }

    fn nvml(mig: Vec<GpuMig>) -> Discovery {
        Discovery {
            method: Method::Nvml,
            gpus: (0..2)
                .map(|index| GpuInfo {
                    index,
                    uuid: format!("GPU-{index}"),
                    name: "NVIDIA A100-SXM4-80GB".into(),
                    memory_mib: 81920,
                })
                .collect(),
            notes: Vec::new(),
            mig,
        }
    }

    /// A MIG unit whose profile matches nothing has 0 usable devices and says why; a GPU
    /// in MIG mode is not handed out whole by `auto`.
    #[test]
    fn a_mig_unit_without_instances_has_no_device_and_says_why() {
        let c = cfg(
            "  - {capacityUnit: a100, maxCapacity: 2}\n  - {capacityUnit: a100-1g, maxCapacity: 7, devices: {mig: 1g.10gb}}\n",
        );
        let d = nvml(vec![
            GpuMig {
                index: 0,
                state: mig::MigState::Disabled,
                instances: vec![],
            },
            GpuMig {
                index: 1,
                state: mig::MigState::Enabled,
                instances: vec![mig::NvmlMig {
                    gi: 1,
                    ci: 0,
                    uuid: "MIG-x".into(),
                    name: "NVIDIA A100-SXM4-80GB MIG 3g.40gb".into(),
                }],
            },
        ]);
        let (caps, warnings) = d.capacity(&c);
        let of = |u: &str| caps.iter().find(|c| c.unit == u).unwrap().devices.clone();
        assert_eq!(of("a100"), vec![0], "GPU 1 is in MIG mode: not whole");
        assert_eq!(of("a100-1g"), Vec::<u32>::new());
        assert!(
            warnings.contains(
                &"unit `a100-1g`: no 1g.10gb MIG instance: GPU 0 has MIG disabled; GPU 1 has only 3g.40gb"
                    .to_string()
            ),
            "{warnings:?}"
        );
        let units = d.mig_units(&c);
        assert_eq!(units.0["a100-1g"], Vec::new());
        assert_eq!(
            units.1["a100-1g"],
            "no 1g.10gb MIG instance: GPU 0 has MIG disabled; GPU 1 has only 3g.40gb"
        );
        // Without NVML, the reason says that MIG needs it.
        let none = Discovery {
            method: Method::None,
            gpus: Vec::new(),
            notes: vec!["NVML: not here".into()],
            mig: Vec::new(),
        };
        let why = none.mig_instances("1g.10gb").unwrap_err();
        assert!(
            why.starts_with("no 1g.10gb MIG instance: MIG instances are found through NVML only"),
            "{why}"
        );
    }

    /// `{fake: N, mig: P}` gives N instances numbered 0.., with fake UUIDs, and needs no
    /// discovery.
    #[test]
    fn fake_mig_instances_need_no_gpu() {
        let c =
            cfg("  - {capacityUnit: a100-1g, maxCapacity: 3, devices: {fake: 3, mig: 1g.10gb}}\n");
        assert!(!needs_discovery(&c));
        let d = Discovery::skipped();
        let (caps, warnings) = d.capacity(&c);
        assert_eq!(caps[0].devices, vec![0, 1, 2]);
        assert!(warnings.is_empty(), "{warnings:?}");
        let units = d.mig_units(&c);
        let uuids: Vec<&str> = units.0["a100-1g"].iter().map(|m| m.uuid.as_str()).collect();
        assert_eq!(
            uuids,
            [
                "MIG-fake-a100-1g-0",
                "MIG-fake-a100-1g-1",
                "MIG-fake-a100-1g-2"
            ]
        );
        let real = cfg("  - {capacityUnit: a100-1g, maxCapacity: 3, devices: {mig: 1g.10gb}}\n");
        assert!(needs_discovery(&real));
    }

    #[test]
    fn parses_nvidia_smi_lines() {
        let g =
            parse_smi("0, GPU-aa, NVIDIA A100-SXM4-80GB, 81920\n1, GPU-bb, NVIDIA H100, 81559\n")
                .unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].index, 1);
        assert_eq!(g[0].name, "NVIDIA A100-SXM4-80GB");
        assert_eq!(g[1].memory_mib, 81559);
        assert!(parse_smi("garbage").is_err());
    }
}
