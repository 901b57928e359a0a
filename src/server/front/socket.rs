//! The control socket `<state>/shareq.sock`: accept connections, read size-limited JSON
//! lines, answer from the latest snapshot or through the runtime.

use super::guard::Guard;
#[cfg(doc)]
use super::protocol::JobsAnswer;
use super::protocol::{ErrorCode, MAX_LINE, Request, Response, StatusAnswer};
use crate::access::Caller;
use crate::exec::StateDir;
use crate::server::runtime::input::{CancelOutcome, CheckpointReport, Input, Span};
use crate::server::runtime::refusal::Refusal;
use crate::snapshot::{Snapshot, Update, Viewer};
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot, watch};

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("a scheduler is already listening on {0}")]
    AlreadyRunning(String),
    #[error("cannot listen on {path}: {source}")]
    Bind {
        path: String,
        source: std::io::Error,
    },
}

/// Bind the socket, with the mode SPEC §9 gives it (see `guard::socket_mode`). A stale
/// socket file left by a dead scheduler is replaced; a live one is an error.
pub fn bind(state: &StateDir, group: Option<&str>) -> Result<UnixListener, SocketError> {
    let path = state.socket();
    let shown = path.display().to_string();
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            return Err(SocketError::AlreadyRunning(shown));
        }
        let _ = std::fs::remove_file(&path);
    }
    let bind_err = |source| SocketError::Bind {
        path: shown.clone(),
        source,
    };
    // Bound under a name of its own, given its owner and mode, then renamed into place:
    // nobody reaches the socket before it has them, and a client that reaches it finds a
    // scheduler past its last step that could fail on the path.
    let (mode, gid) = super::guard::socket_mode(group).map_err(bind_err)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let fresh = path.with_file_name(format!(
        ".{}.{}",
        name.as_deref().unwrap_or("shareq.sock"),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&fresh);
    let listener = UnixListener::bind(&fresh).map_err(bind_err)?;
    let placed = (|| {
        if let Some(gid) = gid {
            nix::unistd::chown(&fresh, None, Some(gid))?;
        }
        std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(mode))?;
        std::fs::rename(&fresh, &path)
    })();
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&fresh);
        return Err(bind_err(e));
    }
    Ok(listener)
}

