//! What a config would do, read from a state directory's database (read-only): the
//! window's real submissions replayed under the configs in force over it and under a
//! proposed one (`shareq whatif`), and a dry run of a proposed config on the jobs the
//! database holds now (`shareq check --against`). The CLI runs these where its user can
//! read the database; the scheduler serves the same to admins who cannot (the `whatif` and
//! `dry_run` requests), the proposed config sent as its files' text.

use crate::config::{ConfigError, DirSnapshot, FileText, LoadedConfig, load_dir};
use crate::exec::gpu::discovery::needs_discovery;
use crate::exec::{Discovery, now_ms};
use crate::model::{UnitCapacity, ValidConfig};
use crate::replay::history::{HistoryTrace, WhatIf, what_if};
use crate::sched::{Clock, Sched};
use crate::store::Store;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Why a what-if, a trace export or a dry run cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum WhatIfError {
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
    #[error("this state directory has no applied config recorded: give it with --current")]
    NoConfigRecorded,
    #[error("the config in {} is not valid:\n  {}", .dir.display(), .errors.join("\n  "))]
    Invalid { dir: PathBuf, errors: Vec<String> },
    /// A config the database recorded that does not read back: when it was applied, why.
    #[error("the config recorded at {at}: {why}")]
    Recorded { at: i64, why: String },
    #[error("no config recorded")]
    NoneRecorded,
    #[error("{0}")]
    ConfigDir(#[from] ConfigError),
}

/// One file of a config directory as a client read it: what a `whatif` or `dry_run`
/// request carries, since the scheduler may not read the client's files (nor should it
/// read a path a client names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigFile {
    /// Its path on the client's side (errors name it).
    pub path: String,
    /// Its YAML.
    pub text: String,
}

/// The files of a config directory, read as the loader reads them.
pub fn files_of(dir: &Path) -> Result<Vec<ConfigFile>, ConfigError> {
    let snap = DirSnapshot::read(dir)?;
    snap.files
        .into_iter()
        .map(|f| {
            Ok(ConfigFile {
                path: f.path.display().to_string(),
                text: f.text?,
            })
        })
        .collect()
}

/// Files sent by a client, parsed and validated as one directory (`dir` names it in
/// errors).
pub fn load_files(dir: &str, files: &[ConfigFile]) -> Result<LoadedConfig, WhatIfError> {
    let snap = DirSnapshot {
        dir: PathBuf::from(dir),
        files: files
            .iter()
            .map(|f| FileText {
                path: PathBuf::from(&f.path),
                text: Ok(f.text.clone()),
            })
            .collect(),
        hash: String::new(),
        stable: true,
        newest: None,
    };
    snap.load().map_err(|errors| WhatIfError::Invalid {
        dir: PathBuf::from(dir),
        errors: errors.iter().map(ToString::to_string).collect(),
    })
}

/// The state directory's database, read-only.
pub fn open(root: &Path) -> Result<Store, WhatIfError> {
    Ok(Store::open_read_only(root)?)
}

/// The config the scheduler applied last: read again from the directory it came from
/// (with a note when that directory changed since), or `over` when given.
pub fn config_in_force(
    store: &Store,
    over: Option<&Path>,
    notes: &mut Vec<String>,
) -> Result<(PathBuf, LoadedConfig), WhatIfError> {
    let (dir, recorded) = match over {
        Some(d) => (d.to_path_buf(), None),
        None => {
            let rec = store.last_config()?.ok_or(WhatIfError::NoConfigRecorded)?;
            (PathBuf::from(&rec.source), Some(rec.hash))
        }
    };
    let loaded = load_dir(&dir).map_err(|errors| WhatIfError::Invalid {
        dir: dir.clone(),
        errors: errors.iter().map(ToString::to_string).collect(),
    })?;
    if let Some(h) = recorded
        && h != loaded.hash
    {
        notes.push(format!(
            "note: {} changed since the scheduler applied it (hash {h}, now {}); using it as it is now",
            dir.display(),
            loaded.hash
        ));
    }
    Ok((dir, loaded))
}

