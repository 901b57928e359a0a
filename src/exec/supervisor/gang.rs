//! A gang's start on its nodes (SPEC §16): the batch script of a gang's Slurm job runs
//! the supervisor on rank 0's node with the gang's launch spec; there it finds rank 0's
//! host name and a free port (`MASTER_ADDR`, `MASTER_PORT`) and becomes one `srun` that
//! starts one supervisor per node (one task on each component of the job), each with the
//! spec in its environment ([`GANG_SPEC_ENV`]: a step's standard input reaches one task
//! only). Each of those takes its own rank by its node's name and runs its node's share
//! of the attempt like any supervisor, with its own devices, record and log.

use crate::exec::state::runfiles::LaunchSpec;
use std::os::unix::process::CommandExt;
use std::path::Path;

/// The environment variable that hands a gang's launch spec (with its main host and port)
/// to the supervisor of each rank. The job's command never sees it: a supervisor on a node
/// gives the command its user's clean environment (`privdrop::RunAs::apply`).
pub const GANG_SPEC_ENV: &str = "SHAREQ_GANG_SPEC";

/// The arguments of the `srun` that starts a gang's supervisors from its batch script:
/// one task on each of the job's `nodes` components (one component per node, in rank
/// order), nothing on their standard input and output (the supervisors report over the
/// report channel), the supervisors' failures left to each (no `--kill-on-bad-exit`:
/// the other ranks get their stop with its grace from the scheduler).
pub fn srun_args(nodes: usize, exe: &Path) -> Vec<String> {
    let groups: Vec<String> = (0..nodes).map(|c| c.to_string()).collect();
    vec![
        format!("--het-group={}", groups.join(",")),
        "--ntasks-per-node=1".to_string(),
        "--input=none".to_string(),
        "--output=/dev/null".to_string(),
        "--error=/dev/null".to_string(),
        "--quiet".to_string(),
        exe.to_string_lossy().into_owned(),
        crate::exec::supervisor::channel::SUPERVISE_SUBCOMMAND.to_string(),
        "-".to_string(),
    ]
}

/// On rank 0's node, in the gang's batch job: note this host and a free port here in the
/// spec, and become the `srun` of every rank's supervisor ([`srun_args`]). Returns only
/// when that cannot be done (then no rank runs, and the job ends without an exit status:
/// the scheduler treats it as lost).
pub fn start_ranks(mut spec: LaunchSpec) -> std::io::Error {
    let port = match std::net::TcpListener::bind(("0.0.0.0", 0)).and_then(|l| l.local_addr()) {
        Ok(a) => a.port(),
        Err(e) => return e,
    };
    let host = match std::fs::read_to_string("/proc/sys/kernel/hostname") {
        Ok(h) => h.trim().to_string(),
        Err(e) => return e,
    };
    let Some(g) = spec.gang.as_mut() else {
        return std::io::Error::other("not a gang's launch spec");
    };
    g.main = Some((host, port));
    let nodes = g.nodes();
    let json = match serde_json::to_string(&spec) {
        Ok(j) => j,
        Err(e) => return std::io::Error::other(e),
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return e,
    };
    let mut cmd = std::process::Command::new("srun");
    cmd.args(srun_args(nodes, &exe)).env(GANG_SPEC_ENV, json);
    // SAFETY: sigprocmask is async-signal-safe. The supervisor blocked the signals it
    // reads from its signalfd; `srun` handles its own.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::signal::sigprocmask(
                nix::sys::signal::SigmaskHow::SIG_SETMASK,
                Some(&nix::sys::signal::SigSet::empty()),
                None,
            )
            .map_err(std::io::Error::from)
        });
    }
    cmd.exec()
}

/// The spec handed to this rank's supervisor by [`start_ranks`], if this process is one.
pub fn handed_spec() -> Option<Vec<u8>> {
    std::env::var_os(GANG_SPEC_ENV).map(|v| v.into_encoded_bytes())
}

/// This supervisor's rank in the gang: the one whose node Slurm says this is
/// (`SLURMD_NODENAME`), else the task's number (`SLURM_PROCID`: one task per node, in
/// the components' order, which is the ranks').
pub fn own_rank(spec: &LaunchSpec) -> Option<u32> {
    let g = spec.gang.as_ref()?;
    rank_here(
        g,
        std::env::var("SLURMD_NODENAME").ok().as_deref(),
        std::env::var("SLURM_PROCID").ok().as_deref(),
    )
}

fn rank_here(
    g: &crate::exec::state::runfiles::Gang,
    node: Option<&str>,
    procid: Option<&str>,
) -> Option<u32> {
    if let Some(r) = node.and_then(|n| g.rank_of(n)) {
        return Some(r);
    }
    procid
        .and_then(|p| p.parse::<u32>().ok())
        .filter(|&r| (r as usize) < g.nodes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::state::runfiles::Gang;

    #[test]
    fn a_rank_is_its_nodes_place_in_the_gang_else_its_task_number() {
        let g = Gang {
            ranks: vec![("n2".into(), vec![0, 3]), ("n1".into(), vec![1, 2])],
            rank: 0,
            main: None,
        };
        assert_eq!(rank_here(&g, Some("n1"), Some("0")), Some(1));
        assert_eq!(rank_here(&g, Some("n2"), Some("1")), Some(0));
        assert_eq!(rank_here(&g, None, Some("1")), Some(1));
        assert_eq!(rank_here(&g, Some("n9"), Some("7")), None);
        assert_eq!(rank_here(&g, None, None), None);
    }

    #[test]
    fn the_ranks_srun_has_one_task_on_every_component_and_no_input() {
        let args = srun_args(3, Path::new("/usr/bin/shareq"));
        assert_eq!(
            args,
            [
                "--het-group=0,1,2",
                "--ntasks-per-node=1",
                "--input=none",
                "--output=/dev/null",
                "--error=/dev/null",
                "--quiet",
                "/usr/bin/shareq",
                "__supervise",
                "-",
            ]
        );
    }
}
