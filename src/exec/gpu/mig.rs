//! MIG instances as capacity (SPEC §15): which instances of a profile this machine's GPUs
//! have (read through NVML, never changed), the `/dev/nvidia-caps` minors that open each
//! one (read from `/proc/driver/nvidia/capabilities`, as NVIDIA's container toolkit
//! does), and the fake instances of `{fake: N, mig: P}`.
//!
//! A unit's devices are its instances numbered 0.. in (GPU, GPU instance, compute
//! instance) order: the scheduler places those numbers as it places GPU indices, and
//! [`MigUnits`] turns them back into UUIDs and device files when a job starts
//! ([`MigAccess`], which device isolation reads).

pub use crate::exec::containment::mig_caps::MigAccess;
use std::collections::BTreeMap;
use std::path::Path;

/// Where the driver publishes each MIG capability's device minor.
pub const CAPS_ROOT: &str = "/proc/driver/nvidia/capabilities";
/// A GPU's MIG mode as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigState {
    Enabled,
    Disabled,
    /// The GPU cannot be partitioned (not an A100/A30/H100-class GPU).
    NotSupported,
    /// NVML failed to answer, in its words.
    Unknown(String),
}

/// One MIG device as NVML lists it under its parent GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlMig {
    /// GPU instance id.
    pub gi: u32,
    /// Compute instance id.
    pub ci: u32,
    /// `MIG-…`.
    pub uuid: String,
    /// Its NVML name, e.g. `NVIDIA A100-SXM4-80GB MIG 1g.10gb`.
    pub name: String,
}

/// What NVML said about one GPU's MIG partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuMig {
    pub index: u32,
    pub state: MigState,
    pub instances: Vec<NvmlMig>,
}

/// One usable MIG instance of a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigInstance {
    /// The parent GPU's index (`/dev/nvidia<parent>`); `None` for a fake instance.
    pub parent: Option<u32>,
    /// `MIG-…`, what `CUDA_VISIBLE_DEVICES` names.
    pub uuid: String,
    pub profile: String,
    /// The `/dev/nvidia-caps/nvidia-cap<N>` minors that open it: its GPU instance's and
    /// its compute instance's access capabilities. Empty for a fake instance.
    pub caps: Vec<u32>,
}

/// The profile of a MIG device from its NVML name (`… MIG 1g.10gb` → `1g.10gb`).
pub fn profile_of(name: &str) -> Option<&str> {
    name.rsplit_once("MIG ").map(|(_, p)| p.trim())
}

/// The `DeviceFileMinor` of a capability's `access` file.
pub fn parse_caps_minor(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("DeviceFileMinor:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The minors of one instance: `gpu<p>/mig/gi<g>/access` and `gpu<p>/mig/gi<g>/ci<c>/access`
/// below `root` ([`CAPS_ROOT`]).
pub fn caps_minors(root: &Path, parent: u32, gi: u32, ci: u32) -> Result<Vec<u32>, String> {
    let gi_dir = root.join(format!("gpu{parent}/mig/gi{gi}"));
    [gi_dir.join("access"), gi_dir.join(format!("ci{ci}/access"))]
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            parse_caps_minor(&text)
                .ok_or_else(|| format!("{} names no DeviceFileMinor", p.display()))
        })
        .collect()
}

/// The instances of `profile` on `gpus` in (GPU, GPU instance, compute instance) order,
/// with their caps minors read below `caps_root`; or, when none fits, why (`no 1g.10gb
/// MIG instance: GPU 0 has MIG disabled`).
pub fn select(
    profile: &str,
    gpus: &[GpuMig],
    caps_root: &Path,
) -> Result<Vec<MigInstance>, String> {
    let mut out = Vec::new();
    let mut why = Vec::new();
    let mut gpus: Vec<&GpuMig> = gpus.iter().collect();
    gpus.sort_by_key(|g| g.index);
    for g in gpus {
        match &g.state {
            MigState::Disabled => why.push(format!("GPU {} has MIG disabled", g.index)),
            MigState::NotSupported => why.push(format!("GPU {} does not support MIG", g.index)),
            MigState::Unknown(e) => why.push(format!("GPU {}: {e}", g.index)),
            MigState::Enabled => {
                let mut mine: Vec<&NvmlMig> = g
                    .instances
                    .iter()
                    .filter(|m| profile_of(&m.name) == Some(profile))
                    .collect();
                if mine.is_empty() {
                    let mut others: Vec<&str> = g
                        .instances
                        .iter()
                        .filter_map(|m| profile_of(&m.name))
                        .collect();
                    others.sort_unstable();
                    others.dedup();
                    why.push(if others.is_empty() {
                        format!("GPU {} has MIG enabled but no instance", g.index)
                    } else {
                        format!("GPU {} has only {}", g.index, others.join(", "))
                    });
                }
                mine.sort_by_key(|m| (m.gi, m.ci));
                for m in mine {
                    match caps_minors(caps_root, g.index, m.gi, m.ci) {
                        Ok(caps) => out.push(MigInstance {
                            parent: Some(g.index),
                            uuid: m.uuid.clone(),
                            profile: profile.to_string(),
                            caps,
                        }),
                        Err(e) => why.push(format!("{}: {e}", m.uuid)),
                    }
                }
            }
        }
    }
    if out.is_empty() {
        if why.is_empty() {
            why.push("no GPU found".to_string());
        }
        return Err(format!("no {profile} MIG instance: {}", why.join("; ")));
    }
    Ok(out)
}

