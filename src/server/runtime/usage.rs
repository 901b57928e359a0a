//! The utilisation sampler: a thread of its own that, every `every` (30 s by default),
//! reads the newest published snapshot and writes one sample per share and unit to the
//! database (`store::usage`), then prunes samples older than `snapshot::usage::KEEP_DAYS` once an
//! hour. It never touches the runtime task: the scheduling pass and its commits do not
//! wait for it, and it costs one small transaction per interval (idle shares write no
//! row). Own, borrowed and lent are the core's figures, as the snapshot carries them
//! (`Sched::share_stats`).

use crate::snapshot::Snapshot;
use crate::store::usage::{self, Sample};
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often samples are taken unless `serve --sample-seconds` says otherwise.
pub const DEFAULT_EVERY: Duration =
    Duration::from_millis(crate::snapshot::usage::DEFAULT_EVERY_MS as u64);

/// How often old samples are pruned.
const PRUNE_EVERY_MS: i64 = 3_600_000;

/// Start sampling the snapshots of `snapshots` into the database at `db` (already created
/// and migrated). The thread ends when the snapshot sender is dropped (the runtime ended).
pub fn start(
    db: &Path,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    every: Duration,
) -> Result<(), rusqlite::Error> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    // NORMAL: the runtime's own commits (FULL) sync the log these rows are in.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    std::thread::Builder::new()
        .name("shareq-usage".into())
        .spawn(move || sample_loop(conn, snapshots, every.max(Duration::from_millis(100))))
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    Ok(())
}

fn sample_loop(mut conn: Connection, rx: watch::Receiver<Arc<Snapshot>>, every: Duration) {
    let every_ms = every.as_millis() as i64;
    let mut since = crate::exec::now_ms();
    let mut pruned_at: Option<i64> = None;
    loop {
        // Sleep in short steps, so that the thread ends soon after the runtime.
        let wake = std::time::Instant::now() + every;
        while std::time::Instant::now() < wake {
            if rx.has_changed().is_err() {
                return;
            }
            let left = wake.saturating_duration_since(std::time::Instant::now());
            std::thread::sleep(left.min(Duration::from_millis(250)));
        }
        let snap = rx.borrow().clone();
        if snap.version == 0 {
            continue;
        }
        let at = crate::exec::now_ms();
        let rows = samples(&snap, since, at);
        if let Err(e) = usage::write(&mut conn, at, every_ms, &rows) {
            tracing::warn!("cannot record the utilisation sample: {e}");
        }
        // The users' decayed usage, as of the snapshot (SPEC §12).
        if let Err(e) = crate::store::user_usage::write(&mut conn, &snap.users) {
            tracing::warn!("cannot record the users' usage: {e}");
        }
        since = at;
        if pruned_at.is_none_or(|t| at - t >= PRUNE_EVERY_MS) {
            pruned_at = Some(at);
            match usage::prune(&conn, at) {
                Ok(0) => {}
                Ok(n) => tracing::info!(rows = n, "old utilisation samples pruned"),
                Err(e) => tracing::warn!("cannot prune the utilisation samples: {e}"),
            }
        }
    }
}

/// One sample per share and unit of the snapshot at `at`; jobs count as started when
/// their (latest) attempt started after `since`.
pub fn samples(snap: &Snapshot, since: i64, at: i64) -> Vec<Sample> {
    let mut queued: HashMap<(&str, &str), u32> = HashMap::new();
    for j in snap.queue.iter() {
        *queued.entry((&j.share, &j.unit)).or_default() += j.quantity;
    }
    let mut started: HashMap<(&str, &str), (u32, i64)> = HashMap::new();
    for j in snap
        .running
        .iter()
        .chain(snap.finished.iter().map(|j| &**j))
    {
        if let Some(t) = j.started.filter(|&t| t > since && t <= at) {
            let e = started.entry((&j.share, &j.unit)).or_default();
            e.0 += 1;
            e.1 += (t - j.submitted).max(0);
        }
    }
    snap.shares
        .iter()
        .map(|s| {
            let key = (s.share.as_str(), s.unit.as_str());
            let (n, wait) = started.get(&key).copied().unwrap_or_default();
            Sample {
                share: s.share.clone(),
                unit: s.unit.clone(),
                limit: s.limit,
                own: s.usage - s.borrowed,
                borrowed: s.borrowed,
                lent: s.lent,
                queued_jobs: s.queued as u32,
                queued_gpus: queued.get(&key).copied().unwrap_or(0),
                wait_max_ms: s.oldest_queued.map_or(0, |t| (at - t).max(0)),
                started: n,
                started_wait_ms: wait,
                slice_gib: snap
                    .units
                    .iter()
                    .find(|u| u.name == s.unit)
                    .and_then(|u| u.memory_gib),
            }
        })
        .collect()
}
