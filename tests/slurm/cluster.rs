//! The test cluster of the Slurm tests (tests/slurm/cluster-up.sh): a Slurm of 2 nodes
//! × 4 fake GPUs on localhost with its own munge key and ports, stopped by pid when
//! dropped; and what the tests read of it.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Cluster {
    pub base: PathBuf,
}

impl Cluster {
    pub fn up() -> Option<Cluster> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!(
                "skipped: the Slurm tests need root (they start slurmctld, slurmd and munged)"
            );
            return None;
        }
        for exe in ["slurmctld", "slurmd", "sbatch", "munged"] {
            let found = Command::new("sh")
                .arg("-c")
                .arg(format!("command -v {exe} || test -x /usr/sbin/{exe}"))
                .output()
                .is_ok_and(|o| o.status.success());
            if !found {
                eprintln!(
                    "skipped: `{exe}` is not installed (apt-get install slurmctld slurmd slurm-client munge)"
                );
                return None;
            }
        }
        let base = std::env::temp_dir().join(format!("shareq-slurm-{}", std::process::id()));
        // Ports of their own, so that a cluster left by another run does not answer.
        let off = std::process::id() % 500;
        let out = Command::new("bash")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slurm/cluster-up.sh"))
            .env("BASE", &base)
            .env("NODES", "2")
            .env("GPUS", "4")
            .env("CTLD_PORT", (18000 + off).to_string())
            .env("NODE_PORT0", (19000 + 4 * off).to_string())
            .output()
            .expect("run cluster-up.sh");
        let cluster = Cluster { base };
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("idle"),
            "the test cluster did not come up:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // SAFETY: each binary that brings a cluster up has one test; nothing else reads
        // the environment meanwhile.
        unsafe { std::env::set_var("SLURM_CONF", cluster.base.join("etc/slurm.conf")) };
        Some(cluster)
    }

    pub fn squeue(&self) -> Vec<Value> {
        let out = Command::new("squeue").arg("--json").output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        v["jobs"].as_array().cloned().unwrap_or_default()
    }

    /// The live Slurm job of a shareq attempt.
    pub fn live(&self, job: u64, attempt: u32) -> Option<Value> {
        let name = format!("shareq-{job}-{attempt}");
        self.squeue().into_iter().find(|j| {
            j["name"] == name.as_str()
                && matches!(
                    j["job_state"].as_str(),
                    Some("PENDING" | "CONFIGURING" | "RUNNING" | "COMPLETING")
                )
        })
    }

    pub fn scontrol(&self, args: &[&str]) {
        let out = Command::new("scontrol").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "scontrol {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slurm/cluster-down.sh"))
            .env("BASE", &self.base)
            .output();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// The indices Slurm allocated, from `gres_detail` (`gpu:g1:1(IDX:1),gpu:g3:1(IDX:3)`).
pub fn slurm_indices(j: &Value) -> Vec<u64> {
    let mut out = Vec::new();
    for g in j["gres_detail"].as_array().into_iter().flatten() {
        let g = g.as_str().unwrap_or_default();
        for part in g.split("IDX:").skip(1) {
            let digits: String = part.chars().take_while(|c| c.is_ascii_digit()).collect();
            if let Ok(n) = digits.parse() {
                out.push(n);
            }
        }
    }
    out.sort_unstable();
    out
}