/// The fake UUID of a unit's `i`th fake instance: stable across restarts, UUID-shaped
/// after its prefix so that tools that split on `-` see the usual groups.
pub fn fake_uuid(unit: &str, i: u32) -> String {
    format!("MIG-fake-{unit}-{i}")
}

/// `{fake: N, mig: P}`: N instances with fake UUIDs and no device files.
pub fn fake_instances(unit: &str, profile: &str, n: u32) -> Vec<MigInstance> {
    (0..n)
        .map(|i| MigInstance {
            parent: None,
            uuid: fake_uuid(unit, i),
            profile: profile.to_string(),
            caps: Vec::new(),
        })
        .collect()
}

/// Each MIG unit's instances, by the numbers the scheduler places; and, for a unit
/// whose profile matches no instance here, why (its 0 usable capacity, shown).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigUnits(
    pub BTreeMap<String, Vec<MigInstance>>,
    pub BTreeMap<String, String>,
);

impl MigUnits {
    /// The instances behind `devices` of `unit`, or `None` when the unit is not a MIG unit.
    pub fn instances(&self, unit: &str, devices: &[u32]) -> Option<Vec<&MigInstance>> {
        let all = self.0.get(unit)?;
        Some(
            devices
                .iter()
                .filter_map(|&d| all.get(d as usize))
                .collect(),
        )
    }

    /// What a job on `devices` of `unit` is given and may open; `None` for whole GPUs.
    pub fn access(&self, unit: &str, devices: &[u32]) -> Option<MigAccess> {
        let inst = self.instances(unit, devices)?;
        let mut gpus: Vec<u32> = inst.iter().filter_map(|m| m.parent).collect();
        gpus.sort_unstable();
        gpus.dedup();
        let mut caps: Vec<u32> = inst.iter().flat_map(|m| m.caps.iter().copied()).collect();
        caps.sort_unstable();
        caps.dedup();
        Some(MigAccess {
            uuids: inst.iter().map(|m| m.uuid.clone()).collect(),
            gpus,
            caps,
        })
    }
}

/// `nvmlDeviceGetMigMode`'s current mode when MIG is on (nvml.h).
const NVML_DEVICE_MIG_ENABLE: u32 = 1;

/// Ask NVML for every GPU's MIG mode and instances (read only: nothing is changed).
pub fn nvml_partitions(nvml: &nvml_wrapper::Nvml) -> Result<Vec<GpuMig>, String> {
    use nvml_wrapper::error::NvmlError;
    let count = nvml.device_count().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for index in 0..count {
        let d = nvml.device_by_index(index).map_err(|e| e.to_string())?;
        let state = match d.mig_mode() {
            Ok(m) if m.current == NVML_DEVICE_MIG_ENABLE => MigState::Enabled,
            Ok(_) => MigState::Disabled,
            Err(NvmlError::NotSupported) => MigState::NotSupported,
            Err(e) => MigState::Unknown(e.to_string()),
        };
        let mut instances = Vec::new();
        if state == MigState::Enabled {
            let most = d.mig_device_count().map_err(|e| e.to_string())?;
            for i in 0..most {
                // A slot with no instance answers NotFound.
                let Ok(m) = d.mig_device_by_index(i) else {
                    continue;
                };
                let (gi, ci) = instance_ids(nvml, &m)?;
                instances.push(NvmlMig {
                    gi,
                    ci,
                    uuid: m.uuid().map_err(|e| e.to_string())?,
                    name: m.name().map_err(|e| e.to_string())?,
                });
            }
        }
        out.push(GpuMig {
            index,
            state,
            instances,
        });
    }
    Ok(out)
}

