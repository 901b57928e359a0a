//! The one way a durable scheduler starts (SPEC §8), used by `shareq serve` and by the
//! console when no scheduler runs yet:
//!
//! lock the state directory → load the config → open the database → prune old history →
//! load → build the scheduler → record the config if it changed → recovery plan (adopt,
//! exits seen while down, `LOST_ON_RESTART`) → apply and store it → start the runtime
//! (carrying out recovery's first pass, watching adopted attempts) → listen on the
//! control socket → sample the utilisation history (`server::runtime::usage`) → watch the config
//! directory.
//!
//! When another scheduler holds the state directory, [`BootError::Locked`] names its pid:
//! `serve` says so and exits; a console attaches to it instead (`remote::attach`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), shareq::server::boot::BootError> {
//! use shareq::exec::StateDir;
//! use shareq::server::boot::{self, BootError, BootOptions};
//! let opts = BootOptions::new(StateDir::new("/tmp/state"), "/etc/shareq".into());
//! match boot::start(opts).await {
//!     Ok(handle) => handle.shutdown(false).await,
//!     Err(BootError::Locked { pid, .. }) => println!("already running as {pid:?}"),
//!     Err(e) => eprintln!("{e}"),
//! }
//! # Ok(()) }
//! ```

use super::front::socket::{self, SocketError};
use super::runtime::{Durable, RuntimeHandle, RuntimeOptions, WatcherGuard, retain_days};
use crate::config::{ConfigError, LoadedConfig, Watcher, load_dir};
use crate::exec::gpu::discovery::needs_discovery;
use crate::exec::{Discovery, StateDir, now_ms};
use crate::sched::{Clock, Sched};
use crate::snapshot::JobView;
use crate::store::{Durability, StateLock, Store, StoreError, recovery};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokio::net::{TcpListener, UnixListener};

/// How to start.
#[derive(Debug, Clone)]
pub struct BootOptions {
    pub state: StateDir,
    pub config_dir: PathBuf,
    /// The `shareq` binary that runs supervisors; `None`: this executable.
    pub supervisor_exe: Option<PathBuf>,
    /// The GPUs of this machine; `None`: discover them when the config names real GPUs.
    pub discovery: Option<Discovery>,
    /// Follow edits of the config directory (default true).
    pub watch_config: bool,
    /// Listen on `<state>/shareq.sock` for the CLI and other consoles (default true).
    pub listen: bool,
    pub durability: Durability,
    /// The control socket's connection cap and idle timeout.
    pub socket_limits: super::front::conn_limits::SocketLimits,
    /// Serve Prometheus metrics on this ADDR:PORT (`None`: the environment's
    /// `metrics.listen`, if any).
    pub metrics: Option<String>,
    /// How often the utilisation history is sampled (`server::runtime::usage`).
    pub sample_every: std::time::Duration,
}

impl BootOptions {
    pub fn new(state: StateDir, config_dir: PathBuf) -> BootOptions {
        BootOptions {
            state,
            config_dir,
            supervisor_exe: None,
            discovery: None,
            watch_config: true,
            listen: true,
            durability: Durability::Full,
            socket_limits: Default::default(),
            metrics: None,
            sample_every: super::runtime::usage::DEFAULT_EVERY,
        }
    }
}

