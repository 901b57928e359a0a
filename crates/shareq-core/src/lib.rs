//! shareq's pure core, a crate of its own so that its layering is the compiler's: it
//! depends on serde alone (no tokio, SQLite, YAML, clock or processes), and its tests build
//! without SQLite's C build. The `shareq` crate re-exports these modules under the same
//! names (`shareq::sched`, `shareq::model`, `shareq::duration`).
//!
//! - [`model`]: the configuration and job vocabulary (serde types).
//! - [`sched`]: the deterministic scheduling state machine.
//! - [`duration`]: spans of time as people read them, one formatter for every output.

pub mod duration;
pub mod model;
pub mod sched;
