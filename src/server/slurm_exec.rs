//! The Slurm executor (SPEC §10): an attempt is one batch job (`sbatch`, pinned to the
//! node and GPUs shareq chose) that runs shareq's supervisor, so the run files and the
//! stop path are the local executor's own. What differs is how an attempt is started
//! and signalled (`scancel --full --signal=TERM`, a plain `scancel` as the backstop) and
//! how its end is seen: one look every second at the run files, `squeue --json` and
//! `sinfo --json`, off the runtime task. A job Slurm lost without an exit status is a
//! vanished supervisor (SPEC §8); a node DOWN is node loss (DEVICE_LOST).

use super::carry::{Backend, Executor};
use super::input::{ExecKind, ExecReport, Input};
use super::timers::{Timer, Timers};
use crate::exec::proc::Stop;
use crate::exec::runfiles::{self, Owner};
use crate::exec::slurm::{self, SlurmJob, SlurmNode};
use crate::exec::{ExitStatus, LaunchSpec};
use crate::model::JobId;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

/// How often shareq looks at Slurm and the run files of its attempts.
pub(crate) const SLURM_POLL: Duration = Duration::from_millis(500);

/// What one look found, for the runtime to act on.
#[derive(Debug)]
pub(crate) struct SlurmView {
    /// `squeue --json` (shareq's jobs of the partition), or why it could not be read.
    jobs: Result<Vec<SlurmJob>, String>,
    nodes: Result<Vec<SlurmNode>, String>,
    /// Per watched attempt: whether its batch job was known when the look began (only
    /// then can its absence from `squeue` mean it was lost), its exit status if written,
    /// and whether its supervisor reported in (its pid file exists).
    attempts: Vec<(JobId, u32, bool, Option<ExitStatus>, bool)>,
}

/// What the runtime must do after a look.
#[derive(Debug, Default)]
pub(crate) struct Reconciled {
    pub running: Vec<(JobId, u32)>,
    pub ended: Vec<(JobId, u32, i32)>,
    pub nodes_down: Vec<String>,
    /// Every node Slurm listed, and whether it is drained.
    pub drained: Vec<(String, bool)>,
}

/// Signal a batch job (TERM or KILL to the batch script through `--full`; a KILL is
/// followed by a plain `scancel`, the backstop). Off the runtime task.
pub(crate) fn cancel(id: u64, how: Stop) {
    tokio::task::spawn_blocking(move || {
        let sig = match how {
            Stop::Term => "TERM",
            Stop::Kill => "KILL",
        };
        if let Err(e) = slurm::scancel(id, Some(sig)) {
            tracing::warn!(slurm_job = id, "{e}");
        }
        if how == Stop::Kill
            && let Err(e) = slurm::scancel(id, None)
        {
            tracing::warn!(slurm_job = id, "{e}");
        }
    });
}

impl Executor {
    /// Submit an attempt as a batch job; STARTING once Slurm has it, RUNNING when its
    /// supervisor reports in.
    pub(super) fn slurm_start(&mut self, spec: LaunchSpec, node: String, partition: String) {
        let (job, attempt) = (spec.job, spec.attempt);
        let exe = self.exe.clone();
        let slurm_log = self.state.attempt_log(job, attempt).with_extension("slurm");
        if let Some(dir) = slurm_log.parent() {
            // Slurm fails a job whose output file it cannot open.
            let _ = std::fs::create_dir_all(dir);
        }
        let tx = self.tx.clone();
        let report = move |k: ExecKind| drop(tx.send(Input::Exec(ExecReport(k))));
        tokio::task::spawn_blocking(move || {
            let submitted = runfiles::write_spec(&spec)
                .map_err(|e| format!("cannot write the attempt's spec: {e}"))
                .and_then(|path| {
                    slurm::sbatch(&slurm::Submit {
                        partition: &partition,
                        node: &node,
                        devices: &spec.devices,
                        job,
                        attempt,
                        exe: &exe,
                        spec: &path,
                        slurm_log: &slurm_log,
                    })
                });
            match submitted {
                Ok(id) => {
                    tracing::info!(job = %job, attempt, slurm_job = id, node = %node, "submitted to Slurm");
                    report(ExecKind::SlurmSubmitted { job, attempt, id });
                }
                Err(e) => {
                    tracing::error!(job = %job, attempt, "cannot submit to Slurm: {e}");
                    report(ExecKind::Exited {
                        job,
                        attempt,
                        status: ExitStatus::ended_now(127),
                    });
                }
            }
        });
    }

