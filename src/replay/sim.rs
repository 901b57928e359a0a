//! The simulated clock (SPEC §6): drives the scheduler through a scenario, instant by
//! instant, in the spec's order (finishes, releases, trace rows, events, one pass), and
//! writes one JSON object per decision. Jobs with `checkpointEverySeconds` save as SPEC
//! §14 says; a save makes no instant of its own.

use super::scenario::{Action, Scenario, TimedAction};
use super::summary::Stats;
use crate::model::JobId;
use crate::model::UnitCapacity;
use crate::sched::{Backfill, Clock, Event, Sched};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::{self, Write};

/// What to produce besides the event lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Append a summary line.
    pub summary: bool,
    /// Keep every line in memory (for `--check`).
    pub keep_lines: bool,
}

/// What a run leaves behind.
#[derive(Debug, Default)]
pub struct Outcome {
    pub lines: Vec<String>,
    /// With `summary`: the figures its last line holds.
    pub summary: Option<crate::replay::Summary>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKind {
    Finish = 0,
    Release = 1,
    /// The end of a job's minimum-runtime protection (SPEC §11): it does nothing by
    /// itself, but makes an instant with a pass.
    ProtectionEnd = 2,
}

/// (time, kind, sequence, job, attempt): finishes before releases at an instant, each in
/// the order it was scheduled.
type Timer = Reverse<(i64, TimerKind, u64, u64, u32)>;

/// (time, job, attempt): a periodic save (SPEC §14). Saves make no instant: those due by
/// an instant are told to the scheduler at its beginning, before anything else.
type Save = Reverse<(i64, u64, u32)>;

/// How a job of the scenario runs.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    /// Its whole running time; `None` = until stopped.
    duration: Option<i64>,
    exit_code: i32,
    /// `checkpointEverySeconds` (SPEC §14).
    every: Option<i64>,
    /// Work saved so far: the next attempt runs `duration − progress`.
    progress: i64,
    /// The current attempt's start and the progress it started from.
    start: i64,
    base: i64,
}

impl Run {
    fn plain(duration: Option<i64>) -> Run {
        Run {
            duration,
            ..Run::default()
        }
    }

    /// What an attempt starting now has to run.
    fn remaining(&self) -> Option<i64> {
        self.duration.map(|d| d - self.progress)
    }

    /// Is `at` a save of the current attempt? Only before its remaining work ends (a
    /// multiple where it ends is no save, SPEC §14).
    fn saves_at(&self, at: i64) -> bool {
        self.duration
            .is_none_or(|d| at - self.start < d - self.base)
    }

    /// The progress saved by a save at `at` of the current attempt.
    fn saved_by(&self, at: i64) -> i64 {
        self.base + (at - self.start)
    }
}

/// What an observer of a run sees: the scheduler just before each pass (`events` empty,
/// `before_pass` true) and after each batch of decisions (the batch in `events`).
pub struct Observation<'a> {
    pub t: i64,
    pub sched: &'a Sched,
    pub events: &'a [Event],
    pub before_pass: bool,
}

type Observer<'a> = Option<&'a mut dyn FnMut(Observation)>;

struct Sim<'a, W: Write> {
    sched: Sched,
    observer: Observer<'a>,
    out: &'a mut W,
    names: HashMap<&'a str, JobId>,
    /// The size of each array submitted, by its parent's id.
    arrays: HashMap<u64, u32>,
    /// Per job id - 1: how it runs.
    runs: Vec<Run>,
    timers: BinaryHeap<Timer>,
    saves: BinaryHeap<Save>,
    seq: u64,
    lines: Option<Vec<String>>,
    stats: Option<Stats>,
    buf: String,
    /// Write no lines (a forward run only observes).
    quiet: bool,
    /// A forward run's stop delay in ticks when a stop's plan gives none (`None`: the
    /// replay's `stopAfter`).
    stop_ticks: Option<i64>,
    /// An instant to run even with nothing due (a forward run's "now").
    first_instant: Option<i64>,
}

/// Run a scenario, writing JSON lines to `out`.
pub fn run<W: Write>(sc: &Scenario, out: &mut W, opts: Options) -> io::Result<Outcome> {
    run_inner(sc, out, opts, None)
}

