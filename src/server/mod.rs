//! The live scheduler: the runtime task that owns the core and carries its decisions out,
//! and the control socket that the CLI talks to.
//!
//! Start it in-process with [`RuntimeHandle::start`]; send [`Input`]s on
//! `handle.inputs`; watch `handle.snapshots` (a `tokio::sync::watch` of
//! `Arc<Snapshot>`), which changes after every batch of inputs.

mod carry;
pub mod client;
pub mod input;
pub mod protocol;
pub mod runtime;
pub mod socket;

pub use client::{Client, ClientError};
pub use input::{CancelOutcome, ConfigUpdate, Input};
pub use protocol::{JobsAnswer, MAX_LINE, Request, Response, StatusAnswer};
pub use runtime::{RuntimeHandle, RuntimeOptions};
