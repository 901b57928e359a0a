//! The database file itself, before SQLite opens it: a new database is created whole
//! (aside, then renamed into place), so an empty or short `shareq.db` is never a fresh
//! start but a damaged or truncated file, refused with what to do (SPEC §8).

use super::StoreError;
use rusqlite::Connection;
use std::path::{Path, PathBuf};

/// What an operator can do about a damaged database, for error messages.
pub fn what_to_do(path: &Path) -> String {
    format!(
        "restore it from a backup, or move it aside (mv {p} {p}.broken) and start again: a \
         new database starts empty, and the run files and logs of the old one are set aside \
         in the state directory's set-aside/ folder",
        p = path.display()
    )
}

fn corrupt(path: &Path, detail: String) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        detail,
    }
}

/// Refuse a file that cannot be a whole SQLite database: empty, shorter than its header
/// says, or not SQLite at all. A missing file is fine (a new database), unless its
/// write-ahead log is still there.
pub fn check(path: &Path) -> Result<(), StoreError> {
    let wal = wal_path(path);
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
                return Err(corrupt(
                    path,
                    format!(
                        "the database file is missing but its write-ahead log {} is there",
                        wal.display()
                    ),
                ));
            }
            return Ok(());
        }
        Err(source) => {
            return Err(StoreError::StateDir {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    if !meta.is_file() {
        return Err(corrupt(path, "not a regular file".to_string()));
    }
    let len = meta.len();
    if len == 0 {
        return Err(corrupt(path, "the file is empty (0 bytes)".to_string()));
    }
    let mut header = [0u8; 100];
    {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|source| StoreError::StateDir {
            path: path.to_path_buf(),
            source,
        })?;
        if f.read_exact(&mut header).is_err() {
            return Err(corrupt(
                path,
                format!("truncated: {len} bytes, shorter than the 100-byte header"),
            ));
        }
    }
    if &header[..16] != b"SQLite format 3\0" {
        return Err(corrupt(path, "not an SQLite database".to_string()));
    }
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65536,
        n => u64::from(n),
    };
    let be32 =
        |i: usize| u32::from_be_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let pages = u64::from(be32(28));
    // The header's page count is valid only when written by the same change as the rest.
    let count_valid = be32(24) == be32(92);
    // A checkpoint cut short by a crash writes page 1 (the header) before the pages past
    // the old end: the file is short, and the write-ahead log still holds every page,
    // which SQLite replays on open. Only without a log is a short file a truncation.
    let wal_holds_pages = std::fs::metadata(wal_path(path)).is_ok_and(|m| m.len() > 0);
    let short = count_valid && len < pages * page_size && !wal_holds_pages;
    if page_size < 512 || len % page_size != 0 || short {
        return Err(corrupt(
            path,
            format!(
                "truncated: {len} bytes, but the header says {pages} pages of {page_size} bytes"
            ),
        ));
    }
    Ok(())
}

pub fn wal_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push("-wal");
    PathBuf::from(p)
}

/// Create a new database at `path` whole: built as `<path>.new` (schema and identity),
/// then renamed into place, so that `path` never exists half-made.
pub fn create(
    path: &Path,
    build: impl FnOnce(&mut Connection) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    for p in [tmp.clone(), wal_path(&tmp)] {
        let _ = std::fs::remove_file(p);
    }
    let mut conn = Connection::open(&tmp).map_err(|e| StoreError::from_sqlite(path, e))?;
    build(&mut conn)?;
    conn.close()
        .map_err(|(_, e)| StoreError::from_sqlite(path, e))?;
    std::fs::rename(&tmp, path).map_err(|source| StoreError::StateDir {
        path: path.to_path_buf(),
        source,
    })?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2-page file whose header claims 3 pages (valid-for matches the change counter).
    fn short_db(dir: &Path) -> PathBuf {
        let path = dir.join("shareq.db");
        let mut page = vec![0u8; 4096 * 2];
        page[..16].copy_from_slice(b"SQLite format 3\0");
        page[16..18].copy_from_slice(&4096u16.to_be_bytes());
        page[24..28].copy_from_slice(&7u32.to_be_bytes());
        page[28..32].copy_from_slice(&3u32.to_be_bytes());
        page[92..96].copy_from_slice(&7u32.to_be_bytes());
        std::fs::write(&path, page).unwrap();
        path
    }

    #[test]
    fn a_short_file_is_a_truncation_unless_the_log_holds_its_pages() {
        let dir = tempfile::tempdir().unwrap();
        let path = short_db(dir.path());
        let err = check(&path).unwrap_err().to_string();
        assert!(
            err.contains("truncated: 8192 bytes, but the header says 3 pages"),
            "{err}"
        );
        // A checkpoint cut short: the log still has the pages.
        std::fs::write(wal_path(&path), vec![1u8; 4096 + 32]).unwrap();
        assert!(check(&path).is_ok());
        // An empty log holds nothing.
        std::fs::write(wal_path(&path), b"").unwrap();
        assert!(check(&path).is_err());
    }
}