/// Accept connections until the listener fails; each gets its own task, up to the cap
/// of `limits` (see `conn_limits`): one over it is told so and closed.
pub async fn serve(
    listener: UnixListener,
    inputs: mpsc::UnboundedSender<Input>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    guard: Guard,
    limits: super::conn_limits::SocketLimits,
) {
    let cap = limits.cap();
    let permits = Arc::new(tokio::sync::Semaphore::new(cap));
    let per_user = crate::counted::Counts::default();
    loop {
        match listener.accept().await {
            Ok((mut stream, _)) => {
                // The global cap keeps descriptors for the scheduler's own work; one
                // user cannot reach it alone (the per-user cap, in `connection`).
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    tracing::debug!(cap, "control connection refused: too many");
                    tokio::spawn(async move {
                        let answer = super::conn_limits::refusal(cap);
                        let write = stream.write_all(&answer);
                        let _ =
                            tokio::time::timeout(std::time::Duration::from_secs(1), write).await;
                    });
                    continue;
                };
                let inputs = inputs.clone();
                let snapshots = snapshots.clone();
                let guard = guard.clone();
                let per_user = per_user.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    let idle = limits.idle;
                    if let Err(e) =
                        connection(stream, inputs, snapshots, guard, idle, per_user).await
                    {
                        tracing::debug!("control connection ended: {e}");
                    }
                });
            }
            Err(e) => {
                tracing::warn!("control socket accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// How many requests of one connection may wait for their answers at once.
const PIPELINE_DEPTH: usize = 1024;

/// An answer on its way: the request was handed to the runtime when it was read.
type Pending = Pin<Box<dyn Future<Output = Response> + Send>>;

/// What the reading half hands the writing half, in request order.
enum Outgoing {
    Answer(Pending),
    /// The client asked to subscribe: after the answers before it, stream the picture as
    /// this viewer may see it.
    Subscribe(Viewer),
    /// The client asked for the decision stream: after the answers before it, stream it.
    Events(
        crate::server::runtime::events::Ask,
        std::path::PathBuf,
        crate::server::runtime::events::EventFeed,
    ),
}

/// One connection. Requests may be pipelined: each is handed to the runtime as soon as
/// it is read (so the runtime sees them in order and records concurrent submits in one
/// commit), and the answers are written in request order.
async fn connection(
    mut stream: UnixStream,
    inputs: mpsc::UnboundedSender<Input>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    guard: Guard,
    idle: std::time::Duration,
    per_user: crate::counted::Counts<u32>,
) -> std::io::Result<()> {
    // Who is calling, from the kernel; never from the request.
    let cred = stream.peer_cred()?;
    let (uid, gid, pid) = (cred.uid(), cred.gid(), cred.pid());
    let caller = match Caller::cached(uid, gid) {
        Some(known) => known,
        None => tokio::task::spawn_blocking(move || Caller::remember(uid, gid))
            .await
            .map_err(std::io::Error::other)?,
    };
    // One user's connections are capped (`limits.maxConnectionsPerUser`); admins are not.
    let access = snapshots.borrow().access.clone();
    let _slot = if access.is_admin(&caller) {
        None
    } else {
        let most = access.limits.max_connections_per_user;
        match per_user.take(caller.uid, most) {
            Some(slot) => Some(slot),
            None => {
                let answer = super::conn_limits::user_refusal(&caller.name, most);
                let write = stream.write_all(&answer);
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), write).await;
                return Ok(());
            }
        }
    };
    let (r, w) = stream.into_split();
    let (tx, rx) = mpsc::channel(PIPELINE_DEPTH);
    let reading = read_requests(
        BufReader::new(r),
        (caller, pid),
        guard,
        inputs,
        snapshots.clone(),
        tx,
        idle,
    );
    let writing = write_answers(w, rx, snapshots);
    let (read, write) = tokio::join!(reading, writing);
    read.and(write)
}

async fn read_requests(
    mut r: BufReader<tokio::net::unix::OwnedReadHalf>,
    (caller, pid): (Caller, Option<i32>),
    guard: Guard,
    inputs: mpsc::UnboundedSender<Input>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    out: mpsc::Sender<Outgoing>,
    idle: std::time::Duration,
) -> std::io::Result<()> {
    loop {
        let mut line = Vec::new();
        let mut limited = (&mut r).take(MAX_LINE as u64 + 1);
        let read = limited.read_until(b'\n', &mut line);
        let Ok(n) = tokio::time::timeout(idle, read).await else {
            return Ok(()); // idle for too long: closed, its descriptor is free again
        };
        let n = n?;
        if n == 0 {
            return Ok(());
        }
        if line.len() > MAX_LINE {
            let e = Response::error(
                ErrorCode::Limit,
                format!(
                    "request too large: a request line may hold at most {MAX_LINE} bytes (1 MiB)"
                ),
            );
            // The rest of the oversized line cannot be told from a next request.
            let _ = out.send(Outgoing::Answer(ready(e))).await;
            return Ok(());
        }
        // Parsed once: a stream request switches the connection, any other is admitted.
        let next = match parse(&line) {
            Err(e) => {
                Outgoing::Answer(ready(Response::error(ErrorCode::BadRequest, e.to_string())))
            }
            Ok(Request::Subscribe) => Outgoing::Subscribe(viewer_of(&caller, &snapshots)),
            Ok(Request::Events {
                after,
                since,
                follow,
            }) => Outgoing::Events(
                crate::server::runtime::events::Ask {
                    after,
                    since,
                    follow,
                    patience: idle,
                },
                guard.state_root(),
                guard.feed.clone(),
            ),
            Ok(req) => {
                let who = (&caller, pid);
                Outgoing::Answer(admit(req, who, &guard, &inputs, &snapshots).await)
            }
        };
        let subscribe = matches!(next, Outgoing::Subscribe(_) | Outgoing::Events(..));
        if out.send(next).await.is_err() || subscribe {
            return Ok(()); // the writer is gone, or the connection now streams
        }
    }
}

