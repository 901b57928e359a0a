//! The database's identity (SPEC §8): a random id made when the database is created and
//! recorded in every run file (`exec::state::runfiles`), so that files of a lost or replaced
//! database are never taken for this one's jobs.

use super::{Store, StoreError};
use crate::exec::state::runfiles::Owner;
use rusqlite::{Connection, OptionalExtension};
use std::path::Path;

/// Give the database an identity if it has none. `fresh`: the database was just created
/// (then no file from before is its own); otherwise it was written by a shareq from before
/// identities, and run files without one are its own up to its highest job id.
pub(crate) fn ensure(conn: &Connection, path: &Path, fresh: bool) -> Result<(), StoreError> {
    let err = |e| StoreError::from_sqlite(path, e);
    let have: Option<i64> = conn
        .query_row("SELECT value FROM meta WHERE key = 'db_id'", [], |r| {
            r.get(0)
        })
        .optional()
        .map_err(err)?;
    if have.is_some() {
        return Ok(());
    }
    let legacy_below: i64 = if fresh {
        0
    } else {
        conn.query_row(
            "SELECT max(COALESCE((SELECT value FROM meta WHERE key = 'max_job_id'), 0),
                        COALESCE((SELECT max(id) FROM jobs), 0))",
            [],
            |r| r.get(0),
        )
        .map_err(err)?
    };
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('db_id', ?1), ('db_id_legacy_below', ?2)",
        [random_id(), legacy_below],
    )
    .map_err(err)?;
    Ok(())
}

/// 64 random bits from the kernel (time and pid when it cannot give them).
fn random_id() -> i64 {
    use std::io::Read;
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let t = crate::exec::now_ms() as u64;
        b = (t.rotate_left(20) ^ u64::from(std::process::id()).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .to_le_bytes();
    }
    i64::from_le_bytes(b)
}

impl Store {
    /// Whose run files are this database's: its identity as run files record it.
    pub fn identity(&self) -> Result<Owner, StoreError> {
        let get = |key: &str| -> Result<Option<i64>, StoreError> {
            self.conn
                .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                .optional()
                .map_err(|e| self.err(e))
        };
        let id = get("db_id")?
            .ok_or_else(|| StoreError::bad_record(&self.path, "no database identity"))?;
        Ok(Owner {
            db: format!("{:016x}", id as u64),
            legacy_below: get("db_id_legacy_below")?.unwrap_or(0).max(0) as u64,
        })
    }

    /// Move away the run files and logs in `state_dir` that are not this database's, and
    /// never hand out their ids (SPEC §8). Logs what it did.
    pub fn set_aside_foreign_files(
        &mut self,
        state_dir: &Path,
        now: i64,
    ) -> Result<(), StoreError> {
        let owner = self.identity()?;
        let max = self.max_job_id()?.0;
        let moved = crate::exec::state::aside::set_aside_foreign(state_dir, &owner, max, now)
            .map_err(|source| StoreError::StateDir {
                path: state_dir.to_path_buf(),
                source,
            })?;
        if let Some(m) = moved {
            tracing::warn!(
                jobs = m.jobs.len(),
                killed = m.killed.len(),
                dir = %m.dir.display(),
                "run files and logs of another database (lost, moved or replaced) were set aside; their job ids will not be reused"
            );
            self.reserve_job_ids(m.highest())?;
        }
        Ok(())
    }

    /// Never hand out an id up to `max` (ids found in run files set aside: SPEC §8).
    pub fn reserve_job_ids(&mut self, max: u64) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO meta (key, value) VALUES ('max_job_id', ?1)
                 ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)",
                [max as i64],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }
}
