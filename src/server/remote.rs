//! Attaching to a scheduler that runs elsewhere on this state directory (SPEC §8): a
//! second console shows the same live view and sends its actions to the running
//! scheduler through the control socket; it never schedules itself. The view arrives as
//! the whole picture once, then as deltas (`snapshot::Update`).
//!
//! [`attach`] returns the same pair a local [`super::RuntimeHandle`] offers — a
//! `watch::Receiver<Arc<Snapshot>>` and an `mpsc::UnboundedSender<Input>` — so a console
//! drives either one with the same code:
//!
//! ```no_run
//! # async fn demo(state: shareq::exec::StateDir) -> Result<(), shareq::server::ClientError> {
//! use shareq::server::{Input, remote};
//! let (mut snapshots, inputs) = remote::attach(&state).await?;
//! let (tx, rx) = tokio::sync::oneshot::channel();
//! let spec = shareq::model::JobSpec::new("train", "qs1", 1, 0);
//! inputs.send(Input::Submit { spec, reply: Some(tx) }).ok();
//! let _id = rx.await; // Ok(Ok(id)) or Ok(Err(why))
//! snapshots.changed().await.ok(); // Err once the scheduler is gone
//! # Ok(()) }
//! ```
//!
//! Inputs and what they become: `Submit`, `Cancel` (the `by` field is ignored: the
//! scheduler identifies the caller by its peer credentials), `SetPriority`, `Reload` → the
//! socket request of the same name; `Sync` → a `status` round trip (the scheduler
//! publishes everything sent before it); `AllJobs` → `jobs --all`; `Shutdown` → detach
//! (the scheduler keeps running); `Config` and `Exec` are the scheduler's own and are
//! dropped.

use super::client::ClientError;
use super::input::{CancelOutcome, Input};
use super::protocol::{Request, Response};
use crate::exec::StateDir;
use crate::snapshot::{JobView, Snapshot, Update};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, watch};

/// Attach to the scheduler running on `state`. The snapshot receiver follows the
/// scheduler's view (its sender is dropped, so `changed()` fails, when the scheduler goes
/// away); the input sender forwards actions to it, answering each `reply` with the
/// scheduler's answer.
pub async fn attach(
    state: &StateDir,
) -> Result<(watch::Receiver<Arc<Snapshot>>, mpsc::UnboundedSender<Input>), ClientError> {
    let socket = state.socket().display().to_string();
    let (mut sub_r, mut sub_w) = connect(state).await?;
    let io = |source| ClientError::Io {
        socket: socket.clone(),
        source,
    };
    sub_w
        .write_all(b"{\"op\":\"subscribe\"}\n")
        .await
        .map_err(io)?;
    let first = read_line(&mut sub_r).await.map_err(io)?;
    let mut current = match serde_json::from_str::<Update>(&first) {
        Ok(Update::Full(s)) => *s,
        Ok(Update::Delta(_)) => {
            return Err(ClientError::BadAnswer(
                "the scheduler's stream began with a delta, not the whole picture".into(),
            ));
        }
        Err(e) => return Err(ClientError::BadAnswer(e.to_string())),
    };
    let (snap_tx, snap_rx) = watch::channel(Arc::new(current.clone()));
    tokio::spawn(async move {
        let _keep = sub_w;
        loop {
            let line = match read_line(&mut sub_r).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::info!("the scheduler's snapshot stream ended: {e}");
                    return;
                }
            };
            // A delta is applied to the picture this side holds: the queue's chunks that
            // did not change stay shared with the previous snapshot.
            let applied = match serde_json::from_str::<Update>(&line) {
                Ok(Update::Full(s)) => {
                    current = *s;
                    Ok(())
                }
                Ok(Update::Delta(d)) => current.apply(*d),
                Err(e) => Err(format!("unreadable update from the scheduler: {e}")),
            };
            match applied {
                Ok(()) => drop(snap_tx.send_replace(Arc::new(current.clone()))),
                Err(e) => {
                    // Out of step with the stream: end it; the console sees the
                    // scheduler gone rather than a wrong picture.
                    tracing::warn!("{e}");
                    return;
                }
            }
            if snap_tx.is_closed() {
                return;
            }
        }
    });

    let (req_r, req_w) = connect(state).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(forward(rx, req_r, req_w));
    Ok((snap_rx, tx))
}