/// The GPU instance and compute instance ids of a MIG device handle (the wrapper has no
/// safe call for them).
fn instance_ids(
    nvml: &nvml_wrapper::Nvml,
    m: &nvml_wrapper::Device<'_>,
) -> Result<(u32, u32), String> {
    let lib = nvml.lib();
    let get_gi = lib
        .nvmlDeviceGetGpuInstanceId
        .as_ref()
        .map_err(|e| format!("nvmlDeviceGetGpuInstanceId: {e}"))?;
    let get_ci = lib
        .nvmlDeviceGetComputeInstanceId
        .as_ref()
        .map_err(|e| format!("nvmlDeviceGetComputeInstanceId: {e}"))?;
    let (mut gi, mut ci) = (0u32, 0u32);
    // SAFETY: `m` is a live MIG device handle of `nvml`, and each call writes one
    // unsigned int through a pointer to a local.
    let (a, b) = unsafe { (get_gi(m.handle(), &mut gi), get_ci(m.handle(), &mut ci)) };
    if a != 0 || b != 0 {
        return Err(format!(
            "NVML could not tell a MIG device's instance ids (codes {a}, {b})"
        ));
    }
    Ok((gi, ci))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mig(gi: u32, ci: u32, profile: &str) -> NvmlMig {
        NvmlMig {
            gi,
            ci,
            uuid: format!("MIG-{gi}{ci}-{profile}"),
            name: format!("NVIDIA A100-SXM4-80GB MIG {profile}"),
        }
    }

    /// A recorded `/proc/driver/nvidia/capabilities` tree of an A100 with two instances.
    fn caps_tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, minor) in [
            ("gpu0/mig/gi1/access", 12),
            ("gpu0/mig/gi1/ci0/access", 13),
            ("gpu0/mig/gi2/access", 21),
            ("gpu0/mig/gi2/ci0/access", 22),
        ] {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(
                p,
                format!("DeviceFileMinor: {minor}\nDeviceFileMode: 292\nDeviceFileModify: 1\n"),
            )
            .unwrap();
        }
        dir
    }

    #[test]
    fn the_caps_minor_is_read_from_the_access_file() {
        assert_eq!(
            parse_caps_minor("DeviceFileMinor: 48\nDeviceFileMode: 292\n"),
            Some(48)
        );
        assert_eq!(parse_caps_minor("DeviceFileMode: 292\n"), None);
        assert_eq!(parse_caps_minor("DeviceFileMinor: x\n"), None);
        let t = caps_tree();
        assert_eq!(caps_minors(t.path(), 0, 2, 0), Ok(vec![21, 22]));
        let e = caps_minors(t.path(), 0, 3, 0).unwrap_err();
        assert!(e.contains("gpu0/mig/gi3/access"), "{e}");
    }

    #[test]
    fn instances_of_the_profile_are_listed_in_order_with_their_caps() {
        let t = caps_tree();
        let gpus = vec![
            GpuMig {
                index: 1,
                state: MigState::Disabled,
                instances: vec![],
            },
            GpuMig {
                index: 0,
                state: MigState::Enabled,
                instances: vec![
                    mig(2, 0, "1g.10gb"),
                    mig(1, 0, "1g.10gb"),
                    mig(5, 0, "3g.40gb"),
                ],
            },
        ];
        let got = select("1g.10gb", &gpus, t.path()).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].uuid, "MIG-10-1g.10gb");
        assert_eq!(got[0].caps, vec![12, 13]);
        assert_eq!(got[1].caps, vec![21, 22]);
        assert_eq!(got[1].parent, Some(0));
        let none = select("2g.20gb", &gpus, t.path()).unwrap_err();
        assert_eq!(
            none,
            "no 2g.20gb MIG instance: GPU 0 has only 1g.10gb, 3g.40gb; GPU 1 has MIG disabled"
        );
    }

    #[test]
    fn a_gpu_with_mig_disabled_is_the_reason() {
        let gpus = vec![GpuMig {
            index: 0,
            state: MigState::Disabled,
            instances: vec![],
        }];
        assert_eq!(
            select("1g.10gb", &gpus, Path::new("/nonexistent")).unwrap_err(),
            "no 1g.10gb MIG instance: GPU 0 has MIG disabled"
        );
        assert_eq!(
            select("1g.10gb", &[], Path::new("/nonexistent")).unwrap_err(),
            "no 1g.10gb MIG instance: no GPU found"
        );
    }

    #[test]
    fn a_mig_job_is_given_its_uuids_and_may_open_its_parent_and_caps() {
        let t = caps_tree();
        let gpus = vec![GpuMig {
            index: 0,
            state: MigState::Enabled,
            instances: vec![mig(1, 0, "1g.10gb"), mig(2, 0, "1g.10gb")],
        }];
        let mut units = MigUnits::default();
        units.0.insert(
            "a100-1g".into(),
            select("1g.10gb", &gpus, t.path()).unwrap(),
        );
        units
            .0
            .insert("fake-1g".into(), fake_instances("fake-1g", "1g.10gb", 3));
        let a = units.access("a100-1g", &[1]).unwrap();
        assert_eq!(a.uuids, vec!["MIG-20-1g.10gb"]);
        assert_eq!(a.gpus, vec![0]);
        assert_eq!(a.caps, vec![21, 22]);
        let f = units.access("fake-1g", &[0, 2]).unwrap();
        assert_eq!(f.uuids, vec!["MIG-fake-fake-1g-0", "MIG-fake-fake-1g-2"]);
        assert!(f.gpus.is_empty() && f.caps.is_empty());
        assert_eq!(units.access("a100", &[0]), None);
    }

    #[test]
    fn the_profile_is_the_end_of_the_nvml_name() {
        assert_eq!(
            profile_of("NVIDIA A100-SXM4-80GB MIG 1g.10gb"),
            Some("1g.10gb")
        );
        assert_eq!(
            profile_of("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me"),
            Some("1g.10gb+me")
        );
        assert_eq!(profile_of("NVIDIA A100-SXM4-80GB"), None);
    }
}
