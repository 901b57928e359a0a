//! The commands that read a state directory's history and replay or dry-run on it:
//! `shareq whatif --config NEW_DIR [--since 7d] [--json]` (the window's real submissions
//! replayed under the configs in force over it and under NEW_DIR, side by side per share),
//! `shareq export-trace [--since 7d] [--out DIR]` (that trace, to edit and replay), and
//! the state behind `shareq check DIR --against STATE` (what applying DIR would do now).
//!
//! All read the database read-only, so they work whether or not a scheduler runs on it.

use super::error::{CliError, ExitKind};
use crate::config::{LoadedConfig, load_dir};
use crate::exec::gpu::discovery::needs_discovery;
use crate::exec::{Discovery, now_ms};
use crate::model::{UnitCapacity, ValidConfig};
use crate::replay::history::{HistoryTrace, what_if};
use crate::sched::{Clock, Sched};
use crate::store::Store;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct WhatifArgs {
    /// The proposed config directory.
    #[arg(long)]
    pub config: PathBuf,
    /// The config to compare with, throughout the window (default: the configs in force
    /// over the window, each from when the scheduler applied it, as the database keeps
    /// them).
    #[arg(long)]
    pub current: Option<PathBuf>,
    /// The window of history: jobs submitted since then (`7d`, `12h`, `2026-12-01`, … as
    /// for `jobs --since`).
    #[arg(long, default_value = "7d")]
    pub since: String,
    /// Print both runs as JSON.
    #[arg(long)]
    pub json: bool,
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct ExportTraceArgs {
    /// The window of history: jobs submitted since then (`7d`, `12h`, `2026-12-01`, … as
    /// for `jobs --since`).
    #[arg(long, default_value = "7d")]
    pub since: String,
    /// Write DIR/trace.csv and DIR/scenario.yaml (the config in force plus the trace,
    /// ready for `shareq replay`); without it, the CSV goes to stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The config for the scenario (default: the one the scheduler applied last).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
}

/// Why a what-if, a trace export or a dry run cannot be made (what follows
/// `shareq whatif: `).
#[derive(Debug, thiserror::Error)]
pub(crate) enum WhatIfError {
    /// No state directory was found.
    #[error("{0}")]
    StateDir(anyhow::Error),
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
    #[error("--since {0}")]
    Since(#[from] super::when::NotATime),
    #[error("{0}")]
    ConfigDir(#[from] crate::config::ConfigError),
    #[error("{}: {source}", .path.display())]
    Yaml {
        path: PathBuf,
        source: serde_yaml::Error,
    },
    #[error("{0}")]
    Scenario(serde_yaml::Error),
}

/// The state directory's database, read-only.
fn open(state: Option<&Path>) -> Result<(PathBuf, Store), WhatIfError> {
    let dir = super::serve::state_dir(state).map_err(WhatIfError::StateDir)?;
    let root = dir.root().to_path_buf();
    let store = Store::open_read_only(&root)?;
    Ok((root, store))
}

/// The config the scheduler applied last: read again from the directory it came from
/// (with a warning when that directory changed since), or `over` when given.
pub(crate) fn config_in_force(
    store: &Store,
    over: Option<&Path>,
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
        eprintln!(
            "note: {} changed since the scheduler applied it (hash {h}, now {}); using it as it is now",
            dir.display(),
            loaded.hash
        );
    }
    Ok((dir, loaded))
}

/// The devices a config's units have on this machine.
pub(crate) fn capacity(config: &ValidConfig) -> Vec<UnitCapacity> {
    let d = if needs_discovery(config) {
        Discovery::run()
    } else {
        Discovery::skipped()
    };
    d.capacity(config).0
}

/// The live state as the database holds it: the jobs queued and running, put back in a
/// scheduler under the config in force, after one pass (as recovery would).
pub(crate) fn live_state(state: &Path) -> Result<(Sched, i64), WhatIfError> {
    let (_, store) = open(Some(state))?;
    let (_, loaded) = config_in_force(&store, None)?;
    let now = now_ms();
    let mut sched = Sched::new(&loaded.config, &capacity(&loaded.config), Clock::Wall);
    // Dependencies on ended jobs are judged as the live scheduler judges them (SPEC §13).
    sched.reserve_ids_below(crate::model::JobId(store.max_job_id()?.0 + 1));
    let (succeeded, arrays) = store.link_history()?;
    sched.restore_history(succeeded, arrays);
    for job in store.active_jobs()? {
        if let Err(e) = sched.restore_job(job.restored(true), now) {
            eprintln!("note: {e}");
        }
    }
    sched.pass(now);
    let _ = sched.take_events();
    Ok((sched, now))
}

fn window(store: &Store, since: &str) -> Result<HistoryTrace, WhatIfError> {
    let now = now_ms();
    let from = super::when::parse_instant(since, now)?;
    let jobs = store.trace_jobs(from, now)?;
    Ok(HistoryTrace::from_jobs(&jobs))
}

/// The configs in force over the trace, from the store: the one in force at its first
/// submission and each applied after it, at its instant (seconds after the origin). A
/// config recorded without its documents (an older database) is read from its
/// directory as it is now. With `--current`, that one directory throughout.
struct InForce {
    first: LoadedConfig,
    changes: Vec<(i64, ValidConfig)>,
    /// What the header says the current column replays.
    label: String,
}

fn in_force(
    store: &Store,
    over: Option<&Path>,
    trace: &HistoryTrace,
) -> Result<InForce, WhatIfError> {
    if over.is_some() {
        let (dir, loaded) = config_in_force(store, over)?;
        return Ok(InForce {
            first: loaded,
            changes: Vec::new(),
            label: dir.display().to_string(),
        });
    }
    let records = store.configs_over(trace.origin_ms, now_ms())?;
    if records.len() <= 1 {
        let (dir, loaded) = config_in_force(store, None)?;
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
            None => config_in_force(store, Some(Path::new(&rec.source)))?.1,
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

pub fn whatif(args: &WhatifArgs) -> Result<(), CliError> {
    let fail = |e: &dyn std::fmt::Display, exit: ExitKind| {
        Err(CliError::failed(format!("shareq whatif: {e}")).with_exit(exit))
    };
    let proposed = match load_dir(&args.config) {
        Ok(l) => l,
        Err(errors) => {
            let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
            let invalid = WhatIfError::Invalid {
                dir: args.config.clone(),
                errors: list,
            };
            return fail(&invalid, ExitKind::Usage);
        }
    };
    let (_, store) = match open(args.state.as_deref()) {
        Ok(s) => s,
        Err(e) => return fail(&e, ExitKind::Failed),
    };
    let trace = match window(&store, &args.since) {
        Ok(t) => t,
        Err(e) => return fail(&e, ExitKind::Usage),
    };
    let current = match in_force(&store, args.current.as_deref(), &trace) {
        Ok(c) => c,
        Err(e) => return fail(&e, ExitKind::Failed),
    };
    let w = what_if(
        &trace,
        current.first.config,
        current.changes,
        proposed.config,
    );
    if args.json {
        match serde_json::to_string_pretty(&w) {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(&e, ExitKind::Failed),
        }
        return Ok(());
    }
    println!(
        "what if: the last {} of history, replayed under {} (current) and {} (proposed)",
        args.since,
        current.label,
        args.config.display()
    );
    print!("{}", w.text());
    Ok(())
}

pub fn export_trace(args: &ExportTraceArgs) -> Result<(), CliError> {
    let fail = |e: &dyn std::fmt::Display, exit: ExitKind| {
        Err(CliError::failed(format!("shareq export-trace: {e}")).with_exit(exit))
    };
    let (_, store) = match open(args.state.as_deref()) {
        Ok(s) => s,
        Err(e) => return fail(&e, ExitKind::Failed),
    };
    let trace = match window(&store, &args.since) {
        Ok(t) => t,
        Err(e) => return fail(&e, ExitKind::Usage),
    };
    let Some(out) = &args.out else {
        print!("{}", trace.to_csv());
        return Ok(());
    };
    let (cfg_dir, _) = match config_in_force(&store, args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(&e, ExitKind::Failed),
    };
    let scenario = match scenario_text(&cfg_dir, &trace, &args.since) {
        Ok(s) => s,
        Err(e) => return fail(&e, ExitKind::Failed),
    };
    let written = std::fs::create_dir_all(out)
        .and_then(|()| std::fs::write(out.join("trace.csv"), trace.to_csv()))
        .and_then(|()| std::fs::write(out.join("scenario.yaml"), scenario));
    if let Err(e) = written {
        return fail(
            &format!("cannot write {}: {e}", out.display()),
            ExitKind::Failed,
        );
    }
    eprintln!(
        "{} jobs written to {} ({} never started and are left out); replay with: shareq replay {} --summary",
        trace.rows.len(),
        out.join("trace.csv").display(),
        trace.never_started,
        out.join("scenario.yaml").display()
    );
    Ok(())
}

/// A scenario holding the config directory's documents and pointing at `trace.csv`.
fn scenario_text(dir: &Path, trace: &HistoryTrace, since: &str) -> Result<String, WhatIfError> {
    use serde::Deserialize;
    let snap = crate::config::DirSnapshot::read(dir)?;
    let mut docs = Vec::new();
    for f in &snap.files {
        let text = f.text.as_ref().map_err(|e| e.clone())?;
        for d in serde_yaml::Deserializer::from_str(text) {
            let v = serde_yaml::Value::deserialize(d).map_err(|source| WhatIfError::Yaml {
                path: f.path.clone(),
                source,
            })?;
            if !v.is_null() {
                docs.push(v);
            }
        }
    }
    let mut map = serde_yaml::Mapping::new();
    map.insert(
        "description".into(),
        format!(
            "{} jobs submitted in the {since} before {} (ms since the epoch {}), exported by shareq export-trace",
            trace.rows.len(),
            crate::exec::now_ms(),
            trace.origin_ms
        )
        .into(),
    );
    map.insert("config".into(), serde_yaml::Value::Sequence(docs));
    map.insert("trace".into(), "trace.csv".into());
    serde_yaml::to_string(&map).map_err(WhatIfError::Scenario)
}
