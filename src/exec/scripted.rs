//! A backend that runs nothing: it records what the runtime asks of it (launches,
//! signals, adoptions) and sends the reports a test script gives it. Runtime tests drive
//! the whole scheduling path through it — starts, stops, timeouts, node loss — with no
//! supervisor, process or batch system. Never chosen for a config (see
//! `choice::choose`); a test builds one with [`Script::new`] and starts the runtime on
//! it (`RuntimeHandle::start_on`).

use crate::exec::LaunchSpec;
use crate::exec::backend::{Backend, Context, Report, Reports, Shared};
use crate::exec::start::Stop;
use crate::model::JobId;
use std::time::Duration;

/// One launch the runtime asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub job: JobId,
    pub attempt: u32,
    pub node: String,
    pub devices: Vec<u32>,
    /// The environment its command would get (`LaunchSpec::job_env`).
    pub env: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct Log {
    launches: Vec<Launch>,
    signals: Vec<(JobId, u32, Stop)>,
    adopted: Vec<(JobId, u32, u32)>,
    forgotten: Vec<(JobId, u32)>,
    polls: usize,
    /// pid → (job, attempt), as a contained backend would read it from the cgroup.
    owners: std::collections::HashMap<i32, (JobId, u32)>,
    reports: Option<Reports>,
}

/// The test's side of a scripted backend: what was asked, and reports to send.
#[derive(Debug, Clone)]
pub struct Script(Shared<Log>);

impl Default for Script {
    fn default() -> Self {
        Script(Shared::new(Log::default()))
    }
}

impl Script {
    pub fn new() -> Script {
        Script::default()
    }

    /// Say that process `pid` belongs to attempt `attempt` of `job`, as a contained
    /// backend would answer from its cgroup.
    pub fn owns(&self, pid: i32, job: JobId, attempt: u32) {
        self.0.lock().owners.insert(pid, (job, attempt));
    }

    /// The backend to start a runtime on (`RuntimeHandle::start_on`).
    pub fn backend(&self) -> impl FnOnce(Context) -> Box<dyn Backend> + use<> {
        let log = self.0.clone();
        move |ctx: Context| {
            log.lock().reports = Some(ctx.reports);
            Box::new(Scripted { log }) as Box<dyn Backend>
        }
    }

    /// Send a report to the runtime as the executor would. False before the runtime
    /// started on this script, or once it is gone.
    pub fn report(&self, r: Report) -> bool {
        let reports = self.0.lock().reports.clone();
        reports.is_some_and(|s| s.send(r))
    }

    pub fn launches(&self) -> Vec<Launch> {
        self.0.lock().launches.clone()
    }

    pub fn signals(&self) -> Vec<(JobId, u32, Stop)> {
        self.0.lock().signals.clone()
    }

    /// (job, attempt, pid) of each adoption.
    pub fn adopted(&self) -> Vec<(JobId, u32, u32)> {
        self.0.lock().adopted.clone()
    }

    /// The attempts whose end the runtime took.
    pub fn forgotten(&self) -> Vec<(JobId, u32)> {
        self.0.lock().forgotten.clone()
    }

    /// How many looks the runtime asked for.
    pub fn polls(&self) -> usize {
        self.0.lock().polls
    }
}

struct Scripted {
    log: Shared<Log>,
}

impl Backend for Scripted {
    fn attempt_of_process(&self, pid: i32) -> Option<(JobId, u32)> {
        self.log.lock().owners.get(&pid).copied()
    }

    fn launch(&mut self, spec: LaunchSpec, node: &str) {
        self.log.lock().launches.push(Launch {
            job: spec.job,
            attempt: spec.attempt,
            node: node.to_string(),
            env: spec.job_env(),
            devices: spec.devices,
        });
    }

    fn signal(&mut self, job: JobId, attempt: u32, how: Stop) {
        self.log.lock().signals.push((job, attempt, how));
    }

    fn adopt(&mut self, job: JobId, attempt: u32, pid: u32, _node: Option<&str>) {
        self.log.lock().adopted.push((job, attempt, pid));
    }

    fn forget(&mut self, job: JobId, attempt: u32) {
        self.log.lock().forgotten.push((job, attempt));
    }

    /// Looked at while something was adopted and not yet ended, like the local executor.
    fn poll_every(&self) -> Option<Duration> {
        let log = self.log.lock();
        let watching = log
            .adopted
            .iter()
            .any(|&(j, a, _)| !log.forgotten.contains(&(j, a)));
        watching.then_some(Duration::from_millis(200))
    }

    fn poll(&mut self) {
        self.log.lock().polls += 1;
    }
}
