//! Running jobs on this machine: GPU discovery and telemetry, the state directory, the
//! supervisor that runs each attempt, and starting and stopping supervisors.

pub mod cgroup;
pub mod device_health;
pub mod gpus;
pub mod log_sink;
pub mod privdrop;
pub mod proc;
pub mod runfiles;
pub mod runfiles_aside;
pub mod session;
pub mod slurm;
pub mod state_dir;
pub mod state_perms;
pub mod supervisor;
pub mod telemetry;

pub use gpus::{Discovery, GpuInfo, Method};
pub use runfiles::{ExitStatus, LaunchSpec, now_ms};
pub use state_dir::StateDir;
