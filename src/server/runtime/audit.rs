//! The audit trail (SPEC §9): every accepted action — submit, cancel, priority, reload —
//! with its caller and time, in the `audit` table of the state database.
//!
//! Rows are written by one thread with its own connection, off the runtime task and off
//! the socket's tasks, gathered for up to 200 ms per commit: an action is answered first,
//! then recorded (a crash within that window can lose the row of an action that did
//! happen; never the action itself). `shareq audit`
//! reads it through the socket, admins only.

use crate::access::Caller;
use crate::model::JobId;
use rusqlite::{Connection, OpenFlags, params};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// One accepted action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// ms since the epoch.
    pub at: i64,
    pub uid: u32,
    pub user: String,
    /// `submit`, `cancel`, `priority` or `reload`.
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobId>,
    /// E.g. the share and name of a submitted job, the new priority.
    #[serde(default)]
    pub detail: String,
}

impl AuditEntry {
    pub fn new(caller: &Caller, action: &str, job: Option<JobId>, detail: String) -> AuditEntry {
        AuditEntry {
            at: crate::exec::now_ms(),
            uid: caller.uid,
            user: caller.name.clone(),
            action: action.to_string(),
            job,
            detail,
        }
    }
}

/// Where accepted actions are recorded; cheap to clone. `Audit::off()` records nothing
/// (a scheduler without a database, as in tests of the runtime alone).
#[derive(Debug, Clone)]
pub struct Audit {
    tx: Option<mpsc::Sender<AuditEntry>>,
    db: Option<PathBuf>,
}

impl Audit {
    pub fn off() -> Audit {
        Audit { tx: None, db: None }
    }

    /// Start the writer on the database at `db` (already created and migrated).
    pub fn start(db: &Path) -> Result<Audit, rusqlite::Error> {
        let conn = open(db, false)?;
        // NORMAL: the runtime's own commits (FULL) sync the log these rows are in.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        let (tx, rx) = mpsc::channel::<AuditEntry>();
        std::thread::Builder::new()
            .name("shareq-audit".into())
            .spawn(move || writer(conn, rx))
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        Ok(Audit {
            tx: Some(tx),
            db: Some(db.to_path_buf()),
        })
    }

    pub fn record(&self, entry: AuditEntry) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(entry);
        }
    }

    /// The newest `limit` entries, newest first (blocking: call it off the runtime).
    pub fn read(&self, limit: usize) -> Result<Vec<AuditEntry>, AuditUnread> {
        let Some(db) = &self.db else {
            return Err(AuditUnread::NoDatabase);
        };
        Ok(read(db, limit)?)
    }
}

/// Why the audit trail could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AuditUnread {
    #[error("this scheduler keeps no database, so no audit trail")]
    NoDatabase,
    #[error("cannot read the audit trail: {0}")]
    Database(#[from] rusqlite::Error),
}

fn open(db: &Path, read_only: bool) -> Result<Connection, rusqlite::Error> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
    } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(db, flags)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    Ok(conn)
}

/// How long the writer gathers entries before it commits them. The runtime commits every
/// batch of decisions on its own connection; a commit of ours between two of its would
/// make it wait on the database lock (SQLite's busy handler sleeps), so ours are rare.
const GATHER: Duration = Duration::from_millis(200);

fn writer(mut conn: Connection, rx: mpsc::Receiver<AuditEntry>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        let until = std::time::Instant::now() + GATHER;
        while batch.len() < 4096 {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(e) => batch.push(e),
                Err(_) => break, // time is up, or every sender is gone: write what we have
            }
        }
        if let Err(e) = write(&mut conn, &batch) {
            tracing::warn!("cannot record {} audit entries: {e}", batch.len());
        }
    }
}

fn write(conn: &mut Connection, batch: &[AuditEntry]) -> Result<(), rusqlite::Error> {
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO audit (at, uid, user, action, job, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        for e in batch {
            stmt.execute(params![
                e.at,
                e.uid,
                e.user,
                e.action,
                e.job.map(|j| j.0 as i64),
                e.detail
            ])?;
        }
    }
    tx.commit()
}

fn read(db: &Path, limit: usize) -> Result<Vec<AuditEntry>, rusqlite::Error> {
    let conn = open(db, true)?;
    let mut stmt = conn.prepare(
        "SELECT at, uid, user, action, job, detail FROM audit ORDER BY seq DESC LIMIT ?1",
    )?;
    let rows = stmt.query_map([limit as i64], |r| {
        Ok(AuditEntry {
            at: r.get(0)?,
            uid: r.get(1)?,
            user: r.get(2)?,
            action: r.get(3)?,
            job: r.get::<_, Option<i64>>(4)?.map(|j| JobId(j as u64)),
            detail: r.get(5)?,
        })
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_written_are_read_back_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        drop(crate::store::Store::open(dir.path()).unwrap());
        let db = dir.path().join(crate::store::DB_FILE);
        let audit = Audit::start(&db).unwrap();
        let alice = Caller {
            uid: 1001,
            name: "alice".into(),
            groups: vec![],
        };
        audit.record(AuditEntry::new(
            &alice,
            "submit",
            Some(JobId(1)),
            "qs1 a".into(),
        ));
        audit.record(AuditEntry::new(
            &alice,
            "cancel",
            Some(JobId(1)),
            String::new(),
        ));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let rows = loop {
            let rows = audit.read(10).unwrap();
            if rows.len() == 2 || std::time::Instant::now() > deadline {
                break rows;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].action, "cancel");
        assert_eq!(rows[1].detail, "qs1 a");
        assert_eq!(rows[1].user, "alice");
    }
}
