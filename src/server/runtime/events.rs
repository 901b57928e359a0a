//! Followers of the decision stream (`shareq events`). The runtime publishes the lines of
//! each committed batch on an [`EventFeed`]; an `events` request is answered with the
//! stored lines from the database (its own read-only connection, on the blocking pool,
//! a page at a time), then, with `follow`, the live ones, without a gap or a repeat (by
//! sequence number). A follower that falls behind the feed reads what it missed from the
//! database.
//!
//! A stream holds at most [`BUFFER`] bytes for its reader: it writes only while the
//! reader's unread bytes in the socket leave room, and waits (holding no database
//! connection) while they do not. A reader that takes nothing for the patience it was
//! given while lines wait is cut off ([`StreamEnd::SlowReader`]): room for the line that
//! says so is always kept in the socket, so the reader finds it after what it was sent.
//! At most [`READING`] streams read the database at once.

use crate::events::EventLine;
use crate::store::Store;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::broadcast;

/// How many batches the feed keeps for a slow follower before it must re-read the
/// database (shared by every follower).
const FEED_BATCHES: usize = 1024;

/// The most bytes of lines one stream holds for its reader at once.
pub const BUFFER: usize = 64 * 1024;

/// How many stored lines are read at once (a line is about 600 bytes written: a page
/// fits one buffer).
const PAGE: usize = 64;

/// How many streams read the database at once (each read holds a connection and its
/// pages): the others wait their turn.
static READING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// Room kept free in the socket's send buffer for the line that says why a stream was
/// cut (and the kernel's own overhead of one more write).
const REASON_ROOM: usize = 8 * 1024;

/// How often a stream whose reader is behind looks whether it took something.
const LOOK_EVERY: Duration = Duration::from_millis(50);

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
    /// How long the reader may take nothing while lines wait for it (the control
    /// socket's idle limit, `serve --idle-timeout`).
    pub patience: Duration,
}

/// Why a stream ended before its end.
#[derive(Debug, thiserror::Error)]
pub enum StreamEnd {
    /// The reader took nothing for `waited` while lines waited for it: cut off, so that
    /// it holds no more of the scheduler's memory; it goes on with `after: last`.
    #[error(
        "events stream cut off: the reader took nothing for {} s while lines waited for it \
         (a stream holds at most {BUFFER} bytes for its reader); ask again with \
         \"after\": {last} to go on",
        .waited.as_secs()
    )]
    SlowReader { waited: Duration, last: u64 },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Write the stored lines, then (with `follow`) the live ones, one JSON
