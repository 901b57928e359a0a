//! The `shareq` command line: parse arguments and dispatch to the library.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use shareq::cli::CliError;
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
    command: Option<Command>,
    /// Without a subcommand: the console on the default config directory.
    #[command(flatten)]
    console: shareq::cli::ConsoleArgs,
}

#[derive(Subcommand)]
enum Command {
    /// The console: the scheduler with a live dashboard on top (the default command).
    Tui(shareq::cli::ConsoleArgs),
    /// Try shareq: the AWS example on fake GPUs in a temporary state directory, with a
    /// load generator that shows lending, borrowing, a reclaim and an in-share preemption.
    Demo(shareq::cli::DemoArgs),
    /// Run a scenario on simulated time and print one JSON line per decision.
    Replay {
        /// The scenario file (YAML).
        scenario: PathBuf,
        /// Verify the scenario's `expect:` (exit 1 with a diff when it does not hold).
        #[arg(long)]
        check: bool,
        /// Add a summary. To a pipe or a file (scripts): the decisions, then the summary as
        /// one final JSON line (SPEC §6). To a terminal: a summary for people instead of
        /// the decisions. --json and --text choose one form whatever the output is.
        #[arg(long)]
        summary: bool,
        /// With --summary: always the machine form (the decisions and a summary line).
        #[arg(long, conflicts_with = "text")]
        json: bool,
        /// With --summary: always the summary for people.
        #[arg(long)]
        text: bool,
        /// Also estimate every N-th submitted job's start at its submission, as the live
        /// forecast would from the replay's own past: one `estimated` line each (SPEC §11).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        estimates: Option<u64>,
    },
    /// Validate a config directory: print what it would apply (exit 0) or every error
    /// (exit 1).
    Check {
        /// The config directory.
        dir: PathBuf,
        /// Keep watching and print one line per change: applied, or rejected with errors.
        #[arg(long)]
        watch: bool,
        /// Also say what applying it would do now to the jobs of this state directory
        /// (which running jobs would be preempted or become reclaimable, which queued jobs
        /// would start, become impossible, or wait for a new reason).
        #[arg(long, value_name = "STATE", conflicts_with = "watch")]
        against: Option<PathBuf>,
    },
    /// Replay the real submissions of a window of history under the config in force and
    /// under a proposed one, and compare them per share.
    Whatif(shareq::cli::WhatifArgs),
    /// Write the real submissions of a window of history as a replay trace (CSV), or with
    /// --out a scenario ready for `shareq replay`.
    ExportTrace(shareq::cli::ExportTraceArgs),
    /// Run the scheduler headless: jobs from `shareq submit`, on this machine's GPUs.
    Serve(shareq::cli::ServeArgs),
    /// Queue a job and print its id.
    Submit(shareq::cli::SubmitArgs),
    /// Cancel jobs.
    Cancel(shareq::cli::CancelArgs),
    /// Change a job's priority.
    Priority(shareq::cli::PriorityArgs),
    /// Inside a job: tell the scheduler this attempt has saved its work (SPEC §14).
    Checkpoint(shareq::cli::CheckpointArgs),
    /// List queued and running jobs, with why each waits.
    Jobs(shareq::cli::JobsArgs),
    /// Shares, capacity, lending and the config state.
    Status(shareq::cli::StatusArgs),
    /// Print a job's output.
    Log(shareq::cli::LogArgs),
    /// Re-read the config directory now (admins).
    Reload(shareq::cli::ReloadArgs),
    /// The audit trail: every accepted submit, cancel, priority change and reload (admins).
    Audit(shareq::cli::AuditArgs),
    /// Who used the GPUs: per share, own / borrowed / lent GPUs, queue and waits over
    /// the last hour, day or week.
    History(shareq::cli::HistoryArgs),
    /// The scheduler's decisions (submitted, started, preempted, ...) as they happen.
    Events(shareq::cli::EventsArgs),
    /// Usage per share (and per user, admins) over a window of the history.
    Report(shareq::cli::ReportArgs),
    /// Show the GPUs of this machine and how they were found, and the running
    /// scheduler's own view of them (lost ones included) when one answers.
    Gpus {
        /// Also show how this config's units map to them.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The scheduler to ask (default: as for `status`).
        #[arg(long)]
        state: Option<PathBuf>,
    },
    /// Print the slurm.conf and gres.conf lines that let shareq pin exact GPUs on the
    /// nodes of a config (the Slurm executor).
    SlurmConf {
        /// The config directory whose `nodes` to describe.
        #[arg(long)]
        config: PathBuf,
    },
    /// Run one attempt of a job (used by the scheduler itself; `-`: the launch spec on
    /// standard input, as a Slurm batch script hands it over).
    #[command(name = "__supervise", hide = true)]
    Supervise { spec: PathBuf },
    /// Print a shell completion script: `shareq completions bash > /etc/bash_completion.d/shareq`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `shareq man > /usr/local/share/man/man1/shareq.1`; with
    /// `--dir DIR`, write shareq.1 and one shareq-<subcommand>.1 per subcommand into DIR.
    Man {
        /// Write every page into this directory (created if missing) instead of printing
        /// the main one.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// The command line as completions offer it: without the hidden supervisor mode
/// (clap_complete lists hidden subcommands too).
fn visible_command() -> clap::Command {
    let full = Cli::command();
    clap::Command::new("shareq")
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

/// A console option written before a subcommand that cannot take it.
#[derive(Debug, thiserror::Error)]
enum Misplaced {
    #[error("two different directories given for one option, before and after `tui`: give it once")]
    TwoForTui,
    #[error(
        "{flag} before `{sub}` is an option of the console, which `{sub}` does not use: \
         write the subcommand's own options after it (`shareq {sub} --help`)"
    )]
    ConsoleOption { flag: &'static str, sub: String },
    #[error(
        "`{sub}` does not use a state directory, so --state {} would be ignored: leave it out",
        .state.display()
    )]
    NoState { sub: String, state: PathBuf },
    #[error(
        "two state directories given: {} (before `{sub}`) and {} (after it): give one",
        .before.display(),
        .after.display()
    )]
    TwoStates {
        sub: String,
        before: PathBuf,
        after: PathBuf,
    },
}

