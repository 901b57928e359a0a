//! The subcommands' bodies: each turns arguments into library calls and an exit code.

mod replay;

pub use replay::replay;