/// Why a scheduler did not start. Nothing stored was changed in any case.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// Another scheduler runs on this state directory.
    #[error(
        "another shareq is already scheduling on {} ({}); stop it first, or use it: the CLI and `shareq tui` talk to it",
        state.display(),
        match pid { Some(p) => format!("pid {p}"), None => "pid unknown".to_string() }
    )]
    Locked { pid: Option<u32>, state: PathBuf },
    #[error("the config in {} is not valid:\n  {}", dir.display(), errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Config {
        dir: PathBuf,
        errors: Vec<ConfigError>,
    },
    /// The state directory or its database cannot be used (read-only, full disk, corrupt,
    /// written by a newer shareq...).
    #[error("{0}")]
    Store(StoreError),
    #[error("{0}")]
    Socket(#[from] SocketError),
    #[error("cannot find the shareq executable for supervisors: {0}")]
    Exe(std::io::Error),
    /// The metrics address is wrong or taken.
    #[error("{0}")]
    Metrics(#[from] crate::metrics::http::BindError),
}

impl From<StoreError> for BootError {
    fn from(e: StoreError) -> BootError {
        match e {
            StoreError::Locked { path, holder } => BootError::Locked {
                pid: holder.0,
                state: path,
            },
            other => BootError::Store(other),
        }
    }
}

/// Start a durable scheduler on `opts.state` (must run inside a tokio runtime).
pub async fn start(opts: BootOptions) -> Result<RuntimeHandle, BootError> {
    let t0 = Instant::now();
    let root = opts.state.root().to_path_buf();
    let lock = lock_state_dir(&opts, &root)?;
    let loaded = load_config(&opts.config_dir)?;
    let (durable, discovery) = recover(&opts, &root, lock, &loaded, t0)?;
    let exe = match opts.supervisor_exe.clone() {
        Some(p) => p,
        None => std::env::current_exe().map_err(BootError::Exe)?,
    };
    // Before the socket answers: a directory deleted from then on is seen as deleted.
    let watched =
        super::runtime::state_watch::identify(root.clone(), root.join(crate::store::DB_FILE));
    let listener = bind_socket(&opts, &root, &loaded)?;
    let metrics_listener = bind_metrics(&opts, &loaded).await?;
    let audit = match super::runtime::audit::Audit::start(&root.join(crate::store::DB_FILE)) {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!("no audit trail: {e}");
            super::runtime::audit::Audit::off()
        }
    };
    let ropts = RuntimeOptions {
        state: opts.state.clone(),
        config_dir: opts.config_dir.clone(),
        supervisor_exe: exe,
        discovery,
    };
    let applied_hash = loaded.hash.clone();
    let executor = crate::exec::choice::describe(&loaded.config.executor());
    let first = opts.watch_config.then(|| loaded.clone());
    let mut handle = RuntimeHandle::start_with(ropts, loaded, Some(durable), None);
    // With a watcher, the config in force is delivered as its first update (a
    // `config_applied` decision, the reload counter), as the watcher delivers every later
    // one; sent before the socket opens, so that every request comes after it.
    if let Some(first) = first {
        (handle.config_sink())(crate::config::ConfigUpdate::Applied(Box::new(first)));
    }
    super::runtime::state_watch::start(watched, handle.inputs.clone());
    if let Some(listener) = listener {
        let guard = super::front::guard::Guard::new(opts.state.clone(), audit.clone());
        socket::serve_runtime(
            &mut handle,
            listener,
            opts.state.socket(),
            guard,
            opts.socket_limits,
        );
        tracing::info!(
            socket = %opts.state.socket().display(),
            executor = %executor,
            "scheduler listening"
        );
    }
    handle.audit = audit;
    serve_sidecars(&mut handle, &opts, &root, metrics_listener, applied_hash);
    Ok(handle)
}

/// Raise the open-file limit, create the state directory and take its lock.
fn lock_state_dir(opts: &BootOptions, root: &Path) -> Result<StateLock, BootError> {
    // Checked before anything in it is opened (SPEC §9).
    let fds = super::front::conn_limits::raise_fd_limit();
    tracing::debug!(open_files = fds, "open-file limit");
    opts.state.create().map_err(|source| {
        BootError::Store(StoreError::StateDir {
            path: root.to_path_buf(),
            source,
        })
    })?;
    Ok(StateLock::acquire(root)?)
}

/// Load and check the config directory: its warnings are logged, an executor that cannot
/// run here is an error.
fn load_config(dir: &Path) -> Result<LoadedConfig, BootError> {
    let loaded = load_dir(dir).map_err(|errors| BootError::Config {
        dir: dir.to_path_buf(),
        errors,
    })?;
    // What `check` warns about, the scheduler's log says at start too (a config with no
    // share at all, admins or members this machine does not know).
    for w in crate::config::warnings(&loaded.config)
        .into_iter()
        .chain(crate::config::unknown_people(&loaded.config))
    {
        tracing::warn!("config {}: {w}", dir.display());
    }
    if let Some(e) = crate::exec::choice::unavailable(&loaded)
        .or_else(|| crate::exec::choice::unreachable(&loaded))
    {
        return Err(BootError::Config {
            dir: dir.to_path_buf(),
            errors: vec![e],
        });
    }
    Ok(loaded)
}

/// Open the database, check it, set foreign files aside and prune the history older than
/// the config keeps; the retention in days and how many jobs were pruned.
fn open_store(
    opts: &BootOptions,
    root: &Path,
    loaded: &LoadedConfig,
    now: i64,
) -> Result<(Store, u32, usize), BootError> {
    let mut store = Store::open_with(root, opts.durability)?;
    store.integrity_check()?;
    store.set_aside_foreign_files(root, now)?;
    let days = retain_days(loaded);
    let pruned = store.prune_jobs(days, now)?;
    crate::exec::state::runfiles::remove_jobs(&opts.state, &pruned);
    Ok((store, days, pruned.len()))
}

