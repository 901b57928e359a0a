//! `shareq replay`: the deterministic simulator of SPEC §6 — scenarios, CSV traces, the
//! simulated clock, `--check` and `--summary`.

mod check;
pub mod history;
mod scenario;
mod sim;
mod summary;

pub use check::{CheckReport, check};
pub use scenario::{Action, Expect, Scenario, ScenarioError, SimSubmit, TimedAction, load_trace};
pub use sim::{
    Forward, Observation, Options, Outcome, event_name, format_event, forward, run, run_backfilled,
    run_observed,
};
pub use summary::{
    Fact, FactKind, GroupSummary, LaneFigures, Standing, Stats, Summary, UnitFigures, WaitFigures,
};
