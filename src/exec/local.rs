//! The local executor: each attempt is a supervisor process on this machine
//! (`shareq __supervise`, [`crate::exec::start::launch`]), signalled by pid, which hands its
//! exit status over its channel and waits until the runtime has stored it
//! ([`Backend::stored`]); an adopted one is watched through its attempt record. Containment of an attempt (cgroups) belongs here: it is
//! set up beside the supervisor's start — in `Local::prepare`, while the start is being
//! written, where the supervisor can start inside its group, else in `Local::launch`'s
//! blocking step — and released with the attempt.

use crate::exec::LaunchSpec;
use crate::exec::backend::{Backend, Context, Report, Reports, Shared, not_started};
use crate::exec::containment::cgroup::{self, AttemptGroup, Containment, DeviceRules, group_name};
use crate::exec::start::{self, Ended, Stop};
use crate::exec::state::runfiles::{self, SupervisorStatus};
use crate::model::JobId;
use std::collections::HashMap;
use std::time::Duration;

/// How often an adopted attempt's run files are looked at.
const ADOPTED_POLL: Duration = Duration::from_millis(200);

/// How often the groups of an earlier scheduler's live attempts are looked at.
const FOREIGN_POLL: Duration = Duration::from_millis(500);

/// Why a device an earlier scheduler's attempt holds is withheld (the reason jobs that
/// need it wait with).
const FOREIGN_HOLDS: &str = "a process of an earlier scheduler holds it (its state directory \
                             was recreated while that job ran); it is given back when that \
                             process ends";

/// Watch the groups of an earlier scheduler's live attempts, on a thread of its own (a
/// read of `cgroup.procs` each), until each is empty: then its devices are reported free.
fn watch_foreign(groups: Vec<cgroup::ForeignGroup>, reports: Reports) {
    if groups.is_empty() {
        return;
    }
    let watch = move || {
        let mut left = groups;
        while !left.is_empty() {
            std::thread::sleep(FOREIGN_POLL);
            let (ended, live): (Vec<_>, Vec<_>) = left.into_iter().partition(|g| g.ended());
            left = live;
            for g in ended {
                tracing::info!(unit = %g.unit, devices = ?g.devices, "the earlier scheduler's attempt on these GPUs has ended: they are handed out again");
                for device in g.devices {
                    let unit = g.unit.clone();
                    if !reports.send(Report::DeviceFree { unit, device }) {
                        return; // the runtime is gone
                    }
                }
            }
        }
    };
    if let Err(e) = std::thread::Builder::new()
        .name("shareq-foreign".into())
        .spawn(watch)
    {
        tracing::error!(
            "cannot watch the earlier scheduler's attempts (their GPUs stay withheld until a restart): {e}"
        );
    }
}

/// What the local executor knows of one attempt.
#[derive(Debug, Default)]
struct LocalAttempt {
    /// Known once the supervisor is started (off the runtime task).
    pid: Option<i32>,
    /// The strongest stop asked for so far; sent as soon as the pid is known.
    stop: Option<Stop>,
    /// Its supervisor is not our child: its end is seen by looking at its run files.
    adopted: bool,
    /// A look at its run files is under way.
    probing: bool,
    /// Its end was reported.
    ended: bool,
    /// Its supervisor handed its status over and waits to hear that it is stored.
    waits: Option<tokio::sync::oneshot::Sender<()>>,
}

pub struct Local {
    ctx: Context,
    attempts: Shared<HashMap<(JobId, u32), LocalAttempt>>,
    /// Cgroups per attempt, where this machine allows them (SPEC §7).
    containment: std::sync::Arc<Containment>,
    /// Supervisors whose end the runtime took but has not stored yet.
    unstored: Vec<tokio::sync::oneshot::Sender<()>>,
    /// Starts being written: their groups made and supervisors started meanwhile
    /// ([`Backend::prepare`]), taken by `launch` or undone by `unprepare`.
    prepared: HashMap<(JobId, u32), tokio::task::JoinHandle<Option<Prepared>>>,
}

/// An attempt's group and its supervisor, started while its start was being written.
struct Prepared {
    group: AttemptGroup,
    /// The group's unified-hierarchy directory, which the supervisor was started in.
    dir: std::path::PathBuf,
    supervisor: start::Prestarted,
}