/// The console's options written before a subcommand (`shareq --state S jobs`): `--state`
/// goes to the subcommand's own, `tui` takes them all, and whatever the subcommand does not
/// take is refused — never ignored in silence.
fn carry_global(
    global: &shareq::cli::ConsoleArgs,
    sub: &str,
    command: &mut Command,
) -> Result<(), Misplaced> {
    if let Command::Tui(own) = command {
        let conflict =
            |a: &Option<PathBuf>, b: &Option<PathBuf>| a.is_some() && b.is_some() && a != b;
        if conflict(&global.state, &own.state) || conflict(&global.config, &own.config) {
            return Err(Misplaced::TwoForTui);
        }
        own.state = own.state.take().or_else(|| global.state.clone());
        own.config = own.config.take().or_else(|| global.config.clone());
        own.theme = own.theme.take().or_else(|| global.theme.clone());
        own.metrics = own.metrics.take().or_else(|| global.metrics.clone());
        own.no_mouse |= global.no_mouse;
        return Ok(());
    }
    let others = [
        ("--config", global.config.is_some()),
        ("--theme", global.theme.is_some()),
        ("--no-mouse", global.no_mouse),
        ("--metrics", global.metrics.is_some()),
    ];
    if let Some((flag, _)) = others.iter().find(|(_, given)| *given) {
        return Err(Misplaced::ConsoleOption {
            flag,
            sub: sub.to_string(),
        });
    }
    let Some(global_state) = &global.state else {
        return Ok(());
    };
    let Some(slot) = state_slot(command) else {
        return Err(Misplaced::NoState {
            sub: sub.to_string(),
            state: global_state.clone(),
        });
    };
    match slot {
        Some(own) if own != global_state => Err(Misplaced::TwoStates {
            sub: sub.to_string(),
            before: global_state.clone(),
            after: own.clone(),
        }),
        _ => {
            *slot = Some(global_state.clone());
            Ok(())
        }
    }
}

/// The subcommand's own `--state`, where it has one.
fn state_slot(command: &mut Command) -> Option<&mut Option<PathBuf>> {
    Some(match command {
        Command::Tui(a) => &mut a.state,
        Command::Whatif(a) => &mut a.state,
        Command::ExportTrace(a) => &mut a.state,
        Command::Serve(a) => &mut a.state,
        Command::Submit(a) => &mut a.state,
        Command::Cancel(a) => &mut a.state,
        Command::Priority(a) => &mut a.state,
        Command::Jobs(a) => &mut a.state,
        Command::Status(a) => &mut a.state,
        Command::Log(a) => &mut a.state,
        Command::Reload(a) => &mut a.state,
        Command::Audit(a) => &mut a.state,
        Command::History(a) => &mut a.state,
        Command::Events(a) => &mut a.state,
        Command::Report(a) => &mut a.state,
        Command::Gpus { state, .. } => state,
        Command::Demo(_)
        | Command::Replay { .. }
        | Command::Check { .. }
        | Command::SlurmConf { .. }
        | Command::Supervise { .. }
        | Command::Completions { .. }
        | Command::Checkpoint(_)
        | Command::Man { .. } => return None,
    })
}

