//! The control socket `<state>/shareq.sock`: accept connections, read size-limited JSON
//! lines, answer from the latest snapshot or through the runtime.

use super::guard::Guard;
use super::protocol::{JobsAnswer, MAX_LINE, Request, Response, StatusAnswer};
use crate::access::Caller;
use crate::exec::StateDir;
use crate::server::runtime::input::{Input, Span};
use crate::snapshot::{Snapshot, Update};
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
    let listener = UnixListener::bind(&path).map_err(bind_err)?;
    let (mode, gid) = super::guard::socket_mode(group).map_err(bind_err)?;
    if let Some(gid) = gid {
        nix::unistd::chown(&path, None, Some(gid)).map_err(|e| bind_err(e.into()))?;
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).map_err(bind_err)?;
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
    loop {
        match listener.accept().await {
            Ok((mut stream, _)) => {
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
                tokio::spawn(async move {
                    let _permit = permit;
                    if let Err(e) = connection(stream, inputs, snapshots, guard, limits.idle).await
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
    /// The client asked to subscribe: after the answers before it, stream the picture.
    Subscribe,
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
    stream: UnixStream,
    inputs: mpsc::UnboundedSender<Input>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    guard: Guard,
    idle: std::time::Duration,
) -> std::io::Result<()> {
    // Who is calling, from the kernel; never from the request.
    let cred = stream.peer_cred()?;
    let (uid, gid) = (cred.uid(), cred.gid());
    let caller = tokio::task::spawn_blocking(move || Caller::lookup(uid, gid))
        .await
        .map_err(std::io::Error::other)?;
    let (r, w) = stream.into_split();
    let (tx, rx) = mpsc::channel(PIPELINE_DEPTH);
    let reading = read_requests(
        BufReader::new(r),
        caller,
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
    caller: Caller,
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
            let e = Response::error(format!(
                "request too large: a request line may hold at most {MAX_LINE} bytes (1 MiB)"
            ));
            // The rest of the oversized line cannot be told from a next request.
            let _ = out.send(Outgoing::Answer(ready(e))).await;
            return Ok(());
        }
        let next = match serde_json::from_slice::<Request>(trim_line(&line)) {
            Ok(Request::Subscribe) => Outgoing::Subscribe,
            Ok(Request::Events {
                after,
                since,
                follow,
            }) => Outgoing::Events(
                crate::server::runtime::events::Ask {
                    after,
                    since,
                    follow,
                },
                guard.state_root(),
                guard.feed.clone(),
            ),
            _ => Outgoing::Answer(admit(&line, &caller, &guard, &inputs, &snapshots).await),
        };
        let subscribe = matches!(next, Outgoing::Subscribe | Outgoing::Events(..));
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
            Outgoing::Subscribe => return stream_updates(w, snapshots).await,
            Outgoing::Events(ask, root, feed) => {
                return crate::server::runtime::events::stream(w, root, feed, ask).await;
            }
        };
        let out = if answer.jobs.is_some() {
            // A long job list: write it out off the async workers.
            tokio::task::spawn_blocking(move || answer_bytes(&answer))
                .await
                .map_err(std::io::Error::other)?
        } else {
            answer_bytes(&answer)
        };
        w.write_all(&out).await?;
    }
    Ok(())
}

fn answer_bytes(answer: &Response) -> Vec<u8> {
    let mut out = serde_json::to_vec(answer).unwrap_or_else(|_| b"{\"ok\":false}".to_vec());
    out.push(b'\n');
    out
}

/// Write the whole picture, then after each change (throttled) what changed since the
/// version sent last; the whole picture again only if the change log no longer reaches
/// back that far.
async fn stream_updates(
    mut w: tokio::net::unix::OwnedWriteHalf,
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
) -> std::io::Result<()> {
    let every = std::time::Duration::from_millis(super::protocol::SUBSCRIBE_EVERY_MS);
    let mut sent: Option<Arc<Snapshot>> = None;
    loop {
        let snap = snapshots.borrow_and_update().clone();
        let update = snap.update_since(sent.as_deref());
        let out = match &update {
            // The whole queue: serialise it off the async workers.
            Update::Full(_) => tokio::task::spawn_blocking(move || update_bytes(&update))
                .await
                .map_err(std::io::Error::other)??,
            Update::Delta(_) => update_bytes(&update)?,
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
    let mut out = serde_json::to_vec(update).map_err(std::io::Error::other)?;
    out.push(b'\n');
    Ok(out)
}

fn ready(r: Response) -> Pending {
    Box::pin(std::future::ready(r))
}

fn gone() -> Response {
    Response::error("the scheduler is shutting down")
}

/// Parse a request and check it against the rules (SPEC §9: a refused request changes
/// nothing and is answered at once); hand what is allowed to the runtime, and record it
/// in the audit trail once accepted. Only a non-admin's request about a job waits here
/// (for the picture to include the job), which keeps the connection's requests in order.
async fn admit(
    line: &[u8],
    caller: &Caller,
    guard: &Guard,
    inputs: &mpsc::UnboundedSender<Input>,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
) -> Pending {
    let text = trim_line(line);
    if text.is_empty() {
        return ready(Response::error(
            "empty request: send one JSON object per line",
        ));
    }
    let mut req: Request = match serde_json::from_slice(text) {
        Ok(r) => r,
        Err(e) => return ready(Response::error(format!("malformed request: {e}"))),
    };
    if let Err(refused) = guard.admit(&mut req, caller, inputs, snapshots).await {
        return ready(refused);
    }
    let audited = matches!(
        req,
        Request::Submit { .. }
            | Request::Cancel { .. }
            | Request::Priority { .. }
            | Request::Reload
    );
    if !audited {
        return dispatch(req, &caller.name, guard, inputs, snapshots);
    }
    let pending = dispatch(req.clone(), &caller.name, guard, inputs, snapshots);
    let (guard, caller) = (guard.clone(), caller.clone());
    Box::pin(async move {
        let answer = pending.await;
        guard.record(&req, &caller, &answer);
        answer
    })
}

/// Hand a request to the runtime now; the returned future waits for its answer.
fn dispatch(
    req: Request,
    user: &str,
    guard: &Guard,
    inputs: &mpsc::UnboundedSender<Input>,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
) -> Pending {
    // Read-your-writes: the snapshot read for the answer must include everything sent
    // before, so a `Sync` is queued behind it now.
    let synced = if matches!(req, Request::Jobs { .. } | Request::Status) {
        let (tx, rx) = oneshot::channel();
        if inputs.send(Input::Sync { reply: tx }).is_err() {
            return ready(gone());
        }
        Some(rx)
    } else {
        None
    };
    match req {
        Request::Submit { job } => {
            let (read_at, metrics) = (std::time::Instant::now(), guard.metrics.clone());
            let (tx, rx) = oneshot::channel();
            let sent = inputs.send(Input::Submit {
                spec: job,
                reply: Some(tx),
            });
            if sent.is_err() {
                return ready(gone());
            }
            Box::pin(async move {
                let answer = rx.await;
                metrics.submit_took(read_at.elapsed());
                match answer {
                    Ok(Ok(id)) => Response {
                        id: Some(id),
                        ..Response::ok()
                    },
                    Ok(Err(e)) => Response::error(e),
                    Err(_) => gone(),
                }
            })
        }
        Request::Cancel { ids } => {
            if ids.is_empty() {
                return ready(Response::error("cancel: no job id given"));
            }
            let (tx, rx) = oneshot::channel();
            let by = user.to_string();
            let sent = inputs.send(Input::Cancel {
                ids,
                by,
                reply: Some(tx),
            });
            if sent.is_err() {
                return ready(gone());
            }
            Box::pin(async move {
                match rx.await {
                    Ok(outcomes) => {
                        let errors: Vec<String> =
                            outcomes.iter().filter_map(|o| o.error.clone()).collect();
                        Response {
                            ok: errors.is_empty(),
                            error: (!errors.is_empty()).then(|| errors.join("; ")),
                            cancelled: Some(outcomes),
                            ..Response::default()
                        }
                    }
                    Err(_) => gone(),
                }
            })
        }
        Request::Priority { id, priority } => {
            let (tx, rx) = oneshot::channel();
            let msg = Input::SetPriority {
                id,
                priority,
                reply: Some(tx),
            };
            if inputs.send(msg).is_err() {
                return ready(gone());
            }
            Box::pin(async move {
                match rx.await {
                    Ok(Ok(changed)) => Response {
                        changed: Some(changed),
                        ..Response::ok()
                    },
                    Ok(Err(e)) => Response::error(e),
                    Err(_) => gone(),
                }
            })
        }
        Request::Reload => {
            let (tx, rx) = oneshot::channel();
            if inputs.send(Input::Reload { reply: Some(tx) }).is_err() {
                return ready(gone());
            }
            Box::pin(async move {
                match rx.await {
                    Ok(Ok(())) => Response::ok(),
                    Ok(Err(e)) => Response::error(format!("config rejected:\n{e}")),
                    Err(_) => gone(),
                }
            })
        }
        Request::Jobs { all, since, until } => {
            let (inputs, snapshots) = (inputs.clone(), snapshots.clone());
            let span = Span { since, until };
            Box::pin(async move {
                if let Some(rx) = synced
                    && rx.await.is_err()
                {
                    return gone();
                }
                jobs(all, span, &inputs, &snapshots).await
            })
        }
        Request::History { window } => {
            let (tx, rx) = oneshot::channel();
            if inputs.send(Input::History { window, reply: tx }).is_err() {
                return ready(gone());
            }
            Box::pin(async move {
                match rx.await {
                    Ok(Ok(h)) => Response {
                        history: Some(h),
                        ..Response::ok()
                    },
                    Ok(Err(e)) => Response::error(e),
                    Err(_) => gone(),
                }
            })
        }
        Request::Subscribe | Request::Events { .. } => {
            ready(Response::error("subscribe: send it as the first request"))
        }
        Request::Predict { job } => {
            let (tx, rx) = oneshot::channel();
            if inputs
                .send(Input::Predict {
                    spec: job,
                    reply: tx,
                })
                .is_err()
            {
                return ready(gone());
            }
            Box::pin(async move {
                match rx.await {
                    Ok(p) => Response {
                        prediction: Some(p),
                        ..Response::ok()
                    },
                    Err(_) => gone(),
                }
            })
        }
        Request::Report {
            since,
            until,
            users,
        } => {
            let guard = guard.clone();
            Box::pin(async move { guard.report(since, until, users == Some(true)).await })
        }
        Request::Log {
            id,
            attempt,
            offset,
        } => {
            let guard = guard.clone();
            Box::pin(async move { guard.log(id, attempt, offset).await })
        }
        Request::Audit { limit } => {
            let guard = guard.clone();
            Box::pin(async move { guard.audit(limit).await })
        }
        Request::Status => {
            let snapshots = snapshots.clone();
            Box::pin(async move {
                if let Some(rx) = synced
                    && rx.await.is_err()
                {
                    return gone();
                }
                let s = snapshots.borrow().clone();
                Response {
                    status: Some(StatusAnswer {
                        env_name: s.env_name.clone(),
                        config: s.config.clone(),
                        units: s.units.clone(),
                        shares: s.shares.clone(),
                        lending: s.lending.clone(),
                        grace_period_seconds: s.grace_period_seconds,
                        queued: s.queue.len(),
                        running: s.running.len(),
                    }),
                    ..Response::ok()
                }
            })
        }
    }
}

/// The `jobs` answer: the live jobs from the latest snapshot, with `all` the finished
/// ones the runtime reads from its history.
async fn jobs(
    all: bool,
    span: Span,
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
    let answer = tokio::task::spawn_blocking(move || jobs_answer(&snap, finished, span)).await;
    match answer {
        Ok(jobs) => Response {
            jobs: Some(jobs),
            ..Response::ok()
        },
        Err(e) => Response::error(format!("cannot list the jobs: {e}")),
    }
}

/// The `jobs` answer from a snapshot and the finished jobs read for `--all`. A job that
/// finished between the snapshot and the history read is listed once, as finished (the
/// newer word).
fn jobs_answer(snap: &Snapshot, finished: Vec<crate::snapshot::JobView>, span: Span) -> JobsAnswer {
    let done: std::collections::HashSet<_> = finished.iter().map(|j| j.id).collect();
    let live = |j: &&crate::snapshot::JobView| !done.contains(&j.id) && span.contains(j);
    JobsAnswer {
        queue: snap
            .queue
            .iter()
            .filter(live)
            .map(|j| snap.queued_row(j))
            .collect(),
        running: snap.running.iter().filter(live).cloned().collect(),
        finished,
        preemptions: snap.preemptions.to_vec(),
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
    let guard = guard.observing(handle.events.clone(), handle.metrics.clone());
    let task = tokio::spawn(serve(
        listener,
        handle.inputs.clone(),
        handle.snapshots.clone(),
        guard,
        limits,
    ));
    handle.attach_server(task, path);
}
