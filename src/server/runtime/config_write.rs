//! Writing one file of the config directory for an admin (`put_config`, issue 46): the
//! directory as it is, with the file as given, is validated as one set exactly as the
//! watcher validates it (SPEC §5); only a valid set is written, atomically (a hidden
//! temporary in the directory, renamed into place) with the owner and mode of the file it
//! replaces, or of the directory for a new one (never writable by group or others).
//! Blocking: called off the runtime task.

use super::refusal::Refusal;
use crate::config::{DirSnapshot, FileText};
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What `put_config` did: the file written (or, dry, that would be) and the config the
/// directory then holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigWritten {
    /// The file's path in the config directory.
    pub path: String,
    /// False with `dryRun`: validated only, nothing written.
    pub written: bool,
    /// The directory's content hash with the file as given.
    pub hash: String,
    /// The config the directory holds with the file, in one line (as `check --watch`
    /// says it).
    pub summary: String,
}

/// A file name `put_config` writes: one plain `*.yaml` / `*.yml` name the loader reads
/// (no folder, not hidden, not an editor temporary).
fn file_name(name: &str) -> Result<&str, Refusal> {
    let plain = !name.is_empty()
        && !name.contains('/')
        && !name.contains('\0')
        && crate::config::is_config_file(Path::new(name));
    if plain {
        Ok(name)
    } else {
        Err(Refusal::Config(format!(
            "{name:?}: not a config file name: give a plain name ending in .yaml or .yml \
             (no folder, not hidden), e.g. shares-vision.yaml"
        )))
    }
}

/// Validate the directory `dir` with `name` holding `text`; unless `dry`, write it.
pub(crate) fn put(dir: &Path, name: &str, text: &str, dry: bool) -> Result<ConfigWritten, Refusal> {
    let name = file_name(name)?;
    // One writer at a time: two requests checked against the same directory must not
    // both be written (together they could be invalid).
    static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = WRITING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let path = dir.join(name);
    let mut snap = DirSnapshot::read(dir).map_err(|e| Refusal::Config(e.to_string()))?;
    snap.files.retain(|f| f.path != path);
    snap.files.push(FileText {
        path: path.clone(),
        text: Ok(text.to_string()),
    });
    snap.files.sort_by(|a, b| a.path.cmp(&b.path));
    let loaded = snap.load().map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        Refusal::Config(lines.join("\n"))
    })?;
    if !dry {
        write_atomically(dir, &path, text.as_bytes())
            .map_err(|e| Refusal::Config(format!("cannot write {}: {e}", path.display())))?;
    }
    // The hash of the directory as it now reads (the one the reload applies).
    let hash = match dry {
        true => loaded.hash,
        false => DirSnapshot::read(dir).map_or(loaded.hash, |s| s.hash),
    };
    Ok(ConfigWritten {
        path: path.display().to_string(),
        written: !dry,
        hash,
        summary: crate::config::one_line(&loaded.config),
    })
}

/// Write `bytes` as `path`: a temporary beside it, given the owner and mode of the file it
/// replaces (a new file: the directory's owner and group, 0644 as the directory allows),
/// synced, then renamed over it.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let old = std::fs::symlink_metadata(path).ok().filter(|m| m.is_file());
    let of_dir = std::fs::metadata(dir)?;
    let (uid, gid, mode) = match &old {
        Some(m) => (m.uid(), m.gid(), m.mode() & 0o7777),
        None => (of_dir.uid(), of_dir.gid(), 0o644 & of_dir.mode()),
    };
    // Never writable by group or others (SPEC §9: a user able to write it would be an
    // admin).
    let mode = (mode & !0o022) | 0o600;
    let name = path.file_name().map_or_else(
        || "config.yaml".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let tmp: PathBuf = dir.join(format!(".{name}.put-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::fchown(&f, Some(uid), Some(gid))?;
        }
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENV: &str = "kind: ServiceEnvironment\nname: t\ncapacityLimits:\n  - capacityUnit: gpu\n    maxCapacity: 2\n    devices: {fake: 2}\n";

    fn share(name: &str, cap: u32) -> String {
        format!(
            "kind: QuotaShare\nquotaShareName: {name}\ncapacityLimits:\n  - capacityUnit: gpu\n    maxCapacity: {cap}\nresourceSharingConfiguration:\n  strategy: LEND_AND_BORROW\n"
        )
    }

    #[test]
    fn a_valid_file_is_written_private_and_an_invalid_one_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("env.yaml"), ENV).unwrap();
        let w = put(dir.path(), "qs1.yaml", &share("qs1", 1), false).unwrap();
        assert!(w.written);
        let path = dir.path().join("qs1.yaml");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), share("qs1", 1));
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode & 0o022, 0, "{mode:o}");
        // A misspelled field: refused with the file, line and column, nothing written.
        let bad = share("qs1", 1).replace("capacityLimits", "capacityLimit");
        let e = put(dir.path(), "qs1.yaml", &bad, false).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("qs1.yaml:3:"), "{text}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), share("qs1", 1));
        // A dry run validates only.
        let w = put(dir.path(), "qs2.yaml", &share("qs2", 1), true).unwrap();
        assert!(!w.written);
        assert!(!dir.path().join("qs2.yaml").exists());
        // No temporaries are left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn only_plain_config_names_are_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("env.yaml"), ENV).unwrap();
        for bad in [
            "../x.yaml",
            "a/b.yaml",
            ".hidden.yaml",
            "x.txt",
            "",
            "x.yaml~",
        ] {
            let e = put(dir.path(), bad, &share("qs1", 1), false).unwrap_err();
            assert!(
                e.to_string().contains("not a config file name"),
                "{bad}: {e}"
            );
        }
    }
}
