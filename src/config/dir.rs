//! Loading a config directory: every `*.yaml` / `*.yml` file, recursively, hidden files
//! and editor temporaries skipped, all documents validated as one set.

use super::error::ConfigError;
use super::parse::parse_documents_partial;
use super::validate::{Texts, validate_texts};
use crate::model::ValidConfig;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A validated config and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    pub config: ValidConfig,
    /// The files read, sorted.
    pub files: Vec<PathBuf>,
    /// A hash of the files' names (relative to the directory) and contents: equal hashes,
    /// equal configs.
    pub hash: String,
}

impl LoadedConfig {
    /// The files' YAML as one text (joined with `---`), as the store keeps each applied
    /// config; `None` when a file cannot be read again.
    pub fn documents(&self) -> Option<String> {
        let texts: Option<Vec<String>> = self
            .files
            .iter()
            .map(|f| std::fs::read_to_string(f).ok())
            .collect();
        Some(texts?.join("\n---\n"))
    }
}

/// Is this a file the loader reads? Hidden files and editor temporaries are not.
pub fn is_config_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if name.starts_with('.') || name.ends_with('~') || name == "4913" || name.starts_with(".#") {
        return false;
    }
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

/// A config entry found in the directory: a regular file to read, or a `*.yaml` /
/// `*.yml` entry that cannot be read as one (SPEC §5: an error naming the file, never
/// skipped — skipping `shares.yaml` would apply a config without its shares).
enum Found {
    File(PathBuf),
    Unreadable(PathBuf, String),
}

impl Found {
    fn path(&self) -> &Path {
        match self {
            Found::File(p) | Found::Unreadable(p, _) => p,
        }
    }
}

/// Lists the config entries under `dir` into `out`, and keeps in `newest` the latest
/// modification time of the directories walked (a create, delete or rename changes it).
fn collect(
    dir: &Path,
    out: &mut Vec<Found>,
    newest: &mut Option<SystemTime>,
) -> std::io::Result<()> {
    let modified = std::fs::metadata(dir)?.modified().ok();
    *newest = (*newest).max(modified);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        // A file can vanish between listing and stat (an editor's temp file): skip it.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            collect(&path, out, newest)?;
        } else if is_config_file(&path) {
            // Only regular files (a symlink to one is fine): reading a FIFO would block
            // for ever, `/dev/zero` would never end.
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => out.push(Found::File(path)),
                Ok(m) => {
                    let why = format!(
                        "cannot read: {}; config files must be plain files",
                        file_kind(&m)
                    );
                    out.push(Found::Unreadable(path, why));
                }
                Err(e) => {
                    // Gone meanwhile (the entry itself no longer exists): an editor's
                    // rename. Otherwise a symlink that leads nowhere or to itself.
                    if std::fs::symlink_metadata(&path).is_err() {
                        continue;
                    }
                    out.push(Found::Unreadable(path, symlink_problem(&e)));
                }
            }
        }
    }
    Ok(())
}

/// Why a symlink in the config directory cannot be followed.
fn symlink_problem(e: &std::io::Error) -> String {
    if e.raw_os_error() == Some(nix::libc::ELOOP) {
        "cannot read: a symlink that loops (it leads back to itself); point it at a real \
         file or remove it"
            .to_string()
    } else if e.kind() == std::io::ErrorKind::NotFound {
        "cannot read: a dangling symlink (its target does not exist); point it at a real \
         file or remove it"
            .to_string()
    } else {
        format!("cannot read: {e}")
    }
}

fn file_kind(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_fifo() {
        "a named pipe"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_dir() {
        "a directory"
    } else {
        "not a plain file"
    }
}

/// The largest config file read (1 MiB): a real one is a few KiB.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Read a config file, at most [`MAX_FILE_BYTES`].
fn read_capped(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "the file is larger than {} KiB, the most a config file may hold: split it, or \
                 remove what is not config",
                MAX_FILE_BYTES >> 10
            ),
        ));
    }
    Ok(bytes)
}

/// One file as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileText {
    pub path: PathBuf,
    /// `Err` holds why it could not be read (not UTF-8, permissions…).
    pub text: Result<String, ConfigError>,
}

