//! `shareq tui`, bare `shareq` and `shareq demo`: the durable scheduler in-process with
//! the console on top (the control socket listens too, so the CLI and other consoles work
//! beside it), or the console attached to the scheduler that already runs there.

use super::error::{CliError, ExitKind};
use crate::exec::StateDir;
use crate::server::boot::{self, BootError, BootOptions};
use crate::server::client::remote;
use crate::tui::bridge::{Exit, NoticeFeed, forward};
use crate::tui::{Action, ConsoleOptions, LogSource, demo, run_console};
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;

#[derive(Debug, Clone, clap::Args)]
pub struct ConsoleArgs {
    /// The config directory (default: $XDG_CONFIG_HOME/shareq).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The state directory (default: $SHAREQ_STATE, else $XDG_STATE_HOME/shareq).
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Colour theme: dark, light, high-contrast, colour-blind-safe, or a YAML file
    /// (see docs/CONSOLE.md, Themes). NO_COLOR=1 turns colour off.
    #[arg(long)]
    pub theme: Option<String>,
    /// Leave the mouse to the terminal (no click selection).
    #[arg(long)]
    pub no_mouse: bool,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics while this console schedules
    /// (default: the environment's `metrics.listen`).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Run the demo on this config directory instead of the built-in one (the AWS example
    /// and a GPU sliced by memory: sample-configs/demo).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Seed of the load generator (the same seed submits the same jobs).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Colour theme: dark, light, high-contrast, colour-blind-safe, or a YAML file
    /// (see docs/CONSOLE.md, Themes). NO_COLOR=1 turns colour off.
    #[arg(long)]
    pub theme: Option<String>,
    /// Leave the mouse to the terminal (no click selection).
    #[arg(long)]
    pub no_mouse: bool,
}

/// The default config directory: `$XDG_CONFIG_HOME/shareq`, else `~/.config/shareq`.
pub fn default_config_dir() -> Option<PathBuf> {
    match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(x) => Some(PathBuf::from(x).join("shareq")),
        None => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/shareq")),
    }
}

/// `shareq tui` (and bare `shareq`, with the default config directory). A scheduler that
/// already answers on the state directory is attached to, config or not; without
/// `--state`, `$SHAREQ_STATE` or `--config`, that includes the system scheduler on
/// `/var/lib/shareq` when the user runs none of their own (docs/DEPLOY.md).
pub fn tui(args: &ConsoleArgs) -> Result<(), CliError> {
    theme_usable(args.theme.as_deref())?;
    let state = if args.config.is_some() {
        StateDir::resolve(args.state.as_deref()).map_err(|e| e.to_string())
    } else {
        super::serve::client_state(args.state.as_deref(), |k| std::env::var_os(k), answers)
            .map_err(|e| e.to_string())
    };
    let state = state.map_err(|e| CliError::failed(format!("shareq: {e}")))?;
    let opts = console_options(args.theme.clone(), args.no_mouse, &state);
    if answers(&state.socket()) {
        return session(None, state, opts, None, args.metrics.clone());
    }
    let config = match args.config.clone().or_else(default_config_dir) {
        Some(c) => c,
        None => {
            return Err(CliError::usage(
                "shareq: no config directory: pass --config DIR, or try `shareq demo`",
            ));
        }
    };
    if !config.is_dir() {
        return Err(CliError::usage(format!(
            "shareq: no config directory at {}, and no scheduler answers on {}.\n\
             To look around first:        shareq demo\n\
             To use your own config:      shareq tui --config DIR   (see sample-configs/ and docs/CONFIG.md)\n\
             To watch a running scheduler: shareq tui --state DIR  (the system one: --state {})",
            config.display(),
            state.root().display(),
            super::serve::SYSTEM_STATE
        )));
    }
    session(Some(&config), state, opts, None, args.metrics.clone())
}

