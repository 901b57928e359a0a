//! `shareq serve --config DIR [--state DIR] [--stop-jobs-on-exit]`: the headless
//! scheduler.

use super::error::{CliError, ExitKind};
use crate::exec::StateDir;
use crate::server::boot::{self, BootError, BootOptions};
use std::path::{Path, PathBuf};
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
    /// At most this many control-socket connections at once (fewer when the open-file
    /// limit is low: descriptors for job starts are always kept free).
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Close a control-socket connection that sends no request for this long (seconds, or
    /// 90s, 5m, 1h).
    #[arg(long, default_value_t = 60, value_parser = crate::duration::parse_seconds)]
    pub idle_timeout: u64,
    /// Take a utilisation sample (per share and unit: GPUs own, borrowed, lent, queue and
    /// wait) for the console's history view this often (seconds, or 30s, 5m).
    #[arg(long, default_value_t = 30, value_parser = crate::duration::parse_seconds)]
    pub sample_seconds: u64,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics (default: the environment's
    /// `metrics.listen`; off when neither says).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
}

/// Exit 0 after a clean shutdown, 1 when it cannot start, 2 on an invalid config.
pub fn serve(args: &ServeArgs) -> Result<(), CliError> {
    let state = match StateDir::resolve(args.state.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            return Err(CliError::failed(format!("shareq serve: {e}")));
        }
    };
    if let Err(e) = state.create() {
        return Err(CliError::failed(format!(
            "shareq serve: cannot create the state directory {}: {e}",
            state.root().display()
        )));
    }
    let _guard = init_tracing(&state);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return Err(CliError::failed(format!(
                "shareq serve: cannot start the async runtime: {e}"
            )));
        }
    };
    let mut opts = BootOptions::new(state.clone(), args.config.clone());
    opts.socket_limits = crate::server::front::conn_limits::SocketLimits {
        max_connections: args.max_connections.max(1),
        idle: std::time::Duration::from_secs(args.idle_timeout.max(1)),
    };
    opts.sample_every = std::time::Duration::from_secs(args.sample_seconds.max(1));
    opts.metrics = args.metrics.clone();
    let stop_jobs = args.stop_jobs_on_exit;
    let args_config_dir = args.config.clone();
    rt.block_on(async move {
        // Catch SIGTERM/SIGINT from now on: a stop asked while starting up is a clean stop.
        let signals = Signals::install();
        // SIGHUP too, before the socket opens: one that came before its handler would
        // stop the scheduler (the default action), and a client can send it as soon as
        // it sees the socket. One that comes while starting is a reload once started.
        let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
        let handle = match boot::start(opts).await {
            Ok(h) => h,
            Err(e @ BootError::Config { .. }) => {
                return Err(CliError::usage(format!("shareq serve: {e}")));
            }
            Err(e) => {
                return Err(CliError::failed(format!("shareq serve: {e}")));
            }
        };
        // SIGHUP (`systemctl reload`, `kill -HUP`): re-read the config now, as `shareq
        // reload` does, and say so in the log with the outcome.
        reload_on_hangup(hup, handle.inputs.clone(), args_config_dir.clone());
        let mut fatal = handle.fatal.clone();
        let failed = tokio::select! {
            _ = signals.wait() => None,
            r = fatal.wait_for(Option::is_some) => match r {
                Ok(why) => why.clone(),
                Err(_) => Some("the scheduler stopped".to_string()),
            },
        };
        if let Some(why) = failed {
            eprintln!("shareq serve: {why}");
            // The refusals of what was waiting are on their way to the clients: let the
            // connections write them before the process ends.
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            handle.shutdown(false).await;
            return Err(CliError::printed(ExitKind::Failed));
        }
        tracing::info!(stop_jobs, "shutting down");
        handle.shutdown(stop_jobs).await;
        Ok(())
    })
}

/// On every SIGHUP: a log line, a reload of the config directory, and a line with its result.
fn reload_on_hangup(
    hup: std::io::Result<tokio::signal::unix::Signal>,
    inputs: tokio::sync::mpsc::UnboundedSender<crate::server::Input>,
    dir: PathBuf,
) {
    let Ok(mut hup) = hup else {
        tracing::warn!("cannot catch SIGHUP: it will stop the scheduler");
        return;
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: re-reading the config in {}", dir.display());
            let (tx, rx) = tokio::sync::oneshot::channel();
            if inputs
                .send(crate::server::Input::Reload { reply: Some(tx) })
                .is_err()
            {
                return;
            }
            match rx.await {
                Ok(Ok(())) => tracing::info!("SIGHUP: config re-read"),
                Ok(Err(why)) => tracing::warn!("SIGHUP: the config was not applied: {why}"),
                Err(_) => return,
            }
        }
    });
}

/// SIGTERM and SIGINT, caught from the moment they are installed.
struct Signals(Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>);