fn main() -> ExitCode {
    // The spawner of supervisors (`exec::start::spawner`), started once by the scheduler.
    let mut args = std::env::args_os().skip(1);
    if let (Some(sub), Some(arg), None) = (args.next(), args.next(), args.next())
        && sub == shareq::exec::start::spawner::SUBCOMMAND
        && arg == shareq::exec::start::spawner::ARGUMENT
    {
        return ExitCode::from(shareq::exec::start::spawner::run(|| {
            let channel = std::path::Path::new(shareq::exec::supervisor::channel::SPEC_ON_CHANNEL);
            shareq::cli::exit_code_of(shareq::cli::supervise(channel))
        }));
    }
    // The supervisor starts once per attempt: skip building the whole CLI for it.
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == "__supervise")
        && let (Some(spec), None) = (args.next(), args.next())
    {
        return shareq::cli::exit_code(shareq::cli::supervise(std::path::Path::new(&spec)));
    }
    // Parsed in two steps to keep the subcommand's name as written (for carry_global).
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let Some(mut command) = cli.command else {
        return shareq::cli::exit_code(shareq::cli::tui(&cli.console));
    };
    let sub = matches.subcommand_name().unwrap_or_default();
    if let Err(e) = carry_global(&cli.console, sub, &mut command) {
        eprintln!("shareq: {e}");
        return ExitCode::from(2);
    }
    if !matches!(
        command,
        Command::Tui(_) | Command::Demo(_) | Command::Serve(_) | Command::Supervise { .. }
    ) {
        shareq::cli::end_quietly_on_closed_pipe();
    }
    let result: Result<(), CliError> = match command {
        Command::Tui(a) => shareq::cli::tui(&a),
        Command::Demo(a) => shareq::cli::demo(&a),
        Command::Replay {
            scenario,
            check,
            summary,
            json,
            text,
            estimates,
        } => {
            use std::io::IsTerminal;
            // SPEC §6: `--summary` adds a final summary line to the decisions; a person at
            // a terminal gets the summary in words instead (issue 46), unless --json.
            let human = summary && (text || (!json && std::io::stdout().is_terminal()));
            shareq::cli::replay(&scenario, check, human, summary && !human, estimates)
        }
        Command::Check {
            dir,
            watch,
            against,
        } => shareq::cli::check::check(&dir, watch, against.as_deref()),
        Command::Whatif(a) => shareq::cli::whatif(&a),
        Command::ExportTrace(a) => shareq::cli::export_trace(&a),
        Command::Serve(a) => {
            // Before it opens anything: what is open above standard error now was
            // inherited, and no job (nor the scheduler) is to hold it (SPEC §9).
            shareq::exec::containment::fds::close_inherited();
            shareq::cli::serve(&a)
        }
        Command::Submit(a) => shareq::cli::submit(&a),
        Command::Cancel(a) => shareq::cli::cancel(&a),
        Command::Priority(a) => shareq::cli::priority(&a),
        Command::Checkpoint(a) => shareq::cli::checkpoint(&a),
        Command::Jobs(a) => shareq::cli::jobs(&a),
        Command::Status(a) => shareq::cli::status(&a),
        Command::Log(a) => shareq::cli::log(&a),
        Command::Reload(a) => shareq::cli::reload(&a),
        Command::Audit(a) => shareq::cli::audit(&a),
        Command::History(a) => shareq::cli::history(&a),
        Command::Events(a) => shareq::cli::events(&a),
        Command::Report(a) => shareq::cli::report(&a),
        Command::Gpus { config, state } => shareq::cli::gpus(config.as_deref(), state.as_deref()),
        Command::SlurmConf { config } => shareq::cli::slurm_conf(&config),
        Command::Supervise { spec } => shareq::cli::supervise(&spec),
        Command::Completions { shell } => {
            let mut cmd = visible_command();
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd, "shareq", &mut out);
            use std::io::Write as _;
            let _ = std::io::stdout().write_all(&out);
            Ok(())
        }
        Command::Man { dir: Some(dir) } => {
            let written = std::fs::create_dir_all(&dir)
                .and_then(|()| clap_mangen::generate_to(Cli::command(), &dir));
            written.map_err(|e| {
                CliError::failed(format!(
                    "shareq man: cannot write the pages in {}: {e}",
                    dir.display()
                ))
            })
        }
        Command::Man { dir: None } => {
            let mut out = Vec::new();
            // The page names shareq-<sub>(1) for each subcommand `man --dir` writes.
            let cmd = Cli::command().disable_help_subcommand(true);
            match clap_mangen::Man::new(cmd).render(&mut out) {
                Ok(()) => {
                    use std::io::Write as _;
                    // A closed pipe (`shareq man | head`) is not an error worth a message.
                    let _ = std::io::stdout().write_all(&out);
                    Ok(())
                }
                Err(e) => Err(CliError::failed(format!("shareq man: {e}"))),
            }
        }
    };
    shareq::cli::exit_code(result)
}