/// The devices a config's units have on this machine.
pub fn capacity(config: &ValidConfig) -> Vec<UnitCapacity> {
    let d = if needs_discovery(config) {
        Discovery::run()
    } else {
        Discovery::skipped()
    };
    d.capacity(config).0
}

/// The live state as the database holds it: the jobs queued and running, put back in a
/// scheduler under the config in force, after one pass (as recovery would).
pub fn live_state(root: &Path, notes: &mut Vec<String>) -> Result<(Sched, i64), WhatIfError> {
    let store = open(root)?;
    let (_, loaded) = config_in_force(&store, None, notes)?;
    let now = now_ms();
    let mut sched = Sched::new(&loaded.config, &capacity(&loaded.config), Clock::Wall);
    // Dependencies on ended jobs are judged as the live scheduler judges them (SPEC §13).
    sched.reserve_ids_below(crate::model::JobId(store.max_job_id()?.0 + 1));
    let (succeeded, arrays) = store.link_history()?;
    sched.restore_history(succeeded, arrays);
    for job in store.active_jobs()? {
        if let Err(e) = sched.restore_job(job.restored(true), now) {
            notes.push(format!("note: {e}"));
        }
    }
    sched.pass(now);
    let _ = sched.take_events();
    Ok((sched, now))
}

/// What applying `proposed` now would do to the jobs the database of `root` holds.
pub fn dry_run_on(
    root: &Path,
    proposed: &ValidConfig,
    notes: &mut Vec<String>,
) -> Result<crate::forecast::DryRun, WhatIfError> {
    let (sched, now) = live_state(root, notes)?;
    let cap = capacity(proposed);
    Ok(crate::forecast::dry_run(sched, proposed, &cap, now))
}

/// The jobs submitted from `from` (ms) until now, as a trace.
pub fn window(store: &Store, from: i64) -> Result<HistoryTrace, WhatIfError> {
    let jobs = store.trace_jobs(from, now_ms())?;
    Ok(HistoryTrace::from_jobs(&jobs))
}

/// What the current column of a what-if replays.
pub enum Current {
    /// The configs in force over the window, as the database keeps them.
    Recorded,
    /// One config throughout, and how to name it.
    Given(Box<LoadedConfig>, String),
}

/// The configs in force over the trace, from the store: the one in force at its first
/// submission and each applied after it, at its instant (seconds after the origin). A
/// config recorded without its documents (an older database) is read from its
/// directory as it is now. With a config given, that one throughout.
struct InForce {
    first: LoadedConfig,
    changes: Vec<(i64, ValidConfig)>,
    /// What the header says the current column replays.
    label: String,
}

fn in_force(
    store: &Store,
    current: Current,
    trace: &HistoryTrace,
    notes: &mut Vec<String>,
) -> Result<InForce, WhatIfError> {
    if let Current::Given(loaded, label) = current {
        return Ok(InForce {
            first: *loaded,
            changes: Vec::new(),
            label,
        });
    }
    let records = store.configs_over(trace.origin_ms, now_ms())?;
    if records.len() <= 1 {
        let (dir, loaded) = config_in_force(store, None, notes)?;
        return Ok(InForce {
            first: loaded,
            changes: Vec::new(),
            label: format!(
                "{} (the config in force over the whole window)",
                dir.display()
            ),
        });
    }
    let mut loaded = Vec::new();
    for (rec, docs) in &records {
        let l = match docs {
            Some(text) => {
                let recorded = |why: String| WhatIfError::Recorded {
                    at: rec.applied_at,
                    why,
                };
                let docs = crate::config::parse_documents(text, None)
                    .map_err(|e| recorded(format!("{e:?}")))?;
                let config = crate::config::validate(docs).map_err(|errors| {
                    let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
                    recorded(list.join("; "))
                })?;
                LoadedConfig {
                    config,
                    files: Vec::new(),
                    hash: rec.hash.clone(),
                }
            }
            None => config_in_force(store, Some(Path::new(&rec.source)), notes)?.1,
        };
        loaded.push((rec.applied_at, l));
    }
    let mut loaded = loaded.into_iter();
    let (_, first) = loaded.next().ok_or(WhatIfError::NoneRecorded)?;
    let changes: Vec<(i64, ValidConfig)> = loaded
        .map(|(at, l)| (((at - trace.origin_ms) / 1000).max(0), l.config))
        .collect();
    let label = format!(
        "the {} configs in force over the window (each from when it was applied)",
        changes.len() + 1
    );
    Ok(InForce {
        first,
        changes,
        label,
    })
}

