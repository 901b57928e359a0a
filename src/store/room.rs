//! Room for the scheduler's own writes on a nearly full state filesystem (SPEC §8): a
//! ballast file beside the database holds space that only the database may use. A write
//! that fails for want of space gives the ballast up, checkpoints and truncates the
//! write-ahead log, and is tried once more, so decisions, cancels and state changes are
//! stored where submits and logs already stop at the reserve; the ballast is made again
//! once the filesystem has room for it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// The ballast, beside the database.
pub const BALLAST_FILE: &str = "shareq.db-ballast";

/// The ballast's size: a sixteenth of the filesystem, at least 1 MiB and at most 64 MiB.
pub fn ballast_size(fs_bytes: u64) -> u64 {
    (fs_bytes / 16).clamp(1 << 20, 64 << 20)
}

/// The ballast of one database.
#[derive(Debug)]
pub(super) struct Ballast {
    path: PathBuf,
    /// Its full size on this filesystem.
    size: u64,
    /// Whether it is there, whole (kept here: submits ask on the runtime's task).
    whole: std::sync::atomic::AtomicBool,
}

impl Ballast {
    pub(super) fn beside(db: &Path) -> Ballast {
        let path = db.with_file_name(BALLAST_FILE);
        let size = nix::sys::statvfs::statvfs(db.parent().unwrap_or(Path::new(".")))
            .map(|s| {
                // The counts are `fsblkcnt_t` / `c_ulong`: u64 here, narrower elsewhere.
                #[allow(clippy::unnecessary_cast)]
                let bytes = (s.blocks() as u64).saturating_mul(s.fragment_size() as u64);
                ballast_size(bytes)
            })
            .unwrap_or(1 << 20);
        let whole = std::fs::metadata(&path).is_ok_and(|m| m.len() >= size);
        Ballast {
            path,
            size,
            whole: whole.into(),
        }
    }

    pub(super) fn size(&self) -> u64 {
        self.size
    }

    /// Bytes the ballast lacks now (0 when it is whole).
    pub(super) fn owed(&self) -> u64 {
        if self.whole.load(Ordering::Relaxed) {
            0
        } else {
            self.size
        }
    }

    /// Give the ballast up; true when it held anything.
    pub(super) fn release(&self) -> bool {
        self.whole.store(false, Ordering::Relaxed);
        match std::fs::remove_file(&self.path) {
            Ok(()) => {
                tracing::warn!(
                    "the state filesystem is full: gave up the database's ballast ({} MiB) \
                     so that the scheduler's own writes go on",
                    self.size >> 20
                );
                true
            }
            Err(_) => false,
        }
    }

    /// Make the ballast whole, written with bytes no filesystem compresses, so that it
    /// really holds its blocks. A failure (no room) leaves no partial file.
    pub(super) fn make(&self) -> std::io::Result<()> {
        if self.owed() == 0 {
            return Ok(());
        }
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(".new");
        let tmp = PathBuf::from(tmp);
        let written = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            // One MiB of xorshift64 bytes, written again and again: nothing compresses it.
            let mut chunk = vec![0u8; 1 << 20];
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ self.size;
            for b in chunk.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
            }
            let mut left = self.size;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                f.write_all(&chunk[..n])?;
                left -= n as u64;
            }
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        match written {
            Ok(()) => self.whole.store(true, Ordering::Relaxed),
            Err(_) => drop(std::fs::remove_file(&tmp)),
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ballast_is_made_whole_given_up_and_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let b = Ballast::beside(&dir.path().join("shareq.db"));
        assert!(b.size() >= 1 << 20 && b.size() <= 64 << 20);
        assert_eq!(b.owed(), b.size());
        b.make().unwrap();
        assert_eq!(b.owed(), 0);
        assert_eq!(
            std::fs::metadata(dir.path().join(BALLAST_FILE))
                .unwrap()
                .len(),
            b.size()
        );
        // Found whole by the next scheduler.
        assert_eq!(Ballast::beside(&dir.path().join("shareq.db")).owed(), 0);
        assert!(b.release());
        assert_eq!(b.owed(), b.size());
        assert!(!dir.path().join(BALLAST_FILE).exists());
        assert!(!b.release(), "nothing left to give up");
        b.make().unwrap();
        assert_eq!(b.owed(), 0);
        assert_eq!(ballast_size(0), 1 << 20);
        assert_eq!(ballast_size(160 << 20), 10 << 20);
        assert_eq!(ballast_size(1 << 40), 64 << 20);
    }
}
