//! The scheduler's files on disk (SPEC §7–§9): where the state directory is and what is in
//! it ([`dir`]), its permissions ([`perms`]), the run files each attempt leaves
//! ([`runfiles`], and [`aside`] for those of another database), and each attempt's output
//! log with its cap and the free-space reserve ([`log_sink`]).

pub mod aside;
pub mod dir;
pub mod log_sink;
pub mod perms;
pub mod runfiles;
