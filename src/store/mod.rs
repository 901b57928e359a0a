//! Durable state (SPEC §8): jobs, attempts, the preemption log, applied configs and the
//! utilisation history (`usage`) in an embedded SQLite database at `<state>/shareq.db`,
//! plus the state-directory lock and the recovery decisions a restarted scheduler applies.
//!
//! Write-ahead discipline: the runtime drains the scheduler's events after each change,
//! hands them to [`Store::record`] (one transaction), and only then carries them out and
//! answers the client. A submit is therefore durable once it is acknowledged, and a
//! decision that could not be stored is never carried out.
//!
//! The API is synchronous; the runtime may call it from `spawn_blocking`.

mod error;
mod events;
mod file;
mod identity;
mod load;
mod lock;
mod record;
pub mod recovery;
mod room;
mod rows;
mod schema;
mod trace;
pub mod usage;
pub mod user_usage;

pub use error::{LockHolder, StoreError};
pub use events::{HistoryWindow, StandingRow};
pub use file::what_to_do;
pub use lock::StateLock;
pub use record::Observed;
pub use room::{BALLAST_FILE, ballast_size};
pub use rows::{AttemptRecord, ConfigRecord, JobRecord, Recovered, StoredHolding, StoredJob};
pub use schema::SCHEMA_VERSION;

use rusqlite::{Connection, MAIN_DB, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The database file inside the state directory.
pub const DB_FILE: &str = "shareq.db";

/// Finished jobs are kept this many days unless `history.retainDays` says otherwise.
pub const DEFAULT_RETAIN_DAYS: u32 = 30;

/// How long the scheduler's writes wait for another connection's lock before they fail.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// How hard each commit is pushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: the WAL is fsynced at every commit, so an acknowledged submit
    /// survives a power cut or a kernel crash too. The default.
    #[default]
    Full,
    /// `synchronous=NORMAL`: fsync at checkpoints only. Survives a crash or `kill -9` of
    /// shareq, but a power cut may lose the last commits. Several times faster for
    /// one-by-one commits on slow disks.
    Normal,
}

/// An open state database.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// The decision lines of the last committed batch (`take_recorded`).
    recorded: Vec<crate::events::EventLine>,
    /// The standing last written to the `standing` table.
    standing: Option<crate::replay::Standing>,
    /// How hard a commit is pushed to disk (a read-only store: `Normal`, never used).
    durability: Durability,
    /// The database's own room on a full filesystem (`None`: a read-only store).
    ballast: Option<room::Ballast>,
}

