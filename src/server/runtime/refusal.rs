//! Why a request was refused — by the rules before it reached the runtime, or by the
//! runtime (a submit, a priority change, a reload, a history read): one type with the
//! structured reason, from where it was refused to whoever asked. Its `Display` is the
//! message the user reads; the control socket gives each variant its error code in one
//! `match` (`front::protocol::ErrorCode::of`), never from the words.

use crate::access::Denied;
use crate::model::{JobId, SpecError};
use crate::sched::{PriorityError, Rejection};

/// Why an input was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The rules of SPEC §9 refuse this caller this action (the message names the rule).
    #[error("{0}")]
    NotAllowed(Denied),
    /// The scheduler refused the submission (SPEC §2, §10, §13).
    #[error("{0}")]
    Rejected(Rejection),
    /// A multi-node job (SPEC §16) submitted to a scheduler whose executor runs jobs on
    /// one machine (its environment lists its one node): its `numNodes`.
    #[error(
        "numNodes: {0}: a multi-node job needs `executor: slurm` \
         (`executor: {{kind: slurm, partition: ...}}` and `nodes`); the local executor runs \
         jobs on this machine only"
    )]
    GangOnLocal(u32),
    /// The submission's own fields are wrong (no command, a working directory that is
    /// none, a client token out of shape), or too large to carry (a limit).
    #[error("{0}")]
    Spec(SpecError),
    /// The user's jobs queued or running (`has`) and the `asks` this submit adds (an
    /// array's size) would be more than one user may have (SPEC §9).
    #[error("{}", user_limit(user, *has, *asks, *most))]
    UserLimit {
        user: String,
        has: u64,
        asks: u64,
        most: u64,
    },
    /// The user's jobs hold their budget of bytes on the state filesystem (job data and
    /// logs, `limits.maxDataMiBPerUser`).
    #[error(
        "user {user} holds {} of job data and logs, budget {} (limits.maxDataMiBPerUser): \
         wait for their history to be pruned, or ask an admin",
        size(*held),
        size(*budget)
    )]
    UserData {
        user: String,
        held: u64,
        budget: u64,
    },
    /// The state filesystem is below its reserve (SPEC §8): new jobs wait outside.
    #[error(
        "the state filesystem has {free_mib} MiB free, below the reserve of {reserve_mib} MiB \
         (logs.minFreeMiB): no new jobs until space is freed there"
    )]
    StateFull { free_mib: u64, reserve_mib: u64 },
    /// Scheduling is paused (its decisions cannot be written, SPEC §8); why, as the
    /// status shows it.
    #[error("{0}")]
    Paused(String),
    /// The scheduler stopped before it could record the answer (or is shutting down);
    /// why.
    #[error("{0}")]
    Stopped(String),
    /// The priority change itself is refused (out of range, no such job).
    #[error("{0}")]
    Priority(PriorityError),
    /// A reloaded config did not validate, or this scheduler cannot carry it out: its
    /// errors, one a line.
    #[error("{0}")]
    Config(String),
    /// The scheduler keeps no database, so it has no history to read.
    #[error("this scheduler keeps no database, so no utilisation history")]
    NoHistory,
    /// The history could not be read: what the database said.
    #[error("cannot read the utilisation history: {0}")]
    HistoryUnreadable(String),
    /// An attached console's scheduler could not be reached: why.
    #[error("the scheduler is not reachable: {0}")]
    Unreachable(String),
    /// An attached console's scheduler refused, with this message (its code stays on the
    /// socket: the console only shows it).
    #[error("{0}")]
    Relayed(String),
    /// A checkpoint report was refused (SPEC §14).
    #[error("{0}")]
    Checkpoint(CheckpointRefusal),
}

/// Why a checkpoint report (`shareq checkpoint`) was refused (SPEC §14).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointRefusal {
    /// The caller is another user than the one the job runs as.
    #[error(
        "{user} may not report a checkpoint for job {job}: it runs as {owner}; only a \
         process of its running attempt may"
    )]
    OtherUser {
        user: String,
        job: JobId,
        owner: String,
    },
    /// The caller is not a process of the attempt: its cgroup names another attempt, or
    /// (outside one) its `SHAREQ_ATTEMPT_TOKEN` is not the attempt's.
    #[error(
        "{user} may not report a checkpoint for job {job} attempt {attempt}: the caller is \
         not a process of that attempt ({why})"
    )]
    NotOfAttempt {
        user: String,
        job: JobId,
        attempt: u32,
        why: &'static str,
    },
    /// No such job is in view.
    #[error("no job {0}")]
    NoJob(JobId),
    /// The job does not run that attempt now (it ended, was requeued, or is queued).
    #[error(
        "job {job} is not running attempt {attempt}: there is nothing to report a checkpoint for"
    )]
    NotRunning { job: JobId, attempt: u32 },
    /// The note is longer than a report may carry.
    #[error("--note: a checkpoint note may hold at most {most} bytes; this one has {bytes}")]
    NoteTooLong { bytes: usize, most: usize },
    /// The report could not be stored (SPEC §8): what the database said.
    #[error("the checkpoint could not be stored: {0}")]
    NotStored(String),
}