impl Local {
    pub fn new(ctx: Context) -> Local {
        // The scope names this database, so that another scheduler's groups (one on a
        // recreated state directory) are told apart from ours.
        let scope = cgroup::scope(ctx.state.root(), &ctx.owner.db);
        // What earlier schedulers of this state directory left empty goes first.
        if let Some(cg) = Containment::detect(&scope).cgroups() {
            cg.tidy();
        }
        let containment = Containment::detect(&scope);
        match containment.warning() {
            Some(w) => tracing::warn!("{w}"),
            None => tracing::info!("each attempt runs in a cgroup of its own; GPUs are isolated"),
        }
        if let Some(why) = containment.cgroups().and_then(|c| c.no_pids_limit()) {
            tracing::warn!("{why}");
        }
        if let Some(slow) = containment.slow_moves(crate::exec::start::starts_inside_groups()) {
            tracing::info!("{slow}");
        }
        if let Some(cg) = containment.cgroups() {
            // A live attempt of an earlier scheduler holds these: not handed out until
            // it has ended.
            let foreign = cg.foreign_held();
            for g in &foreign {
                for &device in &g.devices {
                    ctx.reports.send(Report::DeviceHeld {
                        unit: g.unit.clone(),
                        device,
                        why: FOREIGN_HOLDS.to_string(),
                    });
                }
            }
            watch_foreign(foreign, ctx.reports.clone());
        }
        Local {
            ctx,
            attempts: Shared::new(HashMap::new()),
            containment: std::sync::Arc::new(containment),
            unstored: Vec::new(),
            prepared: HashMap::new(),
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        if let Some(cg) = self.containment.cgroups() {
            cg.tidy();
        }
    }
}

/// Make an attempt's group (blocking) and name it in its launch spec; `None` when not
/// contained.
fn contain(
    containment: &Containment,
    spec: &mut LaunchSpec,
) -> std::io::Result<Option<AttemptGroup>> {
    let Some(cg) = containment.cgroups() else {
        return Ok(None);
    };
    let name = group_name(spec.job.0, spec.attempt, &spec.unit, &spec.devices);
    let rules = DeviceRules::of(&spec.devices, spec.mig.as_ref());
    let group = cg.attempt_with(&name, &rules);
    group.create(&rules)?;
    group.limit_pids(spec.pids_max)?;
    spec.cgroup = group.dirs();
    Ok(Some(group))
}

/// An attempt is over only once its group is empty (its GPUs are released then): kill
/// what is left, off the async workers.
async fn release(group: Option<AttemptGroup>) {
    if let Some(g) = group {
        // Usually the supervisor has seen every process of it end: the group goes
        // here (a hand-off to the blocking pool costs more than the `rmdir`).
        if g.remove_if_empty() {
            return;
        }
        let _ = tokio::task::spawn_blocking(move || cgroup::drain(&g)).await;
    }
}

/// [`release`], but for the supervisor `pid`, which waits in its group to hear that its
/// status is stored (it holds no GPU; the group goes once it has ended).
async fn release_but(group: Option<AttemptGroup>, pid: i32) {
    if let Some(g) = group {
        if g.members().iter().all(|&p| p == pid) {
            return;
        }
        let _ = tokio::task::spawn_blocking(move || cgroup::drain_but(&g, pid)).await;
    }
}

impl Backend for Local {
    /// The supervisor is started off the runtime task (starting a process blocks its
    /// parent until the child has exec'd, ~ms).
    fn launch(&mut self, spec: LaunchSpec, _node: &str) {
        let (job, attempt) = (spec.job, spec.attempt);
        if spec.gang.is_some() {
            // Refused at submission (SPEC §16); one queued before a restart onto this
            // executor cannot run on one machine.
            tracing::error!(job = %job, attempt, "a multi-node job cannot run on the local executor (this machine only): it needs `executor: slurm`");
            return not_started(&self.ctx.reports, job, attempt);
        }
        self.attempts
            .lock()
            .insert((job, attempt), LocalAttempt::default());
        let reports = self.ctx.reports.clone();
        let attempts = self.attempts.clone();
        let (exe, owner) = (self.ctx.exe.clone(), self.ctx.owner.clone());
        let containment = self.containment.clone();
        let prepared = self.prepared.remove(&(job, attempt));
        tokio::spawn(async move {
            let state = spec.state.clone();
            let mut spec = spec;
            // Its supervisor, started while the start was being written, if it could be.
            let ready = match prepared {
                Some(p) => p.await.ok().flatten(),
                None => None,
            };
            let launched = match ready {
                Some(Prepared {
                    group,
                    dir,
                    supervisor,
                }) => {
                    spec.cgroup = group.dirs();
                    if let Err(e) = group.limit_pids(spec.pids_max) {
                        // Its supervisor ends without running anything (as an undone
                        // start's, `unprepare`), and the group goes.
                        tracing::error!(job = %job, attempt, "cannot start a supervisor: {e}");
                        supervisor.abandon().await;
                        let _ = tokio::task::spawn_blocking(move || group.remove()).await;
                        return not_started(&reports, job, attempt);
                    }
                    Ok(supervisor
                        .supervisor(&mut spec, Some(&dir))
                        .map(|s| (s, Some(group))))
                }
                None => {
                    tokio::task::spawn_blocking(move || {
                        let group = contain(&containment, &mut spec)?;
                        let unified = group.as_ref().and_then(|g| g.unified());
                        start::launch(&exe, &mut spec, unified).map(|sup| (sup, group))
                    })
                    .await
                }
            };
            let (mut sup, group) = match launched {
                Ok(Ok(started)) => started,
                Ok(Err(e)) => {
                    tracing::error!(job = %job, attempt, "cannot start a supervisor: {e}");
                    return not_started(&reports, job, attempt);
                }
                Err(e) => {
                    tracing::error!(job = %job, attempt, "supervisor start task failed: {e}");
                    return not_started(&reports, job, attempt);
                }
            };
            sup.send_spec().await;
            if let Some(a) = attempts.lock().get_mut(&(job, attempt)) {
                a.pid = Some(sup.pid);
                if let Some(how) = a.stop {
                    start::signal(sup.pid, how);
                }
            }
            reports.send(Report::Accepted { job, attempt });
            let ended = sup
                .wait(&state, job, attempt, &owner, || {
                    reports.send(Report::Running { job, attempt });
                })
                .await;
            let status = match ended {
                Ended::Gone(status) => status,
                Ended::HandedOver(status) => {
                    // Its supervisor waits, alone in the attempt, until the status is
                    // stored (else it leaves it in the attempt's record).
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    if let Some(a) = attempts.lock().get_mut(&(job, attempt)) {
                        a.waits = Some(tx);
                    }
                    let pid = sup.pid;
                    release_but(group.clone(), pid).await;
                    reports.send(Report::Ended {
                        job,
                        attempt,
                        status,
                    });
                    match rx.await {
                        Ok(()) => sup.stored().await,
                        Err(_) => sup.abandon().await,
                    }
                    release(group).await;
                    return;
                }
            };
            release(group).await;
            reports.send(Report::Ended {
                job,
                attempt,
                status,
            });
        });
    }

