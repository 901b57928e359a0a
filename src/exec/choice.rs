//! Which backend carries a config's attempts out, chosen here and nowhere else
//! ([`choose`]), and what a config's executor cannot carry out, said beside that choice
//! ([`unavailable`], [`unreachable`]): the one place that knows every backend.

use crate::config::{ConfigError, LoadedConfig};
use crate::exec::backend::{Backend, Context};
use crate::exec::slurm::commands;
use crate::model::{Executor, JobId};

/// The one place that picks the backend of a config's executor.
pub fn choose(executor: &Executor, ctx: Context) -> Box<dyn Backend> {
    match executor {
        Executor::Local => Box::new(crate::exec::local::Local::new(ctx)),
        Executor::Slurm(s) => Box::new(crate::exec::slurm::Slurm::new(
            ctx,
            s.partition.clone(),
            s.start,
        )),
    }
}

/// The executor as serve's start log names it: `local`, `slurm (partition gpu)`.
pub fn describe(executor: &Executor) -> String {
    match executor {
        Executor::Local => "local".to_string(),
        Executor::Slurm(s) => format!("slurm (partition {})", s.partition),
    }
}

/// Whether the executor runs attempts on this machine, so that GPU discovery here answers
/// for its node (Slurm's nodes are other machines: their GPUs are the ones the config
/// lists).
pub fn runs_here(executor: &Executor) -> bool {
    match executor {
        Executor::Local => true,
        Executor::Slurm(_) => false,
    }
}

/// A config the executors cannot carry out (several nodes on the local executor) is
/// refused at start and on reload, with the reason on its line.
pub fn unavailable(loaded: &LoadedConfig) -> Option<ConfigError> {
    let nodes = loaded.config.env.nodes.as_ref().map_or(1, Vec::len);
    match loaded.config.executor() {
        Executor::Local if nodes > 1 => Some(
            ConfigError::new(format!(
                "nodes: {nodes} nodes, and the local executor runs jobs on this machine only: list one node, or use `executor: {{kind: slurm, partition: ...}}` (`replay` and `check` accept several nodes without an executor)"
            ))
            .field("nodes"),
        ),
        Executor::Local => None,
        Executor::Slurm(_) => None,
    }
}

/// With the Slurm executor: Slurm must answer and have the partition, and every node of
/// the config must be in it, before anything is started.
pub fn unreachable(loaded: &LoadedConfig) -> Option<ConfigError> {
    let Executor::Slurm(s) = loaded.config.executor() else {
        return None;
    };
    let why = match commands::sinfo(&s.partition) {
        Err(e) => format!("executor: Slurm does not answer: {e}"),
        Ok(nodes) => {
            let missing: Vec<String> = loaded
                .config
                .nodes()
                .into_iter()
                .map(|(n, _)| n)
                .filter(|n| !nodes.iter().any(|x| &x.name == n))
                .collect();
            if missing.is_empty() {
                return None;
            }
            format!(
                "executor: partition `{}` has no node {} (it has: {})",
                s.partition,
                missing.join(", "),
                nodes
                    .iter()
                    .map(|n| n.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    };
    Some(ConfigError::new(why).field("executor"))
}

/// Which attempts run, after a restart, as the executor sees it: `None` for the local
/// executor (recovery looks at this machine's processes); for Slurm, whether its queue
/// still has the attempt's batch job (found by name). Without Slurm's view nothing can be
/// said about what runs: an error, and the scheduler does not start (no guessing).
pub type LiveAttempts = Box<dyn Fn(JobId, u32) -> bool>;

pub fn live_attempts(executor: &Executor) -> Result<Option<LiveAttempts>, ConfigError> {
    match executor {
        Executor::Local => Ok(None),
        Executor::Slurm(s) => {
            let jobs = commands::squeue(&s.partition).map_err(|e| {
                ConfigError::new(format!("executor: Slurm's queue cannot be read: {e}"))
                    .field("executor")
            })?;
            Ok(Some(Box::new(move |job, attempt| {
                let name = commands::job_name(job, attempt);
                jobs.iter().any(|j| j.name == name && j.is_live())
            })))
        }
    }
}
