//! What the runtime hands the supervisor for one attempt (written as JSON next to the
//! attempt's exit status), and what the supervisor leaves behind when the attempt ends.

use crate::model::{Command, JobId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Everything the supervisor needs to run one attempt of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    pub job: JobId,
    pub attempt: u32,
    pub name: String,
    pub share: String,
    pub preempted_count: u32,
    /// Device indices given to the job (`CUDA_VISIBLE_DEVICES`).
    pub devices: Vec<u32>,
    pub command: Command,
    pub env: BTreeMap<String, String>,
    pub working_directory: Option<String>,
    pub log: PathBuf,
    pub exit: PathBuf,
    /// How long processes left behind by a command that ended by itself get between
    /// SIGTERM and SIGKILL.
    pub grace_seconds: u32,
    /// Who the command runs as when the supervisor is root (SPEC §9): the submitter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter: Option<crate::model::Submitter>,
}

impl LaunchSpec {
    /// The job's environment (SPEC §7), on top of its own `env`.
    pub fn job_env(&self) -> BTreeMap<String, String> {
        let mut env = self.env.clone();
        let devices = self
            .devices
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let mut set = |k: &str, v: String| {
            env.insert(k.to_string(), v);
        };
        set("CUDA_VISIBLE_DEVICES", devices.clone());
        set("NVIDIA_VISIBLE_DEVICES", devices);
        set("CUDA_DEVICE_ORDER", "PCI_BUS_ID".to_string());
        set("SHAREQ_JOB_ID", self.job.to_string());
        set("SHAREQ_JOB_NAME", self.name.clone());
        set("SHAREQ_SHARE", self.share.clone());
        set("SHAREQ_ATTEMPT", self.attempt.to_string());
        set("SHAREQ_PREEMPTED_COUNT", self.preempted_count.to_string());
        env
    }
}

/// How an attempt ended, as the supervisor records it in `<attempt>.exit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    /// The exit code; `128 + signal` when a signal ended it; 127 when it could not start.
    pub code: i32,
    /// The signal that ended the command, if one did.
    pub signal: Option<i32>,
    /// When every process of the attempt was gone (ms since the epoch).
    pub finished_at: i64,
}

impl ExitStatus {
    /// Read an exit file; `None` when there is none (yet) or it cannot be read.
    pub fn read(path: &std::path::Path) -> Option<ExitStatus> {
        let bytes = std::fs::read(path).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// Milliseconds since the epoch, from the real clock.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_env_overrides_what_the_job_sets_for_reserved_names() {
        let mut env = BTreeMap::new();
        env.insert("CUDA_VISIBLE_DEVICES".to_string(), "7".to_string());
        env.insert("MINE".to_string(), "x".to_string());
        let spec = LaunchSpec {
            job: JobId(12),
            attempt: 2,
            name: "train".into(),
            share: "qs1".into(),
            preempted_count: 1,
            devices: vec![0, 2],
            command: Command::Shell("true".into()),
            env,
            working_directory: None,
            log: "l".into(),
            exit: "e".into(),
            grace_seconds: 1,
            submitter: None,
        };
        let e = spec.job_env();
        assert_eq!(e["CUDA_VISIBLE_DEVICES"], "0,2");
        assert_eq!(e["NVIDIA_VISIBLE_DEVICES"], "0,2");
        assert_eq!(e["SHAREQ_JOB_ID"], "12");
        assert_eq!(e["SHAREQ_ATTEMPT"], "2");
        assert_eq!(e["SHAREQ_PREEMPTED_COUNT"], "1");
        assert_eq!(e["MINE"], "x");
    }
}
