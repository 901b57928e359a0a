//! Attaching to a scheduler that runs elsewhere on this state directory (SPEC §8): a
//! second console shows the same live view and sends its actions to the running
//! scheduler through the control socket; it never schedules itself. The view arrives as
//! the whole picture once, then as deltas (`snapshot::Update`).
//!
//! [`attach`] returns the same pair a local [`crate::server::RuntimeHandle`] offers — a
//! `watch::Receiver<Arc<Snapshot>>` and an `mpsc::UnboundedSender<Input>` — so a console
//! drives either one with the same code:
//!
//! ```no_run
//! # async fn demo(state: shareq::exec::StateDir) -> Result<(), shareq::server::ClientError> {
//! use shareq::server::Input;
//! use shareq::server::client::remote;
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
//! publishes everything sent before it); `AllJobs` → `jobs --all`; `History` → `history`;
//! `Shutdown` → detach
//! (the scheduler keeps running); `Config` and `Exec` are the scheduler's own and are
//! dropped.

use super::ClientError;
use crate::exec::StateDir;
use crate::server::front::protocol::{Request, Response};
use crate::server::runtime::input::{CancelOutcome, Input};
use crate::server::runtime::refusal::Refusal;
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
    let (sub_r, sub_w, mut current) = subscribe(state).await?;
    let (snap_tx, snap_rx) = watch::channel(Arc::new(current.clone()));
    let st = state.clone();
    tokio::spawn(async move {
        let mut sub_r = sub_r;
        let mut _keep = sub_w;
        loop {
            if follow(&mut sub_r, &mut current, &snap_tx).await.is_break() {
                return; // the console is gone
            }
            // The stream ended (the scheduler restarted, or went away): keep the last
            // picture, say so, and reconnect by ourselves.
            let since = crate::exec::now_ms();
            let mut stale = current.clone();
            stale.link_down_since = Some(since);
            snap_tx.send_replace(Arc::new(stale));
            loop {
                tokio::time::sleep(RECONNECT_EVERY).await;
                if snap_tx.is_closed() {
                    return;
                }
                if let Ok((r, w, full)) = subscribe(&st).await {
                    tracing::info!("reconnected to the scheduler");
                    (sub_r, _keep, current) = (r, w, full);
                    snap_tx.send_replace(Arc::new(current.clone()));
                    break;
                }
            }
        }
    });

    let (req_r, req_w) = connect(state).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    let link = Link {
        state: state.clone(),
        conn: Some((req_r, req_w)),
    };
    tokio::spawn(forward(rx, link));
    Ok((snap_rx, tx))
}

/// How often an attached console tries to reach a scheduler that went away.
const RECONNECT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

type Subscription = (BufReader<OwnedReadHalf>, OwnedWriteHalf, Snapshot);

/// Connect, ask for the snapshot stream and read its first, whole picture.
async fn subscribe(state: &StateDir) -> Result<Subscription, ClientError> {
    let socket = state.socket().display().to_string();
    let (mut sub_r, mut sub_w) = connect(state).await?;
    let served_by = sub_w
        .as_ref()
        .peer_cred()
        .ok()
        .and_then(|c| c.pid())
        .map(|pid| {
            let pid = pid as u32;
            crate::snapshot::ServedBy {
                pid,
                since: process_started_ms(pid),
            }
        });
    let io = |source| ClientError::Io {
        socket: socket.clone(),
        source,
    };
    sub_w
        .write_all(b"{\"op\":\"subscribe\"}\n")
        .await
        .map_err(io)?;
    let first = read_line(&mut sub_r).await.map_err(io)?;
    match serde_json::from_str::<Update>(&first) {
        Ok(Update::Full(mut s)) => {
            s.served_by = served_by;
            Ok((sub_r, sub_w, *s))
        }
        Ok(Update::Delta(_)) => Err(ClientError::BadAnswer(
            "the scheduler's stream began with a delta, not the whole picture".into(),
        )),
        Err(e) => Err(ClientError::BadAnswer(e.to_string())),
    }
}

