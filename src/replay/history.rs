//! The real history as a replay trace (`shareq whatif`, `shareq export-trace`): each job
//! submitted in the window becomes one submit (arrival relative to the window's first,
//! share, unit, GPUs, priority, and how long its last attempt really ran), and the trace
//! is replayed under two configs to compare them share by share.
//!
//! A job that never started (cancelled or still queued) is left out, since its run time
//! is unknown; one still running counts with the time it has run so far. Run times are
//! rounded up to whole seconds. Every job of the trace exits 0 (its retries and exit
//! status are not replayed). Each job is named `<id>-<jobName>` (names are unique within
//! a scenario).

use super::scenario::{Action, Scenario, SimSubmit, TimedAction};
use super::sim::{Options, run};
use crate::model::ValidConfig;
use serde::Serialize;
use std::collections::BTreeMap;

/// One real submission of the window, as a replay trace needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceJob {
    pub id: u64,
    pub name: String,
    pub share: String,
    pub unit: String,
    pub quantity: u32,
    pub priority: u32,
    /// ms since the epoch.
    pub submitted: crate::sched::Time,
    /// How long its last attempt ran (ms): to its end, or until `now` while it runs.
    /// `None`: it never started.
    pub ran_ms: Option<i64>,
    /// Its last attempt is still running (`ran_ms` is a lower bound).
    pub running: bool,
    /// The submitter (SPEC §12: fair share orders by it).
    pub user: Option<String>,
}

/// One submit of the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRow {
    /// Seconds after the window's first submission.
    pub at: i64,
    pub duration: i64,
    pub quantity: u32,
    pub share: String,
    pub name: String,
    pub priority: u32,
    pub unit: String,
    pub user: Option<String>,
}

/// The trace of a window of history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryTrace {
    pub rows: Vec<TraceRow>,
    /// Jobs of the window left out: they never started.
    pub never_started: usize,
    /// Jobs still running, counted with their run time so far.
    pub still_running: usize,
    /// The first submission (ms since the epoch), `at` 0.
    pub origin_ms: i64,
}

impl HistoryTrace {
    /// From the store's rows (in submission order).
    pub fn from_jobs(jobs: &[TraceJob]) -> HistoryTrace {
        let mut t = HistoryTrace {
            origin_ms: jobs.first().map_or(0, |j| j.submitted),
            ..HistoryTrace::default()
        };
        for j in jobs {
            let Some(ran) = j.ran_ms else {
                t.never_started += 1;
                continue;
            };
            t.still_running += usize::from(j.running);
            t.rows.push(TraceRow {
                at: (j.submitted - t.origin_ms).max(0) / 1000,
                duration: ((ran + 999) / 1000).max(1),
                quantity: j.quantity,
                share: j.share.clone(),
                // Names are unique within a scenario: the job id makes them so.
                name: format!("{}-{}", j.id, j.name).chars().take(128).collect(),
                priority: j.priority,
                unit: j.unit.clone(),
                user: j.user.clone(),
            });
        }
        t
    }