async fn write_answers(
    mut w: tokio::net::unix::OwnedWriteHalf,
    mut answers: mpsc::Receiver<Outgoing>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
) -> std::io::Result<()> {
    while let Some(next) = answers.recv().await {
        let answer = match next {
            Outgoing::Answer(pending) => pending.await,
            Outgoing::Subscribe(viewer) => return stream_updates(w, snapshots, viewer).await,
            Outgoing::Events(ask, root, feed) => return events(w, root, feed, ask).await,
        };
        // A long job list comes written out already (off the async workers).
        let out = match answer.line {
            Some(line) => line,
            None => answer_bytes(&answer),
        };
        w.write_all(&out).await?;
    }
    Ok(())
}

/// The decision stream; a reader cut off for taking too little reads why as its last
/// line (`limit`, with the `after` to go on from).
async fn events(
    mut w: tokio::net::unix::OwnedWriteHalf,
    root: std::path::PathBuf,
    feed: crate::server::runtime::events::EventFeed,
    ask: crate::server::runtime::events::Ask,
) -> std::io::Result<()> {
    use crate::server::runtime::events::{StreamEnd, stream};
    match stream(&mut w, root, feed, ask).await {
        Ok(()) => Ok(()),
        Err(StreamEnd::Io(e)) => Err(e),
        Err(cut @ StreamEnd::SlowReader { .. }) => {
            tracing::info!("{cut}");
            // The stream kept room in the socket for this line: it does not wait.
            let line = answer_bytes(&Response::error(ErrorCode::Limit, cut.to_string()));
            let second = std::time::Duration::from_secs(1);
            let _ = tokio::time::timeout(second, w.write_all(&line)).await;
            let _ = tokio::time::timeout(second, w.shutdown()).await;
            Ok(())
        }
    }
}

fn answer_bytes(answer: &Response) -> Vec<u8> {
    let mut out = crate::wire::to_vec(answer).unwrap_or_else(|_| b"{\"ok\":false}".to_vec());
    out.push(b'\n');
    out
}

/// Write the whole picture, then after each change (throttled) what changed since the
/// version sent last; the whole picture again only if the change log no longer reaches
/// back that far.
async fn stream_updates(
    mut w: tokio::net::unix::OwnedWriteHalf,
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
    viewer: Viewer,
) -> std::io::Result<()> {
    let every = std::time::Duration::from_millis(super::protocol::SUBSCRIBE_EVERY_MS);
    let mut sent: Option<Arc<Snapshot>> = None;
    loop {
        let snap = snapshots.borrow_and_update().clone();
        let update = snap.update_since(sent.as_deref());
        let out = match &update {
            // The whole queue: serialise it off the async workers.
            Update::Full(_) => {
                tokio::task::spawn_blocking(move || update_bytes(&update.for_viewer(viewer)))
                    .await
                    .map_err(std::io::Error::other)??
            }
            Update::Delta(_) => update_bytes(&update.for_viewer(viewer))?,
        };
        w.write_all(&out).await?;
        sent = Some(snap);
        tokio::time::sleep(every).await;
        if snapshots.changed().await.is_err() {
            return Ok(()); // the runtime ended
        }
    }
}

fn update_bytes(update: &Update) -> std::io::Result<Vec<u8>> {
    let mut out = crate::wire::to_vec(update).map_err(std::io::Error::other)?;
    out.push(b'\n');
    Ok(out)
}

fn ready(r: Response) -> Pending {
    Box::pin(std::future::ready(r))
}

