//! `shareq check DIR [--watch] [--against STATE]`: validate a config directory and say
//! what it would apply; with `--against`, what applying it now would do to the jobs of a
//! state directory (`forecast::dry_run` on the state its database holds).

use super::error::{CliError, ExitKind};
use crate::config::{
    ConfigError, ConfigUpdate, LoadedConfig, Watcher, borrow_cap_text, changes, load_dir,
    min_runtime_notes, one_line, units, warnings,
};
use crate::model::ValidConfig;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Pads columns to their widest cell; the first row is the header.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            let _ = write!(line, "{cell:<w$}  ", w = width[c]);
        }
        out.push_str("  ");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The full report for a valid config.
pub fn report(dir: &Path, loaded: &LoadedConfig) -> String {
    let cfg = &loaded.config;
    let mut out = format!(
        "{}: valid ({} file{}, {} quota share{}, hash {})\n\nenvironment `{}`, preemption grace period {} s\n",
        dir.display(),
        loaded.files.len(),
        if loaded.files.len() == 1 { "" } else { "s" },
        cfg.shares.len(),
        if cfg.shares.len() == 1 { "" } else { "s" },
        loaded.hash,
        cfg.env.name,
        cfg.env.preemption.grace_period_seconds,
    );
    if let crate::model::Executor::Slurm(s) = cfg.executor() {
        out.push_str(&format!(
            "executor: Slurm partition `{}`, each attempt {}\n",
            s.partition,
            match s.start {
                crate::model::SlurmStart::Sbatch => "a batch job (sbatch)",
                crate::model::SlurmStart::Srun =>
                    "a job step with its own allocation (srun, kept on this machine)",
            }
        ));
    }
    out.push('\n');
    let mut rows = vec![
        [
            "unit",
            "devices",
            "maxCapacity",
            "usable",
            "guaranteed",
            "unassigned",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for u in units(cfg) {
        let unassigned = u64::from(u.usable).saturating_sub(u.guaranteed);
        rows.push(vec![
            u.unit,
            u.devices,
            u.max_capacity.to_string(),
            if u.auto {
                format!("<= {} (auto)", u.usable)
            } else {
                u.usable.to_string()
            },
            u.guaranteed.to_string(),
            unassigned.to_string(),
        ]);
    }
    out.push_str(&table(&rows));
    out.push('\n');
    let mut rows = vec![
        [
            "share",
            "strategy",
            "limit",
            "borrow cap",
            "in-share preemption",
            "state",
            "members",
            "users",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for s in &cfg.shares {
        let limits: Vec<String> = s
            .capacity_limits
            .iter()
            .map(|c| format!("{} {}", c.max_capacity, c.capacity_unit))
            .collect();
        rows.push(vec![
            s.quota_share_name.clone(),
            s.resource_sharing_configuration.strategy.as_str().into(),
            limits.join(", "),
            borrow_cap_text(s),
            if s.preemption_configuration.in_share_preemption.is_enabled() {
                "ENABLED".into()
            } else {
                "DISABLED".into()
            },
            match s.state {
                crate::model::ShareState::Enabled => "ENABLED".into(),
                crate::model::ShareState::Disabled => "DISABLED".into(),
            },
            match &s.members {
                None => "everyone".into(),
                Some(m) if m.is_empty() => "no one".into(),
                Some(m) => m.join(" "),
            },
            crate::config::user_policy_text(s),
        ]);
    }
    out.push_str(&table(&rows));
    let mut w = warnings(cfg);
    w.extend(crate::config::unknown_people(cfg));
    w.extend(mig_notes(cfg));
    if !w.is_empty() {
        out.push_str("\nwarnings:\n");
        for line in w {
            let _ = writeln!(out, "  - {line}");
        }
    }
    let slices = crate::config::slice_notes(cfg);
    if !slices.is_empty() {
        out.push_str("\nslices:\n");
        for line in slices {
            let _ = writeln!(out, "  - {line}");
        }
    }
    let notes = min_runtime_notes(cfg);
    if !notes.is_empty() {
        out.push_str("\nminimum runtimes:\n");
        for line in notes {
            let _ = writeln!(out, "  - {line}");
        }
    }
    out
}

/// A MIG unit (SPEC §15) whose profile matches no instance on this machine, and why
/// (`no 1g.10gb MIG instance: GPU 0 has MIG disabled`). NVML is asked only when the config
/// has such a unit.
fn mig_notes(cfg: &ValidConfig) -> Vec<String> {
    use crate::model::Devices;
    let mig: Vec<(String, String)> = cfg
        .node_units()
        .into_iter()
        .filter_map(|(_, unit, d)| match d {
            Devices::Mig {
                profile,
                fake: None,
            } => Some((unit, profile)),
            _ => None,
        })
        .collect();
    if mig.is_empty() || !crate::exec::choice::runs_here(&cfg.executor()) {
        return Vec::new();
    }
    let found = crate::exec::Discovery::run();
    mig.into_iter()
        .filter_map(|(unit, profile)| {
            found
                .mig_instances(&profile)
                .err()
                .map(|why| format!("unit `{unit}` has 0 usable capacity on this machine: {why}"))
        })
        .collect()
}

fn errors_text(errors: &[ConfigError]) -> String {
    let mut out = String::new();
    for e in errors {
        // An error may quote what the file says (SPEC §9, terminal safety).
        let _ = writeln!(out, "  {}", crate::visible::visible(&e.to_string()));
    }
    out
}

/// `HH:MM:SS` UTC, for the `--watch` lines.
fn clock() -> String {
    let s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Turns watcher updates into `--watch` lines: one per change (a rejection is followed
/// by its errors, one per line).
#[derive(Default)]
pub struct WatchLog {
    in_force: Option<ValidConfig>,
}

impl WatchLog {
    pub fn line(&mut self, update: &ConfigUpdate) -> String {
        match update {
            ConfigUpdate::Applied(l) => {
                let mut line = format!("{} applied {}: {}", clock(), l.hash, one_line(&l.config));
                if let Some(old) = &self.in_force {
                    let c = changes(old, &l.config);
                    if c.is_empty() {
                        line.push_str("; nothing changed");
                    } else {
                        let _ = write!(line, "; {}", c.join(", "));
                    }
                }
                let w = warnings(&l.config).len();
                if w > 0 {
                    let _ = write!(
                        line,
                        " ({w} warning{}: see `shareq check`)",
                        if w == 1 { "" } else { "s" }
                    );
                }
                self.in_force = Some(l.config.clone());
                line.push('\n');
                line
            }
            ConfigUpdate::Rejected(errors) => format!(
                "{} rejected, {} ({} error{}):\n{}",
                clock(),
                if self.in_force.is_some() {
                    "the previous config stays in force"
                } else {
                    "nothing applied yet"
                },
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                errors_text(errors)
            ),
        }
    }
}

/// Exit 0 and a summary when `dir` is valid, 1 with every error when not. With `watch`,
/// keep printing one line per change until interrupted.
pub fn check(dir: &Path, watch: bool, against: Option<&Path>) -> Result<(), CliError> {
    if watch {
        let mut log = WatchLog::default();
        let on_update = Box::new(move |u: ConfigUpdate| {
            print!("{}", log.line(&u));
            let _ = std::io::stdout().flush();
        });
        return match Watcher::start(dir.to_path_buf(), on_update) {
            Ok(_watcher) => loop {
                std::thread::park();
            },
            Err(e) => Err(CliError::usage(format!("shareq check: {e}"))),
        };
    }
    match load_dir(dir) {
        Ok(loaded) => {
            print!("{}", report(dir, &loaded));
            if loaded.config.executor() == crate::model::Executor::Local {
                println!(
                    "\non this machine: {}",
                    crate::exec::containment::cgroup::Containment::describe(
                        crate::exec::start::starts_inside_groups(),
                    )
                );
            }
            match against {
                None => Ok(()),
                Some(state) => dry_run(dir, &loaded, state),
            }
        }
        Err(errors) => {
            eprint!(
                "{}: invalid ({} error{}):\n{}",
                dir.display(),
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                errors_text(&errors)
            );
            Err(CliError::printed(ExitKind::Failed))
        }
    }
}

/// The `--against STATE` section: what applying `loaded` (read from `dir`) would do to the
/// jobs now. A user who cannot read the state's database gets it from the scheduler,
/// which serves dry runs to admins (`dry_run` request).
fn dry_run(dir: &Path, loaded: &LoadedConfig, state: &Path) -> Result<(), CliError> {
    let cmd = format!("check --against {}", state.display());
    let answer = match crate::whatif::unreadable(state) {
        Some(why) => ask_scheduler(&cmd, dir, state, &why)?,
        None => {
            let mut notes = Vec::new();
            match crate::whatif::dry_run_on(state, &loaded.config, &mut notes) {
                Ok(d) => crate::whatif::DryRunAnswer::of(&d, notes),
                Err(e) => return Err(CliError::failed(format!("shareq {cmd}: {e}"))),
            }
        }
    };
    for n in &answer.notes {
        eprintln!("{n}");
    }
    println!(
        "\nagainst {} (the jobs its database holds now; nothing is changed):",
        state.display()
    );
    print!("{}", answer.text);
    Ok(())
}

/// The dry run from the scheduler of `state`, on the files of `dir` as this user reads them.
fn ask_scheduler(
    cmd: &str,
    dir: &Path,
    state: &Path,
    why: &str,
) -> Result<crate::whatif::DryRunAnswer, CliError> {
    let files =
        crate::whatif::files_of(dir).map_err(|e| CliError::failed(format!("shareq {cmd}: {e}")))?;
    let req = crate::server::Request::DryRun { config: files };
    match super::request(Some(state), &req) {
        Ok(crate::server::Response {
            ok: true,
            dry_run: Some(d),
            ..
        }) => {
            eprintln!("note: {why}; asked the scheduler (you are an admin)");
            Ok(d)
        }
        Ok(r) => Err(super::whatif::refused_by_scheduler(cmd, why, &r)),
        Err(e) => Err(super::whatif::no_scheduler(cmd, why, &e)),
    }
}
