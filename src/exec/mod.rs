//! Carrying attempts out and watching the machine: the executor boundary
//! ([`backend::Backend`], with the local and Slurm executors), GPU discovery and
//! telemetry, the state directory, the run files, and the supervisor that runs each
//! attempt. `exec` decides nothing: it imports no `sched`.

pub mod backend;
pub mod cgroup;
pub mod clone_into;
pub mod device_health;
pub mod gpus;
pub mod local;
pub mod log_sink;
pub mod privdrop;
pub mod proc;
pub mod report;
pub mod runfiles;
pub mod runfiles_aside;
pub mod scripted;
pub mod session;
pub mod slurm;
pub mod slurm_exec;
pub mod spawn;
pub mod spawner;
pub mod state_dir;
pub mod state_perms;
pub mod supervisor;
pub mod telemetry;

pub use gpus::{Discovery, GpuInfo, Method};
pub use runfiles::{ExitStatus, LaunchSpec, now_ms};
pub use state_dir::StateDir;
