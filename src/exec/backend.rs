//! The executor boundary (SPEC §10): what carries attempts out. The runtime talks to one
//! [`Backend`] — launch an attempt on a node with devices, signal it, adopt it after a
//! restart, let it look at what runs — and every backend answers with the same
//! [`Report`]s (accepted, running, ended with a code, node down, node drained). Which
//! backend runs is chosen in [`crate::exec::choice`], and nowhere else.
//!
//! Backend-neutral work (the attempt table, TERM → grace → KILL, timeouts, the preemption
//! log) is the runtime's (`server::carry`); a backend keeps only its own per-attempt data.
//! A third executor is a new file with an `impl Backend` and a line in
//! [`crate::exec::choice::choose`].

use crate::exec::start::Stop;
use crate::exec::state::runfiles::Owner;
use crate::exec::{LaunchSpec, StateDir};
use crate::model::JobId;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// What a backend saw of an attempt or a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// The attempt was taken on (a supervisor exists, or Slurm has its batch job): it is
    /// STARTING, its command not yet running.
    Accepted { job: JobId, attempt: u32 },
    /// The attempt's command runs.
    Running { job: JobId, attempt: u32 },
    /// The attempt ended with this status (code 255: its supervisor vanished, 127: it
    /// could not be started); with the run time its supervisor measured, and whether it
    /// stopped the attempt at its timeout (SPEC §7).
    Ended {
        job: JobId,
        attempt: u32,
        status: crate::exec::ExitStatus,
    },
    /// The node went down: nothing on it runs any more (its attempts are reported
    /// `Ended` right after).
    NodeDown { node: String },
    /// Whether the node takes new jobs (its running ones go on).
    NodeDrained { node: String, drained: bool },
    /// Something outside this scheduler holds the device (a live attempt of an earlier
    /// scheduler's, SPEC §8): it is never handed out by this one.
    DeviceHeld {
        unit: String,
        device: u32,
        why: String,
    },
    /// What held a device a `DeviceHeld` named has ended: the device may be handed out.
    DeviceFree { unit: String, device: u32 },
    /// The attempt reported a checkpoint through its supervisor, which checked its token
    /// (SPEC §14: `shareq checkpoint` on a Slurm node).
    Checkpoint {
        job: JobId,
        attempt: u32,
        note: Option<String>,
    },
}

/// Where a backend sends its reports (the runtime's input channel). `send` is false once
/// the runtime is gone.
#[derive(Clone)]
pub struct Reports(Arc<dyn Fn(Report) -> bool + Send + Sync>);

impl Reports {
    pub fn new(f: impl Fn(Report) -> bool + Send + Sync + 'static) -> Reports {
        Reports(Arc::new(f))
    }

    pub fn send(&self, r: Report) -> bool {
        (self.0)(r)
    }
}

impl std::fmt::Debug for Reports {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("Reports")
    }
}

/// What carries attempts out. Every call is made on the runtime task and returns at once;
/// slow work (starting a process, `sbatch`, reading `/proc`) runs off it and comes back
/// as [`Report`]s. A report for an attempt the runtime no longer runs is ignored there.
pub trait Backend: Send {
    /// Start an attempt on `node` with the spec's devices: `Accepted`, then `Running`,
    /// then `Ended` (or only `Ended` with 127 when it cannot be started). A gang's
    /// (SPEC §16: `spec.gang` names every rank's node and devices, `node` is rank 0's) is
    /// one attempt all the same: `Running` once every rank runs, one `Ended` once every
    /// rank has ended. A backend that cannot run gangs ends it with 127.
    fn launch(&mut self, spec: LaunchSpec, node: &str);
    /// An attempt's start on `devices` of `unit` is about to be written (SPEC §8: before it
    /// is carried out): what can be made ready meanwhile, and undone if the write fails,
    /// may begin now. [`Backend::launch`] of the attempt follows once the start is written,
    /// or [`Backend::unprepare`] when the write failed.
    fn prepare(&mut self, _job: JobId, _attempt: u32, _unit: &str, _devices: &[u32]) {}
    /// The starts prepared and not launched (the write failed; or the batch is carried
    /// out and they were not in it) will not be: undo them.
    fn unprepare(&mut self) {}
    /// Deliver a stop (SIGTERM or SIGKILL) to an attempt, now or as soon as it can be
    /// reached (its supervisor started, its batch job known).
    fn signal(&mut self, job: JobId, attempt: u32, how: Stop);
    /// Watch an attempt whose supervisor outlived the previous scheduler (SPEC §8); `pid`
    /// is the one its pid file names, `node` where the core placed it.
    fn adopt(&mut self, job: JobId, attempt: u32, pid: u32, node: Option<&str>);
    /// Watch a gang's attempt (SPEC §16) that outlived the previous scheduler: every
    /// rank's node, rank 0 first, and the grace of its stops. Only a backend that
    /// launches gangs has any; others watch it as a plain attempt on rank 0's node.
    fn adopt_gang(&mut self, job: JobId, attempt: u32, nodes: &[String], _grace_seconds: u32) {
        self.adopt(job, attempt, 0, nodes.first().map(String::as_str));
    }
    /// The runtime took the attempt's end: forget it.
    fn forget(&mut self, job: JobId, attempt: u32);
    /// Everything the runtime took so far is stored in its database (SPEC §8): what a
    /// backend kept only until then (a supervisor waiting with its exit status) may go.
    fn stored(&mut self) {}
    /// How often [`Backend::poll`] wants to run now (`None`: nothing to look at).
    fn poll_every(&self) -> Option<Duration>;
    /// Look at what runs (adopted supervisors, the batch system), off the runtime task.
    fn poll(&mut self);
    /// What the console header must say about this backend (jobs not contained, GPUs not
    /// isolated, SPEC §7), if anything.
    fn warning(&self) -> Option<String> {
        None
    }
    /// The attempt a process of this machine belongs to, by the attempt's containment
    /// (SPEC §14: whose `shareq checkpoint` it is); `None` where attempts are not
    /// contained here, or the process is in none of them.
    fn attempt_of_process(&self, _pid: i32) -> Option<(JobId, u32)> {
        None
    }
}

/// What every backend is built from.
#[derive(Debug, Clone)]
pub struct Context {
    pub state: StateDir,
    /// The `shareq` binary that runs supervisors.
    pub exe: PathBuf,
    /// The database whose run files these are.
    pub owner: Owner,
    pub reports: Reports,
}

/// A backend's per-attempt data, shared between the runtime task and the work it runs
/// off that task (a started supervisor's pid, a batch job's id).
#[derive(Debug)]
pub(crate) struct Shared<T>(Arc<Mutex<T>>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T> Shared<T> {
    pub(crate) fn new(t: T) -> Shared<T> {
        Shared(Arc::new(Mutex::new(t)))
    }

    /// Held only for in-memory work; a panic while holding it leaves plain data behind.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An attempt that ended before it could run (127, like a command that cannot start).
pub(crate) fn not_started(reports: &Reports, job: JobId, attempt: u32) {
    reports.send(Report::Ended {
        job,
        attempt,
        status: crate::exec::ExitStatus::ended_now(127),
    });
}
