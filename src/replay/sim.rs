//! The simulated clock (SPEC §6): drives the scheduler through a scenario, instant by
//! instant, in the spec's order (finishes, releases, trace rows, events, one pass), and
//! writes one JSON object per decision.

use super::scenario::{Action, Scenario, TimedAction};
use super::summary::Stats;
use crate::model::JobId;
use crate::model::UnitCapacity;
use crate::sched::{Event, Sched};
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
    /// Per job id - 1: (duration, exit code).
    runs: Vec<(Option<i64>, i32)>,
    timers: BinaryHeap<Timer>,
    seq: u64,
    lines: Option<Vec<String>>,
    stats: Option<Stats>,
    buf: String,
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

fn run_inner<'a, W: Write>(
    sc: &'a Scenario,
    out: &'a mut W,
    opts: Options,
    observer: Observer<'a>,
) -> io::Result<Outcome> {
    let sched = Sched::new(&sc.config, &UnitCapacity::simulated(&sc.config), true);
    let mut sim = Sim {
        stats: opts.summary.then(|| Stats::new(1)),
        sched,
        observer,
        out,
        names: HashMap::with_capacity(sc.trace.len() + sc.events.len()),
        runs: Vec::with_capacity(sc.trace.len() + sc.events.len()),
        timers: BinaryHeap::new(),
        seq: 0,
        lines: opts.keep_lines.then(Vec::new),
        buf: String::with_capacity(256),
    };
    let (mut ti, mut ei) = (0usize, 0usize);
    let until = sc.until.unwrap_or(i64::MAX);
    loop {
        // A timer made stale by what happened earlier makes no instant (SPEC §6).
        sim.drop_stale_timers();
        let next_timer = sim.timers.peek().map(|Reverse(t)| t.0);
        let next_trace = sc.trace.get(ti).map(|a| a.at);
        let next_event = sc.events.get(ei).map(|a| a.at);
        let Some(t) = [next_timer, next_trace, next_event]
            .into_iter()
            .flatten()
            .min()
        else {
            break;
        };
        if t > until {
            break;
        }
        if let Some(st) = &mut sim.stats {
            st.advance(&sim.sched, t);
        }
        // 1-2. jobs finishing at t, then victims releasing at t.
        while let Some(Reverse((at, kind, _, job, attempt))) = sim.timers.peek().copied() {
            if at != t {
                break;
            }
            sim.timers.pop();
            sim.fire(t, kind, JobId(job), attempt)?;
        }
        // 3. trace rows, then the scenario's events, in file order.
        while ti < sc.trace.len() && sc.trace[ti].at == t {
            sim.act(&sc.trace[ti], t)?;
            ti += 1;
        }
        while ei < sc.events.len() && sc.events[ei].at == t {
            sim.act(&sc.events[ei], t)?;
            ei += 1;
        }
        // 4. exactly one pass.
        if let Some(obs) = &mut sim.observer {
            obs(Observation {
                t,
                sched: &sim.sched,
                events: &[],
                before_pass: true,
            });
        }
        sim.sched.pass(t);
        sim.flush(t)?;
    }
    if let Some(st) = sim.stats.take() {
        let line = st.finish();
        sim.write_line(line)?;
    }
    sim.out.flush()?;
    Ok(Outcome {
        lines: sim.lines.unwrap_or_default(),
    })
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
                let code = self.runs[(id.0 - 1) as usize].1;
                self.sched.job_exited(id, code, t);
            }
            TimerKind::Release => self.sched.gpus_released(id, t),
            TimerKind::ProtectionEnd => {}
        }
        self.flush(t)
    }

    fn act(&mut self, a: &'a TimedAction, t: i64) -> io::Result<()> {
        match &a.action {
            Action::Submit(s) => {
                let spec = s.job_spec();
                if let Ok(id) = self.sched.submit_with_stop(spec, s.stop_after, t) {
                    self.names.insert(s.job_name.as_str(), id);
                    let ix = (id.0 - 1) as usize;
                    if self.runs.len() <= ix {
                        self.runs.resize(ix + 1, (None, 0));
                    }
                    self.runs[ix] = (s.duration, s.exit_code);
                }
            }
            Action::Cancel(name) => {
                if let Some(&id) = self.names.get(name.as_str()) {
                    self.sched.cancel(id, "replay", t);
                }
            }
            Action::Update(u) => {
                // The priority's range was checked when the scenario was read.
                if let Some(&id) = self.names.get(u.job_name.as_str()) {
                    let _ = self.sched.set_priority(id, u.scheduling_priority, t);
                }
            }
            Action::Config(Ok(cfg)) => {
                let cap = UnitCapacity::simulated(cfg);
                self.sched.apply_config(cfg, &cap, t);
            }
            Action::Config(Err(e)) => self.sched.config_rejected(e.clone(), t),
            Action::NodeDown(node) => self.sched.node_lost(node, t),
            Action::NodeDrain(node) => self.sched.node_drained(node, true, t),
        }
        self.flush(t)
    }

    fn schedule(&mut self, at: i64, kind: TimerKind, id: JobId) {
        let attempt = self.sched.job(id).map_or(0, |j| j.attempts_started);
        self.seq += 1;
        self.timers
            .push(Reverse((at, kind, self.seq, id.0, attempt)));
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
                    if let Some(d) = self.runs.get((job.0 - 1) as usize).and_then(|r| r.0) {
                        self.schedule(t + d, TimerKind::Finish, *job);
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
                    let delay = self.sched.stop_delay(*job);
                    if delay > 0 && self.sched.job(*job).is_some_and(|j| j.is_stopping()) {
                        self.schedule(t + i64::from(delay), TimerKind::Release, *job);
                    }
                }
                _ => {}
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

fn num(out: &mut String, key: &str, value: impl std::fmt::Display) {
    use std::fmt::Write as _;
    let _ = write!(out, ",\"{key}\":{value}");
}

/// One output line, with the field names and order of SPEC §6 (`t`: the replay's
/// seconds, or the live stream's epoch seconds with milliseconds).
pub fn format_event(sched: &Sched, ev: &Event, t: impl std::fmt::Display, out: &mut String) {
    use std::fmt::Write as _;
    let name = |id: &JobId| sched.job(*id).map_or("?", |j| j.name());
    let share = |id: &JobId| sched.job(*id).map_or("?", |j| sched.share_name(j.share));
    let _ = write!(out, "{{\"t\":{t}");
    match ev {
        Event::Submitted { job } => {
            field(out, "event", "submitted");
            field(out, "job", name(job));
            field(out, "share", share(job));
        }
        Event::Rejected { name, share, error } => {
            field(out, "event", "rejected");
            field(out, "job", name);
            field(out, "error", error);
            field(out, "share", share);
        }
        Event::Started {
            job,
            node,
            devices,
            borrowed,
        } => {
            field(out, "event", "started");
            field(out, "job", name(job));
            field(out, "share", share(job));
            let (unit, q) = sched
                .job(*job)
                .map_or(("?", 0), |j| (sched.unit_name(j.unit), j.quantity));
            field(out, "unit", unit);
            num(out, "quantity", q);
            num(out, "borrowed", borrowed);
            out.push_str(",\"devices\":[");
            for (i, d) in devices.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{d}");
            }
            out.push(']');
            if let Some(node) = node {
                field(out, "node", node);
            }
        }
        Event::Preempted { job, by, reason } => {
            field(out, "event", "preempted");
            field(out, "job", name(job));
            field(out, "share", share(job));
            match by {
                Some(b) => {
                    field(out, "by", name(b));
                    field(out, "by_share", share(b));
                }
                None => out.push_str(",\"by\":null,\"by_share\":null"),
            }
            field(out, "reason", reason.as_str());
        }
        Event::Requeued { job } => {
            field(out, "event", "requeued");
            field(out, "job", name(job));
        }
        Event::Failed { job, reason } => {
            field(out, "event", "failed");
            field(out, "job", name(job));
            field(out, "reason", reason.code());
            if let crate::sched::FailReason::NonZeroExit(c) = reason {
                num(out, "exitCode", c);
            }
        }
        Event::Cancelled { job, .. } => {
            field(out, "event", "cancelled");
            field(out, "job", name(job));
        }
        Event::TimedOut { job } => {
            field(out, "event", "timed_out");
            field(out, "job", name(job));
        }
        Event::Reprioritized { job, priority } => {
            field(out, "event", "reprioritized");
            field(out, "job", name(job));
            num(out, "priority", priority);
        }
        Event::Succeeded { job } => {
            field(out, "event", "succeeded");
            field(out, "job", name(job));
        }
        Event::ConfigApplied => field(out, "event", "config_applied"),
        Event::ConfigRejected { error } => {
            field(out, "event", "config_rejected");
            field(out, "error", error);
        }
    }
    out.push('}');
}
