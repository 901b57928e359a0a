//! The live scheduler: the runtime task that owns the core and carries its decisions out,
//! and the control socket that the CLI talks to.
//!
//! A durable scheduler (the one `serve` runs, and a console that finds none running) is
//! started with [`boot::start`]: state lock, database, recovery, runtime, control socket
//! and config watcher. When the state directory is taken ([`BootError::Locked`]), a
//! console attaches to the running scheduler with [`client::remote::attach`], which offers the
//! same snapshot receiver and `Input` sender over the socket.
//!
//! [`RuntimeHandle::start`] starts a runtime in memory only (no store, no lock); send [`Input`]s on
//! `handle.inputs`; watch `handle.snapshots` (a `tokio::sync::watch` of
//! `Arc<Snapshot>`), which follows changes within ~20 ms (send `Input::Sync` to wait for
//! one that includes everything sent before).
//!
//! ```no_run
//! # async fn demo(loaded: shareq::config::LoadedConfig) {
//! use shareq::exec::{Discovery, StateDir};
//! use shareq::server::{Input, RuntimeHandle, RuntimeOptions};
//! let opts = RuntimeOptions {
//!     state: StateDir::new("/tmp/shareq-state"),
//!     config_dir: "/etc/shareq".into(),
//!     supervisor_exe: std::env::current_exe().unwrap(), // the `shareq` binary
//!     discovery: Discovery::run(),
//! };
//! let handle = RuntimeHandle::start(opts, loaded);
//! let mut snaps = handle.snapshots.clone();
//! let (tx, rx) = tokio::sync::oneshot::channel();
//! let spec = shareq::model::JobSpec::new("train", "qs1", 1, 0);
//! handle.inputs.send(Input::Submit { spec, reply: Some(tx) }).unwrap();
//! let _id = rx.await.unwrap(); // Err(reason) when refused (here: no command)
//! snaps.changed().await.unwrap();
//! let _now = snaps.borrow().clone(); // Arc<Snapshot>
//! handle.shutdown(false).await; // jobs keep running under their supervisors
//! # }
//! ```

//! Three rooms and the door that starts them:
//!
//! - [`runtime`]: the runtime task that owns the core, and what it runs beside it
//!   (timers, carrying decisions out through `exec::backend`, forecasts, the event feed,
//!   the audit writer, the utilisation sampler, the state-directory watch);
//! - [`front`]: the control socket — who asks (`access`), what is allowed (`guard`), the
//!   wire protocol, connection limits;
//! - [`client`]: the other end of the socket (`Client`, and `remote::attach` for a
//!   console on a scheduler that runs elsewhere);
//! - [`boot`]: starts a durable scheduler (it alone knows all three rooms).
//!
//! Imports go one way: `boot` → `client` → `front` → `runtime`.

pub mod boot;
pub mod client;
pub mod front;
pub mod runtime;

pub use boot::{BootError, BootOptions};
pub use client::{Client, ClientError};
pub use front::protocol::{
    API_VERSION, ConfigWritten, ErrorCode, Hello, JobsAnswer, MAX_LINE, Request, Response,
    StatusAnswer,
};
pub use runtime::input::{CancelOutcome, Input};
pub use runtime::refusal::Refusal;
pub use runtime::{RuntimeHandle, RuntimeOptions};