/// Load the stored state, build the scheduler on this machine's GPUs, record the config if
/// it changed, and plan and apply recovery (adopted attempts, exits seen while down,
/// `LOST_ON_RESTART`): what the runtime starts from, and the GPUs found.
fn recover(
    opts: &BootOptions,
    root: &Path,
    lock: StateLock,
    loaded: &LoadedConfig,
    t0: Instant,
) -> Result<(Durable, Discovery), BootError> {
    let now = now_ms();
    let (mut store, days, pruned) = open_store(opts, root, loaded, now)?;
    let recovered = store.load()?;
    let discovery = match opts.discovery.clone() {
        Some(d) => d,
        None if needs_discovery(&loaded.config) => Discovery::run(),
        None => Discovery::skipped(),
    };
    tracing::info!("{}", discovery.describe());
    let (capacity, _) = discovery.capacity(&loaded.config);
    let mut sched = Sched::new(&loaded.config, &capacity, Clock::Wall);
    let source = opts.config_dir.display().to_string();
    if recovered.config.as_ref().map(|c| c.hash.as_str()) != Some(loaded.hash.as_str()) {
        store.record_config(&loaded.hash, &source, loaded.documents().as_deref(), now)?;
    }
    let live = crate::exec::choice::live_attempts(&loaded.config.executor()).map_err(|e| {
        BootError::Config {
            dir: opts.config_dir.clone(),
            errors: vec![e],
        }
    })?;
    let plan = recovery::plan_with(root, &recovered, live.as_deref());
    let events = plan.apply(&mut store, &mut sched, now)?;
    tracing::info!(
        jobs = recovered.jobs.len(),
        adopted = plan.adopted.len(),
        ended_while_down = plan.observed.len(),
        lost = plan.lost.len(),
        pruned,
        ms = t0.elapsed().as_millis() as u64,
        "recovered the state"
    );
    for id in &plan.lost {
        tracing::warn!(job = %id, "supervisor vanished while no scheduler ran: requeued (LOST_ON_RESTART)");
    }
    let durable = Durable {
        lock,
        store,
        sched,
        events,
        adopted: plan.adopted.clone(),
        preemptions: recovered.preemptions,
        finished: recovered.history.iter().map(JobView::from).collect(),
        retain_days: days,
        config_hash: Some(loaded.hash.clone()),
        owner: recovered.owner.clone(),
    };
    Ok((durable, discovery))
}

/// Bind the control socket when asked to listen; with a socket group, the state directory
/// is opened to the group first.
fn bind_socket(
    opts: &BootOptions,
    root: &Path,
    loaded: &LoadedConfig,
) -> Result<Option<UnixListener>, BootError> {
    if !opts.listen {
        return Ok(None);
    }
    let group = loaded
        .config
        .env
        .control_socket
        .as_ref()
        .and_then(|c| c.group.clone());
    if group.is_some() {
        // The group must reach the socket: enter the directory, not list it.
        crate::exec::state::perms::prepare(root, true).map_err(|source| {
            BootError::Store(StoreError::StateDir {
                path: root.to_path_buf(),
                source,
            })
        })?;
    }
    Ok(Some(socket::bind(&opts.state, group.as_deref())?))
}

/// Bind the metrics address: `--metrics`, else the environment's `metrics.listen`, if any.
async fn bind_metrics(
    opts: &BootOptions,
    loaded: &LoadedConfig,
) -> Result<Option<TcpListener>, BootError> {
    let metrics_addr = opts.metrics.clone().or_else(|| {
        let m = loaded.config.env.metrics.as_ref();
        m.map(|m| m.listen.clone())
    });
    match &metrics_addr {
        Some(addr) => Ok(Some(
            crate::metrics::http::bind(addr)
                .await
                .map_err(BootError::Metrics)?,
        )),
        None => Ok(None),
    }
}

/// What runs beside the runtime once it answers: the metrics server, the utilisation
/// sampler and the config watcher (each only logged when it cannot start).
fn serve_sidecars(
    handle: &mut RuntimeHandle,
    opts: &BootOptions,
    root: &Path,
    metrics_listener: Option<TcpListener>,
    applied_hash: String,
) {
    if let Some(l) = metrics_listener {
        let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
        tracing::info!("serving Prometheus metrics at http://{addr}/metrics");
        handle.metrics_server = Some(tokio::spawn(crate::metrics::http::serve(
            l,
            handle.metrics.clone(),
        )));
    }
    if let Err(e) = super::runtime::usage::start(
        &root.join(crate::store::DB_FILE),
        handle.snapshots.clone(),
        opts.sample_every,
    ) {
        tracing::warn!("no utilisation history: {e}");
    }
    if opts.watch_config {
        // Edits of the config directory apply live; a watcher that cannot start leaves
        // the config as loaded (and `reload` over the socket still works).
        // The config as loaded was delivered above: the watcher delivers what changes.
        match Watcher::start_from(
            opts.config_dir.clone(),
            handle.config_sink(),
            Some(applied_hash),
        ) {
            Ok(w) => {
                handle.watching(w.refusals());
                handle.watcher = Some(WatcherGuard(w));
            }
            Err(e) => tracing::warn!("config changes will not be picked up: {e}"),
        }
    }
}
