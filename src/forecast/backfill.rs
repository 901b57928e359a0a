//! Run-time guesses for backfill under a reservation (a study, docs/SEMANTICS.md; off in
//! the live scheduler): [`Learned`] guesses a job's end as the forecast would (SPEC §11:
//! its own timeout or declared runtime, else a percentile of the Kaplan–Meier estimate of
//! its user's or its share's past attempts), learning from a replay's own past as
//! `shareq replay --estimates` does (`forecast::replayed`), never from the trace's true
//! durations.

use super::replayed::Learner;
use super::{Runtimes, attempt_ticks};
use crate::replay::Observation;
use crate::sched::{Job, RunGuess, Sched, Time};
use std::collections::HashMap;
use std::sync::Mutex;

/// The history is read again at most this often (simulated seconds), as a live scheduler
/// would refresh what it learned, not at every ended attempt.
pub const RELEARN_SECONDS: i64 = 3600;

/// A [`RunGuess`] from the history a replay makes: feed it every observation of the run
/// ([`Learned::observe`]), and it guesses with one of the predictions' percentiles (0, 1,
/// 2: the 25th, 50th, 75th), which may differ for running attempts (when the reserving
/// job would start) and for queued jobs (whether one ends in time).
#[derive(Debug)]
pub struct Learned {
    running: usize,
    queued: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    learner: Learner,
    runtimes: Runtimes,
    /// The share names of the scheduler, by index, when the history was last read.
    names: Vec<String>,
    /// When the history was last read, and its version then.
    read_at: Option<Time>,
    version: u64,
    /// Per (job, attempt, holding): the attempt's guessed length in ticks from its start
    /// (`None`: unknown), until the history is read again, or until a running attempt
    /// outlives it (then guessed again, from what it has run).
    guessed: HashMap<(u64, u32, bool), Option<i64>>,
}

impl Learned {
    /// Every end guessed with the `quantile`-th percentile.
    pub fn new(quantile: usize) -> Learned {
        Learned::split(quantile, quantile)
    }

    /// Running attempts' ends guessed with the `running`-th percentile, queued jobs' run
    /// times with the `queued`-th (e.g. 0 and 2: the reserving job's start guessed early,
    /// a backfill's end late).
    pub fn split(running: usize, queued: usize) -> Learned {
        Learned {
            running: running.min(2),
            queued: queued.min(2),
            inner: Mutex::new(Inner {
                learner: Learner::with_predictors(u64::MAX, Vec::new()),
                runtimes: Runtimes::default(),
                names: Vec::new(),
                read_at: None,
                version: 0,
                guessed: HashMap::new(),
            }),
        }
    }

    /// See one observation of the run (the attempts that end are its history).
    pub fn observe(&self, o: &Observation) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.learner.observe(o);
        }
    }
}

impl Inner {
    /// Read the history again when it moved and `RELEARN_SECONDS` have passed.
    fn relearn(&mut self, sched: &Sched, now: Time) {
        let (history, version) = self.learner.history();
        let due = self
            .read_at
            .is_none_or(|t| now - t >= RELEARN_SECONDS.saturating_mul(sched.ticks_per_second()));
        if version == self.version && self.read_at.is_some() || !due {
            return;
        }
        self.runtimes = Runtimes::from_samples(history.iter().cloned());
        self.version = version;
        self.read_at = Some(now);
        self.names = (0..)
            .map_while(|s| sched.share_name_checked(s).map(str::to_string))
            .collect();
        self.guessed.clear();
    }
}

