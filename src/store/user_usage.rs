//! Each user's decayed usage of each share (SPEC §12), kept so that a restart forgets
//! nothing: one row per (share, user) with the figure and the instant it is for. The
//! figure decays on read (`Sched::restore_usage`), so nothing is rewritten as time
//! passes; the utilisation sampler (`server::runtime::usage`) replaces the rows once per
//! sample interval, so a `kill -9` of serve loses at most that interval's usage.
//!
//! Table (schema migration 8): `user_usage(share, user, usage, at)`.

use super::{Store, StoreError};
use crate::sched::{SavedUsage, UserStanding};
use rusqlite::{Connection, params};

/// Replace the stored figures with `rows` (one transaction).
pub fn write(conn: &mut Connection, rows: &[UserStanding]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    tx.execute("DELETE FROM user_usage", [])?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO user_usage (share, user, usage, at) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for r in rows {
            stmt.execute(params![r.share, r.user, r.usage_gpu_seconds, r.at])?;
        }
    }
    tx.commit()
}

impl Store {
    /// The stored figures, for `Sched::restore_usage`.
    pub fn user_usage(&self) -> Result<Vec<SavedUsage>, StoreError> {
        let err = |e| StoreError::from_sqlite(self.path(), e);
        let mut stmt = self
            .conn
            .prepare_cached("SELECT share, user, usage, at FROM user_usage ORDER BY share, user")
            .map_err(err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SavedUsage {
                    share: r.get(0)?,
                    user: r.get(1)?,
                    usage_gpu_seconds: r.get(2)?,
                    at: r.get(3)?,
                })
            })
            .map_err(err)?;
        rows.collect::<Result<_, _>>().map_err(err)
    }

    /// Replace the stored figures (the sampler does it on its own connection; this serves
    /// the runtime's last word at shutdown and tests).
    pub fn write_user_usage(&mut self, rows: &[UserStanding]) -> Result<(), StoreError> {
        write(&mut self.conn, rows).map_err(|e| StoreError::from_sqlite(self.path(), e))
    }
}
