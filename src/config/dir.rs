//! Loading a config directory: every `*.yaml` / `*.yml` file, recursively, hidden files
//! and editor temporaries skipped, all documents validated as one set.

use super::error::ConfigError;
use super::parse::parse_documents;
use super::validate::{ValidConfig, validate};
use std::path::{Path, PathBuf};

/// A validated config and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    pub config: ValidConfig,
    /// The files read, sorted.
    pub files: Vec<PathBuf>,
    /// A hash of the files' names and contents (to record which version was applied).
    pub hash: String,
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

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
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
        if entry.file_type()?.is_dir() {
            collect(&path, out)?;
        } else if is_config_file(&path) {
            out.push(path);
        }
    }
    Ok(())
}

/// Read, parse and validate a whole directory. On failure, every error found.
pub fn load_dir(dir: &Path) -> Result<LoadedConfig, Vec<ConfigError>> {
    let mut files = Vec::new();
    collect(dir, &mut files).map_err(|e| {
        vec![
            ConfigError::new(format!("cannot read config directory: {e}")).at(
                Some(&dir.display().to_string()),
                None,
                None,
            ),
        ]
    })?;
    files.sort();
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    let mut hasher = Fnv::default();
    for f in &files {
        let name = f.display().to_string();
        match std::fs::read_to_string(f) {
            Ok(text) => {
                hasher.write(name.as_bytes());
                hasher.write(text.as_bytes());
                match parse_documents(&text, Some(&name)) {
                    Ok(d) => docs.extend(d),
                    Err(e) => errors.extend(e),
                }
            }
            Err(e) => errors.push(ConfigError::new(format!("cannot read: {e}")).at(
                Some(&name),
                None,
                None,
            )),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let config = validate(docs)?;
    Ok(LoadedConfig {
        config,
        files,
        hash: format!("{:016x}", hasher.0),
    })
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