    /// Where attempts run in a unified-hierarchy group: the group is made and the
    /// supervisor started inside it now, with nothing to run until `launch` sends the
    /// spec. So its start (a process and a large binary) overlaps the write of the
    /// decision, which costs about 1 ms of `fsync` (docs/PERFORMANCE.md).
    fn prepare(&mut self, job: JobId, attempt: u32, unit: &str, devices: &[u32]) {
        let Some(cg) = self.containment.cgroups() else {
            return;
        };
        if !crate::exec::start::starts_inside_groups()
            || self.prepared.contains_key(&(job, attempt))
        {
            return;
        }
        let group = cg.attempt(&group_name(job.0, attempt, unit, devices));
        let (exe, devices) = (self.ctx.exe.clone(), devices.to_vec());
        let handle = tokio::task::spawn_blocking(move || {
            // A failure here is left to `launch`, which makes the group and starts the
            // supervisor again the usual way and says what went wrong.
            group.create(&DeviceRules::gpus(&devices)).ok()?;
            let dir = group.unified()?.to_path_buf();
            let supervisor = start::prestart(&exe, &dir)?;
            Some(Prepared {
                group,
                dir,
                supervisor,
            })
        });
        self.prepared.insert((job, attempt), handle);
    }

    /// The starts were not written: their supervisors end without running anything, and
    /// their groups go.
    fn unprepare(&mut self) {
        for (_, handle) in self.prepared.drain() {
            tokio::spawn(async move {
                if let Ok(Some(p)) = handle.await {
                    p.supervisor.abandon().await;
                    // Nothing else ran in it; only removed, never killed: the same
                    // attempt, written later, may be in it by now (then it stays).
                    let _ = tokio::task::spawn_blocking(move || p.group.remove()).await;
                }
            });
        }
    }