/// The raw contents of a config directory at one moment, before parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirSnapshot {
    pub dir: PathBuf,
    /// Sorted by path.
    pub files: Vec<FileText>,
    /// Hash of the names (relative to `dir`) and contents.
    pub hash: String,
    /// False when a file changed or vanished while it was being read: a writer is busy,
    /// so the snapshot may hold a partial file and should be read again shortly.
    pub stable: bool,
    /// The latest modification time of the files and directories read: a very recent
    /// one means a writer may not be done.
    pub newest: Option<SystemTime>,
}

/// Where the first byte that is not UTF-8 is, so that it can be found and fixed.
fn not_utf8(path: &Path, e: &std::string::FromUtf8Error) -> ConfigError {
    let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
    let line = good.iter().filter(|b| **b == b'\n').count() + 1;
    let start = good.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&good[start..]).chars().count() + 1;
    ConfigError::new("the file is not UTF-8 text: save it as UTF-8").at(
        Some(&path.display().to_string()),
        Some(line),
        Some(column),
    )
}

fn stamp(path: &Path) -> Option<(u64, Option<SystemTime>)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()))
}

impl DirSnapshot {
    /// Read every config file under `dir`. `Err` when the directory itself cannot be read.
    pub fn read(dir: &Path) -> Result<DirSnapshot, ConfigError> {
        if dir.is_file() {
            let parent = dir.parent().map_or(".".into(), |p| p.display().to_string());
            return Err(ConfigError::new(format!(
                "is a file: shareq reads a whole config directory (try `{parent}`)"
            ))
            .at(Some(&dir.display().to_string()), None, None));
        }
        let mut found = Vec::new();
        let mut newest = None;
        collect(dir, &mut found, &mut newest).map_err(|e| {
            ConfigError::new(format!("cannot read config directory: {e}")).at(
                Some(&dir.display().to_string()),
                None,
                None,
            )
        })?;
        found.sort_by(|a, b| a.path().cmp(b.path()));
        let mut stable = true;
        let mut files = Vec::with_capacity(found.len());
        let mut hasher = Fnv::default();
        for entry in found {
            let path = match entry {
                Found::File(path) => path,
                Found::Unreadable(path, why) => {
                    let rel = path.strip_prefix(dir).unwrap_or(&path);
                    hasher.write(rel.to_string_lossy().as_bytes());
                    hasher.write(&[0]);
                    hasher.write(why.as_bytes());
                    hasher.write(&[0]);
                    let text = Err(ConfigError::new(why).at(
                        Some(&path.display().to_string()),
                        None,
                        None,
                    ));
                    files.push(FileText { path, text });
                    continue;
                }
            };
            let before = stamp(&path);
            let text = match read_capped(&path) {
                Ok(bytes) => {
                    let after = stamp(&path);
                    let complete = before.is_some()
                        && before == after
                        && before.map(|b| b.0) == Some(bytes.len() as u64);
                    stable &= complete;
                    newest = newest.max(after.and_then(|a| a.1));
                    String::from_utf8(bytes).map_err(|e| not_utf8(&path, &e))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    stable = false;
                    continue;
                }
                Err(e) => Err(ConfigError::new(format!("cannot read: {e}")).at(
                    Some(&path.display().to_string()),
                    None,
                    None,
                )),
            };
            let rel = path.strip_prefix(dir).unwrap_or(&path);
            hasher.write(rel.to_string_lossy().as_bytes());
            hasher.write(&[0]);
            match &text {
                Ok(t) => hasher.write(t.as_bytes()),
                Err(e) => hasher.write(e.message.as_bytes()),
            }
            hasher.write(&[0]);
            files.push(FileText { path, text });
        }
        Ok(DirSnapshot {
            dir: dir.to_path_buf(),
            files,
            hash: format!("{:016x}", hasher.0),
            stable,
            newest,
        })
    }