/// `run`, letting `observe` look at the scheduler as the run goes (property tests check
/// invariants this way).
pub fn run_observed<W: Write>(
    sc: &Scenario,
    out: &mut W,
    opts: Options,
    observe: &mut dyn FnMut(Observation),
) -> io::Result<Outcome> {
    run_inner(sc, out, opts, Some(observe))
}

/// `run_observed` with backfill under the reservations for big jobs (a study, off in every
/// other run: docs/SEMANTICS.md); `observe` may feed what the guess learns from.
pub fn run_backfilled<W: Write>(
    sc: &Scenario,
    out: &mut W,
    opts: Options,
    backfill: Backfill,
    observe: &mut dyn FnMut(Observation),
) -> io::Result<Outcome> {
    run_with(sc, out, opts, backfill, Some(observe))
}

fn run_inner<'a, W: Write>(
    sc: &'a Scenario,
    out: &'a mut W,
    opts: Options,
    observer: Observer<'a>,
) -> io::Result<Outcome> {
    run_with(sc, out, opts, Backfill::Off, observer)
}

fn run_with<'a, W: Write>(
    sc: &'a Scenario,
    out: &'a mut W,
    opts: Options,
    backfill: Backfill,
    observer: Observer<'a>,
) -> io::Result<Outcome> {
    let mut sched = Sched::new(
        &sc.config,
        &UnitCapacity::simulated(&sc.config),
        Clock::Simulated,
    );
    sched.set_backfill(backfill);
    let mut sim = Sim::new(sched, observer, out, sc.trace.len() + sc.events.len());
    sim.stats = opts.summary.then(|| Stats::new(1));
    sim.lines = opts.keep_lines.then(Vec::new);
    sim.drive(
        &sc.trace,
        &sc.events,
        sc.until.unwrap_or(i64::MAX),
        u64::MAX,
    )?;
    let summary = sim.stats.take().map(Stats::summary);
    if let Some(s) = &summary {
        sim.write_line(Stats::line(s))?;
    }
    sim.out.flush()?;
    Ok(Outcome {
        lines: sim.lines.unwrap_or_default(),
        summary,
    })
}

/// A forward run from a state the caller built (a copy of the live scheduler): no
/// arrivals, each attempt ending as `duration` says. The forecast (`crate::forecast`)
/// runs the same clock as `shareq replay`, only seeded with the jobs already running.
pub struct Forward<'f> {
    /// The copy to run; it is consumed and returned in its final state.
    pub sched: Sched,
    /// The first instant (the copy's "now"), and the last one simulated (inclusive).
    pub from: i64,
    pub until: i64,
    /// How long an attempt of this job runs, in the scheduler's ticks (`None`: until
    /// stopped). For a job already holding GPUs, the remaining time of its current attempt
    /// is counted from its start.
    pub duration: &'f dyn Fn(&crate::sched::Job) -> Option<i64>,
    /// Ticks between a stop (preemption) and the release of its GPUs, for a copy of the
    /// live scheduler (whose stops release only when told), where the job's stop plan says
    /// nothing longer: a stop takes its share's notice + grace at most (SPEC §14), and the
    /// forecast counts that longest.
    pub stop_ticks: i64,
    /// Give up after this many instants (a bound on the work, whatever the horizon).
    pub max_instants: u64,
}

