//! Start estimates for the queue (SPEC §11): run the copy forward once per percentile of
//! the run-time predictions (25th, 50th, 75th) and note when each job queued now first
//! starts, which makes each estimate a range; a job that starts in none of them is told
//! apart as waiting on an unknown end (a lower bound, from one more run in which unknown
//! ends end at once) or beyond the horizon. One formatter says an estimate the same way
//! everywhere (`jobs`, the console, `--predict`, the submit form).

use super::{Guess, HORIZON_SECONDS, Runtimes};
use crate::model::JobId;
use crate::sched::{Event, Sched, Time};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// What one forecast found for one queued job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Start {
    /// It starts between `earliest` and `latest` (the 25th and 75th percentile runs),
    /// `start` in the median run.
    Range {
        earliest: Time,
        start: Time,
        latest: Time,
    },
    /// It starts no earlier than `from`: its start depends on the end of a job nobody can
    /// predict (`why` names it).
    AtLeast { from: Time, why: String },
    /// Even with every end known it does not start within the horizon.
    Beyond,
}

/// The kind of an estimate, as `jobs --json` (`estimateKind`) and replay's `estimated`
/// lines say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EstimateKind {
    Range,
    LowerBound,
    BeyondHorizon,
    /// The range has passed and the job is still queued: until the next forecast.
    Overdue,
}

impl EstimateKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EstimateKind::Range => "range",
            EstimateKind::LowerBound => "lower_bound",
            EstimateKind::BeyondHorizon => "beyond_horizon",
            EstimateKind::Overdue => "overdue",
        }
    }
}

/// How long (ms) after its latest start a range reads `overdue`: estimates are good to a
/// second (a job's start waits for the pass after the end before it), and the forecast
/// that follows a passed range is due at once.
pub const OVERDUE_AFTER: Time = 1000;

/// The estimates of one forecast, for the jobs queued when it ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Estimates {
    /// When the forecast ran, in the driver's instants (ms live); 0: never.
    pub computed_at: Time,
    /// The last instant it looked at.
    pub horizon_end: Time,
    /// Each job queued then, by id.
    pub starts: Vec<(JobId, Start)>,
    /// How long the forecast took (ms of wall time), copy included.
    #[serde(default)]
    pub took_ms: u64,
    /// Of which copying the scheduler (on the live runtime: the part on its task).
    #[serde(default)]
    pub clone_ms: u64,
}

/// What the forecast says about one queued job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Estimate {
    /// It would start between these instants (the median run's in the middle).
    Range {
        earliest: Time,
        start: Time,
        latest: Time,
    },
    /// It would not start before `from`; `why` names the job of unknown end it waits on.
    AtLeast { from: Time, why: String },
    /// It would not start before this instant (the end of the horizon).
    NotWithin(Time),
    /// No forecast covers it yet (it was queued after the last one).
    NotYet,
}

impl Estimates {
    pub fn of(&self, id: JobId) -> Estimate {
        match self.starts.binary_search_by_key(&id, |(j, _)| *j) {
            Ok(i) => Estimate::from_start(&self.starts[i].1, self.horizon_end),
            Err(_) => Estimate::NotYet,
        }
    }

    /// The same estimates with no instant before `now` (the forecast ran a moment ago; an
    /// estimate is never published in the past, SPEC §11).
    pub fn not_before(mut self, now: Time) -> Estimates {
        for (_, s) in &mut self.starts {
            match s {
                Start::Range {
                    earliest,
                    start,
                    latest,
                } => {
                    *earliest = (*earliest).max(now);
                    *start = (*start).max(now);
                    *latest = (*latest).max(now);
                }
                Start::AtLeast { from, .. } => *from = (*from).max(now),
                Start::Beyond => {}
            }
        }
        self
    }
}

impl Estimate {
    /// What a forecast's [`Start`] says, with its horizon's end.
    pub fn from_start(s: &Start, horizon_end: Time) -> Estimate {
        match s {
            &Start::Range {
                earliest,
                start,
                latest,
            } => Estimate::Range {
                earliest,
                start,
                latest,
            },
            Start::AtLeast { from, why } => Estimate::AtLeast {
                from: *from,
                why: why.clone(),
            },
            Start::Beyond => Estimate::NotWithin(horizon_end),
        }
    }