    /// Parse and validate the files as one set.
    pub fn load(&self) -> Result<LoadedConfig, Vec<ConfigError>> {
        let dir_name = self.dir.display().to_string();
        if self.files.is_empty() {
            return Err(vec![ConfigError::new(
                "no *.yaml or *.yml files: the directory needs a ServiceEnvironment and the quota shares",
            )
            .at(Some(&dir_name), None, None)]);
        }
        let mut docs = Vec::new();
        let mut errors = Vec::new();
        let mut texts = Texts::new();
        for f in &self.files {
            let name = f.path.display().to_string();
            match &f.text {
                Ok(text) => {
                    let (d, e) = parse_documents_partial(text, Some(&name));
                    docs.extend(d);
                    errors.extend(e);
                    texts.insert(name, text.clone());
                }
                Err(e) => errors.push(e.clone()),
            }
        }
        // Semantic checks run even when some documents failed to parse, so that one save
        // shows every problem; the missing-environment error is only meaningful when
        // everything parsed.
        let parsed_all = errors.is_empty();
        match validate_texts(docs, &texts) {
            Ok(config) if parsed_all => Ok(LoadedConfig {
                config,
                files: self.files.iter().map(|f| f.path.clone()).collect(),
                hash: self.hash.clone(),
            }),
            Ok(_) => Err(errors),
            Err(more) => {
                errors.extend(
                    more.into_iter()
                        .filter(|e| parsed_all || e.file.is_some())
                        .map(|e| {
                            if e.file.is_none() {
                                e.at(Some(&dir_name), None, None)
                            } else {
                                e
                            }
                        }),
                );
                Err(errors)
            }
        }
    }
}

/// Read, parse and validate a whole directory. On failure, every error found.
pub fn load_dir(dir: &Path) -> Result<LoadedConfig, Vec<ConfigError>> {
    DirSnapshot::read(dir).map_err(|e| vec![e])?.load()
}

/// FNV-1a, 64 bit: a stable content hash without another dependency.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_hidden_files_and_editor_temporaries() {
        for name in ["a.yaml", "b.yml", "dir/c.yaml"] {
            assert!(is_config_file(Path::new(name)), "{name}");
        }
        for name in [
            ".a.yaml",
            "a.yaml~",
            "4913",
            ".#a.yaml",
            "a.yaml.swp",
            "notes.txt",
        ] {
            assert!(!is_config_file(Path::new(name)), "{name}");
        }
    }

    #[test]
    fn the_hash_follows_names_and_contents_not_the_directory() {
        let a = tempfile::tempdir().expect("tempdir");
        let b = tempfile::tempdir().expect("tempdir");
        for d in [a.path(), b.path()] {
            std::fs::write(d.join("x.yaml"), "kind: QuotaShare\n").expect("write");
        }
        let ha = DirSnapshot::read(a.path()).expect("read").hash;
        assert_eq!(ha, DirSnapshot::read(b.path()).expect("read").hash);
        std::fs::write(b.path().join("x.yaml"), "kind: QuotaShare\n# edit\n").expect("write");
        assert_ne!(ha, DirSnapshot::read(b.path()).expect("read").hash);
        std::fs::rename(a.path().join("x.yaml"), a.path().join("y.yaml")).expect("mv");
        assert_ne!(ha, DirSnapshot::read(a.path()).expect("read").hash);
        // Temporaries do not count.
        std::fs::write(a.path().join(".y.yaml.swp"), "junk").expect("write");
        let snap = DirSnapshot::read(a.path()).expect("read");
        assert_eq!(snap.files.len(), 1);
        assert!(snap.stable);
    }

    #[test]
    fn a_file_is_not_a_directory() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("env.yaml");
        std::fs::write(&f, "kind: ServiceEnvironment\n").expect("write");
        let e = load_dir(&f).expect_err("a file");
        assert!(e[0].message.starts_with("is a file"), "{}", e[0]);
        assert!(
            e[0].message.contains(&d.path().display().to_string()),
            "{}",
            e[0]
        );
    }

    #[test]
    fn a_missing_directory_is_an_error_with_its_name() {
        let e = load_dir(Path::new("/nonexistent/shareq-cfg")).expect_err("missing");
        assert_eq!(e.len(), 1);
        assert!(
            e[0].to_string()
                .starts_with("/nonexistent/shareq-cfg: cannot read config directory"),
            "{}",
            e[0]
        );
    }
}