/// Apply the stream's updates to `current` and publish each, until the stream ends
/// (`Continue`: reconnect) or nobody watches any more (`Break`).
async fn follow(
    sub_r: &mut BufReader<OwnedReadHalf>,
    current: &mut Snapshot,
    snap_tx: &watch::Sender<Arc<Snapshot>>,
) -> std::ops::ControlFlow<()> {
    loop {
        let line = match read_line(sub_r).await {
            Ok(l) => l,
            Err(e) => {
                tracing::info!("the scheduler's snapshot stream ended: {e}");
                return std::ops::ControlFlow::Continue(());
            }
        };
        // A delta is applied to the picture this side holds: the queue's chunks that
        // did not change stay shared with the previous snapshot.
        let applied = match serde_json::from_str::<Update>(&line) {
            Ok(Update::Full(s)) => {
                let by = current.served_by;
                *current = *s;
                current.served_by = by;
                Ok(())
            }
            Ok(Update::Delta(d)) => current.apply(*d).map_err(|e| e.to_string()),
            Err(e) => Err(format!("unreadable update from the scheduler: {e}")),
        };
        match applied {
            Ok(()) => drop(snap_tx.send_replace(Arc::new(current.clone()))),
            Err(e) => {
                // Out of step with the stream: start again from a whole picture.
                tracing::warn!("{e}");
                return std::ops::ControlFlow::Continue(());
            }
        }
        if snap_tx.is_closed() {
            return std::ops::ControlFlow::Break(());
        }
    }
}

/// When process `pid` started (ms since the epoch): its start in clock ticks after boot
/// (`/proc/PID/stat`, field 22) plus the boot time (`/proc/stat`'s `btime`).
fn process_started_ms(pid: u32) -> Option<i64> {
    let ticks = i64::try_from(crate::exec::containment::session::start_time(pid).ok()?).ok()?;
    let boot: i64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&h| h > 0)? as i64;
    Some(boot * 1000 + ticks * 1000 / hz)
}

async fn connect(
    state: &StateDir,
) -> Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf), ClientError> {
    let stream = UnixStream::connect(state.socket())
        .await
        .map_err(|e| ClientError::connecting(state, e))?;
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
) -> Result<Response, CallError> {
    let mut line = serde_json::to_vec(req).map_err(|e| CallError::Unsent(e.to_string()))?;
    line.push(b'\n');
    w.write_all(&line)
        .await
        .map_err(|e| CallError::Unsent(e.to_string()))?;
    let answer = read_line(r)
        .await
        .map_err(|e| CallError::Unanswered(e.to_string()))?;
    serde_json::from_str(&answer)
        .map_err(|e| CallError::Unanswered(format!("unreadable answer: {e}")))
}

/// Why a request got no answer: never sent (safe to send again), or sent and then the
/// answer was lost (it may have been carried out: not sent again).
#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error("{0}")]
    Unsent(String),
    #[error("{0}")]
    Unanswered(String),
}

/// The request connection of an attached console: opened again when the scheduler
/// restarted (the request is sent once more on the new connection).
struct Link {
    state: StateDir,
    conn: Option<(BufReader<OwnedReadHalf>, OwnedWriteHalf)>,
}

impl Link {
    async fn call(&mut self, req: &Request) -> Result<Response, CallError> {
        let mut last = CallError::Unsent(String::new());
        for _ in 0..2 {
            if self.conn.is_none() {
                match connect(&self.state).await {
                    Ok(c) => self.conn = Some(c),
                    Err(e) => return Err(CallError::Unsent(e.to_string())),
                }
            }
            let Some((r, w)) = self.conn.as_mut() else {
                continue;
            };
            match call(r, w, req).await {
                Ok(a) => return Ok(a),
                Err(unsent @ CallError::Unsent(_)) => {
                    self.conn = None;
                    last = unsent;
                }
                Err(unanswered @ CallError::Unanswered(_)) => {
                    self.conn = None;
                    return Err(unanswered);
                }
            }
        }
        Err(last)
    }
}

