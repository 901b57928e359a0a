//! Carrying attempts out and watching the machine. `exec` decides nothing: it imports no
//! `sched`. Its rooms, lowest first (each imports only rooms before it; `src/layering.rs`
//! checks that):
//! - [`containment`]: every process of an attempt found and ended (cgroups, sessions);
//! - [`state`]: the state directory, its permissions, the run files and job logs;
//! - [`supervisor`]: the program both backends run for each attempt (`shareq __supervise`),
//!   and its report channel to the scheduler;
//! - [`start`]: how the scheduler starts a supervisor (the spawner, `clone3` into the
//!   attempt's group, a plain start) and signals it;
//! - [`backend`]: the executor boundary, [`backend::Backend`], and its reports;
//! - [`local`], [`slurm`], [`scripted`]: the backends (this machine, Slurm, tests);
//! - [`choice`]: which backend a config gets, and what it cannot carry out;
//! - [`gpu`]: discovery, telemetry and health of the machine's GPUs.

pub mod backend;
pub mod choice;
pub mod containment;
pub mod gpu;
pub mod local;
pub mod scripted;
pub mod slurm;
pub mod start;
pub mod state;
pub mod supervisor;

pub use gpu::discovery::{Discovery, GpuInfo, Method};
pub use state::dir::StateDir;
pub use state::runfiles::{ExitStatus, LaunchSpec, now_ms};
