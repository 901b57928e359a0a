//! Reading a replay scenario (SPEC §6): the YAML file, its inline config, its events and
//! an optional CSV trace, with errors that name the file, the line and what is wrong.

use crate::config::Document;
use crate::config::{ConfigError, SourcedDocument, parse_value_documents, validate};
use crate::model::{JobSpec, MAX_PRIORITY, RetryStrategy, ValidConfig};
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// A scenario that cannot be run (exit 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// A job submission in a scenario: the job fields plus the simulation's own.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimSubmit {
    pub job_name: String,
    pub quota_share_name: String,
    #[serde(default)]
    pub capacity_unit: Option<String>,
    #[serde(default = "one")]
    pub quantity: u32,
    #[serde(default)]
    pub scheduling_priority: u32,
    /// Running time in seconds; absent = runs until stopped.
    #[serde(default)]
    pub duration: Option<i64>,
    #[serde(default)]
    pub exit_code: i32,
    /// Seconds the job takes to exit after SIGTERM (capped by the grace period).
    #[serde(default)]
    pub stop_after: u32,
    #[serde(default)]
    pub preemption_retries_before_termination: Option<u32>,
    #[serde(default)]
    pub retry_strategy: Option<RetryStrategy>,
    /// Accepted for symmetry with live jobs; replay ignores these.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub command: Option<serde_yaml::Value>,
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub working_directory: Option<String>,
    /// The submitter (SPEC §12); absent: `user`, with no per-user figures.
    #[serde(default)]
    pub user: Option<String>,
    /// SPEC §13: the jobs (by jobName) it waits for.
    #[serde(default)]
    pub depends_on: Vec<SimDependency>,
    #[serde(default)]
    pub array_properties: Option<crate::model::ArrayProperties>,
    /// SPEC §14: the job saves at every multiple of this of its attempt's run time (and
    /// at once on a notice); absent = it saves nothing.
    #[serde(default)]
    pub checkpoint_every_seconds: Option<u64>,
    /// A multi-node job (SPEC §16): `quantity` on each of this many nodes.
    #[serde(default)]
    pub num_nodes: Option<u32>,
}

/// One `dependsOn` entry of a scenario: a job by its name, or `{type: SEQUENTIAL}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimDependency {
    #[serde(default)]
    pub job_name: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<crate::model::DependencyType>,
}

fn one() -> u32 {
    1
}

impl SimSubmit {
    pub fn job_spec(&self) -> JobSpec {
        let mut spec = JobSpec::new(
            &self.job_name,
            &self.quota_share_name,
            self.quantity,
            self.scheduling_priority,
        );
        spec.capacity_unit = self.capacity_unit.clone();
        spec.preemption_retries_before_termination = self.preemption_retries_before_termination;
        spec.retry_strategy = self.retry_strategy.clone();
        // Replay itself ignores it (SPEC §6); a forecast run on a copy reads it.
        spec.timeout_seconds = self.timeout_seconds;
        spec.submitter = self.user.as_ref().map(|name| {
            std::sync::Arc::new(crate::model::Submitter {
                name: name.clone(),
                uid: 0,
            })
        });
        spec.array_properties = self.array_properties;
        spec.checkpoint_every_seconds = self.checkpoint_every_seconds;
        spec.num_nodes = self.num_nodes;
        spec
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimUpdate {
    pub job_name: String,
    pub scheduling_priority: u32,
}

/// What happens at one instant.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Submit(Box<SimSubmit>),
    Cancel(String),
    Update(SimUpdate),
    /// Boxed: a whole config is large beside the other actions.
    /// A config that does not validate is applied as the live scheduler would: rejected,
    /// with its errors.
    Config(Box<Result<ValidConfig, Vec<ConfigError>>>),
    /// A node goes down (SPEC §10): its jobs are preempted with DEVICE_LOST and its
    /// devices leave `usable` until a config event installs it again.
    NodeDown(String),
    /// A node is drained (SPEC §10): no new jobs; its running ones go on.
    NodeDrain(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct TimedAction {
    pub at: i64,
    pub action: Action,
    /// The scenario line it came from, when known.
    pub line: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    at: i64,
    #[serde(default)]
    submit: Option<SimSubmit>,
    #[serde(default)]
    cancel: Option<String>,
    #[serde(default)]
    update: Option<SimUpdate>,
    /// Read as plain YAML: a reload that does not parse is rejected as an event, as live
    /// (SPEC §6); only the initial config makes a scenario unreadable.
    #[serde(default)]
    config: Option<Vec<serde_yaml::Value>>,
    #[serde(default, rename = "nodeDown")]
    node_down: Option<String>,
    #[serde(default, rename = "nodeDrain")]
    node_drain: Option<String>,
}

/// `expect:` of a scenario, checked by `--check`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Exactly these preemptions, in this order (only the keys given are compared).
    #[serde(default)]
    pub preempted: Option<Vec<serde_json::Map<String, serde_json::Value>>>,
    /// Each must match some output line (only the keys given are compared).
    #[serde(default)]
    pub include: Vec<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    #[serde(default)]
    description: Option<String>,
    config: Vec<Document>,
    #[serde(default)]
    events: Vec<RawEvent>,
    #[serde(default)]
    trace: Option<String>,
    #[serde(default)]
    until: Option<i64>,
    #[serde(default)]
    expect: Option<Expect>,
}

/// A scenario ready to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub file: String,
    pub description: Option<String>,
    pub config: ValidConfig,
    /// Events in time order (file order within an instant).
    pub events: Vec<TimedAction>,
    /// Trace rows, in time order (they come before `events` at the same instant).
    pub trace: Vec<TimedAction>,
    pub until: Option<i64>,
    pub expect: Option<Expect>,
}

fn scenario_error(file: &str, line: Option<usize>, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        file: file.to_string(),
        line,
        message: message.into(),
    }
}

