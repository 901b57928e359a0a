//! The commands that read a state directory's history and replay or dry-run on it:
//! `shareq whatif --config NEW_DIR [--since 7d] [--json]` (the window's real submissions
//! replayed under the configs in force over it and under NEW_DIR, side by side per share)
//! and `shareq export-trace [--since 7d] [--out DIR]` (that trace, to edit and replay).
//! The work is `crate::whatif`'s.
//!
//! Both read the database read-only, so they work whether or not a scheduler runs on it.
//! A user who cannot read it (the system scheduler's is root's) gets the what-if from the
//! scheduler, which serves it to admins (`whatif` request).

use super::error::{CliError, ExitKind};
use crate::config::load_dir;
use crate::exec::now_ms;
use crate::replay::history::HistoryTrace;
use crate::server::{Request, Response};
use crate::whatif::{Current, WhatIfAnswer, WhatIfError, files_of};
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
    let state = match super::serve::state_dir(args.state.as_deref()) {
        Ok(s) => s,
        Err(e) => return fail(&e, ExitKind::Failed),
    };
    let from = match super::when::parse_instant(&args.since, now_ms()) {
        Ok(t) => t,
        Err(e) => return fail(&format!("--since {e}"), ExitKind::Usage),
    };
    let answer = match crate::whatif::unreadable(state.root()) {
        Some(why) => ask_scheduler(args, state.root(), &why, from)?,
        None => {
            let current = match &args.current {
                None => Current::Recorded,
                Some(dir) => match load_dir(dir) {
                    Ok(l) => Current::Given(Box::new(l), dir.display().to_string()),
                    Err(errors) => {
                        let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
                        let invalid = WhatIfError::Invalid {
                            dir: dir.clone(),
                            errors: list,
                        };
                        return fail(&invalid, ExitKind::Failed);
                    }
                },
            };
            let mut notes = Vec::new();
            let run =
                crate::whatif::what_if_on(state.root(), proposed.config, current, from, &mut notes);
            match run {
                Ok(run) => WhatIfAnswer::of(run, notes),
                Err(e) => return fail(&e, ExitKind::Failed),
            }
        }
    };
    for n in &answer.notes {
        eprintln!("{n}");
    }
    if args.json {
        match serde_json::to_string_pretty(&answer.result) {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(&e, ExitKind::Failed),
        }
        return Ok(());
    }
    println!(
        "what if: the last {} of history, replayed under {} (current) and {} (proposed)",
        args.since,
        answer.label,
        args.config.display()
    );
    print!("{}", answer.text);
    Ok(())
}

/// The what-if from the scheduler, for a user who cannot read its database (`why` says
/// so): it serves what-ifs to admins, on the files of the configs as this user reads them.
fn ask_scheduler(
    args: &WhatifArgs,
    root: &Path,
    why: &str,
    from: i64,
) -> Result<WhatIfAnswer, CliError> {
    let files =
        |dir: &Path| files_of(dir).map_err(|e| CliError::failed(format!("shareq whatif: {e}")));
    let req = Request::Whatif {
        config: files(&args.config)?,
        current: args.current.as_deref().map(files).transpose()?,
        since: from,
    };
    match super::request(Some(root), &req) {
        Ok(Response {
            ok: true,
            whatif: Some(w),
            ..
        }) => {
            eprintln!("note: {why}; asked the scheduler (you are an admin)");
            Ok(w)
        }
        Ok(r) => Err(refused_by_scheduler("whatif", why, &r)),
        Err(e) => Err(no_scheduler("whatif", why, &e)),
    }
}

/// A user who cannot read the database, refused by the scheduler: both causes, and who
/// may (the scheduler's words name the admins). Exit 3 when the rules refused it.
pub(crate) fn refused_by_scheduler(cmd: &str, why: &str, r: &Response) -> CliError {
    let said = crate::visible::visible_lines(r.error.as_deref().unwrap_or("no reason given"));
    let msg = if r.not_allowed {
        format!("shareq {cmd}: {why}, and the scheduler serves this to admins only: {said}")
    } else {
        format!("shareq {cmd}: {why}; the scheduler, asked instead: {said}")
    };
    CliError::refused(r, msg)
}

/// A user who cannot read the database, and no scheduler to ask.
pub(crate) fn no_scheduler(cmd: &str, why: &str, e: &anyhow::Error) -> CliError {
    CliError::failed(format!(
        "shareq {cmd}: {why}; the scheduler serves this to admins, but it cannot be asked: {e}"
    ))
}

pub fn export_trace(args: &ExportTraceArgs) -> Result<(), CliError> {
    let fail = |e: &dyn std::fmt::Display, exit: ExitKind| {
        Err(CliError::failed(format!("shareq export-trace: {e}")).with_exit(exit))
    };
    let state = match super::serve::state_dir(args.state.as_deref()) {
        Ok(s) => s,
        Err(e) => return fail(&e, ExitKind::Failed),
    };
    if let Some(why) = crate::whatif::unreadable(state.root()) {
        // The scheduler serves what-ifs and dry runs to admins, not the trace itself.
        return fail(
            &format!("{why}: run it as that user (`shareq whatif` works for admins)"),
            ExitKind::Failed,
        );
    }
    let store = match crate::whatif::open(state.root()) {
        Ok(s) => s,
        Err(e) => return fail(&e, ExitKind::Failed),
    };
    let trace = match super::when::parse_instant(&args.since, now_ms()) {
        Ok(from) => match crate::whatif::window(&store, from) {
            Ok(t) => t,
            Err(e) => return fail(&e, ExitKind::Failed),
        },
        Err(e) => return fail(&format!("--since {e}"), ExitKind::Usage),
    };
    let Some(out) = &args.out else {
        print!("{}", trace.to_csv());
        return Ok(());
    };
    let mut notes = Vec::new();
    let (cfg_dir, _) =
        match crate::whatif::config_in_force(&store, args.config.as_deref(), &mut notes) {
            Ok(c) => c,
            Err(e) => return fail(&e, ExitKind::Failed),
        };
    for n in notes {
        eprintln!("{n}");
    }
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
/// Why the scenario of `export-trace --out` cannot be written.
#[derive(Debug, thiserror::Error)]
enum ScenarioError {
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

fn scenario_text(dir: &Path, trace: &HistoryTrace, since: &str) -> Result<String, ScenarioError> {
    use serde::Deserialize;
    let snap = crate::config::DirSnapshot::read(dir)?;
    let mut docs = Vec::new();
    for f in &snap.files {
        let text = f.text.as_ref().map_err(|e| e.clone())?;
        for d in serde_yaml::Deserializer::from_str(text) {
            let v = serde_yaml::Value::deserialize(d).map_err(|source| ScenarioError::Yaml {
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
    serde_yaml::to_string(&map).map_err(ScenarioError::Scenario)
}