/// A what-if and what its current column replays.
pub struct WhatIfRun {
    pub whatif: WhatIf,
    /// The header's name for the current column.
    pub label: String,
}

/// The jobs submitted since `from` (ms) in the database of `root`, replayed under the
/// current configs and under `proposed`.
pub fn what_if_on(
    root: &Path,
    proposed: ValidConfig,
    current: Current,
    from: i64,
    notes: &mut Vec<String>,
) -> Result<WhatIfRun, WhatIfError> {
    let store = open(root)?;
    let trace = window(&store, from)?;
    let current = in_force(&store, current, &trace, notes)?;
    let whatif = what_if(&trace, current.first.config, current.changes, proposed);
    Ok(WhatIfRun {
        whatif,
        label: current.label,
    })
}

/// Why this user reads the database through the scheduler: they cannot read it
/// themselves (it is the scheduler's, 0600). `None`: they can, or it is not there.
pub fn unreadable(root: &Path) -> Option<String> {
    let db = root.join(crate::store::DB_FILE);
    let meta = std::fs::metadata(&db).ok()?;
    match nix::unistd::access(&db, nix::unistd::AccessFlags::R_OK) {
        Ok(()) => None,
        Err(_) => {
            use std::os::unix::fs::MetadataExt;
            let uid = nix::unistd::Uid::from_raw(meta.uid());
            let owner = nix::unistd::User::from_uid(uid)
                .ok()
                .flatten()
                .map_or_else(|| format!("uid {uid}"), |u| u.name);
            Some(format!(
                "only {owner} can read the database {}",
                db.display()
            ))
        }
    }
}

/// A what-if as the CLI prints it: the header's name for the current column, the text,
/// and the result as JSON (`whatif --json`); what the `whatif` request answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIfAnswer {
    /// What the current column replays.
    pub label: String,
    /// The side-by-side comparison, as `shareq whatif` prints it.
    pub text: String,
    /// Both runs, as `shareq whatif --json` prints them.
    pub result: serde_json::Value,
    /// Notes on how it was made (a config that changed since it was applied, a job that
    /// could not be put back).
    pub notes: Vec<String>,
}

impl WhatIfAnswer {
    pub fn of(run: WhatIfRun, notes: Vec<String>) -> WhatIfAnswer {
        WhatIfAnswer {
            text: run.whatif.text(),
            result: serde_json::to_value(crate::wire::Wire(&run.whatif)).unwrap_or_default(),
            label: run.label,
            notes,
        }
    }
}

/// A dry run as `check --against` prints it; what the `dry_run` request answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DryRunAnswer {
    /// What applying the config now would do, as `shareq check --against` prints it.
    pub text: String,
    /// The same, as JSON.
    pub result: serde_json::Value,
    pub notes: Vec<String>,
}

impl DryRunAnswer {
    pub fn of(d: &crate::forecast::DryRun, notes: Vec<String>) -> DryRunAnswer {
        DryRunAnswer {
            text: d.text(),
            result: serde_json::to_value(crate::wire::Wire(d)).unwrap_or_default(),
            notes,
        }
    }
}
