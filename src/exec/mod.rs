//! Running jobs on this machine: GPU discovery and telemetry, the state directory, the
//! supervisor that runs each attempt, and starting and stopping supervisors.

pub mod gpus;
pub mod launch;
pub mod privdrop;
pub mod proc;
pub mod state_dir;
pub mod state_perms;
pub mod supervisor;
pub mod telemetry;

pub use gpus::{Discovery, GpuInfo, Method};
pub use launch::{ExitStatus, LaunchSpec, now_ms};
pub use state_dir::{StateDir, write_atomic};
