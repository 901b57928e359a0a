//! The decision stream and the standing history in the database (migration 6): every
//! batch's decision lines (`events`) and, when it changed, the standing per share and unit
//! after the batch (`standing`), written in the batch's transaction; read back for
//! `shareq events` (the past) and `shareq report` (a window of history).

use super::{Store, StoreError};
use crate::events::EventLine;
use crate::replay::Standing;
use crate::sched::{Event, Sched, Time};
use rusqlite::{Transaction, params};

/// The standing recorded at an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandingRow {
    pub at: Time,
    pub standing: Standing,
}

/// What `shareq report` reads for a window [since, until]: the standing in force at
/// `since` and its changes inside, the decisions before `since` (to know which jobs had
/// started and which were being stopped) and inside, in time order.
#[derive(Debug, Clone, Default)]
pub struct HistoryWindow {
    pub standing_before: Option<StandingRow>,
    pub standings: Vec<StandingRow>,
    pub before: Vec<EventLine>,
    pub inside: Vec<EventLine>,
}

/// Write a batch's lines, and the standing when it differs from `last`. Returns the
/// stored lines (with their sequence numbers) and the standing written, if one was.
pub(super) fn record_stream(
    tx: &Transaction,
    now: Time,
    events: &[Event],
    sched: &Sched,
    last: Option<&Standing>,
) -> rusqlite::Result<(Vec<EventLine>, Option<Standing>)> {
    let mut lines = crate::events::lines(now, events, sched);
    for l in &mut lines {
        tx.prepare_cached(
            "INSERT INTO events (at, event, job, share, user, submitted, quantity, line)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            l.at,
            l.event,
            l.job.map(|j| j as i64),
            l.share,
            l.user,
            l.submitted,
            l.quantity,
            l.line
        ])?;
        l.seq = tx.last_insert_rowid() as u64;
    }
    let standing = Standing::of(sched);
    if last == Some(&standing) {
        return Ok((lines, None));
    }
    let figures = serde_json::to_string(&standing)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    tx.prepare_cached("INSERT INTO standing (at, figures) VALUES (?1, ?2)")?
        .execute(params![now, figures])?;
    Ok((lines, Some(standing)))
}

/// Forget the stream and standing older than `cutoff`, keeping the last standing before it
/// (a report starting there needs what was in force).
pub(super) fn prune(tx: &Transaction, cutoff: Time) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM events WHERE at < ?1", [cutoff])?;
    tx.execute(
        "DELETE FROM standing WHERE at < ?1
         AND seq < (SELECT max(seq) FROM standing WHERE at < ?1)",
        [cutoff],
    )?;
    Ok(())
}

const LINE_COLUMNS: &str = "seq, at, event, job, share, user, submitted, quantity, line";

fn line_row(r: &rusqlite::Row) -> rusqlite::Result<EventLine> {
    Ok(EventLine {
        seq: r.get::<_, i64>(0)? as u64,
        at: r.get(1)?,
        event: r.get(2)?,
        job: r.get::<_, Option<i64>>(3)?.map(|j| j as u64),
        share: r.get(4)?,
        user: r.get(5)?,
        submitted: r.get(6)?,
        quantity: r.get(7)?,
        line: r.get(8)?,
    })
}

fn standing_row(r: &rusqlite::Row) -> rusqlite::Result<(Time, String)> {
    Ok((r.get(0)?, r.get(1)?))
}

impl Store {
    /// The lines of the last committed batch (the runtime hands them to followers right
    /// after each `record`).
    pub fn take_recorded(&mut self) -> Vec<EventLine> {
        std::mem::take(&mut self.recorded)
    }

    /// Stored lines after sequence number `after`, at or after `since` (ms), oldest
    /// first, at most `limit`.
    pub fn events_after(
        &self,
        after: u64,
        since: Time,
        limit: usize,
    ) -> Result<Vec<EventLine>, StoreError> {
        let sql = format!(
            "SELECT {LINE_COLUMNS} FROM events WHERE seq > ?1 AND at >= ?2 ORDER BY seq LIMIT ?3"
        );
        let mut stmt = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(
                params![after as i64, since, limit.min(i64::MAX as usize) as i64],
                line_row,
            )
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// The newest stored sequence number (0 when none).
    pub fn last_event_seq(&self) -> Result<u64, StoreError> {
        self.conn
            .query_row("SELECT COALESCE(max(seq), 0) FROM events", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|s| s as u64)
            .map_err(|e| self.err(e))
    }

    /// What a report over [since, until] (ms) reads.
    pub fn history_window(&self, since: Time, until: Time) -> Result<HistoryWindow, StoreError> {
        let err = |e| self.err(e);
        let parse = |(at, text): (Time, String)| -> Result<StandingRow, StoreError> {
            let standing = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                path: self.path.clone(),
                detail: format!("standing recorded at {at}: {e}"),
            })?;
            Ok(StandingRow { at, standing })
        };
        let before = self
            .conn
            .query_row(
                "SELECT at, figures FROM standing WHERE at <= ?1 ORDER BY seq DESC LIMIT 1",
                [since],
                standing_row,
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .map_err(err)?
            .map(parse)
            .transpose()?;
        let mut stmt = self
            .conn
            .prepare("SELECT at, figures FROM standing WHERE at > ?1 AND at <= ?2 ORDER BY seq")
            .map_err(err)?;
        let standings = stmt
            .query_map(params![since, until], standing_row)
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?
            .into_iter()
            .map(parse)
            .collect::<Result<Vec<_>, _>>()?;
        let lines =
            |sql: &str, args: &[&dyn rusqlite::ToSql]| -> Result<Vec<EventLine>, StoreError> {
                let mut stmt = self.conn.prepare(sql).map_err(err)?;
                let rows = stmt
                    .query_map(args, line_row)
                    .map_err(err)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(err)?;
                Ok(rows)
            };
        let before_lines = lines(
            &format!(
                "SELECT {LINE_COLUMNS} FROM events WHERE at < ?1
                 AND event IN ('started','preempted','requeued','failed','succeeded','cancelled')
                 ORDER BY seq"
            ),
            &[&since],
        )?;
        let inside = lines(
            &format!("SELECT {LINE_COLUMNS} FROM events WHERE at >= ?1 AND at <= ?2 ORDER BY seq"),
            &[&since, &until],
        )?;
        Ok(HistoryWindow {
            standing_before: before,
            standings,
            before: before_lines,
            inside,
        })
    }
}
