//! GPU telemetry: where NVML answers, sample each GPU's utilisation and memory every few
//! seconds on a background thread; where it does not (no driver, fake GPUs), do nothing.
//! A GPU that NVML reports lost (or needing a reset) is reported once through `lost`
//! (`exec::gpu::health`), and its jobs are preempted with `DEVICE_LOST`. Each round also
//! lists each device's compute processes and their memory, where NVML reports them, for
//! the overuse watch of sliced units (`exec::gpu::overuse`).

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Duration;

/// GPU telemetry for one device, where NVML answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Telemetry {
    pub util: u32,
    pub mem_used: u64,
    pub mem_total: u64,
}

/// Samples keyed by (unit, device index), as `Snapshot::build` wants them.
pub type Samples = HashMap<(String, u32), Telemetry>;

/// Compute processes keyed by (unit, device index): (pid, MiB held), where NVML reports
/// per-process memory.
pub type Processes = HashMap<(String, u32), Vec<(u32, u64)>>;

/// Start sampling the real devices `devices` (unit, NVML index) every `every`, handing
/// each round to `send` until it returns false. Returns why not when NVML is unavailable
/// or there is nothing to sample.
pub fn start(
    devices: Vec<(String, u32)>,
    every: Duration,
    send: impl Fn(Samples, Processes) -> bool + Send + 'static,
    lost: impl Fn(crate::exec::gpu::health::Lost) -> bool + Send + 'static,
) -> Result<std::thread::JoinHandle<()>, String> {
    if devices.is_empty() {
        return Err("no real GPU to sample".to_string());
    }
    let nvml = nvml_wrapper::Nvml::init()
        .map_err(|e| format!("NVML: {}", crate::exec::gpu::discovery::nvml_error(&e)))?;
    std::thread::Builder::new()
        .name("shareq-telemetry".to_string())
        .spawn(move || {
            let mut gone = std::collections::HashSet::new();
            loop {
                let mut samples = Samples::new();
                let mut procs = Processes::new();
                for (unit, index) in &devices {
                    if gone.contains(&(unit, *index)) {
                        continue;
                    }
                    let d = match nvml.device_by_index(*index) {
                        Ok(d) => d,
                        Err(e) => {
                            if let Some(why) = crate::exec::gpu::health::fatal_nvml(&e) {
                                gone.insert((unit, *index));
                                lost(crate::exec::gpu::health::Lost {
                                    unit: unit.clone(),
                                    device: *index,
                                    why,
                                });
                            }
                            continue;
                        }
                    };
                    if let Err(e) = d.utilization_rates()
                        && let Some(why) = crate::exec::gpu::health::fatal_nvml(&e)
                    {
                        gone.insert((unit, *index));
                        lost(crate::exec::gpu::health::Lost {
                            unit: unit.clone(),
                            device: *index,
                            why,
                        });
                        continue;
                    }
                    let util = d.utilization_rates().map_or(0, |u| u.gpu);
                    let (used, total) = d
                        .memory_info()
                        .map_or((0, 0), |m| (m.used >> 20, m.total >> 20));
                    if let Ok(ps) = d.running_compute_processes() {
                        let held = ps
                            .iter()
                            .filter_map(|p| match p.used_gpu_memory {
                                nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => {
                                    Some((p.pid, b >> 20))
                                }
                                nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                            })
                            .collect();
                        procs.insert((unit.clone(), *index), held);
                    }
                    samples.insert(
                        (unit.clone(), *index),
                        Telemetry {
                            util,
                            mem_used: used,
                            mem_total: total,
                        },
                    );
                }
                if !send(samples, procs) {
                    return;
                }
                std::thread::sleep(every);
            }
        })
        .map_err(|e| format!("cannot start the telemetry thread: {e}"))
}