fn from_yaml_error(file: &str, e: &serde_yaml::Error) -> ScenarioError {
    let mut msg = e.to_string();
    if let Some(i) = msg.find(" at line ") {
        msg.truncate(i);
    }
    scenario_error(file, e.location().map(|l| l.line()), msg)
}

pub(crate) fn config_errors(errs: &[ConfigError]) -> String {
    errs.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Inline documents: the scenario error already names the file, so the documents do not.
fn sourced(docs: Vec<Document>) -> Vec<SourcedDocument> {
    docs.into_iter()
        .map(|doc| SourcedDocument {
            origin: crate::config::Origin::default(),
            doc,
        })
        .collect()
}

/// The line of each `- at:` item under `events:` (1-based), for error messages.
fn event_lines(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut in_events = false;
    for (i, l) in text.lines().enumerate() {
        if !l.starts_with(' ') && !l.starts_with('-') && !l.is_empty() && !l.starts_with('#') {
            in_events = l.starts_with("events:");
            continue;
        }
        let t = l.trim_start();
        if in_events
            && (t.starts_with("- at:") || t.starts_with("- {at:") || t.starts_with("- { at:"))
        {
            out.push(i + 1);
        }
    }
    out
}

impl Scenario {
    /// Read and check a scenario file (and its trace).
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| scenario_error(&file, None, format!("cannot read: {e}")))?;
        Scenario::parse(&text, &file, path.parent())
    }

    /// Parse a scenario from text; `dir` resolves a relative `trace:`.
    pub fn parse(text: &str, file: &str, dir: Option<&Path>) -> Result<Scenario, ScenarioError> {
        let raw: RawScenario = serde_yaml::from_str(text).map_err(|e| from_yaml_error(file, &e))?;
        let config = validate(sourced(raw.config)).map_err(|errs| {
            scenario_error(
                file,
                None,
                format!("invalid config: {}", config_errors(&errs)),
            )
        })?;
        let lines = event_lines(text);
        let mut events = Vec::with_capacity(raw.events.len());
        for (i, ev) in raw.events.into_iter().enumerate() {
            let line = lines.get(i).copied();
            let kinds = usize::from(ev.submit.is_some())
                + usize::from(ev.cancel.is_some())
                + usize::from(ev.update.is_some())
                + usize::from(ev.config.is_some())
                + usize::from(ev.node_down.is_some())
                + usize::from(ev.node_drain.is_some());
            if kinds != 1 {
                return Err(scenario_error(
                    file,
                    line,
                    format!(
                        "event {} (at {}) must have exactly one of submit, cancel, update, config, nodeDown, nodeDrain; it has {kinds}",
                        i + 1,
                        ev.at
                    ),
                ));
            }
            if ev.at < 0 {
                return Err(scenario_error(
                    file,
                    line,
                    format!("event {}: at {} is negative", i + 1, ev.at),
                ));
            }
            let action = if let Some(s) = ev.submit {
                if s.checkpoint_every_seconds == Some(0) {
                    return Err(scenario_error(
                        file,
                        line,
                        format!(
                            "submit of `{}`: checkpointEverySeconds must be at least 1 (leave it out for none)",
                            s.job_name
                        ),
                    ));
                }
                Action::Submit(Box::new(s))
            } else if let Some(c) = ev.cancel {
                Action::Cancel(c)
            } else if let Some(u) = ev.update {
                if u.scheduling_priority > MAX_PRIORITY {
                    return Err(scenario_error(
                        file,
                        line,
                        format!(
                            "update of `{}`: schedulingPriority {} is out of range 0..{MAX_PRIORITY}",
                            u.job_name, u.scheduling_priority
                        ),
                    ));
                }
                Action::Update(u)
            } else if let Some(n) = ev.node_down.clone().or(ev.node_drain.clone()) {
                let down = ev.node_down.is_some();
                let what = if down { "nodeDown" } else { "nodeDrain" };
                if !config.has_nodes() || !config.nodes().iter().any(|(name, _)| *name == n) {
                    return Err(scenario_error(
                        file,
                        line,
                        format!(
                            "event {}: {what} `{n}` is not a node of the scenario's config",
                            i + 1
                        ),
                    ));
                }
                if down {
                    Action::NodeDown(n)
                } else {
                    Action::NodeDrain(n)
                }
            } else {
                let docs = ev.config.unwrap_or_default();
                Action::Config(Box::new(
                    parse_value_documents(&docs, None).and_then(validate),
                ))
            };
            events.push(TimedAction {
                at: ev.at,
                action,
                line,
            });
        }
        events.sort_by_key(|e| e.at);
        let trace = match &raw.trace {
            None => Vec::new(),
            Some(t) => {
                let p = dir.map_or_else(|| PathBuf::from(t), |d| d.join(t));
                load_trace(&p)?
            }
        };
        // Names are unique; cancels and updates name a job of the scenario.
        let mut names: HashSet<&str> = HashSet::with_capacity(trace.len() + events.len());
        for a in trace.iter().chain(events.iter()) {
            if let Action::Submit(s) = &a.action
                && !names.insert(s.job_name.as_str())
            {
                return Err(scenario_error(
                    file,
                    a.line,
                    format!(
                        "job name `{}` is used twice: names are unique within a scenario",
                        s.job_name
                    ),
                ));
            }
        }
        for a in &events {
            let name = match &a.action {
                Action::Cancel(n) => n,
                Action::Update(u) => &u.job_name,
                _ => continue,
            };
            if !names.contains(name.as_str()) {
                return Err(scenario_error(
                    file,
                    a.line,
                    format!(
                        "names unknown job `{name}`: no submit in this scenario has that jobName"
                    ),
                ));
            }
        }
        Ok(Scenario {
            file: file.to_string(),
            description: raw.description,
            config,
            events,
            trace,
            until: raw.until,
            expect: raw.expect,
        })
    }
}