fn gone() -> Response {
    Response::shutting_down()
}

/// What is wrong with a request line (answered `bad_request`).
#[derive(Debug, thiserror::Error)]
enum BadLine {
    #[error("empty request: send one JSON object per line")]
    Empty,
    #[error("malformed request: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// One request line, or what is wrong with it.
fn parse(line: &[u8]) -> Result<Request, BadLine> {
    let text = trim_line(line);
    if text.is_empty() {
        return Err(BadLine::Empty);
    }
    Ok(serde_json::from_slice(text)?)
}

/// Check a request against the rules (SPEC §9: a refused request changes nothing and is
/// answered at once); hand what is allowed to the runtime, and record it in the audit
/// trail once accepted. Only a non-admin's request about a job waits here (for the
/// picture to include the job), which keeps the connection's requests in order.
async fn admit(
    mut req: Request,
    (caller, pid): (&Caller, Option<i32>),
    guard: &Guard,
    inputs: &mpsc::UnboundedSender<Input>,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
) -> Pending {
    if let Err(refused) = guard.admit(&mut req, caller, inputs, snapshots).await {
        return ready(refused);
    }
    let audited = matches!(
        req,
        Request::Submit { .. }
            | Request::Cancel { .. }
            | Request::Priority { .. }
            | Request::Reload
            | Request::PutConfig { .. }
    );
    if !audited {
        return dispatch(req, (caller, pid), guard, inputs, snapshots);
    }
    let pending = dispatch(req.clone(), (caller, pid), guard, inputs, snapshots);
    let (guard, caller) = (guard.clone(), caller.clone());
    Box::pin(async move {
        let answer = pending.await;
        guard.record(&req, &caller, &answer);
        answer
    })
}

/// Send the runtime an input that carries a reply channel, now; the returned future waits
/// for the reply and turns it into the answer (a runtime gone meanwhile: "shutting down").
fn ask<T: Send + 'static>(
    inputs: &mpsc::UnboundedSender<Input>,
    input: impl FnOnce(oneshot::Sender<T>) -> Input,
    answer: impl FnOnce(T) -> Response + Send + 'static,
) -> Pending {
    ask_then(inputs, input, |t| std::future::ready(answer(t)))
}

/// [`ask`] with an answer that takes its time (reads a snapshot, asks again).
fn ask_then<T: Send + 'static, F: Future<Output = Response> + Send + 'static>(
    inputs: &mpsc::UnboundedSender<Input>,
    input: impl FnOnce(oneshot::Sender<T>) -> Input,
    answer: impl FnOnce(T) -> F + Send + 'static,
) -> Pending {
    let (tx, rx) = oneshot::channel();
    if inputs.send(input(tx)).is_err() {
        return ready(gone());
    }
    Box::pin(async move {
        match rx.await {
            Ok(t) => answer(t).await,
            Err(_) => gone(),
        }
    })
}

/// A reply that is the runtime's answer or why it refused (the code from the refusal's
/// kind, [`ErrorCode::of`]).
fn or_refused<T>(ok: impl FnOnce(T) -> Response) -> impl FnOnce(Result<T, Refusal>) -> Response {
    move |r| match r {
        Ok(t) => ok(t),
        Err(refusal) => Response::refused(&refusal),
    }
}

