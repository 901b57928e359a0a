//! The control socket `<state>/shareq.sock`: accept connections, read size-limited JSON
//! lines, answer from the latest snapshot or through the runtime.

use super::input::Input;
use super::protocol::{JobsAnswer, MAX_LINE, Request, Response, StatusAnswer};
use crate::exec::StateDir;
use crate::snapshot::Snapshot;
use std::os::unix::fs::PermissionsExt;
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

/// Bind the socket (mode 0600). A stale socket file left by a dead scheduler is replaced;
/// a live one is an error.
pub fn bind(state: &StateDir) -> Result<UnixListener, SocketError> {
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
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(bind_err)?;
    Ok(listener)
}

/// Accept connections until the listener fails; each gets its own task, up to the cap
/// of `limits` (see `conn_limits`): one over it is told so and closed.
pub async fn serve(
    listener: UnixListener,
    inputs: mpsc::UnboundedSender<Input>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
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
                tokio::spawn(async move {
                    let _permit = permit;
                    if let Err(e) = connection(stream, inputs, snapshots, limits.idle).await {
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

/// The peer's user name, from the kernel's peer credentials.
fn peer_user(stream: &UnixStream) -> String {
    match stream.peer_cred() {
        Ok(cred) => {
            let uid = nix::unistd::Uid::from_raw(cred.uid());
            match nix::unistd::User::from_uid(uid) {
                Ok(Some(u)) => u.name,
                _ => format!("uid {}", cred.uid()),
            }
        }
        Err(_) => "unknown".to_string(),
    }
}

async fn connection(
    stream: UnixStream,
    inputs: mpsc::UnboundedSender<Input>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    idle: std::time::Duration,
) -> std::io::Result<()> {
    let user = peer_user(&stream);
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
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
        let too_long = line.len() > MAX_LINE;
        if !too_long
            && matches!(
                serde_json::from_slice::<Request>(trim_line(&line)),
                Ok(Request::Subscribe)
            )
        {
            return stream_snapshots(w, snapshots).await;
        }
        let answer = if too_long {
            Response::error(format!(
                "request too large: a request line may hold at most {MAX_LINE} bytes (1 MiB)"
            ))
        } else {
            answer(&line, &user, &inputs, &snapshots).await
        };
        let mut out = serde_json::to_vec(&answer).unwrap_or_else(|_| b"{\"ok\":false}".to_vec());
        out.push(b'\n');
        w.write_all(&out).await?;
        if too_long {
            // The rest of the oversized line cannot be told from a next request.
            return Ok(());
        }
    }
}

/// Write the current snapshot, then one after each change, throttled.
async fn stream_snapshots(
    mut w: tokio::net::unix::OwnedWriteHalf,
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
) -> std::io::Result<()> {
    let every = std::time::Duration::from_millis(super::protocol::SUBSCRIBE_EVERY_MS);
    loop {
        let snap = snapshots.borrow_and_update().clone();
        let mut out = serde_json::to_vec(&*snap).map_err(std::io::Error::other)?;
        out.push(b'\n');
        w.write_all(&out).await?;
        tokio::time::sleep(every).await;
        if snapshots.changed().await.is_err() {
            return Ok(()); // the runtime ended
        }
    }
}

async fn answer(
    line: &[u8],
    user: &str,
    inputs: &mpsc::UnboundedSender<Input>,
    snapshots: &watch::Receiver<Arc<Snapshot>>,
) -> Response {
    let text = trim_line(line);
    if text.is_empty() {
        return Response::error("empty request: send one JSON object per line");
    }
    let req: Request = match serde_json::from_slice(text) {
        Ok(r) => r,
        Err(e) => return Response::error(format!("malformed request: {e}")),
    };
    let gone = || Response::error("the scheduler is shutting down");
    if matches!(req, Request::Jobs { .. } | Request::Status) {
        // Read-your-writes: the snapshot must include everything sent before.
        let (tx, rx) = oneshot::channel();
        if inputs.send(Input::Sync { reply: tx }).is_err() || rx.await.is_err() {
            return gone();
        }
    }
    match req {
        Request::Submit { job } => {
            let (tx, rx) = oneshot::channel();
            if inputs
                .send(Input::Submit {
                    spec: job,
                    reply: Some(tx),
                })
                .is_err()
            {
                return gone();
            }
            match rx.await {
                Ok(Ok(id)) => Response {
                    id: Some(id),
                    ..Response::ok()
                },
                Ok(Err(e)) => Response::error(e),
                Err(_) => gone(),
            }
        }
        Request::Cancel { ids } => {
            if ids.is_empty() {
                return Response::error("cancel: no job id given");
            }
            let (tx, rx) = oneshot::channel();
            let by = user.to_string();
            if inputs
                .send(Input::Cancel {
                    ids,
                    by,
                    reply: Some(tx),
                })
                .is_err()
            {
                return gone();
            }
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
        }
        Request::Priority { id, priority } => {
            let (tx, rx) = oneshot::channel();
            let msg = Input::SetPriority {
                id,
                priority,
                reply: Some(tx),
            };
            if inputs.send(msg).is_err() {
                return gone();
            }
            match rx.await {
                Ok(Ok(changed)) => Response {
                    changed: Some(changed),
                    ..Response::ok()
                },
                Ok(Err(e)) => Response::error(e),
                Err(_) => gone(),
            }
        }
        Request::Reload => {
            let (tx, rx) = oneshot::channel();
            if inputs.send(Input::Reload { reply: Some(tx) }).is_err() {
                return gone();
            }
            match rx.await {
                Ok(Ok(())) => Response::ok(),
                Ok(Err(e)) => Response::error(format!("config rejected:\n{e}")),
                Err(_) => gone(),
            }
        }
        Request::Jobs { all } => {
            let snap = snapshots.borrow().clone();
            let finished = if all {
                let (tx, rx) = oneshot::channel();
                if inputs.send(Input::AllJobs { reply: tx }).is_err() {
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
            // A job that finished between the snapshot and the history read is listed
            // once, as finished (the newer word).
            let done: std::collections::HashSet<_> = finished.iter().map(|j| j.id).collect();
            let live = |v: &Vec<crate::snapshot::JobView>| {
                v.iter()
                    .filter(|j| !done.contains(&j.id))
                    .cloned()
                    .collect::<Vec<_>>()
            };
            Response {
                jobs: Some(JobsAnswer {
                    queue: live(&snap.queue),
                    running: live(&snap.running),
                    finished,
                    preemptions: snap.preemptions.clone(),
                }),
                ..Response::ok()
            }
        }
        Request::Subscribe => Response::error("subscribe: send it as the first request"),
        Request::Status => {
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
        }
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
