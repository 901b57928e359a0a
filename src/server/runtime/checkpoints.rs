//! Checkpoint reports (SPEC §14, `shareq checkpoint`): who may report for an attempt (a
//! process of it, as the user it runs as: by its cgroup, else by its token), the report
//! stored in the database before anything else, then given to the core
//! (`Sched::report_checkpoint`), whose victim order it moves.

use super::Runtime;
use super::input::CheckpointReport;
use super::refusal::{CheckpointRefusal, Refusal};
use crate::sched::Checkpoint;
use crate::snapshot::CheckpointView;

impl Runtime {
    /// Take a report: checked, stored, then given to the core. A report while a stop is
    /// under way is taken too.
    pub(super) fn checkpoint(
        &mut self,
        r: CheckpointReport,
        now: i64,
    ) -> Result<CheckpointView, Refusal> {
        let refused = |c| Err(Refusal::Checkpoint(c));
        let Some(j) = self.sched.job(r.job) else {
            return refused(CheckpointRefusal::NoJob(r.job));
        };
        // The user the attempt runs as: its submitter under a root scheduler (SPEC §9),
        // else the scheduler's own user.
        let me = nix::unistd::geteuid().as_raw();
        let submitter = j.spec.submitter.as_deref();
        let (runs_as, owner) = match submitter {
            Some(s) if me == 0 => (s.uid, s.name.clone()),
            _ => (me, format!("uid {me}")),
        };
        if r.uid != runs_as {
            return refused(CheckpointRefusal::OtherUser {
                user: r.user,
                job: r.job,
                owner,
            });
        }
        if !self
            .exec
            .is_of_attempt(r.pid, r.job, r.attempt, r.token.as_ref())
        {
            let why = if r.token.is_some() {
                "its cgroup is another attempt's, or SHAREQ_ATTEMPT_TOKEN is not this attempt's"
            } else {
                "it is in none of the attempt's cgroups and sent no SHAREQ_ATTEMPT_TOKEN"
            };
            return refused(CheckpointRefusal::NotOfAttempt {
                user: r.user,
                job: r.job,
                attempt: r.attempt,
                why,
            });
        }
        self.take_checkpoint(r.job, r.attempt, r.note, now)
    }

    /// A report of a caller known to be of the attempt (checked here, or by the
    /// attempt's supervisor on a node): the attempt must hold the job's GPUs now; stored,
    /// then given to the core.
    pub(super) fn take_checkpoint(
        &mut self,
        job: crate::model::JobId,
        attempt: u32,
        note: Option<String>,
        now: i64,
    ) -> Result<CheckpointView, Refusal> {
        let refused = |c| Err(Refusal::Checkpoint(c));
        let bytes = note.as_ref().map_or(0, String::len);
        if bytes > Checkpoint::NOTE_MAX {
            return refused(CheckpointRefusal::NoteTooLong {
                bytes,
                most: Checkpoint::NOTE_MAX,
            });
        }
        let Some(j) = self.sched.job(job) else {
            return refused(CheckpointRefusal::NoJob(job));
        };
        if !j.is_holding() || j.attempts_started != attempt {
            return refused(CheckpointRefusal::NotRunning { job, attempt });
        }
        // Never before the attempt's last save (the core keeps the later one).
        let at = j.last_save_or_start().map_or(now, |t| now.max(t));
        if let Some(p) = &mut self.persist {
            let note = note.as_deref();
            super::off_the_async_workers(|| p.store.record_checkpoint(job, attempt, at, note))
                .map_err(|e| Refusal::Checkpoint(CheckpointRefusal::NotStored(e.to_string())))?;
        }
        let note = note.map(std::sync::Arc::<str>::from);
        self.sched.report_checkpoint(job, attempt, at, note);
        self.picture.touch(job);
        tracing::info!(job = %job, attempt, "checkpoint reported");
        let stored = self.sched.job(job).and_then(|j| j.checkpoint.as_deref());
        Ok(stored.map(CheckpointView::from).unwrap_or(CheckpointView {
            at,
            attempt,
            note: None,
        }))
    }
}
