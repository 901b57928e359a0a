//! What a user asks for when submitting a job (SPEC §2), and the job states they see.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A job's identity, assigned by the scheduler, growing in submission order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Highest allowed `schedulingPriority`.
pub const MAX_PRIORITY: u32 = 9999;

/// A command: an argv list, or a string run with `sh -c`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Command {
    Shell(String),
    Argv(Vec<String>),
}

impl Command {
    /// The command as one line, as a shell would read it back: a string as given, an
    /// argv list joined by spaces with each argument that needs it single-quoted.
    pub fn line(&self) -> String {
        match self {
            Command::Shell(s) => s.clone(),
            Command::Argv(v) => v
                .iter()
                .map(|a| {
                    let plain = !a.is_empty()
                        && a.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
                    if plain {
                        a.clone()
                    } else {
                        format!("'{}'", a.replace('\'', "'\\''"))
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryStrategy {
    pub attempts: u32,
}

/// A submission, with the field names of SPEC §2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobSpec {
    pub job_name: String,
    pub quota_share_name: String,
    /// Defaults to the environment's only unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_unit: Option<String>,
    #[serde(default = "one")]
    pub quantity: u32,
    #[serde(default)]
    pub scheduling_priority: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Command>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_directory: Option<String>,
    /// Absent = requeue forever; 0 = FAILED on the first preemption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption_retries_before_termination: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_strategy: Option<RetryStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Chosen by the client for this one submission: a retry with the same token (after a
    /// lost answer) gets the job the first one made, never a second job (SPEC §8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_token: Option<String>,
    /// Who submitted it. Set by the scheduler from the caller's peer credentials (SPEC
    /// §9); whatever a request says here is overwritten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Shared: every snapshot of a queued job refers to it instead of copying it.
    pub submitter: Option<std::sync::Arc<Submitter>>,
    /// The jobs it waits for (SPEC §13): it is PENDING until they have all SUCCEEDED.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<Dependency>,
    /// One submission, `size` children (SPEC §13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_properties: Option<ArrayProperties>,
    /// How often the job saves its work, in seconds (SPEC §14): replay saves it at every
    /// multiple of this of an attempt's run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_every_seconds: Option<u64>,
    /// How long the submitter expects one attempt to run, in seconds (`submit --expect`):
    /// the start estimates' first source for this job (SPEC §11). Scheduling ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_runtime_seconds: Option<u64>,
    /// A multi-node job (SPEC §16): `quantity` GPUs on each of this many distinct nodes
    /// (2..64). Absent for a plain job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_nodes: Option<u32>,
}

/// The longest note a checkpoint report (`shareq checkpoint --note`, SPEC §14) may carry,
/// in bytes.
pub const CHECKPOINT_NOTE_MAX: usize = 200;

/// At most this many dependencies per job (SPEC §13).
pub const MAX_DEPENDENCIES: usize = 20;
/// The largest array (SPEC §13); the smallest is 2.
pub const MAX_ARRAY_SIZE: u32 = 10_000;
/// The most nodes a multi-node job may ask for (SPEC §16); the fewest is 2.
pub const MAX_NODES: u32 = 64;

/// One entry of `dependsOn`, as in AWS Batch: `{jobId: 12}` waits for job 12 (all of it,
/// for an array); `{jobId: 12, type: N_TO_N}` makes child i of an array wait for child i
/// of array 12; `{type: SEQUENTIAL}` on an array makes each child wait for the one before
/// (with a `jobId`, SEQUENTIAL is a plain dependency on that job).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dependency {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<JobRef>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<DependencyType>,
}

impl Dependency {
    /// `{jobId: id}`.
    pub fn on(id: JobRef) -> Dependency {
        Dependency {
            job_id: Some(id),
            kind: None,
        }
    }

    /// A dependency as people write one (`submit --after`, the console's form): `12`,
    /// `12:3` (an array's child), `N_TO_N:12` or `SEQUENTIAL`.
    pub fn parse(text: &str) -> Result<Dependency, BadJobRef> {
        let a = text.trim();
        if a.eq_ignore_ascii_case("SEQUENTIAL") {
            return Ok(Dependency {
                job_id: None,
                kind: Some(DependencyType::Sequential),
            });
        }
        if let Some((kind, id)) = a.split_once(':')
            && kind.eq_ignore_ascii_case("N_TO_N")
        {
            return Ok(Dependency {
                job_id: Some(id.parse::<JobRef>()?),
                kind: Some(DependencyType::NToN),
            });
        }
        Ok(Dependency::on(a.parse::<JobRef>()?))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DependencyType {
    #[serde(rename = "N_TO_N")]
    NToN,
    #[serde(rename = "SEQUENTIAL")]
    Sequential,
}

/// A job as a user names it: `12`, or `12:3` for child 3 of array 12. In JSON a number,
/// or a string in either form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobRef {
    pub job: JobId,
    pub index: Option<u32>,
}

impl JobRef {
    pub fn job(id: u64) -> JobRef {
        JobRef {
            job: JobId(id),
            index: None,
        }
    }

    /// The id it names: an array's children follow their parent, child i of array P is
    /// id P + 1 + i (SPEC §13; the one place that says so). Whether P is an array of more
    /// than i children is for the scheduler to check.
    pub fn id(self) -> JobId {
        match self.index {
            None => self.job,
            Some(i) => JobId(self.job.0 + 1 + u64::from(i)),
        }
    }
}

impl fmt::Display for JobRef {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.index {
            None => write!(f, "{}", self.job),
            Some(i) => write!(f, "{}:{i}", self.job),
        }
    }
}

/// Text that names no job: what was given. Its `Display` says what a job reference is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadJobRef(pub String);

impl fmt::Display for BadJobRef {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "`{}` is not a job id (a number, or PARENT:INDEX for an array's child)",
            self.0
        )
    }
}

impl std::error::Error for BadJobRef {}

impl std::str::FromStr for JobRef {
    type Err = BadJobRef;
    fn from_str(s: &str) -> Result<JobRef, BadJobRef> {
        let bad = || BadJobRef(s.to_string());
        let (job, index) = match s.trim().split_once(':') {
            None => (s.trim(), None),
            Some((p, i)) => (p, Some(i.parse::<u32>().map_err(|_| bad())?)),
        };
        let job = job.parse::<u64>().map_err(|_| bad())?;
        if job == 0 {
            return Err(bad());
        }
        Ok(JobRef {
            job: JobId(job),
            index,
        })
    }
}

impl Serialize for JobRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.index {
            None => s.serialize_u64(self.job.0),
            Some(_) => s.serialize_str(&self.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for JobRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<JobRef, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Id(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Id(0) => Err(serde::de::Error::custom("job ids start at 1")),
            Raw::Id(n) => Ok(JobRef::job(n)),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// `arrayProperties: {size: N}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArrayProperties {
    pub size: u32,
}

/// The user a job is charged to (SPEC §12): its submitter, `user` when it has none (as in
/// replay without `user:`).
pub fn charged_user(submitter: Option<&Submitter>) -> &str {
    submitter.map_or("user", |s| s.name.as_str())
}

/// A job's owner: the unix user who submitted it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submitter {
    pub name: String,
    pub uid: u32,
}

fn one() -> u32 {
    1
}

impl JobSpec {
    /// Distinct nodes it asks for: 1, or a gang's `numNodes` (SPEC §16).
    pub fn nodes(&self) -> u32 {
        self.num_nodes.unwrap_or(1).max(1)
    }

    /// GPUs in all: `quantity` on each of its nodes (SPEC §16: a gang counts as one job
    /// of N × quantity).
    pub fn total_quantity(&self) -> u32 {
        self.quantity.saturating_mul(self.nodes())
    }

    /// A minimal spec, for tests and generators.
    pub fn new(name: &str, share: &str, quantity: u32, priority: u32) -> JobSpec {
        JobSpec {
            job_name: name.to_string(),
            quota_share_name: share.to_string(),
            capacity_unit: None,
            quantity,
            scheduling_priority: priority,
            command: None,
            env: BTreeMap::new(),
            working_directory: None,
            preemption_retries_before_termination: None,
            retry_strategy: None,
            timeout_seconds: None,
            client_token: None,
            submitter: None,
            depends_on: Vec::new(),
            array_properties: None,
            checkpoint_every_seconds: None,
            expected_runtime_seconds: None,
            num_nodes: None,
        }
    }

    /// How many attempts non-zero exits may use (1..=10, default 1).
    pub fn attempts(&self) -> u32 {
        self.retry_strategy.as_ref().map_or(1, |r| r.attempts)
    }
}

/// Job states, as in AWS Batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    Submitted,
    /// Waits for its dependencies (SPEC §13): in no queue.
    Pending,
    Runnable,
    Scheduled,
    Starting,
    Running,
    Succeeded,
    Failed,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Submitted => "SUBMITTED",
            JobState::Pending => "PENDING",
            JobState::Runnable => "RUNNABLE",
            JobState::Scheduled => "SCHEDULED",
            JobState::Starting => "STARTING",
            JobState::Running => "RUNNING",
            JobState::Succeeded => "SUCCEEDED",
            JobState::Failed => "FAILED",
        }
    }

    /// Every state, in the order of a job's life (for counts by state).
    pub const ALL: [JobState; 8] = [
        JobState::Submitted,
        JobState::Pending,
        JobState::Runnable,
        JobState::Scheduled,
        JobState::Starting,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
    ];

    /// Its place in [`JobState::ALL`].
    pub fn ordinal(self) -> usize {
        self as usize
    }

    pub fn is_finished(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Command;

    #[test]
    fn a_command_reads_as_one_shell_line() {
        assert_eq!(
            Command::Shell("sleep 3 && echo ok".into()).line(),
            "sleep 3 && echo ok"
        );
        let argv = Command::Argv(vec![
            "python".into(),
            "train.py".into(),
            "--name=run 1".into(),
            "it's".into(),
            String::new(),
        ]);
        assert_eq!(
            argv.line(),
            r#"python train.py '--name=run 1' 'it'\''s' ''"#
        );
    }
}