/// Forward inputs to the scheduler, one request at a time, in order.
async fn forward(mut rx: mpsc::UnboundedReceiver<Input>, mut link: Link) {
    let gone = |e: CallError| Refusal::Unreachable(e.to_string());
    while let Some(input) = rx.recv().await {
        match input {
            Input::Submit { spec, reply } => {
                let res = match link.call(&Request::Submit { job: spec }).await {
                    Ok(a) if a.ok => {
                        a.id.ok_or_else(|| Refusal::Relayed("no id in the answer".to_string()))
                    }
                    Ok(a) => Err(Refusal::Relayed(a.error.unwrap_or_default())),
                    Err(e) => Err(gone(e)),
                };
                if let Some(tx) = reply {
                    let _ = tx.send(res);
                }
            }
            Input::Cancel { ids, reply, .. } => {
                let req = Request::Cancel { ids: ids.clone() };
                let res = match link.call(&req).await {
                    Ok(a) => match a.cancelled {
                        Some(v) => v,
                        None => outcomes_error(&ids, a.error.unwrap_or_default()),
                    },
                    Err(e) => outcomes_error(&ids, gone(e).to_string()),
                };
                if let Some(tx) = reply {
                    let _ = tx.send(res);
                }
            }
            Input::SetPriority {
                id,
                priority,
                reply,
                ..
            } => {
                let res = match link.call(&Request::Priority { id, priority }).await {
                    Ok(a) if a.ok => Ok(a.changed.unwrap_or(false)),
                    Ok(a) => Err(Refusal::Relayed(a.error.unwrap_or_default())),
                    Err(e) => Err(gone(e)),
                };
                if let Some(tx) = reply {
                    let _ = tx.send(res);
                }
            }
            Input::Reload { reply } => {
                let res = match link.call(&Request::Reload).await {
                    Ok(a) if a.ok => Ok(()),
                    Ok(a) => Err(Refusal::Relayed(a.error.unwrap_or_default())),
                    Err(e) => Err(gone(e)),
                };
                if let Some(tx) = reply {
                    let _ = tx.send(res);
                }
            }
            Input::Sync { reply } => {
                // `status` makes the scheduler publish everything sent before it.
                let _ = link.call(&Request::Status).await;
                let _ = reply.send(());
            }
            Input::AllJobs { span, reply } => {
                let mut all: Vec<JobView> = Vec::new();
                let req = Request::Jobs {
                    all: true,
                    since: span.since,
                    until: span.until,
                };
                if let Ok(Response { jobs: Some(j), .. }) = link.call(&req).await {
                    all.extend(j.running);
                    all.extend(j.queue);
                    all.extend(j.finished);
                }
                let _ = reply.send(all);
            }
            Input::History { window, reply } => {
                let res = match link.call(&Request::History { window }).await {
                    Ok(Response {
                        history: Some(h), ..
                    }) => Ok(h),
                    Ok(a) => Err(Refusal::Relayed(
                        a.error.unwrap_or_else(|| "no history in the answer".into()),
                    )),
                    Err(e) => Err(gone(e)),
                };
                let _ = reply.send(res);
            }
            Input::Shutdown { reply, .. } => {
                // Detach: the scheduler itself keeps running.
                if let Some(tx) = reply {
                    let _ = tx.send(());
                }
                return;
            }
            Input::Predict { spec, reply } => {
                match link.call(&Request::Predict { job: spec }).await {
                    Ok(Response {
                        prediction: Some(p),
                        ..
                    }) => {
                        let _ = reply.send(p);
                    }
                    // Refused as the submit would be (not a member of the share): the form
                    // shows the refusal as its verdict.
                    Ok(Response {
                        ok: false,
                        error: Some(why),
                        ..
                    }) => {
                        let _ = reply.send(crate::forecast::Prediction::rejected(
                            why,
                            crate::exec::now_ms(),
                        ));
                    }
                    _ => {}
                }
            }
            Input::PutConfig {
                file,
                text,
                dry_run,
                reply,
            } => {
                let req = Request::PutConfig {
                    file,
                    text,
                    dry_run,
                };
                let res = match link.call(&req).await {
                    Ok(Response {
                        config: Some(c), ..
                    }) => Ok(c),
                    Ok(a) => Err(Refusal::Relayed(a.error.unwrap_or_default())),
                    Err(e) => Err(gone(e)),
                };
                let _ = reply.send(res);
            }
            // A report says who sent it by the kernel's word on the job's own connection:
            // it cannot be relayed.
            Input::Checkpoint { reply, .. } => {
                let why = "a checkpoint is reported by the job itself (shareq checkpoint), \
                           not through an attached console";
                let _ = reply.send(Err(Refusal::Relayed(why.to_string())));
            }
            Input::Config(_) | Input::Watching(_) | Input::Exec(_) => {}
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