impl Store {
    /// Open (creating it if needed) the database of `state_dir` and bring its schema up to
    /// date. A corrupt file, a database of a newer shareq or a read-only directory is an
    /// error, and then nothing on disk has been changed.
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        Store::open_with(state_dir, Durability::Full)
    }

    /// [`Store::open`] with a chosen [`Durability`].
    pub fn open_with(state_dir: &Path, durability: Durability) -> Result<Store, StoreError> {
        std::fs::create_dir_all(state_dir).map_err(|source| StoreError::StateDir {
            path: state_dir.to_path_buf(),
            source,
        })?;
        let path = state_dir.join(DB_FILE);
        file::check(&path)?;
        if !path.exists() {
            file::create(&path, |conn| {
                schema::migrate(conn, &path, 0)?;
                identity::ensure(conn, &path, true)
            })?;
        }
        let err = |e| StoreError::from_sqlite(&path, e);
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(&path, flags).map_err(err)?;
        // SQLite silently falls back to read-only for a write-protected file.
        if conn.is_readonly(MAIN_DB).map_err(err)? {
            return Err(StoreError::ReadOnly {
                path,
                detail: "the database file is write-protected".to_string(),
            });
        }
        conn.busy_timeout(LOCK_WAIT).map_err(err)?;
        let version = schema::check(&conn, &path)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::ReadOnly {
                path,
                detail: format!("cannot switch to WAL journaling (got `{mode}`)"),
            });
        }
        // FULL by default: every commit fsyncs the WAL. A submit is acknowledged only after its commit,
        // and a user who saw "submitted 42" must find job 42 after a power cut too, not
        // only after a crash of shareq (which NORMAL would already survive). Throughput comes
        // from batching: the runtime commits all the decisions of one pass together.
        let sync = match durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        conn.pragma_update(None, "synchronous", sync).map_err(err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(err)?;
        schema::migrate(&mut conn, &path, version)?;
        identity::ensure(&conn, &path, false)?;
        let ballast = room::Ballast::beside(&path);
        let store = Store {
            conn,
            path,
            recorded: Vec::new(),
            standing: None,
            durability,
            ballast: Some(ballast),
        };
        // A log left by the last run (a full filesystem, a crash) is folded in now.
        store.shrink_log();
        store.restore_ballast_if(|size| store.free_bytes().is_some_and(|f| f >= 4 * size));
        Ok(store)
    }

    /// Open an existing database for reading only (`shareq jobs --all` when no scheduler
    /// runs): nothing is created, migrated or written.
    pub fn open_read_only(state_dir: &Path) -> Result<Store, StoreError> {
        let path = state_dir.join(DB_FILE);
        if !path.exists() {
            return Err(StoreError::StateDir {
                path: path.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no database: no scheduler has run on this state directory",
                ),
            });
        }
        file::check(&path)?;
        let err = |e| StoreError::from_sqlite(&path, e);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).map_err(err)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(err)?;
        schema::check(&conn, &path)?;
        Ok(Store {
            conn,
            path,
            recorded: Vec::new(),
            standing: None,
            durability: Durability::Normal,
            ballast: None,
        })
    }

    /// How long a statement waits for another connection's lock before it fails
    /// ([`LOCK_WAIT`] from `open`).
    pub fn set_lock_wait(&self, wait: Duration) -> Result<(), StoreError> {
        self.conn.busy_timeout(wait).map_err(|e| self.err(e))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    /// Run SQLite's own consistency check; `Ok(())` when it finds nothing.
    pub fn integrity_check(&self) -> Result<(), StoreError> {
        let mut stmt = self
            .conn
            .prepare("PRAGMA integrity_check")
            .map_err(|e| self.err(e))?;
        let lines: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .map_err(|e| self.err(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(e))?;
        let fk: i64 = self
            .conn
            .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
                r.get(0)
            })
            .map_err(|e| self.err(e))?;
        if lines == ["ok"] && fk == 0 {
            Ok(())
        } else {
            Err(StoreError::Corrupt {
                path: self.path.clone(),
                detail: format!("{}; {fk} dangling attempt rows", lines.join("; ")),
            })
        }
    }

    /// Fold the write-ahead log into the database and truncate it
    /// (`wal_checkpoint(TRUNCATE)`); best effort: a reader may hold it (then it is not
    /// truncated). True when the log was emptied.
    pub fn shrink_log(&self) -> bool {
        let done: Result<i64, _> =
            self.conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0));
        match done {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => {
                tracing::debug!("checkpoint failed: {e}");
                false
            }
        }
    }

    /// Make room for the database's own write when the filesystem is full: give the
    /// ballast up and truncate the log. True when anything may have been freed.
    pub fn make_room(&mut self) -> bool {
        let released = self.ballast.as_ref().is_some_and(room::Ballast::release);
        let shrunk = self.shrink_log();
        released || shrunk
    }

    /// Bytes the ballast lacks (given up, or never made for want of room): submits wait
    /// for that much more than the reserve, so the space stays the database's.
    pub fn ballast_owed(&self) -> u64 {
        self.ballast.as_ref().map_or(0, room::Ballast::owed)
    }

    /// The ballast's full size (0 for a read-only store).
    pub fn ballast_bytes(&self) -> u64 {
        self.ballast.as_ref().map_or(0, room::Ballast::size)
    }

    /// Make the ballast whole again when `room(size)` says the filesystem has room for it.
    pub fn restore_ballast_if(&self, room: impl FnOnce(u64) -> bool) {
        let Some(b) = &self.ballast else { return };
        if b.owed() == 0 || !room(b.size()) {
            return;
        }
        match b.make() {
            Ok(()) => tracing::info!("the database's ballast ({} MiB) is made", b.size() >> 20),
            Err(e) => tracing::debug!("cannot make the database's ballast: {e}"),
        }
    }

    /// Free bytes for unprivileged writers on the database's filesystem.
    pub fn free_bytes(&self) -> Option<u64> {
        let dir = self.path.parent()?;
        let s = nix::sys::statvfs::statvfs(dir).ok()?;
        // The counts are `fsblkcnt_t` / `c_ulong`: u64 here, narrower elsewhere.
        #[allow(clippy::unnecessary_cast)]
        Some((s.blocks_available() as u64).saturating_mul(s.fragment_size() as u64))
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        StoreError::from_sqlite(&self.path, e)
    }

    #[cfg(test)]
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }
}

#[cfg(test)]
mod tests;