impl Signals {
    fn install() -> Signals {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(t), Ok(i)) => Signals(Some((t, i))),
            _ => Signals(None),
        }
    }

    async fn wait(self) {
        match self.0 {
            Some((mut term, mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
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
    // Colour codes only on a terminal: the journal and files get plain words.
    let stderr = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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

/// Where the system scheduler keeps its state (the systemd unit in `assets/`).
pub const SYSTEM_STATE: &str = "/var/lib/shareq";

/// The state directory a client command talks to: `--state`, else `$SHAREQ_STATE`, else
/// the user's own (`$XDG_STATE_HOME/shareq`, `~/.local/state/shareq`) when a scheduler
/// listens there, else the system scheduler's `/var/lib/shareq` when one listens there,
/// else the user's own (so that the error names it). See docs/DEPLOY.md.
pub(crate) fn state_dir(flag: Option<&Path>) -> anyhow::Result<StateDir> {
    client_state(flag, |k| std::env::var_os(k), |p| p.exists())
}

/// A client found no scheduler on `state`: when it is the system's directory, or (no
/// `--state`, no `$SHAREQ_STATE`) the system directory holds a scheduler's database, the
/// system scheduler is down for a moment (a restart) and the advice is to wait, not to
/// start a scheduler of one's own.
pub(crate) fn when_system_down(
    e: crate::server::ClientError,
    state: &StateDir,
    flag: bool,
    system: &Path,
) -> crate::server::ClientError {
    let explicit = flag || std::env::var_os("SHAREQ_STATE").is_some_and(|v| !v.is_empty());
    let is_system = state.root() == system;
    if is_system || (!explicit && system.join(crate::store::DB_FILE).exists()) {
        e.system_restarting(&system.display().to_string())
    } else {
        e
    }
}

/// [`state_dir`] with the environment and the test for a socket given (the Python client's
/// `default_state_dir` follows the same steps: tests/it/python_client.rs compares them).
pub fn client_state(
    flag: Option<&Path>,
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
    exists: impl Fn(&Path) -> bool,
) -> anyhow::Result<StateDir> {
    let explicit = flag.is_some() || env("SHAREQ_STATE").is_some_and(|v| !v.is_empty());
    let own = StateDir::resolve_with(flag, &env);
    if explicit {
        return Ok(own?);
    }
    if let Ok(own) = &own
        && exists(&own.socket())
    {
        return Ok(own.clone());
    }
    let system = StateDir::new(SYSTEM_STATE);
    if exists(&system.socket()) {
        return Ok(system);
    }
    Ok(own?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// issue 46: during a restart of the system scheduler, the advice is to wait for it,
    /// never to start a scheduler of one's own; elsewhere it is to start one.
    #[test]
    fn a_down_system_scheduler_is_waited_for_not_replaced() {
        let system = tempfile::tempdir().unwrap();
        let own = StateDir::new("/home/a/.local/state/shareq");
        let down = |state: &StateDir| {
            let err = std::io::Error::from(std::io::ErrorKind::NotFound);
            crate::server::ClientError::connecting(state, err)
        };
        let said = |state: &StateDir, flag: bool| {
            when_system_down(down(state), state, flag, system.path()).to_string()
        };
        // No system scheduler was ever here: start your own.
        assert!(said(&own, false).contains("start one with: shareq serve"));
        // The system's database is there: it is restarting.
        std::fs::write(system.path().join(crate::store::DB_FILE), b"").unwrap();
        let text = said(&own, false);
        assert!(
            text.contains("the system scheduler (") && text.contains("may be restarting"),
            "{text}"
        );
        assert!(!text.contains("shareq serve"), "{text}");
        // Asked for its own directory by name: that one is down, start it.
        assert!(said(&own, true).contains("start one with"));
        // The system directory itself, named or found.
        let sys = StateDir::new(system.path());
        assert!(said(&sys, true).contains("may be restarting"));
    }

    #[test]
    fn clients_find_the_system_scheduler_when_they_run_none_of_their_own() {
        let env = |k: &str| (k == "HOME").then(|| std::ffi::OsString::from("/home/a"));
        let own = Path::new("/home/a/.local/state/shareq/shareq.sock");
        let system = Path::new("/var/lib/shareq/shareq.sock");
        let pick = |sockets: &[&Path], flag: Option<&Path>| {
            client_state(flag, env, |p| sockets.contains(&p))
                .unwrap()
                .root()
                .to_path_buf()
        };
        assert_eq!(pick(&[system], None), Path::new(SYSTEM_STATE));
        assert_eq!(
            pick(&[own, system], None),
            Path::new("/home/a/.local/state/shareq")
        );
        assert_eq!(pick(&[], None), Path::new("/home/a/.local/state/shareq"));
        assert_eq!(pick(&[system], Some(Path::new("/s"))), Path::new("/s"));
    }
}