/// Run `f`, letting `observe` see every batch of decisions. Returns the final state and
/// whether the run ended before `until` because nothing was left to happen.
pub fn forward(f: Forward, observe: &mut dyn FnMut(Observation)) -> (Sched, bool) {
    let mut sink = io::sink();
    let n = f.sched.next_job_id().0 as usize;
    let mut sim = Sim::new(f.sched, Some(observe), &mut sink, n);
    sim.quiet = true;
    sim.stop_ticks = Some(f.stop_ticks.max(1));
    let holding: Vec<(JobId, Option<i64>, Option<i64>, bool)> = sim
        .sched
        .jobs()
        .map(|j| {
            let d = (f.duration)(j);
            (j.id, d, j.started_at(), j.is_stopping())
        })
        .collect();
    sim.runs = vec![Run::default(); n];
    for &(id, d, started, stopping) in &holding {
        sim.runs[(id.0 - 1) as usize] = Run::plain(d);
        match (started, stopping) {
            (Some(t0), true) => {
                let since = sim
                    .sched
                    .job(id)
                    .and_then(|j| j.stopping_since())
                    .unwrap_or(t0);
                let ticks = sim.live_stop_ticks(id, f.stop_ticks);
                sim.schedule((since + ticks).max(f.from), TimerKind::Release, id);
            }
            (Some(t0), false) => {
                if let Some(d) = d {
                    sim.schedule((t0 + d).max(f.from), TimerKind::Finish, id);
                }
                if let Some(until) = sim.sched.protected_until(id).filter(|&u| u > f.from) {
                    sim.schedule(until, TimerKind::ProtectionEnd, id);
                }
            }
            _ => {}
        }
    }
    // The first instant is "now": one pass on the copy as it is.
    sim.first_instant = Some(f.from);
    let drained = sim
        .drive(&[], &[], f.until, f.max_instants)
        .unwrap_or(false);
    (sim.sched, drained)
}

impl<'a, W: Write> Sim<'a, W> {
    fn new(sched: Sched, observer: Observer<'a>, out: &'a mut W, n: usize) -> Sim<'a, W> {
        Sim {
            sched,
            observer,
            out,
            names: HashMap::with_capacity(n),
            arrays: HashMap::new(),
            runs: Vec::with_capacity(n),
            timers: BinaryHeap::new(),
            saves: BinaryHeap::new(),
            seq: 0,
            lines: None,
            stats: None,
            buf: String::with_capacity(256),
            quiet: false,
            stop_ticks: None,
            first_instant: None,
        }
    }

    /// The clock: instant after instant until nothing is left, `until` is passed or
    /// `max_instants` were run. Returns true when it ended because nothing was left.
    fn drive(
        &mut self,
        trace: &'a [TimedAction],
        events: &'a [TimedAction],
        until: i64,
        max_instants: u64,
    ) -> io::Result<bool> {
        let (mut ti, mut ei) = (0usize, 0usize);
        let mut instants = 0u64;
        let mut last: Option<i64> = None;
        loop {
            // A timer made stale by what happened earlier makes no instant (SPEC §6).
            self.drop_stale_timers();
            let next_timer = self.timers.peek().map(|Reverse(t)| t.0);
            let next_trace = trace.get(ti).map(|a| a.at);
            let next_event = events.get(ei).map(|a| a.at);
            // The instants the scheduler asks for itself (a lapse's retry), read off its
            // state after the last pass: one made stale since makes none.
            let next_wake = last.and_then(|t| self.sched.next_wakeup(t));
            let Some(t) = [
                next_timer,
                next_trace,
                next_event,
                next_wake,
                self.first_instant.take(),
            ]
            .into_iter()
            .flatten()
            .min() else {
                return Ok(true);
            };
            if t > until || instants >= max_instants {
                return Ok(false);
            }
            instants += 1;
            last = Some(t);
            if let Some(st) = &mut self.stats {
                st.advance(&self.sched, t);
            }
            // The saves due by t (a save at a release counts, SPEC §14).
            self.apply_saves(t);
            // 1-2. jobs finishing at t, then victims releasing at t.
            while let Some(Reverse((at, kind, _, job, attempt))) = self.timers.peek().copied() {
                if at != t {
                    break;
                }
                self.timers.pop();
                self.fire(t, kind, JobId(job), attempt)?;
            }
            // 3. trace rows, then the scenario's events, in file order.
            while ti < trace.len() && trace[ti].at == t {
                self.act(&trace[ti], t)?;
                ti += 1;
            }
            while ei < events.len() && events[ei].at == t {
                self.act(&events[ei], t)?;
                ei += 1;
            }
            // 4. exactly one pass.
            if let Some(obs) = &mut self.observer {
                obs(Observation {
                    t,
                    sched: &self.sched,
                    events: &[],
                    before_pass: true,
                });
            }
            self.sched.pass(t);
            self.flush(t)?;
        }
    }
}