    /// The trace as SPEC §6's CSV (`at,duration,quantity,quotaShareName,jobName,
    /// schedulingPriority,capacityUnit,user`; the submitter, which fair share orders by).
    pub fn to_csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let _ = w.write_record([
            "at",
            "duration",
            "quantity",
            "quotaShareName",
            "jobName",
            "schedulingPriority",
            "capacityUnit",
            "user",
        ]);
        for r in &self.rows {
            let _ = w.write_record([
                r.at.to_string(),
                r.duration.to_string(),
                r.quantity.to_string(),
                r.share.clone(),
                r.name.clone(),
                r.priority.to_string(),
                r.unit.clone(),
                r.user.clone().unwrap_or_default(),
            ]);
        }
        String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
    }

    /// The trace under `config`, as a scenario.
    pub fn scenario(&self, config: ValidConfig) -> Scenario {
        let trace = self
            .rows
            .iter()
            .map(|r| TimedAction {
                at: r.at,
                action: Action::Submit(Box::new(SimSubmit {
                    job_name: r.name.clone(),
                    quota_share_name: r.share.clone(),
                    capacity_unit: Some(r.unit.clone()),
                    quantity: r.quantity,
                    scheduling_priority: r.priority,
                    duration: Some(r.duration),
                    exit_code: 0,
                    stop_after: 0,
                    preemption_retries_before_termination: None,
                    retry_strategy: None,
                    timeout_seconds: None,
                    command: None,
                    env: None,
                    working_directory: None,
                    user: r.user.clone(),
                    depends_on: Vec::new(),
                    array_properties: None,
                    checkpoint_every_seconds: None,
                    num_nodes: None,
                })),
                line: None,
            })
            .collect();
        Scenario {
            file: "history".to_string(),
            description: None,
            config,
            events: Vec::new(),
            trace,
            until: None,
            expect: None,
        }
    }
}

/// One share's figures under one config.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ShareFigures {
    pub jobs_started: u64,
    pub jobs_rejected: u64,
    /// Seconds from submission to first start.
    pub wait_p50: i64,
    pub wait_p95: i64,
    pub gpu_hours_used: f64,
    pub gpu_hours_borrowed: f64,
    pub gpu_hours_lent: f64,
    pub preemptions: u64,
    pub gpu_hours_lost: f64,
}

/// The whole run under one config.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunFigures {
    pub utilisation: f64,
    /// Seconds from the first submission to the last event.
    pub span: f64,
    pub shares: BTreeMap<String, ShareFigures>,
}

/// The trace replayed under the current and the proposed config.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhatIf {
    pub jobs: usize,
    pub never_started: usize,
    pub still_running: usize,
    pub current: RunFigures,
    pub proposed: RunFigures,
}

/// Replay `trace` under `config` and read its figures.
pub fn figures(trace: &HistoryTrace, config: ValidConfig) -> RunFigures {
    figures_over(trace, config, Vec::new())
}

/// [`figures`] with the config replaced at the given instants (seconds after the trace's
/// origin), as the configs in force over the window were.
pub fn figures_over(
    trace: &HistoryTrace,
    config: ValidConfig,
    changes: Vec<(i64, ValidConfig)>,
) -> RunFigures {
    let mut sc = trace.scenario(config);
    sc.events = changes
        .into_iter()
        .map(|(at, c)| TimedAction {
            at,
            action: Action::Config(Box::new(Ok(c))),
            line: None,
        })
        .collect();
    let mut out: Vec<u8> = Vec::new();
    let opts = Options {
        summary: true,
        keep_lines: false,
    };
    // Writing to memory cannot fail.
    let _ = run(&sc, &mut out, opts);
    let text = String::from_utf8_lossy(&out);
    let mut fig = RunFigures::default();
    let mut started: BTreeMap<String, u64> = BTreeMap::new();
    for line in text.lines() {
        if line.contains("\"event\":\"rejected\"") || line.contains("\"event\":\"summary\"") {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if v["event"] == "rejected" {
                let share = v["share"].as_str().unwrap_or("?").to_string();
                fig.shares.entry(share).or_default().jobs_rejected += 1;
                continue;
            }
            fig.utilisation = v["utilisation"].as_f64().unwrap_or(0.0);
            fig.span = v["span"].as_f64().unwrap_or(0.0);
            if let Some(shares) = v["shares"].as_object() {
                for (name, s) in shares {
                    let f = fig.shares.entry(name.clone()).or_default();
                    let h = |k: &str| s[k].as_f64().unwrap_or(0.0) / 3600.0;
                    f.wait_p50 = s["p50_wait"].as_i64().unwrap_or(0);
                    f.wait_p95 = s["p95_wait"].as_i64().unwrap_or(0);
                    f.gpu_hours_used = h("gpu_seconds_within_limit") + h("gpu_seconds_borrowed");
                    f.gpu_hours_borrowed = h("gpu_seconds_borrowed");
                    f.gpu_hours_lent = h("gpu_seconds_lent");
                    f.preemptions = s["preemptions"].as_u64().unwrap_or(0);
                    f.gpu_hours_lost = h("gpu_seconds_lost_to_preemption");
                }
            }
        } else if line.contains("\"event\":\"started\"")
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(line)
        {
            *started
                .entry(v["share"].as_str().unwrap_or("?").to_string())
                .or_default() += 1;
        }
    }
    // Starts count attempts; a preempted job starts again.
    for (share, n) in started {
        let f = fig.shares.entry(share).or_default();
        f.jobs_started = n.saturating_sub(f.preemptions);
    }
    fig
}

