//! The utilisation history in the state database: per share and unit, samples of the GPUs
//! it uses within its limit (own), beyond it (borrowed) and lends, its queue and how long
//! its jobs wait, taken by `server::runtime::usage` at a fixed cadence and read back per window
//! (hour, day, week) in [`BUCKETS`] equal buckets.
//!
//! Tables (schema migration 5): `usage_ticks` has one row per sample instant (so a bucket
//! knows how many samples it had: none means no scheduler ran), `usage_samples` one row
//! per (instant, share, unit) that was not idle (an idle share writes nothing; reading
//! counts its missing rows as zeros), and `usage_coarse` the same rows summed per
//! [`COARSE_MS`] as they are written: an hour is read from the samples, a day and a week
//! from the sums (whose 12 minutes divide both of their buckets). Samples older than
//! [`KEEP_DAYS`] days are pruned. Migration 13 marks the rows of a unit sliced by memory
//! (SPEC §15) with its `memoryGiB` (`slice_gib`): their figures are GiB, read back as a
//! series of their own kind ([`ShareSeries::memory_gib`]); a database from before reads as
//! whole GPUs.

use crate::snapshot::usage::{BUCKETS, KEEP_DAYS, ShareSeries, UsageHistory, UsagePoint, Window};
use rusqlite::{Connection, params};
use std::collections::BTreeMap;

/// The span of one `usage_coarse` row: a day's bucket (12 min), and a seventh of a week's.
pub const COARSE_MS: i64 = 12 * 60_000;

/// One sample of one share on one unit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sample {
    pub share: String,
    pub unit: String,
    /// Its guarantee (`maxCapacity`) then.
    pub limit: u32,
    /// GPUs held within its limit (usage − borrowed).
    pub own: u32,
    /// GPUs held beyond its limit.
    pub borrowed: u32,
    /// Its idle guarantee used by borrowers.
    pub lent: u32,
    pub queued_jobs: u32,
    /// GPUs its queued jobs ask for.
    pub queued_gpus: u32,
    /// How long its longest-waiting queued job had waited (ms; 0: none queued).
    pub wait_max_ms: i64,
    /// Jobs that started since the previous sample, and the sum of their waits (ms from
    /// submission to that start).
    pub started: u32,
    pub started_wait_ms: i64,
    /// A unit sliced by memory (SPEC §15): the GiB of each device; the figures above
    /// are then GiB, not GPUs.
    pub slice_gib: Option<u32>,
}

impl Sample {
    /// Nothing held, lent, queued or started: not written.
    pub fn is_idle(&self) -> bool {
        self.own == 0
            && self.borrowed == 0
            && self.lent == 0
            && self.queued_jobs == 0
            && self.started == 0
    }
}

/// Store the samples of one instant: a tick, and a row per sample that is not idle.
pub fn write(
    conn: &mut Connection,
    at: i64,
    every_ms: i64,
    samples: &[Sample],
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    tx.execute(
        "INSERT OR REPLACE INTO usage_ticks (at, every_ms) VALUES (?1, ?2)",
        params![at, every_ms],
    )?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT OR REPLACE INTO usage_samples (at, share, unit, limit_gpus, own, borrowed,
                 lent, queued_jobs, queued_gpus, wait_max, started, started_wait, slice_gib)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        )?;
        let mut coarse = tx.prepare_cached(
            "INSERT INTO usage_coarse (bucket, share, unit, limit_gpus, last_at, own, borrowed,
                 lent, queued_gpus, wait_max, started, started_wait, slice_gib)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
             ON CONFLICT (bucket, share, unit) DO UPDATE SET
                 limit_gpus = excluded.limit_gpus, last_at = excluded.last_at,
                 slice_gib = excluded.slice_gib,
                 own = own + excluded.own, borrowed = borrowed + excluded.borrowed,
                 lent = lent + excluded.lent, queued_gpus = queued_gpus + excluded.queued_gpus,
                 wait_max = max(wait_max, excluded.wait_max),
                 started = started + excluded.started,
                 started_wait = started_wait + excluded.started_wait",
        )?;
        let bucket = at.div_euclid(COARSE_MS) * COARSE_MS;
        for s in samples.iter().filter(|s| !s.is_idle()) {
            coarse.execute(params![
                bucket,
                s.share,
                s.unit,
                s.limit,
                at,
                s.own,
                s.borrowed,
                s.lent,
                s.queued_gpus,
                s.wait_max_ms,
                s.started,
                s.started_wait_ms,
                s.slice_gib
            ])?;
            stmt.execute(params![
                at,
                s.share,
                s.unit,
                s.limit,
                s.own,
                s.borrowed,
                s.lent,
                s.queued_jobs,
                s.queued_gpus,
                s.wait_max_ms,
                s.started,
                s.started_wait_ms,
                s.slice_gib
            ])?;
        }
    }
    tx.commit()
}