/// Read a CSV trace: header names the columns; times must not go backwards.
pub fn load_trace(path: &Path) -> Result<Vec<TimedAction>, ScenarioError> {
    let file = path.display().to_string();
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| scenario_error(&file, None, format!("cannot read trace: {e}")))?;
    let headers = rdr
        .headers()
        .map_err(|e| scenario_error(&file, Some(1), format!("bad header: {e}")))?
        .clone();
    const KNOWN: &[&str] = &[
        "at",
        "duration",
        "quantity",
        "quotaShareName",
        "jobName",
        "schedulingPriority",
        "capacityUnit",
        "user",
        "checkpointEverySeconds",
        "numNodes",
    ];
    let mut col: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, h) in headers.iter().enumerate() {
        match KNOWN.iter().find(|k| **k == h) {
            Some(k) => {
                col.insert(k, i);
            }
            None => {
                return Err(scenario_error(
                    &file,
                    Some(1),
                    format!("unknown column `{h}` (columns: {})", KNOWN.join(", ")),
                ));
            }
        }
    }
    for req in ["at", "duration", "quantity", "quotaShareName"] {
        if !col.contains_key(req) {
            return Err(scenario_error(
                &file,
                Some(1),
                format!("missing column `{req}`"),
            ));
        }
    }
    let mut out = Vec::new();
    let mut last = i64::MIN;
    for (n, rec) in rdr.records().enumerate() {
        let line = n + 2;
        let rec = rec.map_err(|e| scenario_error(&file, Some(line), format!("{e}")))?;
        let get = |k: &str| {
            col.get(k)
                .and_then(|&i| rec.get(i))
                .filter(|v| !v.is_empty())
        };
        let num = |k: &str| -> Result<Option<i64>, ScenarioError> {
            get(k)
                .map(|v| {
                    v.parse::<i64>().map_err(|_| {
                        scenario_error(
                            &file,
                            Some(line),
                            format!("{k}: `{v}` is not a whole number"),
                        )
                    })
                })
                .transpose()
        };
        let at = num("at")?.ok_or_else(|| scenario_error(&file, Some(line), "at: missing"))?;
        if at < last {
            return Err(scenario_error(
                &file,
                Some(line),
                format!(
                    "at {at} is earlier than the previous row's {last}: rows must be in time order"
                ),
            ));
        }
        if at < 0 {
            return Err(scenario_error(
                &file,
                Some(line),
                format!("at {at} is negative"),
            ));
        }
        last = at;
        let duration = num("duration")?;
        if duration.is_some_and(|d| d < 0) {
            return Err(scenario_error(&file, Some(line), "duration is negative"));
        }
        let every = num("checkpointEverySeconds")?;
        let every = every
            .map(|c| {
                u64::try_from(c).ok().filter(|&c| c >= 1).ok_or_else(|| {
                    scenario_error(
                        &file,
                        Some(line),
                        format!("checkpointEverySeconds {c} must be at least 1 (empty for none)"),
                    )
                })
            })
            .transpose()?;
        // SPEC §16: a gang's node count (the submit checks 2..64; `1` or empty: a plain
        // job, as a trace's column is filled for every row).
        let nodes = num("numNodes")?
            .map(|c| {
                u32::try_from(c).map_err(|_| {
                    scenario_error(&file, Some(line), format!("numNodes {c} is out of range"))
                })
            })
            .transpose()?
            .filter(|&c| c != 1);
        let quantity = num("quantity")?
            .ok_or_else(|| scenario_error(&file, Some(line), "quantity: missing"))?;
        let quantity = u32::try_from(quantity).map_err(|_| {
            scenario_error(
                &file,
                Some(line),
                format!("quantity {quantity} is out of range"),
            )
        })?;
        let prio = num("schedulingPriority")?.unwrap_or(0);
        let prio = u32::try_from(prio).map_err(|_| {
            scenario_error(
                &file,
                Some(line),
                format!("schedulingPriority {prio} is out of range"),
            )
        })?;
        let share = get("quotaShareName")
            .ok_or_else(|| scenario_error(&file, Some(line), "quotaShareName: missing"))?;
        let name = get("jobName").map_or_else(|| format!("job-{}", n + 1), str::to_string);
        out.push(TimedAction {
            at,
            line: None,
            action: Action::Submit(Box::new(SimSubmit {
                job_name: name,
                quota_share_name: share.to_string(),
                capacity_unit: get("capacityUnit").map(str::to_string),
                quantity,
                scheduling_priority: prio,
                duration,
                exit_code: 0,
                stop_after: 0,
                preemption_retries_before_termination: None,
                retry_strategy: None,
                timeout_seconds: None,
                command: None,
                env: None,
                working_directory: None,
                user: get("user").filter(|u| !u.is_empty()).map(str::to_string),
                depends_on: Vec::new(),
                array_properties: None,
                checkpoint_every_seconds: every,
                num_nodes: nodes,
            })),
        });
    }
    Ok(out)
}