    /// The median start instant, if one was estimated (for a lower bound: the bound).
    pub fn start(&self) -> Option<Time> {
        match *self {
            Estimate::Range { start, .. } => Some(start),
            Estimate::AtLeast { from, .. } => Some(from),
            _ => None,
        }
    }

    /// The earliest start (a range's start, or the lower bound).
    pub fn earliest(&self) -> Option<Time> {
        match *self {
            Estimate::Range { earliest, .. } => Some(earliest),
            Estimate::AtLeast { from, .. } => Some(from),
            _ => None,
        }
    }

    /// The latest start: only a range has one.
    pub fn latest(&self) -> Option<Time> {
        match *self {
            Estimate::Range { latest, .. } => Some(latest),
            _ => None,
        }
    }

    /// Its kind at `now`: a range whose latest start has passed by more than
    /// [`OVERDUE_AFTER`] is `overdue` (the job could not start in it; the next forecast,
    /// due at once, estimates it again). `None`: not estimated yet.
    pub fn kind(&self, now: Time) -> Option<EstimateKind> {
        match self {
            Estimate::Range { latest, .. } if latest.saturating_add(OVERDUE_AFTER) < now => {
                Some(EstimateKind::Overdue)
            }
            Estimate::Range { .. } => Some(EstimateKind::Range),
            Estimate::AtLeast { .. } => Some(EstimateKind::LowerBound),
            Estimate::NotWithin(_) => Some(EstimateKind::BeyondHorizon),
            Estimate::NotYet => None,
        }
    }

    /// The one way an estimate is written (ms instants; clock times at `utc_offset` seconds
    /// from UTC, the local one for people, [`local_utc_offset`]): `14:32–18:10`,
    /// `14:32` where the range's ends agree to the minute, `≥ 14:32` (a lower bound: it
    /// waits on an unknown end), `overdue`, `>7d` (counted from when the forecast ran,
    /// `computed_at`), or `?` before the first forecast. A time on another day than `now`
    /// carries its weekday (`Wed 09:10`), or its date beyond a week.
    pub fn label(&self, now: Time, computed_at: Time, utc_offset: i32) -> String {
        match (self, self.kind(now)) {
            (_, Some(EstimateKind::Overdue)) => "overdue".to_string(),
            (
                &Estimate::Range {
                    earliest, latest, ..
                },
                _,
            ) => {
                let (a, b) = (
                    clock(earliest, now, utc_offset),
                    clock(latest, now, utc_offset),
                );
                if a == b { a } else { format!("{a}–{b}") }
            }
            (Estimate::AtLeast { from, .. }, _) => {
                format!("≥ {}", clock((*from).max(now), now, utc_offset))
            }
            (Estimate::NotWithin(end), _) => {
                format!(">{}", crate::duration::short(end - computed_at))
            }
            _ => "?".to_string(),
        }
    }

    /// What the estimate rests on, for details: the job of unknown end a lower bound waits
    /// on, or the median start.
    pub fn note(&self, now: Time, utc_offset: i32) -> Option<String> {
        match self {
            Estimate::AtLeast { why, .. } => Some(why.clone()),
            Estimate::Range { start, .. } => {
                Some(format!("median {}", clock(*start, now, utc_offset)))
            }
            _ => None,
        }
    }
}

/// This machine's offset from UTC now, in seconds (for [`Estimate::label`]).
pub fn local_utc_offset() -> i32 {
    chrono::Local::now().offset().local_minus_utc()
}

/// `14:32` (the same day as `now`), `Wed 14:32` (within 6 days), `2026-12-24 14:32`
/// (later), at `utc_offset` seconds from UTC.
pub fn clock(t: Time, now: Time, utc_offset: i32) -> String {
    use chrono::{FixedOffset, TimeZone};
    let tz = FixedOffset::east_opt(utc_offset).unwrap_or(FixedOffset::east_opt(0).expect("UTC"));
    let (Some(at), Some(today)) = (
        tz.timestamp_millis_opt(t).single(),
        tz.timestamp_millis_opt(now).single(),
    ) else {
        return "?".to_string();
    };
    if at.date_naive() == today.date_naive() {
        at.format("%H:%M").to_string()
    } else if (t - now).abs() < 6 * 86_400_000 {
        at.format("%a %H:%M").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M").to_string()
    }
}

