//! One turn of the runtime's loop: the work it takes in, what each input did, and the
//! answers held back until the turn's decisions are recorded and carried out.

use super::input::{CancelOutcome, Input};
use super::refusal::Refusal;
use super::timers::Timer;
use crate::model::JobId;
use tokio::sync::oneshot;

/// Answers held back until the batch's decisions are carried out (and, with a store,
/// recorded): a job is accepted only once that is done.
pub(super) enum Deferred {
    Submit(
        oneshot::Sender<Result<JobId, Refusal>>,
        Result<JobId, Refusal>,
    ),
    Cancel(oneshot::Sender<Vec<CancelOutcome>>, Vec<CancelOutcome>),
    Priority(
        oneshot::Sender<Result<bool, Refusal>>,
        Result<bool, Refusal>,
    ),
    Reload(oneshot::Sender<Result<(), Refusal>>, Result<(), Refusal>),
}

/// A shutdown asked for: whether to stop the jobs first, and who waits for the end.
pub(super) struct Shutdown {
    pub(super) stop_jobs: bool,
    pub(super) replies: Vec<oneshot::Sender<()>>,
}

/// One unit of work of a turn.
// Each item is taken in once per turn; boxing the inputs would cost an allocation each.
#[allow(clippy::large_enum_variant)]
pub(super) enum Work {
    Input(Input),
    Timer(Timer),
}

/// What taking in one input did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Nothing a reader could see.
    Nothing,
    /// The picture changed (a state, telemetry), the scheduler's choices did not.
    Redraw,
    /// The scheduler's inputs changed: run a pass.
    Reschedule,
}

/// What one turn collected: whether to run a pass, and who waits for the turn's end.
#[derive(Default)]
pub(super) struct Turn {
    pub(super) needs_pass: bool,
    pub(super) changed: bool,
    pub(super) deferred: Vec<Deferred>,
    pub(super) syncs: Vec<oneshot::Sender<()>>,
}

impl Turn {
    pub(super) fn note(&mut self, outcome: Outcome) {
        self.needs_pass |= outcome == Outcome::Reschedule;
        self.changed |= outcome != Outcome::Nothing;
    }

    /// The turn's decisions could not be recorded (the scheduler stops, `msg` says why):
    /// refuse everything that waits for them.
    pub(super) fn refuse(self, msg: &str) {
        let stopped = || Refusal::Stopped(msg.to_string());
        for d in self.deferred {
            match d {
                Deferred::Submit(tx, _) => drop(tx.send(Err(stopped()))),
                Deferred::Cancel(tx, v) => drop(
                    tx.send(
                        v.into_iter()
                            .map(|o| CancelOutcome {
                                cancelled: false,
                                error: Some(msg.to_string()),
                                ..o
                            })
                            .collect(),
                    ),
                ),
                Deferred::Priority(tx, _) => drop(tx.send(Err(stopped()))),
                Deferred::Reload(tx, _) => drop(tx.send(Err(stopped()))),
            }
        }
    }

    /// Send every answer held back until the turn's decisions were recorded.
    pub(super) fn answer(self) {
        for d in self.deferred {
            match d {
                Deferred::Submit(tx, v) => drop(tx.send(v)),
                Deferred::Cancel(tx, v) => drop(tx.send(v)),
                Deferred::Priority(tx, v) => drop(tx.send(v)),
                Deferred::Reload(tx, v) => drop(tx.send(v)),
            }
        }
        for tx in self.syncs {
            let _ = tx.send(());
        }
    }
}