/// Hand a request to the runtime now (or answer it from the picture or the records); the
/// returned future waits for its answer. One handler per family of requests.
fn dispatch(
    req: Request,
    (caller, pid): (&Caller, Option<i32>),
    guard: &Guard,
    inputs: &mpsc::UnboundedSender<Input>,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
) -> Pending {
    match req {
        Request::Submit { job } => submit(job, guard, inputs),
        Request::Cancel { ids } => cancel(ids, caller, guard, inputs, snapshots),
        Request::Priority { id, priority } => set_priority(id, priority, caller, inputs),
        Request::Reload => reload(inputs),
        Request::PutConfig {
            file,
            text,
            dry_run,
        } => put_config(file, text, dry_run, inputs),
        Request::History { window } => {
            let input = |tx| Input::History { window, reply: tx };
            let answer = or_refused(|h| Response {
                history: Some(h),
                ..Response::ok()
            });
            ask(inputs, input, answer)
        }
        Request::Predict { job } => {
            let input = |tx| Input::Predict {
                spec: job,
                reply: tx,
            };
            ask(inputs, input, |p| Response {
                prediction: Some(p),
                ..Response::ok()
            })
        }
        // Read-your-writes: the snapshot read for the answer must include everything
        // sent before, so a `Sync` is queued behind it now.
        Request::Jobs { all, since, until } => {
            let span = Span { since, until };
            list_jobs(all, span, caller, inputs, snapshots)
        }
        Request::Job { id } => one_job(id, caller, guard, inputs, snapshots),
        Request::Status => {
            let snapshots = snapshots.clone();
            after_sync(inputs, async move { status(&snapshots.borrow()) })
        }
        Request::Hello { api } => {
            let admin = snapshots.borrow().access.is_admin(caller);
            ready(super::api::hello(api, caller, admin))
        }
        Request::Report {
            since,
            until,
            users,
        } => report(since, until, users == Some(true), guard, snapshots),
        Request::Log {
            id,
            attempt,
            offset,
            rank,
        } => {
            let (guard, snapshots) = (guard.clone(), snapshots.clone());
            let at = super::guard::LogAt {
                attempt,
                offset,
                rank: rank.unwrap_or(0),
            };
            Box::pin(async move { guard.log(id, at, &snapshots).await })
        }
        Request::Whatif {
            config,
            current,
            since,
        } => Box::pin(super::admin_reads::whatif(
            guard.state_root(),
            config,
            current,
            since,
        )),
        Request::DryRun { config } => {
            Box::pin(super::admin_reads::dry_run(guard.state_root(), config))
        }
        Request::Audit { limit } => {
            let guard = guard.clone();
            Box::pin(async move { guard.audit(limit).await })
        }
        Request::Checkpoint {
            job,
            attempt,
            token,
            note,
        } => {
            let report = CheckpointReport {
                job,
                attempt,
                token,
                note,
                uid: caller.uid,
                user: caller.name.clone(),
                pid,
            };
            let input = |reply| Input::Checkpoint { report, reply };
            ask(
                inputs,
                input,
                or_refused(|c| Response {
                    checkpoint: Some(c),
                    ..Response::ok()
                }),
            )
        }
        Request::Subscribe | Request::Events { .. } => ready(Response::error(
            ErrorCode::BadRequest,
            "subscribe: send it as the first request",
        )),
    }
}

/// `submit`: the runtime's answer, its latency measured from the line's reading.
fn submit(
    job: crate::model::JobSpec,
    guard: &Guard,
    inputs: &mpsc::UnboundedSender<Input>,
) -> Pending {
    let (read_at, metrics) = (std::time::Instant::now(), guard.metrics.clone());
    let input = |tx| Input::Submit {
        spec: job,
        reply: Some(tx),
    };
    ask(inputs, input, move |r: Result<_, Refusal>| {
        metrics.submit_took(read_at.elapsed());
        or_refused(|id| Response {
            id: Some(id),
            ..Response::ok()
        })(r)
    })
}