/// A `--theme` that cannot be used is refused before the console takes the screen, with
/// the whole reason (the header would have to cut it). Exit 2, as for bad arguments.
fn theme_usable(theme: Option<&str>) -> Result<(), CliError> {
    match crate::tui::theme::Theme::resolve(theme, false) {
        (_, Some(why)) => {
            let why = why.strip_suffix("; using dark").unwrap_or(&why);
            Err(CliError::usage(format!(
                "shareq: {why} (see docs/CONSOLE.md, Themes)"
            )))
        }
        (_, None) => Ok(()),
    }
}

/// Does a scheduler answer on `socket`?
fn answers(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

/// `shareq demo`: a fresh state directory, the built-in config (`tui::demo::CONFIG`: the
/// AWS example and a sliced GPU) or `--config`, on fake GPUs, and a load generator.
pub fn demo(args: &DemoArgs) -> Result<(), CliError> {
    theme_usable(args.theme.as_deref())?;
    // Private and unpredictable (SPEC §9): mkdtemp, mode 0700.
    let template = std::env::temp_dir().join("shareq-demo-XXXXXX");
    let root = match nix::unistd::mkdtemp(&template) {
        Ok(r) => r,
        Err(e) => {
            return Err(CliError::failed(format!(
                "shareq demo: cannot create a temporary directory in {}: {e}",
                std::env::temp_dir().display()
            )));
        }
    };
    let state = StateDir::new(root.join("state"));
    let config = match &args.config {
        Some(c) => c.clone(),
        None => {
            let dir = root.join("config");
            let written = std::fs::create_dir_all(&dir).and_then(|()| {
                demo::CONFIG
                    .iter()
                    .try_for_each(|(name, text)| std::fs::write(dir.join(name), text))
            });
            if let Err(e) = written {
                return Err(CliError::failed(format!(
                    "shareq demo: cannot write the demo config in {}: {e}",
                    dir.display()
                )));
            }
            dir
        }
    };
    let mut opts = console_options(args.theme.clone(), args.no_mouse, &state);
    // Closing the demo's terminal stops its jobs, so that its directory can go too.
    opts.stop_jobs_on_hangup = true;
    // The load goes to the shares of the config in use (an invalid one is reported by
    // the session, which refuses to start on it).
    let load = match &args.config {
        None => demo::Demo::new(args.seed),
        Some(dir) => match crate::config::load_dir(dir) {
            Ok(loaded) => demo::Demo::for_config(args.seed, &loaded.config),
            Err(_) => demo::Demo::new(args.seed),
        },
    };
    let code = session(Some(&config), state.clone(), opts, Some(load), None);
    // The demo leaves nothing behind but jobs the operator chose to detach. A stopped
    // job's supervisor may still be ending when the session returns (it ends once told
    // its status is stored): such ones get a moment, detached jobs keep running.
    let running = || crate::exec::state::runfiles::attempts_left_running(state.root());
    let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while running() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if running() {
        let _ = std::fs::remove_dir_all(root.join("config"));
        eprintln!(
            "shareq demo: jobs still run detached; their state stays in {}",
            root.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&root);
    }
    code
}

fn console_options(theme: Option<String>, no_mouse: bool, state: &StateDir) -> ConsoleOptions {
    ConsoleOptions {
        theme,
        mouse: !no_mouse,
        logs: LogSource::StateDir(state.root().to_path_buf()),
        ..ConsoleOptions::default()
    }
}

/// Run the runtime and the console until the operator leaves. When another scheduler
/// already runs on the state directory, the console attaches to it through its socket
/// instead (it never schedules twice).
fn session(
    config: Option<&Path>,
    state: StateDir,
    mut opts: ConsoleOptions,
    demo: Option<demo::Demo>,
    metrics: Option<String>,
) -> Result<(), CliError> {
    // A scheduler answers there already (maybe root's, in a directory this user may not
    // write): attach without touching its files.
    let running = answers(&state.socket());
    if !running && let Err(e) = state.create() {
        return Err(CliError::failed(format!(
            "shareq: cannot create the state directory {}: {e}",
            state.root().display()
        )));
    }
    let _guard = if running {
        None
    } else {
        init_file_tracing(&state)
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return Err(CliError::failed(format!(
                "shareq: cannot start the async runtime: {e}"
            )));
        }
    };
    rt.block_on(async move {
        if running && metrics.is_some() {
            eprintln!(
                "shareq: --metrics is ignored: this console attaches to the scheduler already \
                 running on {}, which serves its own metrics (`serve --metrics`)",
                state.root().display()
            );
        }
        let booted = match config.filter(|_| !running) {
            None => Err(BootError::Locked {
                pid: None,
                state: state.root().to_path_buf(),
            }),
            Some(config) => {
            let mut boot_opts = BootOptions::new(state.clone(), config.to_path_buf());
            if demo.is_some() {
                // The demo lives minutes: sample often enough for `h` to show something.
                boot_opts.sample_every = DEMO_SAMPLE_EVERY;
            }
            boot_opts.metrics = metrics.clone();
            boot::start(boot_opts).await
            }
        };
        let (local, snapshots, inputs) =
            match booted {
                Ok(handle) => {
                    let (s, i) = (handle.snapshots.clone(), handle.inputs.clone());
                    (Some(handle), s, i)
                }
                Err(BootError::Locked { pid, .. }) => match remote::attach(&state).await {
                    Ok((s, i)) => {
                        tracing::info!(?pid, "attached to the running scheduler");
                        (None, s, i)
                    }
                    Err(e) => {
                        return Err(CliError::failed(format!("shareq: another scheduler holds {} (pid {}) but its socket does not answer: {e}",
                            state.root().display(),
                            pid.map_or("unknown".to_string(), |p| p.to_string()))));
                    }
                },
                Err(BootError::Config { dir, errors }) => {
                    eprintln!("shareq: the config in {} is not valid:", dir.display());
                    for e in errors {
                        eprintln!("  {e}");
                    }
                    return Err(CliError::printed(ExitKind::Usage));
                }
                Err(e) => {
                    return Err(CliError::failed(format!("shareq: {e}")));
                }
            };
        opts.attached = local.is_none();
        let (actions_tx, actions_rx) = mpsc::channel::<Action>(256);
        let (notices_tx, notices_rx) = mpsc::unbounded_channel();
        opts.notices = NoticeFeed::new(notices_rx);
        // The console at the keyboard acts directly on its own scheduler: record its
        // actions here (an attached one goes through the socket, which records them).
        let audit = local
            .as_ref()
            .map_or_else(crate::server::runtime::audit::Audit::off, |h| h.audit.clone());
        let bridge = tokio::spawn(forward(
            actions_rx,
            inputs,
            current_user(),
            notices_tx,
            audit,
        ));
        let generator = demo.map(|load| tokio::spawn(demo::run_demo(actions_tx.clone(), load)));
        let console = run_console(snapshots, actions_tx, opts).await;
        if let Some(g) = generator {
            g.abort();
        }
        let exit = bridge.await.unwrap_or(Exit::ConsoleGone);
        tracing::info!(?exit, "console closed");
        // An attached console leaves the other scheduler running whatever was chosen.
        if let Some(handle) = local {
            handle.shutdown(matches!(exit, Exit::Quit { stop_jobs: true })).await;
        }
        match console {
            Ok(()) => Ok(()),
            Err(e) => {
                Err(CliError::failed(format!("shareq: {e:#}")))
            }
        }
    })
}

/// How often `shareq demo` samples the utilisation history (`serve` and `tui`: 30 s).
const DEMO_SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Who is at the keyboard, for `CANCELLED: by <user>`: from the user database, never
/// from the environment.
fn current_user() -> String {
    crate::access::Caller::current().name
}

/// Log to `<state>/shareq.log` only: the terminal belongs to the console.
fn init_file_tracing(state: &StateDir) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(state.server_log())
        .ok()?;
    let (writer, guard) = tracing_appender::non_blocking(file);
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(writer)
        .with_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")));
    let _ = tracing_subscriber::registry().with(layer).try_init();
    Some(guard)
}
