//! What a MIG job (SPEC §15) is told and may open, and the driver's files that say which
//! `nvidia-caps` devices exist: read by device isolation ([`super::cgroup`]) and filled in
//! by MIG discovery (`exec::gpu::mig`).

/// The list of every MIG capability minor the driver may hand out.
pub const MIG_MINORS: &str = "/proc/driver/nvidia-caps/mig-minors";

/// The character-device major of `nvidia-caps` in `/proc/devices`.
pub fn caps_major(proc_devices: &str) -> Option<u32> {
    proc_devices
        .lines()
        .skip_while(|l| !l.starts_with("Character devices:"))
        .take_while(|l| !l.starts_with("Block devices:"))
        .find_map(|l| {
            let (major, name) = l.trim().split_once(' ')?;
            (name.trim() == "nvidia-caps")
                .then(|| major.parse().ok())
                .flatten()
        })
}

/// The MIG capability minors of `mig-minors` (`config 1`, `monitor 2`, `gpu0/gi1/access
/// 12`, …) that matter to a job that may open the GPUs `parents`: the machine-wide ones
/// and those of instances on its parents. What device isolation closes but the job's own
/// (an instance on another GPU cannot be used without that GPU's `/dev/nvidia<i>`, which
/// is closed; the driver lists every possible minor of 32 GPUs, thousands of them).
pub fn parse_mig_minors(text: &str, parents: &[u32]) -> Vec<u32> {
    let mut v: Vec<u32> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (name, minor) = (f.next()?, f.next()?);
            let on_parent = match name.strip_prefix("gpu") {
                Some(rest) => {
                    let (gpu, _) = rest.split_once('/')?;
                    parents.iter().any(|p| gpu == p.to_string())
                }
                None => true,
            };
            on_parent.then(|| minor.parse().ok()).flatten()
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// A MIG job's devices: the UUIDs it is told, the parent GPUs' minors and the caps
/// minors it may open.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MigAccess {
    pub uuids: Vec<String>,
    pub gpus: Vec<u32>,
    pub caps: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINORS: &str = "config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n\
                          gpu1/gi0/access 30\ngpu1/gi0/ci0/access 31\ngpu3/gi2/access 50\n\
                          gpu10/gi0/access 60\n";

    #[test]
    fn the_caps_major_and_minors_come_from_proc() {
        let devices = "Character devices:\n  1 mem\n195 nvidia\n235 nvidia-caps\n511 nvidia-uvm\n\nBlock devices:\n235 nvidia-caps\n";
        assert_eq!(caps_major(devices), Some(235));
        assert_eq!(caps_major("Character devices:\n195 nvidia\n"), None);
        assert_eq!(parse_mig_minors(MINORS, &[0, 3]), vec![1, 2, 3, 4, 50]);
        assert_eq!(parse_mig_minors(MINORS, &[1]), vec![1, 2, 30, 31]);
        assert_eq!(parse_mig_minors(MINORS, &[]), vec![1, 2]);
    }
}
