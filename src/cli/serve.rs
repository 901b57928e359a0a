//! `shareq serve --config DIR [--state DIR] [--stop-jobs-on-exit]`: the headless
//! scheduler.

use crate::config::{Watcher, load_dir};
use crate::exec::gpus::needs_discovery;
use crate::exec::{Discovery, StateDir};
use crate::server::{RuntimeHandle, RuntimeOptions, socket};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The config directory (ServiceEnvironment and QuotaShare YAML files).
    #[arg(long)]
    pub config: PathBuf,
    /// The state directory (default: $SHAREQ_STATE, else $XDG_STATE_HOME/shareq).
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// On exit, stop every running job (SIGTERM, grace, SIGKILL) instead of leaving them
    /// running under their supervisors.
    #[arg(long)]
    pub stop_jobs_on_exit: bool,
}

/// Exit 0 after a clean shutdown, 1 when it cannot start, 2 on an invalid config.
pub fn serve(args: &ServeArgs) -> ExitCode {
    let state = match StateDir::resolve(args.state.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shareq serve: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = state.create() {
        eprintln!(
            "shareq serve: cannot create the state directory {}: {e}",
            state.root().display()
        );
        return ExitCode::from(1);
    }
    let _guard = init_tracing(&state);
    let loaded = match load_dir(&args.config) {
        Ok(l) => l,
        Err(errors) => {
            eprintln!(
                "shareq serve: the config in {} is not valid:",
                args.config.display()
            );
            for e in errors {
                eprintln!("  {e}");
            }
            return ExitCode::from(2);
        }
    };
    let discovery = if needs_discovery(&loaded.config) {
        Discovery::run()
    } else {
        Discovery::skipped()
    };
    tracing::info!("{}", discovery.describe());
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("shareq serve: cannot find my own executable: {e}");
            return ExitCode::from(1);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("shareq serve: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let opts = RuntimeOptions {
        state: state.clone(),
        config_dir: args.config.clone(),
        supervisor_exe: exe,
        discovery,
    };
    let stop_jobs = args.stop_jobs_on_exit;
    rt.block_on(async move {
        let listener = match socket::bind(&state) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("shareq serve: {e}");
                return ExitCode::from(1);
            }
        };
        let config_dir = opts.config_dir.clone();
        let handle = RuntimeHandle::start(opts, loaded);
        // Edits of the config directory apply live; a watcher that cannot start leaves
        // the config as loaded (and `reload` over the socket still works).
        let _watcher = match Watcher::start(config_dir, handle.config_sink()) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!("config changes will not be picked up: {e}");
                None
            }
        };
        let server = tokio::spawn(socket::serve(
            listener,
            handle.inputs.clone(),
            handle.snapshots.clone(),
        ));
        tracing::info!(
            socket = %state.socket().display(),
            "scheduler listening"
        );
        wait_for_signal().await;
        tracing::info!(stop_jobs, "shutting down");
        server.abort();
        let _ = std::fs::remove_file(state.socket());
        handle.shutdown(stop_jobs).await;
        ExitCode::SUCCESS
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Log to `<state>/shareq.log` and to stderr (`RUST_LOG` filters; default `info`).
fn init_tracing(state: &StateDir) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(state.server_log());
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter());
    match file {
        Ok(f) => {
            let (writer, guard) = tracing_appender::non_blocking(f);
            let file_layer = tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(writer)
                .with_filter(filter());
            let _ = tracing_subscriber::registry()
                .with(stderr)
                .with(file_layer)
                .try_init();
            Some(guard)
        }
        Err(e) => {
            let _ = tracing_subscriber::registry().with(stderr).try_init();
            tracing::warn!("cannot open {}: {e}", state.server_log().display());
            None
        }
    }
}

/// The state directory from a `--state` flag, or the environment.
pub(crate) fn state_dir(flag: Option<&Path>) -> anyhow::Result<StateDir> {
    StateDir::resolve(flag).map_err(anyhow::Error::msg)
}