async fn connect(
    state: &StateDir,
) -> Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf), ClientError> {
    let path = state.socket();
    let socket = path.display().to_string();
    let stream = UnixStream::connect(&path)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ClientError::NotRunning {
                    socket: socket.clone(),
                    state: state.root().display().to_string(),
                }
            }
            _ => ClientError::Io {
                socket: socket.clone(),
                source: e,
            },
        })?;
    let (r, w) = stream.into_split();
    Ok((BufReader::new(r), w))
}

async fn read_line(r: &mut BufReader<OwnedReadHalf>) -> std::io::Result<String> {
    let mut line = String::new();
    if r.read_line(&mut line).await? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the scheduler closed the connection",
        ));
    }
    Ok(line)
}

/// Send one request, read its answer.
async fn call(
    r: &mut BufReader<OwnedReadHalf>,
    w: &mut OwnedWriteHalf,
    req: &Request,
) -> Result<Response, String> {
    let mut line = serde_json::to_vec(req).map_err(|e| e.to_string())?;
    line.push(b'\n');
    w.write_all(&line).await.map_err(|e| e.to_string())?;
    let answer = read_line(r).await.map_err(|e| e.to_string())?;
    serde_json::from_str(&answer).map_err(|e| format!("unreadable answer: {e}"))
}

/// Forward inputs to the scheduler, one request at a time, in order.
async fn forward(
    mut rx: mpsc::UnboundedReceiver<Input>,
    mut r: BufReader<OwnedReadHalf>,
    mut w: OwnedWriteHalf,
) {
    let gone = |e: String| format!("the scheduler is not reachable: {e}");
    while let Some(input) = rx.recv().await {
        match input {
            Input::Submit { spec, reply } => {
                let res = match call(&mut r, &mut w, &Request::Submit { job: spec }).await {
                    Ok(a) if a.ok => a.id.ok_or_else(|| "no id in the answer".to_string()),
                    Ok(a) => Err(a.error.unwrap_or_default()),
                    Err(e) => Err(gone(e)),
                };
                if let Some(tx) = reply {
                    let _ = tx.send(res);
                }
            }
            Input::Cancel { ids, reply, .. } => {
                let req = Request::Cancel { ids: ids.clone() };
                let res = match call(&mut r, &mut w, &req).await {
                    Ok(a) => match a.cancelled {
                        Some(v) => v,
                        None => outcomes_error(&ids, a.error.unwrap_or_default()),
                    },
                    Err(e) => outcomes_error(&ids, gone(e)),
                };
                if let Some(tx) = reply {
                    let _ = tx.send(res);
                }
            }
            Input::SetPriority {
                id,
                priority,
                reply,
            } => {
                let res = match call(&mut r, &mut w, &Request::Priority { id, priority }).await {
                    Ok(a) if a.ok => Ok(a.changed.unwrap_or(false)),
                    Ok(a) => Err(a.error.unwrap_or_default()),
                    Err(e) => Err(gone(e)),
                };
                if let Some(tx) = reply {
                    let _ = tx.send(res);
                }
            }
            Input::Reload { reply } => {
                let res = match call(&mut r, &mut w, &Request::Reload).await {
                    Ok(a) if a.ok => Ok(()),
                    Ok(a) => Err(a.error.unwrap_or_default()),
                    Err(e) => Err(gone(e)),
                };
                if let Some(tx) = reply {
                    let _ = tx.send(res);
                }
            }
            Input::Sync { reply } => {
                // `status` makes the scheduler publish everything sent before it.
                let _ = call(&mut r, &mut w, &Request::Status).await;
                let _ = reply.send(());
            }
            Input::AllJobs { reply } => {
                let mut all: Vec<JobView> = Vec::new();
                if let Ok(Response { jobs: Some(j), .. }) =
                    call(&mut r, &mut w, &Request::Jobs { all: true }).await
                {
                    all.extend(j.running);
                    all.extend(j.queue);
                    all.extend(j.finished);
                }
                let _ = reply.send(all);
            }
            Input::Shutdown { reply, .. } => {
                // Detach: the scheduler itself keeps running.
                if let Some(tx) = reply {
                    let _ = tx.send(());
                }
                return;
            }
            Input::Config(_) | Input::Exec(_) => {}
        }
    }
}

fn outcomes_error(ids: &[crate::model::JobId], why: String) -> Vec<CancelOutcome> {
    ids.iter()
        .map(|&id| CancelOutcome {
            id,
            cancelled: false,
            error: Some(why.clone()),
        })
        .collect()
}