/// `cancel`: what became of each id; an id the runtime could not cancel was never handed
/// out (`not_found`), unless the scheduler stopped before it could record the cancel.
fn cancel(
    ids: Vec<crate::model::JobId>,
    caller: &Caller,
    guard: &Guard,
    inputs: &mpsc::UnboundedSender<Input>,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
) -> Pending {
    if ids.is_empty() {
        return ready(Response::error(
            ErrorCode::BadRequest,
            "cancel: no job id given",
        ));
    }
    let by = caller.name.clone();
    let input = |tx| Input::Cancel {
        ids,
        by,
        reply: Some(tx),
    };
    let (stopped, snapshots) = (guard.clone(), snapshots.clone());
    ask(inputs, input, move |outcomes: Vec<CancelOutcome>| {
        let errors: Vec<String> = outcomes.iter().filter_map(|o| o.error.clone()).collect();
        // Refused while scheduling is paused (the runtime published the pause before it
        // answered): `unavailable`, as a submit then is.
        let paused = snapshots
            .borrow()
            .paused
            .is_some()
            .then_some(ErrorCode::Unavailable);
        let code = stopped.stopped().or(paused).unwrap_or(ErrorCode::NotFound);
        Response {
            ok: errors.is_empty(),
            error: (!errors.is_empty()).then(|| errors.join("; ")),
            code: (!errors.is_empty()).then_some(code),
            cancelled: Some(outcomes),
            ..Response::default()
        }
    })
}

/// `priority`: whether it changed (false: the job had ended).
fn set_priority(
    id: crate::model::JobId,
    priority: u32,
    caller: &Caller,
    inputs: &mpsc::UnboundedSender<Input>,
) -> Pending {
    let input = |tx| Input::SetPriority {
        id,
        priority,
        by: caller.name.clone(),
        reply: Some(tx),
    };
    let answer = or_refused(|changed| Response {
        changed: Some(changed),
        ..Response::ok()
    });
    ask(inputs, input, answer)
}

/// `reload`: a refused config's errors follow `config rejected:`.
fn reload(inputs: &mpsc::UnboundedSender<Input>) -> Pending {
    let input = |tx| Input::Reload { reply: Some(tx) };
    ask(inputs, input, move |r: Result<(), Refusal>| match r {
        Ok(()) => Response::ok(),
        Err(refusal) => Response {
            error: Some(format!("config rejected:\n{refusal}")),
            ..Response::refused(&refusal)
        },
    })
}

/// `put_config`: the file written and the config reloaded, or why not (a refused
/// config's errors follow `config rejected:`, as `reload` words them).
fn put_config(
    file: String,
    text: String,
    dry_run: bool,
    inputs: &mpsc::UnboundedSender<Input>,
) -> Pending {
    let input = |tx| Input::PutConfig {
        file,
        text,
        dry_run,
        reply: tx,
    };
    ask(inputs, input, move |r: Result<_, Refusal>| match r {
        Ok(written) => Response {
            config: Some(written),
            ..Response::ok()
        },
        Err(refusal @ Refusal::Config(_)) => Response {
            error: Some(format!("config rejected:\n{refusal}")),
            ..Response::refused(&refusal)
        },
        Err(refusal) => Response::refused(&refusal),
    })
}

/// `jobs`, from the picture once it includes everything sent before.
fn list_jobs(
    all: bool,
    span: Span,
    caller: &Caller,
    inputs: &mpsc::UnboundedSender<Input>,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
) -> Pending {
    let (inputs2, snapshots) = (inputs.clone(), snapshots.clone());
    let viewer = viewer_of(caller, &snapshots);
    after_sync(inputs, async move {
        jobs(all, span, viewer, &inputs2, &snapshots).await
    })
}

/// `job`: one job, from the picture once it includes everything sent before.
fn one_job(
    id: crate::model::JobId,
    caller: &Caller,
    guard: &Guard,
    inputs: &mpsc::UnboundedSender<Input>,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
) -> Pending {
    let (snapshots, root) = (snapshots.clone(), guard.state_root());
    let viewer = viewer_of(caller, &snapshots);
    after_sync(inputs, async move {
        let snap = snapshots.borrow().clone();
        super::api::job(id, &snap, root, viewer).await
    })
}

