//! shareq: quota-share GPU scheduling for shared machines.
//!
//! - [`model`]: the configuration and job vocabulary (serde types); with [`sched`] and
//!   [`duration`], re-exported from the `shareq-core` crate.
//! - [`config`]: parsing and validating configuration documents.
//! - [`sched`]: the pure, deterministic scheduling core.
//! - [`replay`]: the simulator that drives `sched` on simulated time.
//! - [`snapshot`]: the immutable picture of the scheduler that readers share.
//! - [`exec`]: GPUs, the supervisor and the processes of jobs.
//! - [`server`]: the live runtime task and the control socket.
//! - [`cli`]: the subcommands' bodies.
//! - [`events`]: the live decision stream, in the replay's line format.
//! - [`duration`]: spans of time as people read them, one formatter for every output.

pub mod access;
pub mod cli;
pub mod config;
pub mod events;
pub mod exec;
pub mod forecast;
pub mod metrics;
pub mod replay;
pub mod report;
pub mod server;
pub mod snapshot;
pub mod store;
pub mod tui;
pub mod visible;

#[cfg(test)]
mod layering;

// The pure core is its own crate (crates/shareq-core); the same paths as before.
pub use shareq_core::{duration, model, sched};