    fn signal(&mut self, job: JobId, attempt: u32, how: Stop) {
        if let Some(a) = self.attempts.lock().get_mut(&(job, attempt)) {
            a.stop = Some(how);
            if let Some(pid) = a.pid {
                start::signal(pid, how);
            }
        }
    }

    fn adopt(&mut self, job: JobId, attempt: u32, pid: u32, _node: Option<&str>) {
        let pid = i32::try_from(pid).ok().filter(|&p| p > 0);
        let a = LocalAttempt {
            pid,
            adopted: true,
            ..LocalAttempt::default()
        };
        self.attempts.lock().insert((job, attempt), a);
    }

    fn forget(&mut self, job: JobId, attempt: u32) {
        if let Some(waits) = self
            .attempts
            .lock()
            .remove(&(job, attempt))
            .and_then(|a| a.waits)
        {
            self.unstored.push(waits);
        }
    }

    fn stored(&mut self) {
        for waits in self.unstored.drain(..) {
            let _ = waits.send(());
        }
    }

    fn attempt_of_process(&self, pid: i32) -> Option<(JobId, u32)> {
        let cg = self.containment.cgroups()?;
        cg.attempt_of_process(pid).map(|(j, a)| (JobId(j), a))
    }

    fn warning(&self) -> Option<String> {
        self.containment.warning()
    }

    fn poll_every(&self) -> Option<Duration> {
        let watching = self.attempts.lock().values().any(|a| a.adopted && !a.ended);
        watching.then_some(ADOPTED_POLL)
    }

    /// Look at each adopted attempt's run files (on the blocking pool: it reads `/proc`).
    /// A supervisor gone without an exit status (killed from outside) is reported only
    /// once nothing of its attempt's session runs (SPEC §7).
    fn poll(&mut self) {
        let due: Vec<(JobId, u32)> = {
            let mut attempts = self.attempts.lock();
            attempts
                .iter_mut()
                .filter(|(_, a)| a.adopted && !a.ended && !a.probing)
                .map(|(&k, a)| {
                    a.probing = true;
                    k
                })
                .collect()
        };
        for (job, attempt) in due {
            let group = self
                .containment
                .cgroups()
                .and_then(|cg| cg.find(job.0, attempt));
            probe(&self.ctx, self.attempts.clone(), job, attempt, group);
        }
    }
}

fn probe(
    ctx: &Context,
    attempts: Shared<HashMap<(JobId, u32), LocalAttempt>>,
    job: JobId,
    attempt: u32,
    group: Option<AttemptGroup>,
) {
    let (root, owner) = (ctx.state.root().to_path_buf(), ctx.owner.clone());
    let reports: Reports = ctx.reports.clone();
    tokio::spawn(async move {
        let status =
            tokio::task::spawn_blocking(move || runfiles::probe(&root, job, attempt, &owner))
                .await
                .unwrap_or(SupervisorStatus::Alive { pid: 0 });
        let ended = match status {
            SupervisorStatus::Alive { .. } => None,
            SupervisorStatus::Exited(status) => Some(status),
            SupervisorStatus::Vanished { session } => {
                if let Some(sid) = session {
                    tracing::warn!(job = %job, attempt, "adopted supervisor died without an exit status: killing what is left of its attempt");
                    start::clear_session(sid).await;
                }
                Some(crate::exec::ExitStatus::ended_now(255))
            }
        };
        if let Some(a) = attempts.lock().get_mut(&(job, attempt)) {
            a.probing = false;
            a.ended = ended.is_some();
        }
        if let Some(status) = ended {
            // An adopted attempt found again by its group: over once the group is empty.
            release(group).await;
            reports.send(Report::Ended {
                job,
                attempt,
                status,
            });
        }
    });
}