/// `report`: usage figures from the history, with usage against weight in the fair-share
/// shares (SPEC §12) as of now.
fn report(
    since: i64,
    until: i64,
    users: bool,
    guard: &Guard,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
) -> Pending {
    let guard = guard.clone();
    let fair: Vec<crate::sched::UserStanding> = snapshots
        .borrow()
        .users
        .iter()
        .filter(|u| u.fair)
        .cloned()
        .collect();
    Box::pin(async move { guard.report(since, until, users, fair).await })
}

/// Queue a `Sync` now; answer with `then` once the runtime has published everything sent
/// before it.
fn after_sync(
    inputs: &mpsc::UnboundedSender<Input>,
    then: impl Future<Output = Response> + Send + 'static,
) -> Pending {
    ask_then(inputs, |reply| Input::Sync { reply }, |()| then)
}

fn status(s: &Snapshot) -> Response {
    Response {
        status: Some(StatusAnswer {
            env_name: s.env_name.clone(),
            config: s.config.clone(),
            units: s.units.clone(),
            shares: s.shares.clone(),
            lending: s.lending.clone(),
            grace_period_seconds: s.grace_period_seconds,
            queued: s.queue.len(),
            pending: s.linked.pending.len(),
            running: s.running.len(),
            paused: s.paused.clone(),
            disk: s.disk.clone(),
        }),
        ..Response::ok()
    }
}

/// The `jobs` answer: the live jobs from the latest snapshot, with `all` the finished
/// ones the runtime reads from its history.
async fn jobs(
    all: bool,
    span: Span,
    viewer: Viewer,
    inputs: &mpsc::UnboundedSender<Input>,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
) -> Response {
    let snap = snapshots.borrow().clone();
    let finished = if all {
        let (tx, rx) = oneshot::channel();
        if inputs.send(Input::AllJobs { span, reply: tx }).is_err() {
            return gone();
        }
        match rx.await {
            Ok(mut v) => {
                v.retain(|j| j.state.is_finished());
                v.sort_by_key(|j| std::cmp::Reverse((j.finished, j.id)));
                v
            }
            Err(_) => return gone(),
        }
    } else {
        Vec::new()
    };
    // Writing out 100,000 rows takes a while: not on an async worker.
    let line = tokio::task::spawn_blocking(move || {
        let answer = JobsLine {
            done: finished.iter().map(|j| j.id).collect(),
            snap: &snap,
            finished: &finished,
            span,
            viewer,
        };
        let mut out = crate::wire::to_vec(&answer)?;
        out.push(b'\n');
        Ok::<_, serde_json::Error>(out)
    })
    .await;
    match line {
        Ok(Ok(line)) => Response {
            line: Some(line),
            ..Response::ok()
        },
        Ok(Err(e)) => Response::error(ErrorCode::Unavailable, format!("cannot list the jobs: {e}")),
        Err(e) => Response::error(ErrorCode::Unavailable, format!("cannot list the jobs: {e}")),
    }
}

/// The `jobs` answer, written out from a snapshot and the finished jobs read for `--all`
/// as the JSON of `Response { jobs: Some(JobsAnswer { .. }), ..Response::ok() }`, one row
/// at a time: no list of every job is made for it. A job that finished between the
/// snapshot and the history read is listed once, as finished (the newer word).
struct JobsLine<'a> {
    snap: &'a Snapshot,
    finished: &'a [crate::snapshot::JobView],
    done: std::collections::HashSet<crate::model::JobId>,
    span: Span,
    viewer: Viewer,
}

impl JobsLine<'_> {
    fn live(&self, j: &crate::snapshot::JobView) -> bool {
        !self.done.contains(&j.id) && self.span.contains(j)
    }
}

impl serde::Serialize for JobsLine<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct("Response", 2)?;
        m.serialize_field("ok", &true)?;
        m.serialize_field("jobs", &JobsRows(self))?;
        m.end()
    }
}

/// The `jobs` field of [`JobsLine`]: the fields of a [`JobsAnswer`], in its order.
struct JobsRows<'a>(&'a JobsLine<'a>);