impl<'a, W: Write> Sim<'a, W> {
    /// Would this timer, fired at its instant `at`, still do something? A timer of an
    /// attempt that already ended (finished, or preempted and released) is stale, and so
    /// is the end of an attempt whose stop releases its GPUs first (or at the same instant:
    /// the preemption wins). Once stale, a timer stays stale.
    fn is_live(&self, at: i64, kind: TimerKind, id: JobId, attempt: u32) -> bool {
        let Some(job) = self.sched.job(id) else {
            return false;
        };
        if !job.is_holding() || job.attempts_started != attempt {
            return false;
        }
        match kind {
            TimerKind::Finish => self.sched.release_instant(id).is_none_or(|r| r > at),
            TimerKind::Release => job.is_stopping(),
            TimerKind::ProtectionEnd => self.sched.protected_until(id) == Some(at),
        }
    }

    fn drop_stale_timers(&mut self) {
        while let Some(&Reverse((at, kind, _, job, attempt))) = self.timers.peek() {
            if self.is_live(at, kind, JobId(job), attempt) {
                break;
            }
            self.timers.pop();
        }
    }

    fn fire(&mut self, t: i64, kind: TimerKind, id: JobId, attempt: u32) -> io::Result<()> {
        if !self.is_live(t, kind, id, attempt) {
            return Ok(());
        }
        match kind {
            TimerKind::Finish => {
                // A retry after a non-zero exit goes on from the last save (SPEC §14).
                let save = self.sched.job(id).and_then(|j| j.last_save);
                let run = &mut self.runs[(id.0 - 1) as usize];
                if let Some(at) = save {
                    run.progress = run.saved_by(at);
                }
                let code = run.exit_code;
                // The work ran out: finished, even during a stop (SPEC §6).
                self.sched.job_finished(id, code, t);
            }
            TimerKind::Release => self.sched.gpus_released(id, t),
            TimerKind::ProtectionEnd => {}
        }
        self.flush(t)
    }

    fn act(&mut self, a: &'a TimedAction, t: i64) -> io::Result<()> {
        match &a.action {
            Action::Submit(s) => {
                let mut spec = s.job_spec();
                // SPEC §13: dependencies name jobs of the scenario, submitted before.
                for d in &s.depends_on {
                    let job_id = match &d.job_name {
                        None => None,
                        Some(n) => match self.lookup(n) {
                            Some(id) => Some(crate::model::JobRef::job(id.0)),
                            None => {
                                let error = format!(
                                    "dependsOn: no job named `{n}` was accepted before this one"
                                );
                                self.sched
                                    .reject(&s.job_name, &s.quota_share_name, error, t);
                                return self.flush(t);
                            }
                        },
                    };
                    spec.depends_on.push(crate::model::Dependency {
                        job_id,
                        kind: d.kind,
                    });
                }
                if let Ok(id) = self.sched.submit_with_stop(spec, s.stop_after, t) {
                    self.names.insert(s.job_name.as_str(), id);
                    if let Some(a) = s.array_properties {
                        self.arrays.insert(id.0, a.size);
                    }
                    let last = id.0 + u64::from(s.array_properties.map_or(0, |a| a.size));
                    if self.runs.len() < last as usize {
                        self.runs.resize(last as usize, Run::default());
                    }
                    let every = s
                        .checkpoint_every_seconds
                        .map(|c| i64::try_from(c).unwrap_or(i64::MAX));
                    for ix in id.0 - 1..last {
                        self.runs[ix as usize] = Run {
                            duration: s.duration,
                            exit_code: s.exit_code,
                            every,
                            ..Run::default()
                        };
                    }
                }
            }
            Action::Cancel(name) => {
                if let Some(id) = self.lookup(name) {
                    self.sched.cancel(id, "replay", t);
                }
            }
            Action::Update(u) => {
                // The priority's range was checked when the scenario was read.
                if let Some(id) = self.lookup(&u.job_name) {
                    let _ = self.sched.set_priority(id, u.scheduling_priority, t);
                }
            }
            Action::Config(c) => match c.as_ref() {
                Ok(cfg) => {
                    let cap = UnitCapacity::simulated(cfg);
                    self.sched.apply_config(cfg, &cap, t);
                }
                Err(errs) => self
                    .sched
                    .config_rejected(super::scenario::config_errors(errs), t),
            },
            Action::NodeDown(node) => self.sched.node_lost(node, t),
            Action::NodeDrain(node) => self.sched.node_drained(node, true, t),
        }
        self.flush(t)
    }