/// Estimate when each queued job of `sched` (a copy) starts, from `now`.
pub fn estimate(sched: Sched, now: Time, runtimes: &Runtimes) -> Estimates {
    estimate_within(sched, now, runtimes, HORIZON_SECONDS)
}

/// When each job of `watch` first starts in one forward run.
fn first_starts(
    sched: Sched,
    now: Time,
    runtimes: &Runtimes,
    guess: Guess,
    horizon_seconds: i64,
    watch: &[JobId],
) -> (HashMap<JobId, Time>, Sched) {
    let mut first: HashMap<JobId, Time> = HashMap::with_capacity(watch.len());
    let wanted: std::collections::HashSet<JobId> = watch.iter().copied().collect();
    let end = super::run(sched, now, runtimes, guess, horizon_seconds, &mut |o| {
        for ev in o.events {
            if let Event::Started { job, .. } = ev
                && wanted.contains(job)
            {
                first.entry(*job).or_insert(o.t);
            }
        }
    });
    (first, end)
}

/// [`estimate`] with another horizon (seconds).
pub fn estimate_within(
    sched: Sched,
    now: Time,
    runtimes: &Runtimes,
    horizon_seconds: i64,
) -> Estimates {
    let t0 = std::time::Instant::now();
    let tps = sched.ticks_per_second();
    let horizon_end = now.saturating_add(horizon_seconds.saturating_mul(tps));
    let queued = sched.queue();
    let mut starts: BTreeMap<JobId, Start> = BTreeMap::new();
    if !queued.is_empty() {
        // The jobs whose end no source predicts, running or queued.
        let names: Vec<String> = (0..)
            .map_while(|s| sched.share_name_checked(s).map(str::to_string))
            .collect();
        let unknown: Vec<JobId> = sched
            .jobs()
            .filter(|j| j.is_holding() || j.is_pending())
            .filter(|j| super::attempt_ticks(j, now, tps, &names, runtimes, 1).is_none())
            .map(|j| j.id)
            .collect();
        let mut runs: [HashMap<JobId, Time>; 3] = Default::default();
        let mut median_end = None;
        for (q, run) in runs.iter_mut().enumerate() {
            let guess = Guess {
                quantile: q,
                unknown_ends_now: false,
            };
            let (first, end) = first_starts(
                sched.clone(),
                now,
                runtimes,
                guess,
                horizon_seconds,
                &queued,
            );
            *run = first;
            if q == 1 {
                median_end = Some(end);
            }
        }
        let mut undecided = Vec::new();
        for &id in &queued {
            let mut seen: Vec<Time> = runs.iter().filter_map(|r| r.get(&id).copied()).collect();
            if seen.is_empty() {
                undecided.push(id);
                continue;
            }
            seen.sort_unstable();
            let earliest = seen[0];
            let latest = if seen.len() == 3 {
                seen[2]
            } else {
                horizon_end
            };
            let start = runs[1]
                .get(&id)
                .copied()
                .unwrap_or(latest)
                .clamp(earliest, latest);
            starts.insert(
                id,
                Start::Range {
                    earliest,
                    start,
                    latest,
                },
            );
        }
        if !undecided.is_empty() {
            let bounds = if unknown.is_empty() {
                HashMap::new()
            } else {
                let guess = Guess {
                    quantile: 0,
                    unknown_ends_now: true,
                };
                first_starts(
                    sched.clone(),
                    now,
                    runtimes,
                    guess,
                    horizon_seconds,
                    &undecided,
                )
                .0
            };
            for id in undecided {
                let s = match bounds.get(&id) {
                    Some(&from) => Start::AtLeast {
                        from,
                        why: waits_on(&sched, median_end.as_ref(), &unknown, id),
                    },
                    None => Start::Beyond,
                };
                starts.insert(id, s);
            }
        }
    }
    Estimates {
        computed_at: now,
        horizon_end,
        starts: starts.into_iter().collect(),
        took_ms: t0.elapsed().as_millis() as u64,
        clone_ms: 0,
    }
}