impl serde::Serialize for JobsRows<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let (l, v) = (self.0, self.0.viewer);
        let mut queue: Vec<&crate::snapshot::JobView> =
            l.snap.queue.iter().filter(|j| l.live(j)).collect();
        // With fair share the stored order is not the scheduling order (SPEC §12).
        l.snap.scheduling_order(&mut queue);
        let running = l.snap.running.iter().filter(|j| l.live(j));
        let pending = l
            .snap
            .linked
            .pending
            .iter()
            .map(|j| &**j)
            .filter(|j| l.live(j));
        let arrays = l
            .snap
            .linked
            .arrays
            .iter()
            .map(|j| &**j)
            .filter(|j| l.live(j));
        let mut m = s.serialize_struct("JobsAnswer", 8)?;
        m.serialize_field(
            "queue",
            &Rows::new(queue.into_iter().map(|j| v.view(l.snap.queued_row(j)))),
        )?;
        m.serialize_field("running", &Rows::new(running.map(|j| Seen(v, j))))?;
        m.serialize_field("pending", &Rows::new(pending.map(|j| Seen(v, j))))?;
        m.serialize_field("arrays", &Rows::new(arrays.map(|j| Seen(v, j))))?;
        m.serialize_field(
            "finished",
            &Rows::new(l.finished.iter().map(|j| Seen(v, j))),
        )?;
        m.serialize_field("preemptions", &*l.snap.preemptions)?;
        m.serialize_field("callerIsAdmin", &v.admin)?;
        let sliced: Vec<&str> = l
            .snap
            .units
            .iter()
            .filter(|u| u.memory_gib.is_some())
            .map(|u| u.name.as_str())
            .collect();
        if !sliced.is_empty() {
            m.serialize_field("slicedUnits", &sliced)?;
        }
        m.end()
    }
}

/// A sequence written out as its iterator goes (once).
struct Rows<I>(std::cell::RefCell<Option<I>>);

impl<I> Rows<I> {
    fn new(rows: I) -> Rows<I> {
        Rows(std::cell::RefCell::new(Some(rows)))
    }
}

impl<I: Iterator<Item = T>, T: serde::Serialize> serde::Serialize for Rows<I> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.borrow_mut().take().into_iter().flatten())
    }
}

/// A job as a viewer may see it (`Viewer::view`), copied only when its command is hidden.
struct Seen<'a>(Viewer, &'a crate::snapshot::JobView);

impl serde::Serialize for Seen<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Seen(v, j) = self;
        if v.sees_command(j) || j.command.is_empty() {
            j.serialize(s)
        } else {
            v.view((*j).clone()).serialize(s)
        }
    }
}

/// Who the caller is to the picture (SPEC §9): an admin sees every command.
fn viewer_of(caller: &Caller, snapshots: &watch::Receiver<Arc<Snapshot>>) -> Viewer {
    Viewer {
        uid: caller.uid,
        admin: snapshots.borrow().access.is_admin(caller),
    }
}

fn trim_line(line: &[u8]) -> &[u8] {
    let mut t = line;
    while let Some((last, rest)) = t.split_last() {
        if last.is_ascii_whitespace() {
            t = rest;
        } else {
            break;
        }
    }
    t
}

/// Serve the control socket from `handle`'s runtime until it shuts down (the accept loop
/// and the socket file go with the handle).
pub(crate) fn serve_runtime(
    handle: &mut crate::server::runtime::RuntimeHandle,
    listener: tokio::net::UnixListener,
    path: std::path::PathBuf,
    guard: Guard,
    limits: super::conn_limits::SocketLimits,
) {
    let guard = guard.observing(
        handle.events.clone(),
        handle.metrics.clone(),
        handle.fatal.clone(),
    );
    let task = tokio::spawn(serve(
        listener,
        handle.inputs.clone(),
        handle.snapshots.clone(),
        guard,
        limits,
    ));
    handle.attach_server(task, path);
}
