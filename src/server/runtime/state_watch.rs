//! Watching the state directory (SPEC §8): if it is deleted or replaced while the
//! scheduler runs (say `rm -rf` and a new one made in its place), another scheduler could
//! take its place and hand out the same GPUs, and nothing this one writes would be found
//! again. So the directory and its database are looked at every second; when either is
//! gone or is another file than at start (device and inode), the runtime stops scheduling
//! at once and the scheduler exits with an error.

use super::input::{ExecKind, ExecReport, Input};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;

/// How often the state directory is looked at.
pub const EVERY: Duration = Duration::from_secs(1);

fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The state directory and its database as they are now: what [`start`] compares with.
/// Taken before the control socket is bound, so that a directory deleted as soon as the
/// scheduler answers is seen as deleted.
pub(crate) struct Watched {
    root: PathBuf,
    db: PathBuf,
    ids: Option<((u64, u64), (u64, u64))>,
}

pub(crate) fn identify(root: PathBuf, db: PathBuf) -> Watched {
    let ids = identity(&root).zip(identity(&db));
    Watched { root, db, ids }
}

/// Start watching the state directory and its database on a background thread; reports
/// to the runtime once, as `StateLost`, and ends with it.
pub(crate) fn start(watched: Watched, tx: mpsc::UnboundedSender<Input>) {
    let Watched { root, db, ids } = watched;
    let Some((root_id, db_id)) = ids else {
        tracing::warn!(state = %root.display(), "cannot watch the state directory");
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("shareq-state-watch".to_string())
        .spawn(move || {
            loop {
                std::thread::sleep(EVERY);
                if tx.is_closed() {
                    return;
                }
                let what = if identity(&root) != Some(root_id) {
                    "the state directory was deleted or replaced"
                } else if identity(&db) != Some(db_id) {
                    "the database file was deleted or replaced"
                } else {
                    continue;
                };
                let why = format!(
                    "{what} ({}) while this scheduler ran: it stopped scheduling, since \
                     another scheduler may now use the same GPUs and nothing it records \
                     would be found again. Jobs it started keep running under their \
                     supervisors; start shareq again on the state directory you mean to use",
                    root.display()
                );
                tracing::error!("{why}");
                let _ = tx.send(Input::Exec(ExecReport(ExecKind::StateLost(why))));
                return;
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch the state directory: {e}");
    }
}
