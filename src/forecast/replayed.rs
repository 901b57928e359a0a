//! Start estimates inside a replay, computed as live from the replay's own past (SPEC §11,
//! `shareq replay --estimates N`): a [`Learner`] watches the run, keeping the attempts
//! that ended (finished ones, and preempted ones as censored) as the live history keeps
//! them, and estimates every N-th submitted job at its submission instant, after the pass,
//! on a copy of the replay's scheduler — exactly what the live forecast would say then.

use super::{Estimate, EstimateKind, Predictor, Runtimes, Sample, estimate};
use crate::model::JobId;
use crate::replay::Observation;
use crate::sched::{Event, Sched, Time};
use std::collections::{HashMap, HashSet, VecDeque};

/// One sampled job's estimate, made at its submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampled {
    pub job: JobId,
    /// The instant it was submitted (and estimated), in the replay's ticks.
    pub at: Time,
    /// What the forecast said then (a job that started at once: the range of that instant).
    pub estimate: Estimate,
}

impl Sampled {
    /// The replay's line: `{"t":..,"event":"estimated","job":"..","kind":"range",
    /// "earliest":..,"start":..,"latest":..}` (times in scenario ticks; an absent one
    /// `null`; a lower bound adds `"waitsOn"`).
    pub fn line(&self, sched: &Sched) -> String {
        let time = |t: Option<Time>| t.map_or("null".to_string(), |t| t.to_string());
        let kind = self
            .estimate
            .kind(self.at)
            .unwrap_or(EstimateKind::BeyondHorizon);
        let name = serde_json::to_string(&sched.replay_name(self.job)).unwrap_or_default();
        let mut line = format!(
            "{{\"t\":{},\"event\":\"estimated\",\"job\":{name},\"kind\":\"{}\",\"earliest\":{},\"start\":{},\"latest\":{}",
            self.at,
            kind.as_str(),
            time(self.estimate.earliest()),
            time(self.estimate.start()),
            time(self.estimate.latest()),
        );
        if let Estimate::AtLeast { why, .. } = &self.estimate {
            line.push_str(",\"waitsOn\":");
            line.push_str(&serde_json::to_string(why).unwrap_or_default());
        }
        line.push('}');
        line
    }
}

/// Watches a replay (its observer) and estimates every `every`-th submitted job.
#[derive(Debug)]
pub struct Learner {
    every: u64,
    predictors: Vec<Predictor>,
    submitted: u64,
    started: HashMap<JobId, Time>,
    timed_out: HashSet<JobId>,
    /// The latest attempts that ended, newest first (at most `LEARNED_FROM`).
    history: VecDeque<Sample>,
    /// How many attempts it has learned from in all.
    learned: u64,
    /// The instant of the pass whose batch comes next.
    pass_at: Option<Time>,
    /// Submitted since the last pass's batch, to estimate after it.
    due: Vec<JobId>,
}

impl Learner {
    /// Estimate every `every`-th submission (1: all) with SPEC §11's predictor.
    pub fn new(every: u64) -> Learner {
        Learner::with_predictors(every, vec![Predictor::User])
    }

    /// The same, each sample estimated once per predictor (the calibration compares them).
    pub fn with_predictors(every: u64, predictors: Vec<Predictor>) -> Learner {
        Learner {
            every: every.max(1),
            predictors,
            submitted: 0,
            started: HashMap::new(),
            timed_out: HashSet::new(),
            history: VecDeque::new(),
            learned: 0,
            pass_at: None,
            due: Vec::new(),
        }
    }

    /// See one observation; after the pass of an instant at which sampled jobs were
    /// submitted, their estimates (one per predictor, in order).
    pub fn observe(&mut self, o: &Observation) -> Vec<Vec<Sampled>> {
        if o.before_pass {
            self.pass_at = Some(o.t);
            return Vec::new();
        }
        let tps = o.sched.ticks_per_second().max(1);
        let mut started_now = HashSet::new();
        for ev in o.events {
            match ev {
                Event::Submitted { job } => {
                    self.submitted += 1;
                    if self.submitted.is_multiple_of(self.every) {
                        self.due.push(*job);
                    }
                }
                Event::Started { job, .. } => {
                    self.started.insert(*job, o.t);
                    started_now.insert(*job);
                }
                Event::TimedOut { job } => {
                    self.timed_out.insert(*job);
                }
                Event::Succeeded { job } => self.ended(o, *job, false, tps),
                Event::Requeued { job, lost } => self.ended(o, *job, lost.is_some(), tps),
                Event::Failed { job, lost, .. } => self.ended(o, *job, lost.is_some(), tps),
                Event::Cancelled { job, .. } => {
                    self.started.remove(job);
                }
                _ => {}
            }
        }
        if self.pass_at != Some(o.t) || self.due.is_empty() {
            return Vec::new();
        }
        self.pass_at = None;
        let due = std::mem::take(&mut self.due);
        let mut out = Vec::new();
        for &p in &self.predictors {
            let runtimes = Runtimes::from_samples(self.history.iter().cloned()).with_predictor(p);
            let est = estimate(o.sched.clone(), o.t, &runtimes);
            let mut these = Vec::new();
            for &job in &due {
                // An array's parent is estimated by its first child.
                let watched = match o.sched.job(job).and_then(|j| j.array_size()) {
                    Some(_) => JobId(job.0 + 1),
                    None => job,
                };
                let estimate = if started_now.contains(&watched) {
                    Estimate::Range {
                        earliest: o.t,
                        start: o.t,
                        latest: o.t,
                    }
                } else {
                    est.of(watched)
                };
                // A job waiting for its dependencies has no estimate (`jobs`: `after`).
                if estimate != Estimate::NotYet {
                    these.push(Sampled {
                        job,
                        at: o.t,
                        estimate,
                    });
                }
            }
            out.push(these);
        }
        out
    }

    fn ended(&mut self, o: &Observation, job: JobId, censored: bool, tps: i64) {
        let Some(t0) = self.started.remove(&job) else {
            return;
        };
        if self.timed_out.remove(&job) {
            return;
        }
        let Some(j) = o.sched.job(job) else { return };
        self.history.push_front(Sample {
            user: j
                .spec
                .submitter
                .as_ref()
                .map_or(String::new(), |s| s.name.clone()),
            share: o.sched.share_name(j.share).to_string(),
            gpus: j.spec.quantity,
            ms: (o.t - t0).saturating_mul(1000) / tps,
            censored,
        });
        self.history.truncate(super::runtimes::LEARNED_FROM);
        self.learned += 1;
    }

    /// The attempts it keeps (the newest [`super::runtimes::LEARNED_FROM`], newest first),
    /// and how many it has learned from in all (a version: it moves with every one).
    pub fn history(&self) -> (&VecDeque<Sample>, u64) {
        (&self.history, self.learned)
    }
}