/// Drop samples older than [`KEEP_DAYS`]; returns how many rows went.
pub fn prune(conn: &Connection, now: i64) -> rusqlite::Result<usize> {
    let before = now - KEEP_DAYS * 24 * 3_600_000;
    let n = conn.execute("DELETE FROM usage_samples WHERE at < ?1", [before])?;
    let n = n + conn.execute("DELETE FROM usage_coarse WHERE bucket < ?1", [before])?;
    Ok(n + conn.execute("DELETE FROM usage_ticks WHERE at < ?1", [before])?)
}

/// The window ending at `now`, bucketed. Bucket edges are multiples of the bucket length,
/// so that two reads a little apart cut the same buckets.
pub fn read(conn: &Connection, window: Window, now: i64) -> rusqlite::Result<UsageHistory> {
    let coarse = (window.ms() / BUCKETS as i64) % COARSE_MS == 0;
    read_from(conn, window, now, coarse)
}

/// [`read`] from the 12-minute sums (`coarse`) or from the samples.
fn read_from(
    conn: &Connection,
    window: Window,
    now: i64,
    coarse: bool,
) -> rusqlite::Result<UsageHistory> {
    let bucket_ms = window.ms() / BUCKETS as i64;
    let to = (now.div_euclid(bucket_ms) + 1) * bucket_ms;
    let from = to - window.ms();
    let mut samples = vec![0u32; BUCKETS];
    let mut stmt = conn.prepare_cached(
        "SELECT (at - ?1) / ?2, count(*) FROM usage_ticks WHERE at >= ?1 AND at < ?3 GROUP BY 1",
    )?;
    let mut rows = stmt.query(params![from, bucket_ms, to])?;
    while let Some(r) = rows.next()? {
        let (b, n): (i64, u32) = (r.get(0)?, r.get(1)?);
        if let Some(slot) = usize::try_from(b).ok().and_then(|b| samples.get_mut(b)) {
            *slot = n;
        }
    }
    let every_ms: i64 = conn
        .query_row(
            "SELECT every_ms FROM usage_ticks WHERE at < ?1 ORDER BY at DESC LIMIT 1",
            [to],
            |r| r.get(0),
        )
        .unwrap_or(0);
    let mut series: BTreeMap<(String, String), ShareSeries> = BTreeMap::new();
    // A database from before migration 13 (read without a scheduler to migrate it) has
    // no `slice_gib`: its samples are whole GPUs.
    let slice_gib = if has_slice_gib(conn)? {
        "slice_gib"
    } else {
        "NULL"
    };
    // An hour from the samples themselves; a day or a week from the 12-minute sums. The
    // bare `limit_gpus` and `slice_gib` are the newest row's (SQLite takes them from the
    // row of `max`).
    let sql = if coarse {
        format!(
            "SELECT (bucket - ?1) / ?2, share, unit, sum(own), sum(borrowed), sum(lent),
                sum(queued_gpus), max(wait_max), sum(started), sum(started_wait),
                max(last_at), limit_gpus, {slice_gib}
         FROM usage_coarse WHERE bucket >= ?1 AND bucket < ?3
         GROUP BY 1, 2, 3 ORDER BY 2, 3, 1"
        )
    } else {
        format!(
            "SELECT (at - ?1) / ?2, share, unit, sum(own), sum(borrowed), sum(lent),
                sum(queued_gpus), max(wait_max), sum(started), sum(started_wait),
                max(at), limit_gpus, {slice_gib}
         FROM usage_samples WHERE at >= ?1 AND at < ?3
         GROUP BY 1, 2, 3 ORDER BY 2, 3, 1"
        )
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(params![from, bucket_ms, to])?;
    let mut newest: BTreeMap<(String, String), i64> = BTreeMap::new();
    while let Some(r) = rows.next()? {
        let b: i64 = r.get(0)?;
        let Some(b) = usize::try_from(b).ok().filter(|&b| b < BUCKETS) else {
            continue;
        };
        let (share, unit): (String, String) = (r.get(1)?, r.get(2)?);
        let n = f64::from(samples[b].max(1));
        let avg = |v: i64| v as f64 / n;
        let key = (share.clone(), unit.clone());
        let at: i64 = r.get(10)?;
        let limit: u32 = r.get(11)?;
        let memory_gib: Option<u32> = r.get(12)?;
        let s = series.entry(key.clone()).or_insert_with(|| ShareSeries {
            share,
            unit,
            limit,
            memory_gib,
            points: vec![UsagePoint::default(); BUCKETS],
        });
        if newest.get(&key).is_none_or(|&t| at >= t) {
            newest.insert(key, at);
            s.limit = limit;
            s.memory_gib = memory_gib;
        }
        s.points[b] = UsagePoint {
            own: avg(r.get(3)?),
            borrowed: avg(r.get(4)?),
            lent: avg(r.get(5)?),
            queued_gpus: avg(r.get(6)?),
            wait_max_ms: r.get(7)?,
            started: r.get(8)?,
            started_wait_ms: r.get(9)?,
        };
    }
    Ok(UsageHistory {
        window,
        from,
        to,
        bucket_ms,
        samples,
        every_ms,
        series: series.into_values().collect(),
    })
}

/// Does `usage_samples` have migration 13's `slice_gib` (a database read as it is, not
/// migrated, may be older)?
fn has_slice_gib(conn: &Connection) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare_cached("SELECT name FROM pragma_table_info('usage_samples')")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        if r.get::<_, String>(0)? == "slice_gib" {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Read a window from the database file at `db` through a read-only connection of its
/// own (the runtime's is busy with its own commits).
pub fn read_file(db: &std::path::Path, window: Window, now: i64) -> rusqlite::Result<UsageHistory> {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(db, flags)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    read(&conn, window, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        drop(crate::store::Store::open(dir.path()).unwrap());
        let conn = Connection::open(dir.path().join(crate::store::DB_FILE)).unwrap();
        (dir, conn)
    }

    fn sample(share: &str, own: u32, borrowed: u32) -> Sample {
        Sample {
            share: share.into(),
            unit: "h100".into(),
            limit: 2,
            own,
            borrowed,
            ..Sample::default()
        }
    }

    #[test]
    fn buckets_average_over_their_samples_and_idle_rows_count_as_zero() {
        let (_d, mut conn) = db();
        let now = 100 * H;
        let hour = Window::Hour;
        let bucket = hour.ms() / BUCKETS as i64;
        // Two samples in one bucket: A uses 2 then 0 (idle, not written): average 1.
        let t0 = (now / bucket - 10) * bucket;
        write(
            &mut conn,
            t0,
            15_000,
            &[sample("A", 2, 1), sample("B", 0, 0)],
        )
        .unwrap();
        write(&mut conn, t0 + 15_000, 15_000, &[sample("A", 0, 0)]).unwrap();
        let h = read(&conn, hour, now).unwrap();
        assert_eq!(h.samples.iter().sum::<u32>(), 2);
        assert_eq!(h.series.len(), 1, "B was idle throughout: {:?}", h.series);
        let a = &h.series[0];
        let b = h.samples.iter().position(|&n| n == 2).unwrap();
        assert_eq!(a.points[b].own, 1.0);
        assert_eq!(a.points[b].borrowed, 0.5);
        assert_eq!(h.bucket_start(b), t0);
        assert_eq!(h.every_ms, 15_000);
        // Buckets without a tick: no scheduler ran then.
        assert_eq!(h.samples.iter().filter(|&&n| n == 0).count(), BUCKETS - 1);
        // Outside the hour, inside the week.
        assert!(read(&conn, hour, now + 2 * H).unwrap().is_empty());
        let w = read(&conn, Window::Week, now + 2 * H).unwrap();
        assert!(!w.is_empty());
        assert_eq!(w.series[0].share, "A");
    }

    #[test]
    fn a_day_and_a_week_read_from_the_sums_as_from_the_samples() {
        let (_d, mut conn) = db();
        let now = 1000 * H + 123_456;
        // Two days of samples every 5 minutes, with an idle stretch and changing figures.
        let mut at = now - 48 * H;
        let mut i = 0u32;
        while at <= now {
            let rows = [
                Sample {
                    wait_max_ms: i64::from(i % 13) * 60_000,
                    started: i % 3,
                    started_wait_ms: i64::from(i % 3) * 10_000,
                    queued_jobs: 1,
                    queued_gpus: i % 4,
                    limit: 2 + i / 300,
                    ..sample("A", i % 3, i % 2)
                },
                sample("B", if i % 50 < 10 { 0 } else { 2 }, 0),
            ];
            write(&mut conn, at, 300_000, &rows).unwrap();
            at += 300_000;
            i += 1;
        }
        for w in [Window::Day, Window::Week] {
            let sums = read_from(&conn, w, now, true).unwrap();
            let raw = read_from(&conn, w, now, false).unwrap();
            assert_eq!(sums.samples, raw.samples, "{w:?}");
            assert_eq!(sums.series.len(), raw.series.len());
            for (a, b) in sums.series.iter().zip(&raw.series) {
                assert_eq!((&a.share, &a.unit, a.limit), (&b.share, &b.unit, b.limit));
                for (p, q) in a.points.iter().zip(&b.points) {
                    assert!((p.own - q.own).abs() < 1e-9, "{w:?} {p:?} {q:?}");
                    assert!((p.borrowed - q.borrowed).abs() < 1e-9);
                    assert!((p.queued_gpus - q.queued_gpus).abs() < 1e-9);
                    assert_eq!(
                        (p.wait_max_ms, p.started, p.started_wait_ms),
                        (q.wait_max_ms, q.started, q.started_wait_ms)
                    );
                }
            }
            assert!(
                sums.series
                    .iter()
                    .any(|s| s.points.iter().any(|p| p.own > 0.0))
            );
        }
    }

    /// SPEC §15: a sliced unit's rows say so, and read back as a series of GiB (from the
    /// samples and from the 12-minute sums alike), beside the same share's GPUs.
    #[test]
    fn a_sliced_units_samples_read_back_as_gib() {
        let (_d, mut conn) = db();
        let now = 100 * H;
        let gib = Sample {
            unit: "h100-mem".into(),
            limit: 80,
            slice_gib: Some(80),
            ..sample("A", 40, 20)
        };
        write(&mut conn, now - 60_000, 30_000, &[sample("A", 1, 0), gib]).unwrap();
        for coarse in [false, true] {
            let h = read_from(&conn, Window::Day, now, coarse).unwrap();
            let kinds: Vec<(&str, Option<u32>, u32)> = h
                .series
                .iter()
                .map(|s| (s.unit.as_str(), s.memory_gib, s.limit))
                .collect();
            assert_eq!(
                kinds,
                vec![("h100", None, 2), ("h100-mem", Some(80), 80)],
                "coarse {coarse}"
            );
            let own: f64 = h.series[1].points.iter().map(|p| p.own).sum();
            assert_eq!(own, 40.0);
        }
    }

    /// A database from before migration 13 reads as whole GPUs, as it is (the CLI reads it
    /// without a scheduler to migrate it) and once migrated.
    #[test]
    fn a_database_from_before_slices_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        drop(crate::store::Store::open(dir.path()).unwrap());
        let path = dir.path().join(crate::store::DB_FILE);
        let now = 100 * H;
        {
            let mut conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "ALTER TABLE usage_samples DROP COLUMN slice_gib;
                 ALTER TABLE usage_coarse DROP COLUMN slice_gib;
                 ALTER TABLE jobs DROP COLUMN more_nodes;
                 ALTER TABLE attempts DROP COLUMN more_nodes;
                 PRAGMA user_version = 12;",
            )
            .unwrap();
            // A sample as version 12 wrote it.
            let tx = conn.transaction().unwrap();
            tx.execute_batch(&format!(
                "INSERT INTO usage_ticks VALUES ({t}, 30000);
                 INSERT INTO usage_samples VALUES ({t}, 'A', 'h100', 2, 1, 1, 0, 0, 0, 0, 0, 0);",
                t = now - 60_000
            ))
            .unwrap();
            tx.commit().unwrap();
        }
        let h = read_file(&path, Window::Hour, now).unwrap();
        assert_eq!(h.series.len(), 1);
        assert_eq!(h.series[0].memory_gib, None);
        assert_eq!(h.series[0].points.iter().map(|p| p.own).sum::<f64>(), 1.0);
        // The scheduler migrates it: the old row stays whole GPUs, new rows say GiB.
        drop(crate::store::Store::open(dir.path()).unwrap());
        let mut conn = Connection::open(&path).unwrap();
        let gib = Sample {
            unit: "h100-mem".into(),
            slice_gib: Some(80),
            ..sample("A", 20, 0)
        };
        write(&mut conn, now - 30_000, 30_000, &[gib]).unwrap();
        let h = read(&conn, Window::Hour, now).unwrap();
        let kinds: Vec<Option<u32>> = h.series.iter().map(|s| s.memory_gib).collect();
        assert_eq!(kinds, vec![None, Some(80)]);
    }

    #[test]
    fn old_samples_are_pruned() {
        let (_d, mut conn) = db();
        let now = 1000 * H;
        write(
            &mut conn,
            now - KEEP_DAYS * 24 * H - 1,
            30_000,
            &[sample("A", 1, 0)],
        )
        .unwrap();
        write(&mut conn, now - H, 30_000, &[sample("A", 1, 0)]).unwrap();
        // The old sample, its 12-minute sum and its tick.
        assert_eq!(prune(&conn, now).unwrap(), 3);
        let n: i64 = conn
            .query_row("SELECT count(*) FROM usage_samples", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }
}