    /// `sbatch` answered: remember the batch job and deliver a stop asked for meanwhile.
    pub(crate) fn slurm_submitted(&mut self, job: JobId, attempt: u32, id: u64) -> bool {
        let Some(a) = self.running.get_mut(&job).filter(|a| a.attempt == attempt) else {
            // Ended (cancelled) before Slurm answered: take the batch job back.
            cancel(id, Stop::Kill);
            return false;
        };
        a.slurm = Some(id);
        if let Some(how) = a.stop {
            Self::signal(a, how);
        }
        true
    }

    /// Keep the look at Slurm armed.
    pub(crate) fn slurm_watch(&self, timers: &mut Timers) {
        if matches!(self.backend, Backend::Slurm { .. }) && !timers.is_set(Timer::SlurmPoll) {
            timers.set(Timer::SlurmPoll, SLURM_POLL);
        }
    }

    /// Look at Slurm and the watched attempts' run files, off the runtime task; the
    /// result comes back as `SlurmView`.
    pub(crate) fn slurm_look(&self) {
        let Backend::Slurm { partition } = &self.backend else {
            return;
        };
        let partition = partition.clone();
        let watched: Vec<(JobId, u32, bool)> = self
            .running
            .iter()
            .map(|(&j, a)| (j, a.attempt, a.slurm.is_some()))
            .collect();
        let (root, owner): (PathBuf, Owner) = (self.state.root().to_path_buf(), self.owner.clone());
        let tx = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            // Exit files first, then Slurm: an attempt that ended because its node went
            // down is seen with that node down (Slurm marks it before killing the job).
            let mut attempts: Vec<(JobId, u32, bool, Option<ExitStatus>, bool)> = watched
                .into_iter()
                .map(|(job, attempt, known)| {
                    let exit = runfiles::read_exit(&root, job, attempt, &owner);
                    let pid = runfiles::read_pid(&root, job, attempt, &owner).is_some();
                    (job, attempt, known, exit, pid)
                })
                .collect();
            let jobs = slurm::squeue(&partition);
            let nodes = slurm::sinfo(&partition);
            // And again for those without one: a job gone from squeue wrote its exit
            // before it went (or it was lost).
            for a in attempts.iter_mut().filter(|a| a.3.is_none()) {
                a.3 = runfiles::read_exit(&root, a.0, a.1, &owner);
            }
            let view = SlurmView {
                jobs,
                nodes,
                attempts,
            };
            let _ = tx.send(Input::Exec(ExecReport(ExecKind::SlurmView(Box::new(view)))));
        });
    }

    /// Act on a look: attempts that ended (exit status, or gone from Slurm without one),
    /// supervisors that reported in, batch jobs found by name, nodes that went down.
    pub(crate) fn slurm_reconcile(
        &mut self,
        view: SlurmView,
        down_before: &HashSet<String>,
    ) -> Reconciled {
        let mut out = Reconciled::default();
        let jobs = match view.jobs {
            Ok(j) => Some(j),
            Err(e) => {
                tracing::warn!("cannot read Slurm's queue: {e}");
                None
            }
        };
        for (job, attempt, known, exit, pid) in view.attempts {
            let Some(a) = self.running.get_mut(&job).filter(|a| a.attempt == attempt) else {
                continue;
            };
            let name = slurm::job_name(job, attempt);
            // Its batch job, by id once known; found by name (adoption) only among the
            // live ones, newest first (an older shareq may have used the name).
            let in_slurm = jobs.as_ref().and_then(|js| match a.slurm {
                Some(id) => js.iter().find(|s| s.id == id && s.is_live()),
                None => js
                    .iter()
                    .filter(|s| s.name == name && s.is_live())
                    .max_by_key(|s| s.id),
            });
            if a.slurm.is_none()
                && let Some(s) = in_slurm
            {
                tracing::info!(job = %job, attempt, slurm_job = s.id, "found its Slurm job by name");
                a.slurm = Some(s.id);
                if let Some(how) = a.stop {
                    Self::signal(a, how);
                }
            }
            if let Some(status) = exit {
                out.ended.push((job, attempt, status.code));
                continue;
            }
            if pid && !a.reported {
                a.reported = true;
                out.running.push((job, attempt));
            }
            // Submitted, and Slurm no longer has it, and no exit status: lost (SPEC §8).
            if known && jobs.is_some() && in_slurm.is_none() {
                tracing::warn!(job = %job, attempt, "Slurm no longer has the attempt's job and it left no exit status: treated as a vanished supervisor");
                out.ended.push((job, attempt, 255));
            }
        }
        match view.nodes {
            Ok(nodes) => {
                for n in nodes.iter().filter(|n| n.is_down()) {
                    if !down_before.contains(&n.name) {
                        out.nodes_down.push(n.name.clone());
                    }
                }
                out.drained = nodes
                    .iter()
                    .map(|n| (n.name.clone(), n.is_drained()))
                    .collect();
            }
            Err(e) => tracing::warn!("cannot read Slurm's nodes: {e}"),
        }
        out
    }
}