/// [`EventLine`] per line, until the client or the runtime goes away or the reader is
/// too slow.
pub async fn stream(
    w: &mut OwnedWriteHalf,
    root: PathBuf,
    feed: EventFeed,
    ask: Ask,
) -> Result<(), StreamEnd> {
    // Subscribed before the database is read: nothing committed in between is missed.
    let mut live = ask.follow.then(|| feed.subscribe());
    let mut sink = Sink::new(w, ask.patience, ask.after);
    catch_up(&mut sink, &root, ask.since).await?;
    let Some(rx) = live.as_mut() else {
        return Ok(sink.w.shutdown().await?);
    };
    loop {
        match rx.recv().await {
            Ok(batch) => send_lines(&mut sink, &batch, ask.since).await?,
            Err(broadcast::error::RecvError::Lagged(_)) => {
                catch_up(&mut sink, &root, ask.since).await?;
            }
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}

/// The writing half of a stream, with the bound on what waits for its reader.
struct Sink<'a> {
    w: &'a mut OwnedWriteHalf,
    /// The socket's send buffer, in the kernel's bytes (0: unknown).
    sndbuf: usize,
    patience: Duration,
    /// The sequence number of the last line written.
    last: u64,
}

impl<'a> Sink<'a> {
    fn new(w: &'a mut OwnedWriteHalf, patience: Duration, after: u64) -> Sink<'a> {
        let sock: &tokio::net::UnixStream = (*w).as_ref();
        let sndbuf =
            nix::sys::socket::getsockopt(sock, nix::sys::socket::sockopt::SndBuf).unwrap_or(0);
        Sink {
            w,
            sndbuf,
            patience,
            last: after,
        }
    }

    /// The bytes written that the reader has not taken yet, as the kernel counts them
    /// (0 when it cannot say).
    fn unread(&self) -> usize {
        let sock: &tokio::net::UnixStream = (*self.w).as_ref();
        let mut n: nix::libc::c_int = 0;
        // SAFETY: SIOCOUTQ (TIOCOUTQ) on a socket writes one int through the pointer,
        // which points at `n`, alive for the call.
        let r = unsafe { nix::libc::ioctl(sock.as_raw_fd(), nix::libc::TIOCOUTQ, &mut n) };
        if r < 0 { 0 } else { n.max(0) as usize }
    }

    /// Would `len` more bytes fit beside `unread` ones, with the reason's room kept?
    fn fits(&self, unread: usize, len: usize) -> bool {
        unread == 0 || unread + len + REASON_ROOM <= self.sndbuf
    }

    /// Write `out` (whole lines, the last one numbered `upto`) once it fits; a reader
    /// that takes nothing for the patience meanwhile ends the stream.
    async fn send(&mut self, out: &[u8], upto: u64) -> Result<(), StreamEnd> {
        if out.is_empty() {
            return Ok(());
        }
        let mut unread = self.unread();
        let mut taken_at = Instant::now();
        while !self.fits(unread, out.len()) {
            if taken_at.elapsed() >= self.patience {
                return Err(self.slow());
            }
            tokio::time::sleep(LOOK_EVERY).await;
            let now = self.unread();
            if now < unread {
                taken_at = Instant::now(); // it took something
            }
            unread = now;
        }
        match tokio::time::timeout(self.patience, self.w.write_all(out)).await {
            Ok(written) => written?,
            Err(_) => return Err(self.slow()),
        }
        self.last = upto;
        Ok(())
    }

    fn slow(&self) -> StreamEnd {
        StreamEnd::SlowReader {
            waited: self.patience,
            last: self.last,
        }
    }
}

/// Write `lines` after the last one written and at or after `since`, a buffer at a time.
async fn send_lines(sink: &mut Sink<'_>, lines: &[EventLine], since: i64) -> Result<(), StreamEnd> {
    let after = sink.last;
    let mut out = Vec::new();
    let mut upto = after;
    for l in lines.iter().filter(|l| l.seq > after && l.at >= since) {
        let start = out.len();
        push_line(&mut out, l)?;
        if out.len() > BUFFER && start > 0 {
            let next = out.split_off(start);
            sink.send(&out, upto).await?;
            out = next;
        }
        upto = l.seq;
    }
    sink.send(&out, upto).await
}

async fn open(root: PathBuf) -> std::io::Result<Store> {
    tokio::task::spawn_blocking(move || Store::open_read_only(&root))
        .await
        .map_err(std::io::Error::other)?
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// Write every stored line after the last one written, a page at a time. The database
/// connection is kept only while the reader keeps up: one that is behind is waited for
/// without it.
async fn catch_up(
    sink: &mut Sink<'_>,
    root: &std::path::Path,
    since: i64,
) -> Result<(), StreamEnd> {
    let mut store: Option<Store> = None;
    loop {
        let turn = READING.acquire().await.map_err(std::io::Error::other)?;
        let s = match store.take() {
            Some(s) => s,
            None => open(root.to_path_buf()).await?,
        };
        let after = sink.last;
        let (s, page) = tokio::task::spawn_blocking(move || {
            let page = s.events_after(after, since, PAGE);
            (s, page)
        })
        .await
        .map_err(std::io::Error::other)?;
        drop(turn);
        let page = page.map_err(|e| std::io::Error::other(e.to_string()))?;
        // The connection is kept for the next page while the reader has room for this one.
        if sink.fits(sink.unread(), BUFFER) {
            store = Some(s);
        }
        send_lines(sink, &page, since).await?;
        if page.len() < PAGE {
            return Ok(());
        }
    }
}

/// A line as the stream sends it: its keys' camelCase names beside the old ones
/// ([`crate::wire::line`]), also in lines stored before they were written so.
fn push_line(out: &mut Vec<u8>, l: &EventLine) -> std::io::Result<()> {
    let written = match crate::wire::line(&l.line) {
        std::borrow::Cow::Owned(line) => {
            crate::wire::to_writer(&mut *out, &EventLine { line, ..l.clone() })
        }
        std::borrow::Cow::Borrowed(_) => crate::wire::to_writer(&mut *out, l),
    };
    written.map_err(std::io::Error::other)?;
    out.push(b'\n');
    Ok(())
}
