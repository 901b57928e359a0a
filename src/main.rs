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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Replay {
            scenario,
            check,
            summary,
        } => shareq::cli::replay(&scenario, check, summary),
    }
}
