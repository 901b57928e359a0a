//! The `shareq` command line: parse arguments and dispatch to the library.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "shareq",
    version,
    about = "Quota-share GPU scheduling for shared machines"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario on simulated time and print one JSON line per decision.
    Replay {
        /// The scenario file (YAML).
        scenario: PathBuf,
        /// Verify the scenario's `expect:` (exit 1 with a diff when it does not hold).
        #[arg(long)]
        check: bool,
        /// Print a summary line at the end.
        #[arg(long)]
        summary: bool,
    },
    /// Validate a config directory: print what it would apply (exit 0) or every error
    /// (exit 1).
    Check {
        /// The config directory.
        dir: PathBuf,
        /// Keep watching and print one line per change: applied, or rejected with errors.
        #[arg(long)]
        watch: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Replay {
            scenario,
            check,
            summary,
        } => shareq::cli::replay(&scenario, check, summary),
        Command::Check { dir, watch } => shareq::cli::check::check(&dir, watch),
    }
}