impl RunGuess for Learned {
    fn remaining(&self, sched: &Sched, job: &Job, now: Time) -> Option<Time> {
        let mut inner = self.inner.lock().ok()?;
        inner.relearn(sched, now);
        let start = job.started_at();
        let key = (job.id.0, job.attempts_started, start.is_some());
        let t0 = start.unwrap_or(now);
        let tps = sched.ticks_per_second();
        let quantile = if start.is_some() {
            self.running
        } else {
            self.queued
        };
        let fresh =
            |inner: &Inner| attempt_ticks(job, now, tps, &inner.names, &inner.runtimes, quantile);
        let ticks = match inner.guessed.get(&key) {
            // A running attempt that outlived its guess is guessed again from its run.
            Some(&Some(d)) if start.is_some() && t0.saturating_add(d) < now => {
                let d = fresh(&inner);
                inner.guessed.insert(key, d);
                d
            }
            Some(&d) => d,
            None => {
                let d = fresh(&inner);
                inner.guessed.insert(key, d);
                d
            }
        }?;
        Some(t0.saturating_add(ticks).saturating_sub(now).max(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::{Options, Scenario, run, run_backfilled};
    use crate::sched::Backfill;
    use std::sync::Arc;

    /// W's four 10 s jobs are its history; then w0 (W's guarantee, no known end) and b
    /// (borrowing, timeout 400 s) run, and V's big job (2 GPUs) takes the reservation at
    /// 90 with one GPU idle: with b ending by 420 at the latest, big would have its GPUs
    /// then. s1 (10 s by W's history) comes at 100.
    const SCENARIO: &str = "
config:
- kind: ServiceEnvironment
  name: sim
  capacityLimits: [{capacityUnit: gpu, maxCapacity: 4, devices: {fake: 4}}]
  reserveAfterSeconds: 60
- kind: QuotaShare
  quotaShareName: V
  capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]
  resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
- kind: QuotaShare
  quotaShareName: W
  capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]
  resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
events:
- {at: 0, submit: {jobName: h1, quotaShareName: W, quantity: 1, duration: 10}}
- {at: 0, submit: {jobName: h2, quotaShareName: W, quantity: 1, duration: 10}}
- {at: 0, submit: {jobName: h3, quotaShareName: W, quantity: 1, duration: 10}}
- {at: 0, submit: {jobName: h4, quotaShareName: W, quantity: 1, duration: 10}}
- {at: 20, submit: {jobName: w0, quotaShareName: W, quantity: 2, duration: 100000}}
- {at: 20, submit: {jobName: b, quotaShareName: W, quantity: 1, duration: 300, timeoutSeconds: 400}}
- {at: 30, submit: {jobName: big, quotaShareName: V, quantity: 2, duration: 500}}
- {at: 100, submit: {jobName: s1, quotaShareName: W, quantity: 1, duration: 10}}
until: 2000
";

    /// When each job first started.
    fn starts(text: &[u8]) -> HashMap<String, i64> {
        let mut out = HashMap::new();
        for line in String::from_utf8_lossy(text).lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            if v["event"] == "started" {
                let job = v["job"].as_str().unwrap_or_default().to_string();
                out.entry(job).or_insert(v["t"].as_i64().unwrap_or(-1));
            }
        }
        out
    }

    #[test]
    fn a_job_predicted_to_end_before_the_reserving_job_could_start_backfills() {
        let sc = Scenario::parse(SCENARIO, "backfill", None).expect("scenario");
        let mut plain = Vec::new();
        run(&sc, &mut plain, Options::default()).expect("runs");
        let plain = starts(&plain);
        // As SPEC §3 has it: s1 waits for big, which starts when b ends, and then for big.
        assert_eq!(plain["big"], 320);
        assert_eq!(plain["s1"], 820);
        let learned = Arc::new(Learned::new(1));
        let mut out = Vec::new();
        let bf = Backfill::By(learned.clone());
        run_backfilled(&sc, &mut out, Options::default(), bf, &mut |o| {
            learned.observe(&o)
        })
        .expect("runs");
        let with = starts(&out);
        // s1 is predicted to run 10 s (W's history), so it ends by 110 ≤ 420: it starts at
        // once, and big starts when it would have.
        assert_eq!(with["s1"], 100);
        assert_eq!(with["big"], 320);
        // Without any history the guess knows only declared times: s1 declares none.
        let blind = Arc::new(Learned::new(1));
        let mut out = Vec::new();
        let bf = Backfill::By(blind);
        run_backfilled(&sc, &mut out, Options::default(), bf, &mut |_| {}).expect("runs");
        assert_eq!(starts(&out)["s1"], 820);
    }
}
