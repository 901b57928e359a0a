//! The vocabulary of shareq: configuration documents, job submissions and job states.
//! Plain serde types with the field names of the SPEC; no behaviour beyond defaults.

mod capacity;
mod config;
mod job;

pub use capacity::{LOCAL_NODE, UnitCapacity, ValidConfig};
pub use config::*;
pub use job::*;