/// Compare `current` and `proposed` on the trace.
/// The window under the configs in force then (`current`, replaced by each of
/// `current_changes` at its instant, seconds after the origin) and under `proposed`.
pub fn what_if(
    trace: &HistoryTrace,
    current: ValidConfig,
    current_changes: Vec<(i64, ValidConfig)>,
    proposed: ValidConfig,
) -> WhatIf {
    WhatIf {
        jobs: trace.rows.len(),
        never_started: trace.never_started,
        still_running: trace.still_running,
        current: figures_over(trace, current, current_changes),
        proposed: figures(trace, proposed),
    }
}

impl WhatIf {
    /// Both runs side by side, one block per share.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} jobs replayed ({} never started and are left out, {} still running counted with their time so far)",
            self.jobs, self.never_started, self.still_running
        );
        let _ = writeln!(out, "{:<28} {:>14} {:>14}", "", "current", "proposed");
        let _ = writeln!(
            out,
            "{:<28} {:>13.1}% {:>13.1}%",
            "utilisation",
            self.current.utilisation * 100.0,
            self.proposed.utilisation * 100.0
        );
        let names: std::collections::BTreeSet<&String> = self
            .current
            .shares
            .keys()
            .chain(self.proposed.shares.keys())
            .collect();
        let dur = |s: i64| crate::duration::human(s * 1000);
        for name in names {
            let d = ShareFigures::default();
            let c = self.current.shares.get(name).unwrap_or(&d);
            let p = self.proposed.shares.get(name).unwrap_or(&d);
            let _ = writeln!(out, "{name}");
            let rows: [(&str, String, String); 9] = [
                (
                    "  jobs started",
                    c.jobs_started.to_string(),
                    p.jobs_started.to_string(),
                ),
                (
                    "  jobs rejected",
                    c.jobs_rejected.to_string(),
                    p.jobs_rejected.to_string(),
                ),
                ("  wait p50", dur(c.wait_p50), dur(p.wait_p50)),
                ("  wait p95", dur(c.wait_p95), dur(p.wait_p95)),
                (
                    "  GPU-hours used",
                    format!("{:.1}", c.gpu_hours_used),
                    format!("{:.1}", p.gpu_hours_used),
                ),
                (
                    "  GPU-hours borrowed",
                    format!("{:.1}", c.gpu_hours_borrowed),
                    format!("{:.1}", p.gpu_hours_borrowed),
                ),
                (
                    "  GPU-hours lent",
                    format!("{:.1}", c.gpu_hours_lent),
                    format!("{:.1}", p.gpu_hours_lent),
                ),
                (
                    "  preemptions",
                    c.preemptions.to_string(),
                    p.preemptions.to_string(),
                ),
                (
                    "  GPU-hours lost",
                    format!("{:.1}", c.gpu_hours_lost),
                    format!("{:.1}", p.gpu_hours_lost),
                ),
            ];
            for (label, a, b) in rows {
                let _ = writeln!(out, "{label:<28} {a:>14} {b:>14}");
            }
        }
        out
    }
}
