//! Lost GPUs (SPEC §4.4 `DEVICE_LOST`): telemetry that finds a GPU gone reports it once,
//! and the runtime preempts the jobs on it and stops handing it out.
//!
//! Real GPUs are watched by `exec::gpu::telemetry` (NVML's "GPU is lost" and "reset required"
//! are fatal). Fake GPUs (`devices: {fake: N}`) fail on purpose, for drills and tests:
//! a line `UNIT INDEX` in the file `<state>/fake-gpu-faults` (looked at every second) makes
//! that fake GPU fail as a lost real one would. Lines starting with `#` are comments.

use crate::exec::StateDir;
use std::collections::BTreeSet;
use std::time::Duration;

/// The file that makes fake GPUs fail.
pub const FAKE_FAULTS_FILE: &str = "fake-gpu-faults";

/// How often the fault file is read.
const FAKE_POLL: Duration = Duration::from_secs(1);

/// A GPU found lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    pub unit: String,
    pub device: u32,
    /// What was seen, for the log.
    pub why: String,
}

/// Is this NVML error one after which the GPU cannot be used? Its words when it is.
pub fn fatal_nvml(e: &nvml_wrapper::error::NvmlError) -> Option<String> {
    use nvml_wrapper::error::NvmlError;
    match e {
        NvmlError::GpuLost => Some("NVML: the GPU has fallen off the bus or is lost".into()),
        NvmlError::ResetRequired => Some("NVML: the GPU needs a reset".into()),
        _ => None,
    }
}

/// The (unit, index) lines of a fault file.
pub fn parse_faults(text: &str) -> BTreeSet<(String, u32)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect()
}

/// Watch `<state>/fake-gpu-faults` for the fake devices `devices` (unit, index) on a
/// background thread, reporting each listed one once through `lost`, while `alive` says
/// the runtime is there. Nothing to do (no thread) without fake devices.
pub fn start_fake(
    state: &StateDir,
    devices: Vec<(String, u32)>,
    lost: impl Fn(Lost) -> bool + Send + 'static,
    alive: impl Fn() -> bool + Send + 'static,
) {
    if devices.is_empty() {
        return;
    }
    let path = state.root().join(FAKE_FAULTS_FILE);
    let known: BTreeSet<(String, u32)> = devices.into_iter().collect();
    let spawned = std::thread::Builder::new()
        .name("shareq-fake-gpu-health".to_string())
        .spawn(move || {
            let mut reported = BTreeSet::new();
            loop {
                if let Ok(text) = std::fs::read_to_string(&path) {
                    for d in parse_faults(&text) {
                        if known.contains(&d) && reported.insert(d.clone()) {
                            let why = format!("listed in {}", path.display());
                            if !lost(Lost {
                                unit: d.0,
                                device: d.1,
                                why,
                            }) {
                                return;
                            }
                        }
                    }
                }
                std::thread::sleep(FAKE_POLL);
                if !alive() {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch fake GPU faults: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_lines() {
        let f = parse_faults("# drill\ngpu 1\n\n gpu 3 extra\nbad\nother x\n");
        assert_eq!(
            f.into_iter().collect::<Vec<_>>(),
            [("gpu".to_string(), 1), ("gpu".to_string(), 3)]
        );
    }
}
