//! shareq: quota-share GPU scheduling for shared machines.
//!
//! Every module, lowest layer first (`layering.rs` holds the order and enforces it):
//!
//! - [`model`]: the configuration and job vocabulary (serde types); with [`sched`] and
//!   [`duration`], re-exported from the `shareq-core` crate.
//! - [`duration`]: spans of time as people read them, one formatter for every output.
//! - [`visible`]: terminal safety, user-controlled text with its control characters shown.
//! - [`counted`]: things open at once counted per key, given back on drop (connection caps).
//! - [`wire`]: the key names of the JSON shareq writes for programs (camelCase, the old
//!   snake_case names beside them for one release).
//! - [`config`]: parsing, validating and watching configuration documents.
//! - [`sched`]: the pure, deterministic scheduling core, on a wall or simulated clock.
//! - [`exec`]: carrying attempts out: executors, GPUs, the supervisor and run files.
//! - [`access`]: who is asking and what they may do (SPEC §9).
//! - [`replay`]: the simulator that drives `sched` on simulated time.
//! - [`events`]: the live decision stream, in the replay's line format.
//! - [`forecast`]: forward simulation on a copy of the scheduler (start estimates, what-ifs).
//! - [`snapshot`]: the immutable picture of the scheduler that readers share, and the
//!   usage history's windows as readers see them.
//! - [`store`]: durable state in SQLite: jobs, attempts, history, usage samples, recovery.
//! - [`metrics`]: Prometheus counters, histograms and gauges.
//! - [`report`]: `shareq report`, usage figures over a window of the live history.
//! - [`whatif`]: what a config would do, read from a state directory's database (`whatif`,
//!   `check --against`), for the CLI and for the scheduler serving admins.
//! - [`server`]: the live runtime task, the control socket and its client.
//! - [`tui`]: the console, a ratatui view over the snapshots that sends actions.
//! - [`cli`]: the subcommands' bodies.

pub mod access;
pub mod cli;
pub mod config;
pub mod counted;
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
pub mod whatif;
pub mod wire;

/// The layering rule, checked by tests.
#[cfg(test)]
mod layering;

// The pure core is its own crate (crates/shareq-core), seen here under its own names.
pub use shareq_core::{duration, model, sched};