/// The words of [`Refusal::UserLimit`]: an array too large for what is left says its size
/// and what is left, not only how many the user has.
fn user_limit(user: &str, has: u64, asks: u64, most: u64) -> String {
    let rule = format!("(limits.maxQueuedJobsPerUser = {most})");
    if asks <= 1 {
        return format!(
            "{user} has {has} jobs queued or running, the most one user may have {rule}: \
             wait for some to end"
        );
    }
    let left = most.saturating_sub(has);
    format!(
        "an array of {asks} jobs is more than {user} may still queue: {user} has {has} jobs \
         queued or running and may have at most {most} {rule}, so {left} more"
    )
}

/// Bytes to the nearest MiB, or in GiB when whole.
fn size(bytes: u64) -> String {
    let mib = bytes.saturating_add(1 << 19) >> 20;
    if mib >= 1024 && mib.is_multiple_of(1024) {
        format!("{} GiB", mib >> 10)
    } else {
        format!("{mib} MiB")
    }
}

impl From<Rejection> for Refusal {
    fn from(r: Rejection) -> Refusal {
        Refusal::Rejected(r)
    }
}

impl From<SpecError> for Refusal {
    fn from(e: SpecError) -> Refusal {
        Refusal::Spec(e)
    }
}

impl From<PriorityError> for Refusal {
    fn from(e: PriorityError) -> Refusal {
        Refusal::Priority(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_refusals_name_the_rule() {
        let other = CheckpointRefusal::OtherUser {
            user: "bob".into(),
            job: JobId(12),
            owner: "alice".into(),
        };
        assert_eq!(
            Refusal::Checkpoint(other).to_string(),
            "bob may not report a checkpoint for job 12: it runs as alice; only a process of \
             its running attempt may"
        );
        let long = CheckpointRefusal::NoteTooLong {
            bytes: 230,
            most: 200,
        };
        assert_eq!(
            long.to_string(),
            "--note: a checkpoint note may hold at most 200 bytes; this one has 230"
        );
    }

    #[test]
    fn a_users_data_budget_is_named() {
        let r = Refusal::UserData {
            user: "alice".into(),
            held: 812 << 20,
            budget: 1 << 30,
        };
        assert!(
            r.to_string()
                .starts_with("user alice holds 812 MiB of job data and logs, budget 1 GiB"),
            "{r}"
        );
    }

    /// The words are the ones users read before the refusal was typed.
    #[test]
    fn refusals_read_as_before() {
        let limit = Refusal::UserLimit {
            user: "bob".into(),
            has: 3,
            asks: 1,
            most: 3,
        };
        assert_eq!(
            limit.to_string(),
            "bob has 3 jobs queued or running, the most one user may have \
             (limits.maxQueuedJobsPerUser = 3): wait for some to end"
        );
        // An array larger than what is left: its size and the real counts.
        let array = Refusal::UserLimit {
            user: "bob".into(),
            has: 0,
            asks: 500,
            most: 100,
        };
        assert_eq!(
            array.to_string(),
            "an array of 500 jobs is more than bob may still queue: bob has 0 jobs queued \
             or running and may have at most 100 (limits.maxQueuedJobsPerUser = 100), so 100 more"
        );
        let full = Refusal::StateFull {
            free_mib: 10,
            reserve_mib: 64,
        };
        assert_eq!(
            full.to_string(),
            "the state filesystem has 10 MiB free, below the reserve of 64 MiB \
             (logs.minFreeMiB): no new jobs until space is freed there"
        );
        assert_eq!(
            Refusal::from(Rejection::Quantity).to_string(),
            "quantity must be at least 1"
        );
        assert_eq!(
            Refusal::from(SpecError::NoCommand).to_string(),
            "command is required"
        );
        assert_eq!(
            Refusal::from(PriorityError::NoJob(JobId(4))).to_string(),
            "no job 4"
        );
        assert_eq!(
            Refusal::NoHistory.to_string(),
            "this scheduler keeps no database, so no utilisation history"
        );
        assert_eq!(
            Refusal::HistoryUnreadable("locked".into()).to_string(),
            "cannot read the utilisation history: locked"
        );
    }
}
