//! What can go wrong with the state directory, in words an operator can act on.

use rusqlite::ErrorCode;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot use state directory {path}: {source}")]
    StateDir { path: PathBuf, source: io::Error },

    #[error(
        "another shareq is already scheduling on {path} ({holder}); attach to it, or stop it first"
    )]
    Locked { path: PathBuf, holder: LockHolder },

    #[error(
        "{path} is not a readable shareq database ({detail}); it was left untouched and \
         nothing was scheduled. To go on, {}",
        super::file::what_to_do(path)
    )]
    Corrupt { path: PathBuf, detail: String },

    #[error(
        "{path} has schema version {found}, but this shareq knows only up to {known}: it was \
         written by a newer shareq. Upgrade shareq; nothing was changed"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },

    #[error(
        "cannot write {path}: the state directory or database is read-only ({detail}); \
         choose a writable directory with --state"
    )]
    ReadOnly { path: PathBuf, detail: String },

    #[error("cannot write {path}: the disk is full; nothing of this change was stored")]
    DiskFull { path: PathBuf },

    #[error("database {path} is busy: another process holds it ({detail})")]
    Busy { path: PathBuf, detail: String },

    #[error("{path}: a stored record is unreadable: {detail}")]
    BadRecord { path: PathBuf, detail: String },

    #[error("database error on {path}: {source}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

/// Who holds the state lock, as far as its lock file tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockHolder(pub Option<u32>);

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self.0 {
            Some(pid) => write!(f, "pid {pid}"),
            None => f.write_str("pid unknown: it has not written its lock file yet"),
        }
    }
}

impl StoreError {
    /// Sort a SQLite error into the cases an operator can act on.
    pub(crate) fn from_sqlite(path: &Path, e: rusqlite::Error) -> StoreError {
        let path = path.to_path_buf();
        let (code, detail) = match &e {
            rusqlite::Error::SqliteFailure(f, msg) => {
                (Some(f.code), msg.clone().unwrap_or_else(|| f.to_string()))
            }
            _ => (None, e.to_string()),
        };
        match code {
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
                StoreError::Corrupt { path, detail }
            }
            Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
                StoreError::ReadOnly { path, detail }
            }
            Some(ErrorCode::DiskFull) => StoreError::DiskFull { path },
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                StoreError::Busy { path, detail }
            }
            _ => StoreError::Sqlite { path, source: e },
        }
    }

    pub(crate) fn bad_record(path: &Path, detail: impl Into<String>) -> StoreError {
        StoreError::BadRecord {
            path: path.to_path_buf(),
            detail: detail.into(),
        }
    }
}