    /// The job a scenario names: a submission's `jobName`, or `<name>:<i>` for child i of
    /// the array submitted as `<name>` (SPEC §13).
    fn lookup(&self, name: &str) -> Option<JobId> {
        if let Some(&id) = self.names.get(name) {
            return Some(id);
        }
        let (parent, index) = name.rsplit_once(':')?;
        let index: u32 = index.parse().ok()?;
        let &parent = self.names.get(parent)?;
        let &size = self.arrays.get(&parent.0)?;
        (index < size).then(|| JobId(parent.0 + 1 + u64::from(index)))
    }

    /// How long a live stop of `job` takes in the forecast: the longest its stop may
    /// take (its share's notice and grace, SPEC §14), else `fallback` (the environment's
    /// grace); at least one tick.
    fn live_stop_ticks(&self, job: JobId, fallback: i64) -> i64 {
        self.sched
            .stop_plan(job)
            .map_or(fallback, |p| {
                i64::from(p.longest()) * self.sched.ticks_per_second()
            })
            .max(1)
    }

    fn schedule(&mut self, at: i64, kind: TimerKind, id: JobId) {
        let attempt = self.sched.job(id).map_or(0, |j| j.attempts_started);
        self.seq += 1;
        self.timers
            .push(Reverse((at, kind, self.seq, id.0, attempt)));
    }

    /// Tell the scheduler of the saves due by `t`, each at its own instant, and arm each
    /// job's next one.
    fn apply_saves(&mut self, t: i64) {
        while let Some(&Reverse((at, job, attempt))) = self.saves.peek() {
            if at > t {
                break;
            }
            self.saves.pop();
            let id = JobId(job);
            let live = self
                .sched
                .job(id)
                .is_some_and(|j| j.is_holding() && j.attempts_started == attempt);
            if live {
                self.sched.checkpoint(id, attempt, at);
                self.arm_save(id, attempt, at);
            }
        }
    }

    /// Arm the save after `from` of attempt `attempt`, if its job saves and the attempt
    /// still has work then.
    fn arm_save(&mut self, id: JobId, attempt: u32, from: i64) {
        let Some(run) = self.runs.get((id.0 - 1) as usize) else {
            return;
        };
        let Some(every) = run.every else { return };
        let next = from.saturating_add(every);
        if run.saves_at(next) {
            self.saves.push(Reverse((next, id.0, attempt)));
        }
    }

