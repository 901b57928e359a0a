//! Followers of the decision stream (`shareq events`). The runtime publishes the lines of
//! each committed batch on an [`EventFeed`]; an `events` request is answered with the
//! stored lines from the database (its own read-only connection, on the blocking pool),
//! then, with `follow`, the live ones, without a gap or a repeat (by sequence number). A
//! follower that falls behind the feed reads what it missed from the database.

use crate::events::EventLine;
use crate::store::Store;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::sync::broadcast;

/// How many batches the feed keeps for a slow follower before it must re-read the
/// database.
const FEED_BATCHES: usize = 1024;

/// How many stored lines are read at once.
const PAGE: usize = 5_000;

/// Where the runtime publishes committed lines.
#[derive(Debug, Clone)]
pub struct EventFeed(broadcast::Sender<Arc<Vec<EventLine>>>);

impl Default for EventFeed {
    fn default() -> Self {
        EventFeed(broadcast::channel(FEED_BATCHES).0)
    }
}

impl EventFeed {
    /// Hand a committed batch's lines to the followers (nothing when none listens).
    pub fn publish(&self, lines: Vec<EventLine>) {
        if !lines.is_empty() && self.0.receiver_count() > 0 {
            let _ = self.0.send(Arc::new(lines));
        }
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<Vec<EventLine>>> {
        self.0.subscribe()
    }
}

/// What an `events` request asks for.
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    /// Lines after this sequence number.
    pub after: u64,
    /// Lines at or after this time (ms).
    pub since: i64,
    pub follow: bool,
}

/// Write the stored lines, then (with `follow`) the live ones, one JSON
/// [`EventLine`] per line, until the client or the runtime goes away.
pub async fn stream(
    mut w: tokio::net::unix::OwnedWriteHalf,
    root: PathBuf,
    feed: EventFeed,
    ask: Ask,
) -> std::io::Result<()> {
    // Subscribed before the database is read: nothing committed in between is missed.
    let mut live = ask.follow.then(|| feed.subscribe());
    let mut store = Some(open(root.clone()).await?);
    let mut last = ask.after;
    catch_up(&mut w, &mut store, &root, &mut last, ask.since).await?;
    let Some(rx) = live.as_mut() else {
        return w.shutdown().await;
    };
    store = None; // followers hold no connection while they wait
    loop {
        match rx.recv().await {
            Ok(batch) => {
                let mut out = Vec::new();
                for l in batch.iter() {
                    if l.seq > last && l.at >= ask.since {
                        push_line(&mut out, l)?;
                        last = l.seq;
                    }
                }
                if !out.is_empty() {
                    w.write_all(&out).await?;
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                catch_up(&mut w, &mut store, &root, &mut last, ask.since).await?;
                store = None;
            }
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}

async fn open(root: PathBuf) -> std::io::Result<Store> {
    tokio::task::spawn_blocking(move || Store::open_read_only(&root))
        .await
        .map_err(std::io::Error::other)?
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// Write every stored line after `last`.
async fn catch_up(
    w: &mut tokio::net::unix::OwnedWriteHalf,
    store: &mut Option<Store>,
    root: &std::path::Path,
    last: &mut u64,
    since: i64,
) -> std::io::Result<()> {
    let mut s = match store.take() {
        Some(s) => s,
        None => open(root.to_path_buf()).await?,
    };
    loop {
        let after = *last;
        let (back, page) = tokio::task::spawn_blocking(move || {
            let page = s.events_after(after, since, PAGE);
            (s, page)
        })
        .await
        .map_err(std::io::Error::other)?;
        s = back;
        let page = page.map_err(|e| std::io::Error::other(e.to_string()))?;
        let mut out = Vec::new();
        for l in &page {
            push_line(&mut out, l)?;
            *last = l.seq;
        }
        w.write_all(&out).await?;
        if page.len() < PAGE {
            *store = Some(s);
            return Ok(());
        }
    }
}

fn push_line(out: &mut Vec<u8>, l: &EventLine) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, l).map_err(std::io::Error::other)?;
    out.push(b'\n');
    Ok(())
}
