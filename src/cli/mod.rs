//! The subcommands' bodies: each turns arguments into library calls and an exit code.

pub mod check;
mod replay;

pub use replay::replay;