    /// Write the scheduler's new events and arm the timers they imply.
    fn flush(&mut self, t: i64) -> io::Result<()> {
        let events = self.sched.take_events();
        if let Some(obs) = &mut self.observer {
            obs(Observation {
                t,
                sched: &self.sched,
                events: &events,
                before_pass: false,
            });
        }
        for ev in events {
            if let Some(st) = &mut self.stats {
                st.record(&self.sched, &ev, t);
            }
            match &ev {
                Event::Started { job, .. } => {
                    let ix = (job.0 - 1) as usize;
                    if let Some(run) = self.runs.get_mut(ix) {
                        run.start = t;
                        run.base = run.progress;
                    }
                    let run = self.runs.get(ix).copied().unwrap_or_default();
                    if let Some(d) = run.remaining() {
                        self.schedule(t + d, TimerKind::Finish, *job);
                    }
                    if run.every.is_some() {
                        let attempt = self.sched.job(*job).map_or(0, |j| j.attempts_started);
                        self.arm_save(*job, attempt, t);
                    }
                    if let Some(until) = self.sched.protected_until(*job) {
                        self.schedule(until, TimerKind::ProtectionEnd, *job);
                    }
                }
                Event::ConfigApplied => {
                    // A changed minRuntimeSeconds moves the protections' ends.
                    let ends: Vec<(i64, JobId)> = self
                        .sched
                        .jobs()
                        .filter(|j| j.is_holding())
                        .filter_map(|j| Some((self.sched.protected_until(j.id)?, j.id)))
                        .filter(|&(until, _)| until > t)
                        .collect();
                    for (until, id) in ends {
                        self.schedule(until, TimerKind::ProtectionEnd, id);
                    }
                }
                Event::Preempted { job, .. } | Event::Cancelled { job, stop: true } => {
                    let delay = match self.stop_ticks {
                        Some(d) => self.live_stop_ticks(*job, d),
                        None => i64::from(self.sched.stop_delay(*job)),
                    };
                    if delay > 0 && self.sched.job(*job).is_some_and(|j| j.is_stopping()) {
                        self.schedule(t + delay, TimerKind::Release, *job);
                    }
                }
                // The work saved before a preemption carries over (SPEC §14).
                Event::Requeued { job, lost: Some(l) }
                | Event::Failed {
                    job, lost: Some(l), ..
                } if l.checkpointed => {
                    if let Some(run) = self.runs.get_mut((job.0 - 1) as usize) {
                        run.progress = run.saved_by(l.since);
                    }
                }
                _ => {}
            }
            // SPEC §13: a dependent job that becomes RUNNABLE prints nothing new.
            if self.quiet || matches!(ev, Event::Released { .. }) {
                continue;
            }
            let mut line = std::mem::take(&mut self.buf);
            line.clear();
            format_event(&self.sched, &ev, t, &mut line);
            self.write_line(line)?;
        }
        Ok(())
    }

    fn write_line(&mut self, line: String) -> io::Result<()> {
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        match &mut self.lines {
            Some(lines) => lines.push(line),
            None => self.buf = line,
        }
        Ok(())
    }
}

fn push_str(out: &mut String, s: &str) {
    if s.bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b < 0x7f)
    {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
    }
}

fn field(out: &mut String, key: &str, value: &str) {
    out.push_str(",\"");
    out.push_str(key);
    out.push_str("\":");
    push_str(out, value);
}

/// `[0,1]`: device indices.
fn index_list(out: &mut String, devices: &[u32]) {
    use std::fmt::Write as _;
    out.push('[');
    for (i, d) in devices.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{d}");
    }
    out.push(']');
}

fn num(out: &mut String, key: &str, value: impl std::fmt::Display) {
    use std::fmt::Write as _;
    let _ = write!(out, ",\"{key}\":{value}");
}

/// `"lost"`, in GPU-seconds, on the line that ends a preemption (SPEC §14): only for a job
/// that declares `checkpointEverySeconds` or whose share sent it a notice, so that other
/// replays print what they always did.
fn lost_field(sched: &Sched, out: &mut String, job: &JobId, lost: &Option<crate::sched::Lost>) {
    let Some(l) = lost else { return };
    let saves = sched
        .job(*job)
        .is_some_and(|j| j.spec.checkpoint_every_seconds.is_some());
    if !(saves || l.noticed) {
        return;
    }
    let tps = sched.ticks_per_second();
    if tps == 1 {
        num(out, "lost", l.gpu_ticks());
    } else {
        num(out, "lost", l.gpu_ticks() as f64 / tps as f64);
    }
}

/// The name of an event, as the replay's `event` field says it.
pub fn event_name(ev: &Event) -> &'static str {
    match ev {
        Event::Submitted { .. } => "submitted",
        Event::Rejected { .. } => "rejected",
        Event::Started { .. } => "started",
        Event::Preempted { .. } => "preempted",
        Event::Requeued { .. } => "requeued",
        Event::Failed { .. } => "failed",
        Event::Cancelled { .. } => "cancelled",
        Event::TimedOut { .. } => "timed_out",
        Event::OverMemory { .. } => "over_memory",
        Event::Reprioritized { .. } => "reprioritized",
        Event::Succeeded { .. } => "succeeded",
        Event::Released { .. } => "released",
        Event::ConfigApplied => "config_applied",
        Event::ConfigRejected { .. } => "config_rejected",
    }
}

