//! One scheduler per state directory: an exclusive `flock` on `<state>/shareq.lock`, which
//! holds the owner's pid so that a second one can say who runs.
//!
//! The kernel drops the lock when the file is closed or the process dies, `kill -9`
//! included, so a stale lock file never blocks a restart. The descriptor is opened
//! close-on-exec (Rust's default), so supervisors started by the scheduler do not inherit
//! the lock and keep it after the scheduler is gone.

use super::error::{LockHolder, StoreError};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The lock file inside the state directory.
pub const LOCK_FILE: &str = "shareq.lock";

/// The held lock; released on drop.
#[derive(Debug)]
pub struct StateLock {
    file: File,
    path: PathBuf,
}

impl StateLock {
    /// Take the lock, or say which process holds it.
    pub fn acquire(state_dir: &Path) -> Result<StateLock, StoreError> {
        let dir_err = |source| StoreError::StateDir {
            path: state_dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(state_dir).map_err(dir_err)?;
        let path = state_dir.join(LOCK_FILE);
        let file_err = |source| StoreError::StateDir {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(file_err)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(StoreError::Locked {
                    path: state_dir.to_path_buf(),
                    holder: LockHolder(read_pid(&mut file)),
                });
            }
            Err(TryLockError::Error(e)) => return Err(file_err(e)),
        }
        file.set_len(0).map_err(file_err)?;
        file.seek(SeekFrom::Start(0)).map_err(file_err)?;
        writeln!(file, "{}", std::process::id()).map_err(file_err)?;
        file.flush().map_err(file_err)?;
        Ok(StateLock { file, path })
    }

    /// The pid written in the lock file of `state_dir`, if any (the holder when locked).
    pub fn holder(state_dir: &Path) -> Option<u32> {
        let mut f = File::open(state_dir.join(LOCK_FILE)).ok()?;
        read_pid(&mut f)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        // Best effort: a leftover pid in an unlocked file misleads nobody, since only a
        // failed `try_lock` reads it.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}