/// `job 7 (qs1) has no run-time history`: the job of unknown end that `id` waits on. The
/// first of `unknown` still holding GPUs of `id`'s unit at the end of the median run; else
/// the first of them.
fn waits_on(sched: &Sched, end: Option<&Sched>, unknown: &[JobId], id: JobId) -> String {
    let unit = sched.job(id).map(|j| j.unit);
    let holding = |k: &&JobId| {
        end.and_then(|e| e.job(**k))
            .is_some_and(|j| j.is_holding() && Some(j.unit) == unit)
    };
    let Some(k) = unknown
        .iter()
        .find(holding)
        .or_else(|| unknown.first())
        .and_then(|k| sched.job(*k))
    else {
        return "it waits on a job with no known end".to_string();
    };
    format!(
        "job {} ({}) has no run-time history",
        k.id,
        sched.share_name(k.share)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_labels() {
        let now = 1_000_000_000_000;
        let m = 60_000;
        let r = Estimate::Range {
            earliest: now + 10 * m,
            start: now + 20 * m,
            latest: now + 30 * m,
        };
        assert_eq!(r.kind(now), Some(EstimateKind::Range));
        let text = r.label(now, now, 0);
        assert_eq!(
            text,
            format!(
                "{}–{}",
                clock(now + 10 * m, now, 0),
                clock(now + 30 * m, now, 0)
            )
        );
        // Passed its latest start: overdue, only then.
        assert_eq!(
            r.kind(now + 30 * m + OVERDUE_AFTER),
            Some(EstimateKind::Range)
        );
        assert_eq!(
            r.kind(now + 30 * m + OVERDUE_AFTER + 1),
            Some(EstimateKind::Overdue)
        );
        assert_eq!(r.label(now + 31 * m, now, 0), "overdue");
        // Ends that agree to the minute: one time.
        let one = Estimate::Range {
            earliest: now + 10 * m,
            start: now + 10 * m,
            latest: now + 10 * m,
        };
        assert_eq!(one.label(now, now, 0), clock(now + 10 * m, now, 0));
        let lb = Estimate::AtLeast {
            from: now + 5 * m,
            why: "job 7 (qs1) has no run-time history".to_string(),
        };
        assert_eq!(lb.kind(now), Some(EstimateKind::LowerBound));
        assert_eq!(
            lb.label(now, now, 0),
            format!("≥ {}", clock(now + 5 * m, now, 0))
        );
        // A lower bound that has passed is "at least now", never overdue.
        assert_eq!(lb.kind(now + 9 * m), Some(EstimateKind::LowerBound));
        assert_eq!(
            lb.label(now + 9 * m, now, 0),
            format!("≥ {}", clock(now + 9 * m, now, 0))
        );
        let week = 7 * 86_400_000;
        let far = Estimate::NotWithin(now + week);
        assert_eq!(far.kind(now), Some(EstimateKind::BeyondHorizon));
        // Counted from the forecast, a second later still `>7d`.
        assert_eq!(far.label(now + 1000, now, 0), ">7d");
        assert_eq!(Estimate::NotYet.label(now, now, 0), "?");
        // 2001-09-09 01:46:40 UTC: the clock at an offset, the weekday on another day.
        assert_eq!(clock(now, now, 0), "01:46");
        assert_eq!(clock(now, now, 3600), "02:46");
        assert_eq!(clock(now + 86_400_000, now, 0), "Mon 01:46");
        assert_eq!(clock(now + 8 * 86_400_000, now, 0), "2001-09-17 01:46");
        assert_eq!(Estimate::NotYet.kind(now), None);
    }

    #[test]
    fn nothing_is_published_in_the_past() {
        let e = Estimates {
            computed_at: 100,
            horizon_end: 1000,
            starts: vec![
                (
                    JobId(1),
                    Start::Range {
                        earliest: 101,
                        start: 150,
                        latest: 300,
                    },
                ),
                (
                    JobId(2),
                    Start::AtLeast {
                        from: 105,
                        why: String::new(),
                    },
                ),
                (JobId(3), Start::Beyond),
            ],
            took_ms: 0,
            clone_ms: 0,
        }
        .not_before(120);
        assert_eq!(
            e.of(JobId(1)),
            Estimate::Range {
                earliest: 120,
                start: 150,
                latest: 300
            }
        );
        assert_eq!(e.of(JobId(2)).earliest(), Some(120));
        assert_eq!(e.of(JobId(3)), Estimate::NotWithin(1000));
        assert_eq!(e.of(JobId(4)), Estimate::NotYet);
    }
}