/// One output line, with the field names and order of SPEC §6 (`t`: the replay's
/// seconds, or the live stream's epoch seconds with milliseconds).
pub fn format_event(sched: &Sched, ev: &Event, t: impl std::fmt::Display, out: &mut String) {
    use std::fmt::Write as _;
    let name = |id: &JobId| sched.replay_name(*id);
    let share = |id: &JobId| sched.job(*id).map_or("?", |j| sched.share_name(j.share));
    // An array parent's lines say its size (SPEC §13: `"array":N`).
    let array_size = |out: &mut String, job: &JobId| {
        if let Some(n) = sched.job(*job).and_then(|j| j.array_size()) {
            num(out, "array", n);
        }
    };
    let _ = write!(out, "{{\"t\":{t}");
    field(out, "event", event_name(ev));
    match ev {
        Event::Submitted { job } => {
            field(out, "job", &name(job));
            field(out, "share", share(job));
            array_size(out, job);
        }
        Event::Rejected { name, share, error } => {
            field(out, "job", name);
            field(out, "error", error);
            field(out, "share", share);
        }
        Event::Started {
            job,
            node,
            devices,
            borrowed,
            more,
        } => {
            field(out, "job", &name(job));
            field(out, "share", share(job));
            // A gang's quantity is its per-node one (SPEC §16).
            let (unit, q) = sched
                .job(*job)
                .map_or(("?", 0), |j| (sched.unit_name(j.unit), j.per_node()));
            field(out, "unit", unit);
            num(out, "quantity", q);
            num(out, "borrowed", borrowed);
            out.push_str(",\"devices\":");
            if more.is_empty() {
                index_list(out, devices);
                if let Some(node) = node {
                    field(out, "node", node);
                }
            } else {
                // A gang: devices per node, then the nodes, in node order (SPEC §16).
                out.push('[');
                index_list(out, devices);
                for (_, d) in more {
                    out.push(',');
                    index_list(out, d);
                }
                out.push_str("],\"nodes\":[");
                let nodes = node.iter().chain(more.iter().map(|(n, _)| n));
                for (i, n) in nodes.enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    push_str(out, n);
                }
                out.push(']');
            }
        }
        Event::Preempted { job, by, reason } => {
            field(out, "job", &name(job));
            field(out, "share", share(job));
            match by {
                Some(b) => {
                    field(out, "by", &name(b));
                    field(out, "by_share", share(b));
                }
                None => out.push_str(",\"by\":null,\"by_share\":null"),
            }
            field(out, "reason", reason.as_str());
        }
        Event::Requeued { job, lost } => {
            field(out, "job", &name(job));
            lost_field(sched, out, job, lost);
        }
        Event::Failed { job, reason, lost } => {
            field(out, "job", &name(job));
            field(out, "reason", reason.code());
            array_size(out, job);
            match reason {
                crate::sched::FailReason::NonZeroExit(c) => num(out, "exitCode", c),
                // Live only: killed from outside, by this signal (not by shareq).
                crate::sched::FailReason::Signalled(sig) => {
                    num(out, "exitCode", 128 + sig);
                    field(out, "signal", &crate::sched::state::signal_name(*sig));
                }
                crate::sched::FailReason::DependencyFailed { job, .. } => {
                    field(out, "dependency", &name(job));
                }
                _ => {}
            }
            lost_field(sched, out, job, lost);
        }
        Event::Cancelled { job, .. } => {
            field(out, "job", &name(job));
        }
        Event::TimedOut { job } => {
            field(out, "job", &name(job));
        }
        Event::OverMemory {
            job,
            held_gib,
            of_gib,
            stop,
        } => {
            field(out, "job", &name(job));
            num(out, "heldGiB", held_gib);
            num(out, "ofGiB", of_gib);
            num(out, "stop", stop);
        }
        Event::Reprioritized { job, priority, .. } => {
            field(out, "job", &name(job));
            num(out, "priority", priority);
        }
        Event::Succeeded { job } | Event::Released { job } => {
            field(out, "job", &name(job));
            array_size(out, job);
        }
        Event::ConfigApplied => {}
        Event::ConfigRejected { error } => {
            field(out, "error", error);
        }
    }
    out.push('}');
}
