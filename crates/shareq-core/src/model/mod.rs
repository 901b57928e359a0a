//! The vocabulary of shareq: configuration documents, job submissions and job states.
//! Plain serde types with the field names of the SPEC; no behaviour beyond defaults and
//! the checks of a submission that need no I/O (`checks`).

mod capacity;
mod checks;
mod config;
mod job;

pub use capacity::{LOCAL_NODE, UnitCapacity, ValidConfig};
pub use checks::{MAX_JOB_BYTES, MAX_TOKEN, SpecError, check_client_token};
pub use config::*;
pub use job::*;
