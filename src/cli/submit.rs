//! `shareq submit --share S [options] -- CMD...`: queue a job and print its id; with
//! `--predict`, say what it would do now (the real scheduler on a copy of the live state,
//! SPEC §11) and submit nothing.

use super::error::CliError;
use super::request;
use crate::model::{ArrayProperties, Command, Dependency, JobSpec, RetryStrategy};
use crate::server::Request;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The quota share to submit to.
    #[arg(long)]
    pub share: String,
    /// How many GPUs the job needs in all (default 1). With `--nodes`: the GPUs of all
    /// its nodes together, split evenly over them (`--nodes 2 --gpus 8`: 4 on each).
    #[arg(long)]
    pub gpus: Option<u32>,
    /// A multi-node job (a gang, SPEC §16): run on this many distinct nodes at once,
    /// 2..64, all of them or none. Needs an environment with `nodes`; say the GPUs of each
    /// node with `--gpus-per-node` (or the total with `--gpus`).
    #[arg(long, value_name = "N", value_parser = parse_nodes)]
    pub nodes: Option<u32>,
    /// With `--nodes`: the GPUs the job needs on each of its nodes (default 1).
    #[arg(long, value_name = "G")]
    pub gpus_per_node: Option<u32>,
    /// GiB of one GPU, on a unit sliced by memory (SPEC §15): `20G`, `20GiB` or `20`.
    /// The job gets one device (`CUDA_VISIBLE_DEVICES`) and `SHAREQ_GPU_MEMORY_GIB`.
    #[arg(long, value_name = "GIB", value_parser = parse_gib, conflicts_with_all = ["gpus", "nodes"])]
    pub gpu_memory: Option<u32>,
    /// The capacity unit (default: the environment's only unit).
    #[arg(long)]
    pub unit: Option<String>,
    /// schedulingPriority, 0..9999 (higher first).
    #[arg(long, default_value_t = 0)]
    pub priority: u32,
    /// The job's name (default: the command's first word).
    #[arg(long)]
    pub name: Option<String>,
    /// Preemptions allowed before the job fails (default: requeue forever).
    #[arg(long)]
    pub preemption_retries: Option<u32>,
    /// Attempts for non-zero exits, 1..10.
    #[arg(long)]
    pub attempts: Option<u32>,
    /// Wall-clock limit per attempt: seconds (90) or 20s, 30m, 2h, 1h30m.
    #[arg(long, value_parser = crate::duration::parse_seconds)]
    pub timeout: Option<u64>,
    /// How often the job saves its work and reports it with `shareq checkpoint`
    /// (`checkpointEverySeconds`, SPEC §14): 90, 20s, 30m, 2h. `jobs` warns when a running
    /// attempt has not reported for twice that long.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_seconds)]
    pub checkpoint_every: Option<u64>,
    /// How long you expect the job to run (90, 20s, 30m, 2h30m, 1d): start estimates of
    /// the jobs behind it use it instead of the history (SPEC §11). Scheduling does not.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_seconds)]
    pub expect: Option<u64>,
    /// An environment variable for the job, K=V (repeatable).
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// The working directory (default: the current one).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
    /// Make the submit idempotent: a submit with a token you already used gets the job
    /// the first one made, never a second (default: a fresh random token, which the CLI
    /// reuses only for its own retries). Tokens are per user.
    #[arg(long, value_name = "TOKEN")]
    pub client_token: Option<String>,
    /// Submit nothing: print what the job would do now (start, borrow, preempt, wait, or
    /// be rejected) and its estimated start, as the scheduler decides on a copy of its
    /// state. `--json` prints the prediction as JSON.
    #[arg(long)]
    pub predict: bool,
    /// Wait for these jobs to succeed first (SPEC §13): `12,14` (a job, or all of an
    /// array), `12:3` (an array's child), `N_TO_N:12` (with `--array`: child i after child
    /// i of array 12), `SEQUENTIAL` (with `--array`: each child after the one before).
    /// Until then the job is PENDING; if one fails, so does this one.
    #[arg(long, value_name = "ID[,ID...]", value_delimiter = ',')]
    pub after: Vec<String>,
    /// Submit an array of N jobs (2..10000), children PARENT:0 .. PARENT:N-1, each with
    /// `SHAREQ_ARRAY_INDEX` (and `AWS_BATCH_JOB_ARRAY_INDEX`) in its environment.
    #[arg(long, value_name = "N")]
    pub array: Option<u32>,
    /// With `--predict`: JSON output.
    #[arg(long, requires = "predict")]
    pub json: bool,
    /// The command: several words run as an argv list; a single word runs with `sh -c`.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// What is wrong with the command line of a submission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSubmit {
    #[error("--env `{0}`: expected K=V")]
    EnvNotKv(String),
    #[error("--env `{0}`: the name is empty")]
    EnvNoName(String),
    #[error("no command given (put it after `--`)")]
    NoCommand,
    #[error("--after {0}")]
    After(#[from] crate::model::BadJobRef),
    #[error(
        "--gpus {gpus} counts the job's GPUs in all, and --nodes {nodes} × --gpus-per-node \
         {per_node} is {}: give one of --gpus and --gpus-per-node, or make them agree",
        u64::from(*nodes) * u64::from(*per_node)
    )]
    GpusDisagree {
        gpus: u32,
        nodes: u32,
        per_node: u32,
    },
    #[error(
        "--gpus {gpus} counts the job's GPUs in all, and {gpus} does not split evenly over \
         --nodes {nodes}: say the GPUs of each node with --gpus-per-node"
    )]
    GpusUneven { gpus: u32, nodes: u32 },
    #[error(
        "--gpus-per-node {0} is for a multi-node job: add --nodes N (2..64), or ask for \
         a job on one node with --gpus {0}"
    )]
    PerNodeAlone(u32),
    #[error("--nodes {nodes} × {per_node} GPUs is more GPUs than a job can ask for")]
    GangTooLarge { nodes: u32, per_node: u32 },
}

impl SubmitArgs {
    /// The request body this submission sends.
    pub fn spec(&self) -> Result<JobSpec, BadSubmit> {
        let mut env = BTreeMap::new();
        for kv in &self.env {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(BadSubmit::EnvNotKv(kv.clone()));
            };
            if k.is_empty() {
                return Err(BadSubmit::EnvNoName(kv.clone()));
            }
            env.insert(k.to_string(), v.to_string());
        }
        let (quantity, num_nodes) = self.shape()?;
        let command = match self.command.as_slice() {
            [] => return Err(BadSubmit::NoCommand),
            [one] => Command::Shell(one.clone()),
            many => Command::Argv(many.to_vec()),
        };
        let name = self.name.clone().unwrap_or_else(|| {
            let first = self.command[0].split_whitespace().next().unwrap_or("job");
            let base = first.rsplit('/').next().unwrap_or(first);
            base.chars().take(128).collect()
        });
        // A relative `--cwd` is this process's directory's, never the scheduler's.
        let cwd = match &self.cwd {
            Some(p) => Some(std::path::absolute(p).unwrap_or_else(|_| p.clone())),
            None => std::env::current_dir().ok(),
        };
        Ok(JobSpec {
            job_name: name,
            quota_share_name: self.share.clone(),
            capacity_unit: self.unit.clone(),
            quantity,
            scheduling_priority: self.priority,
            command: Some(command),
            env,
            working_directory: cwd.map(|p| p.display().to_string()),
            preemption_retries_before_termination: self.preemption_retries,
            retry_strategy: self.attempts.map(|attempts| RetryStrategy { attempts }),
            timeout_seconds: self.timeout,
            client_token: Some(self.client_token.clone().unwrap_or_else(client_token)),
            submitter: None,
            depends_on: self
                .after
                .iter()
                .map(|a| parse_after(a))
                .collect::<Result<_, _>>()?,
            array_properties: self.array.map(|size| ArrayProperties { size }),
            checkpoint_every_seconds: self.checkpoint_every,
            expected_runtime_seconds: self.expect,
            num_nodes,
        })
    }

    /// The spec's `quantity` and `numNodes`: GiB of one device on a sliced unit (SPEC
    /// §15), the GPUs of a plain job, or a gang's GPUs on each node and its nodes (SPEC
    /// §16). `--gpus` is always the job's GPUs in all, so beside `--nodes` it must split
    /// evenly and agree with `--gpus-per-node`.
    pub fn shape(&self) -> Result<(u32, Option<u32>), BadSubmit> {
        let Some(nodes) = self.nodes else {
            if let Some(per_node) = self.gpus_per_node {
                return Err(BadSubmit::PerNodeAlone(per_node));
            }
            return Ok((self.gpu_memory.or(self.gpus).unwrap_or(1), None));
        };
        let per_node = match (self.gpus, self.gpus_per_node) {
            (None, per_node) => per_node.unwrap_or(1),
            (Some(gpus), Some(per_node)) => {
                if u64::from(gpus) != u64::from(nodes) * u64::from(per_node) {
                    return Err(BadSubmit::GpusDisagree {
                        gpus,
                        nodes,
                        per_node,
                    });
                }
                per_node
            }
            (Some(gpus), None) => {
                if gpus % nodes != 0 {
                    return Err(BadSubmit::GpusUneven { gpus, nodes });
                }
                gpus / nodes
            }
        };
        if per_node.checked_mul(nodes).is_none() {
            return Err(BadSubmit::GangTooLarge { nodes, per_node });
        }
        Ok((per_node, Some(nodes)))
    }
}

/// The most nodes a gang may ask for (SPEC §16).
pub const MAX_NODES: u32 = 64;

/// `--nodes`: 2..64 distinct nodes (a job on one node has no `--nodes`).
pub fn parse_nodes(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if (2..=MAX_NODES).contains(&n) => Ok(n),
        Ok(n @ 0..=1) => Err(format!(
            "`{n}`: a multi-node job runs on 2..{MAX_NODES} nodes; a job on one node leaves \
             out --nodes and asks with --gpus"
        )),
        Ok(n) => Err(format!(
            "`{n}`: a multi-node job runs on at most {MAX_NODES} nodes"
        )),
        Err(_) => Err(format!("`{s}`: expected a number of nodes, 2..{MAX_NODES}")),
    }
}

/// `--gpu-memory`: whole GiB, as `20G`, `20GiB` or `20` (at least 1).
pub fn parse_gib(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let digits = t
        .strip_suffix("GiB")
        .or_else(|| t.strip_suffix("G"))
        .unwrap_or(t)
        .trim();
    match digits.parse::<u32>() {
        Ok(0) => Err(format!("`{s}`: a job needs at least 1 GiB")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "`{s}`: expected whole GiB of GPU memory, as 20G, 20GiB or 20"
        )),
    }
}

/// One `--after` entry: `12`, `12:3`, `N_TO_N:12` or `SEQUENTIAL` (SPEC §13).
pub fn parse_after(a: &str) -> Result<Dependency, BadSubmit> {
    Ok(Dependency::parse(a)?)
}

/// A token for one submission (SPEC §8): 128 random bits from the kernel, in hex.
fn client_token() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if ok.is_err() {
        let seed = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
        b[..seed.len().min(16)].copy_from_slice(&seed.as_bytes()[..seed.len().min(16)]);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// How often a submit whose answer was lost is sent again (with the same token).
const SUBMIT_TRIES: u32 = 4;

/// Submit, and when the answer is lost (the connection broke after the request went out),
/// ask again with the same client token: the scheduler answers with the job the first
/// request made, if it made one, so a retry never queues a second job. Once an answer was
/// lost, a scheduler that is not listening (it is restarting) is asked again too, and if
/// it does not come back in time the error says the job may exist: never the plain "no
/// scheduler is listening", which means nothing was sent.
fn submit_with_retries(
    state: Option<&std::path::Path>,
    req: &Request,
) -> anyhow::Result<crate::server::Response> {
    use crate::server::ClientError;
    let mut tries = 0;
    let mut lost = false;
    loop {
        tries += 1;
        let result = request(state, req);
        let err = match &result {
            Err(e) => e.downcast_ref::<ClientError>(),
            Ok(_) => None,
        };
        if let Some(ClientError::Timeout { .. }) = err {
            // Sent, and no answer in time: asking again would wait as long again.
            anyhow::bail!(
                "{}; the job may have been queued: look with `shareq jobs --all` before \
                 submitting again",
                err.map(ToString::to_string).unwrap_or_default()
            );
        }
        let io = matches!(err, Some(ClientError::Io { .. }));
        let down = matches!(err, Some(ClientError::NotRunning { .. }));
        if tries < SUBMIT_TRIES && (io || (lost && down)) {
            if io {
                if let Err(e) = &result {
                    eprintln!(
                        "shareq submit: {e}; asking again (the same submission, not a new job)"
                    );
                }
            } else {
                eprintln!(
                    "shareq submit: the scheduler is not back yet; asking again (the same submission, not a new job)"
                );
            }
            lost |= io;
            std::thread::sleep(std::time::Duration::from_millis(200 << tries));
            continue;
        }
        if lost && (io || down) {
            anyhow::bail!(
                "the answer to this submit was lost and the scheduler did not answer again in time: \
                 the job may have been queued; look with `shareq jobs --all` before submitting again"
            );
        }
        return result;
    }
}

pub fn submit(args: &SubmitArgs) -> Result<(), CliError> {
    let mut spec = match args.spec() {
        Ok(s) => s,
        Err(e) => {
            return Err(CliError::usage(format!("shareq submit: {e}")));
        }
    };
    if args.gpu_memory.is_some() {
        let units = sliced_units(args.state.as_deref());
        if let Some(units) = units {
            spec.capacity_unit = Some(
                slice_unit(spec.capacity_unit.as_deref(), &units)
                    .map_err(|e| CliError::usage(format!("shareq submit: {e}")))?,
            );
        }
    }
    if args.predict {
        return predict(args, spec);
    }
    match submit_with_retries(args.state.as_deref(), &Request::Submit { job: spec }) {
        Ok(r) if r.ok => {
            if let Some(id) = r.id {
                println!("{id}");
            }
            Ok(())
        }
        Ok(r) => Err(CliError::refused(
            &r,
            format!(
                "shareq submit: rejected: {}",
                crate::visible::visible(r.error.as_deref().unwrap_or("no reason given"))
            ),
        )),
        Err(e) => Err(CliError::client(&e, format!("shareq submit: {e}"))),
    }
}

/// The scheduler's units, each with its GiB per device when it is sliced by memory
/// (SPEC §15); `None` when it cannot be asked (the submit then says why).
fn sliced_units(state: Option<&std::path::Path>) -> Option<Vec<(String, Option<u32>)>> {
    match request(state, &Request::Status) {
        Ok(crate::server::Response {
            ok: true,
            status: Some(s),
            ..
        }) => Some(
            s.units
                .iter()
                .map(|u| (u.name.clone(), u.memory_gib))
                .collect(),
        ),
        _ => None,
    }
}

/// The unit `--gpu-memory` asks GiB of: `--unit` when it is sliced by memory, else the
/// environment's only sliced unit.
pub fn slice_unit(asked: Option<&str>, units: &[(String, Option<u32>)]) -> Result<String, String> {
    let sliced: Vec<&str> = units
        .iter()
        .filter(|(_, gib)| gib.is_some())
        .map(|(n, _)| n.as_str())
        .collect();
    match asked {
        Some(u) if sliced.contains(&u) => Ok(u.to_string()),
        // An unknown unit: the scheduler's refusal names it.
        Some(u) if !units.iter().any(|(n, _)| n == u) => Ok(u.to_string()),
        Some(u) => Err(format!(
            "--gpu-memory asks GiB of a unit sliced by memory, and unit `{u}` counts whole GPUs (use --gpus){}",
            match sliced.as_slice() {
                [] => String::new(),
                s => format!("; sliced: {}", s.join(", ")),
            }
        )),
        None => match sliced.as_slice() {
            [one] => Ok(one.to_string()),
            [] => Err(
                "--gpu-memory: no unit of this environment is sliced by memory (use --gpus)"
                    .to_string(),
            ),
            many => Err(format!(
                "--gpu-memory: several units are sliced by memory ({}): say which with --unit",
                many.join(", ")
            )),
        },
    }
}

/// `--predict`: ask, print, submit nothing. Exit 0 whatever the verdict; refused as the
/// submit would be refused by the rules (SPEC §9), exit 3; 1 when the scheduler cannot be
/// asked.
fn predict(args: &SubmitArgs, spec: JobSpec) -> Result<(), CliError> {
    let p = match request(args.state.as_deref(), &Request::Predict { job: spec }) {
        Ok(crate::server::Response {
            ok: true,
            prediction: Some(p),
            ..
        }) => p,
        // Refused as the submit would be (not a member of the share: exit 3).
        Ok(r) => {
            let why = crate::visible::visible(r.error.as_deref().unwrap_or("no reason given"));
            return Err(CliError::refused(
                &r,
                format!("shareq submit --predict: {why}"),
            ));
        }
        Err(e) => {
            return Err(CliError::failed(format!("shareq submit --predict: {e}")));
        }
    };
    if args.json {
        match crate::wire::to_string_pretty(&p) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                return Err(CliError::failed(format!("shareq submit --predict: {e}")));
            }
        }
        return Ok(());
    }
    println!("{}: {}", p.verdict.label(), crate::visible::visible(&p.why));
    if let Some(e) = p.estimate() {
        println!(
            "start (estimate): {}",
            e.label(p.at, p.at, crate::forecast::local_utc_offset())
        );
        if let crate::forecast::Estimate::AtLeast { why, .. } = &e {
            println!("  a lower bound: {}", crate::visible::visible(why));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{BadSubmit, SubmitArgs, parse_after, parse_gib, slice_unit};
    use crate::model::{DependencyType, JobRef};
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Line {
        #[command(flatten)]
        submit: SubmitArgs,
    }

    /// `shareq submit ARGS -- true` as clap reads it.
    fn parse(args: &[&str]) -> Result<SubmitArgs, String> {
        let line = ["submit", "--share", "s"]
            .iter()
            .chain(args)
            .chain(&["--", "true"]);
        Line::try_parse_from(line)
            .map(|l| l.submit)
            .map_err(|e| e.to_string())
    }

    /// The spec's (quantity, numNodes) of a command line, or why it is refused.
    fn shape(args: &[&str]) -> Result<(u32, Option<u32>), String> {
        let a = parse(args)?;
        let spec = a.spec().map_err(|e| e.to_string())?;
        assert_eq!(a.shape(), Ok((spec.quantity, spec.num_nodes)));
        Ok((spec.quantity, spec.num_nodes))
    }

    /// SPEC §16: `--nodes N --gpus-per-node G` asks G on each of N nodes; `--gpus` stays
    /// the job's GPUs in all, so beside `--nodes` it splits evenly and must agree.
    #[test]
    fn nodes_and_gpus_per_node_make_a_gang_and_gpus_stays_the_total() {
        assert_eq!(shape(&[]), Ok((1, None)));
        assert_eq!(shape(&["--gpus", "3"]), Ok((3, None)));
        assert_eq!(
            shape(&["--nodes", "2", "--gpus-per-node", "4"]),
            Ok((4, Some(2)))
        );
        assert_eq!(shape(&["--nodes", "3"]), Ok((1, Some(3))));
        assert_eq!(shape(&["--nodes", "2", "--gpus", "8"]), Ok((4, Some(2))));
        assert_eq!(
            shape(&["--nodes", "2", "--gpus", "8", "--gpus-per-node", "4"]),
            Ok((4, Some(2)))
        );
        assert_eq!(shape(&["--nodes", "64"]), Ok((1, Some(64))));
        assert_eq!(shape(&["--gpu-memory", "20G"]), Ok((20, None)));
    }

    #[test]
    fn contradictions_about_nodes_are_refused_with_what_to_say_instead() {
        let e = shape(&["--nodes", "2", "--gpus", "6", "--gpus-per-node", "4"]).unwrap_err();
        assert!(
            e.contains(
                "--gpus 6 counts the job's GPUs in all, and --nodes 2 × --gpus-per-node 4 is 8"
            ),
            "{e}"
        );
        let e = shape(&["--nodes", "2", "--gpus", "7"]).unwrap_err();
        assert!(
            e.contains("7 does not split evenly over --nodes 2") && e.contains("--gpus-per-node"),
            "{e}"
        );
        let e = shape(&["--gpus-per-node", "4"]).unwrap_err();
        assert!(
            e.contains("--gpus-per-node 4 is for a multi-node job: add --nodes N"),
            "{e}"
        );
        for one in ["0", "1"] {
            let e = shape(&["--nodes", one]).unwrap_err();
            assert!(
                e.contains("2..64 nodes; a job on one node leaves out --nodes"),
                "{one}: {e}"
            );
        }
        let e = shape(&["--nodes", "65"]).unwrap_err();
        assert!(e.contains("at most 64 nodes"), "{e}");
        let e = shape(&["--nodes", "two"]).unwrap_err();
        assert!(e.contains("expected a number of nodes"), "{e}");
        let e = shape(&["--nodes", "2", "--gpu-memory", "20G"]).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
        let e = shape(&["--nodes", "64", "--gpus-per-node", "4294967295"]).unwrap_err();
        assert!(e.contains("more GPUs than a job can ask for"), "{e}");
        assert!(matches!(
            parse(&["--nodes", "2", "--gpus", "3"]).unwrap().shape(),
            Err(BadSubmit::GpusUneven { gpus: 3, nodes: 2 })
        ));
    }

    #[test]
    fn gpu_memory_reads_g_gib_and_plain_numbers() {
        assert_eq!(parse_gib("20G"), Ok(20));
        assert_eq!(parse_gib("20GiB"), Ok(20));
        assert_eq!(parse_gib("20"), Ok(20));
        assert!(parse_gib("0").unwrap_err().contains("at least 1 GiB"));
        assert!(
            parse_gib("20MB")
                .unwrap_err()
                .contains("expected whole GiB")
        );
        assert!(parse_gib("1.5G").is_err());
    }

    #[test]
    fn gpu_memory_goes_to_the_sliced_unit_or_says_why_not() {
        let u = |n: &str, g: Option<u32>| (n.to_string(), g);
        let one = [u("gpu", None), u("mem", Some(80))];
        assert_eq!(slice_unit(None, &one), Ok("mem".to_string()));
        assert_eq!(slice_unit(Some("mem"), &one), Ok("mem".to_string()));
        let e = slice_unit(Some("gpu"), &one).unwrap_err();
        assert!(
            e.contains("unit `gpu` counts whole GPUs (use --gpus); sliced: mem"),
            "{e}"
        );
        assert_eq!(slice_unit(Some("nope"), &one), Ok("nope".to_string()));
        let e = slice_unit(None, &[u("gpu", None)]).unwrap_err();
        assert!(e.contains("no unit of this environment is sliced"), "{e}");
        let two = [u("a", Some(80)), u("b", Some(40))];
        let e = slice_unit(None, &two).unwrap_err();
        assert!(
            e.contains("several units are sliced by memory (a, b)"),
            "{e}"
        );
    }

    #[test]
    fn after_reads_jobs_children_and_the_two_types() {
        let d = parse_after("12").unwrap();
        assert_eq!((d.job_id, d.kind), (Some(JobRef::job(12)), None));
        let d = parse_after(" 12:3 ").unwrap();
        assert_eq!(d.job_id.unwrap().to_string(), "12:3");
        let d = parse_after("n_to_n:7").unwrap();
        assert_eq!(
            (d.job_id, d.kind),
            (Some(JobRef::job(7)), Some(DependencyType::NToN))
        );
        let d = parse_after("SEQUENTIAL").unwrap();
        assert_eq!((d.job_id, d.kind), (None, Some(DependencyType::Sequential)));
        for bad in ["", "x", "0", "12:", "12:x", "N_TO_N:"] {
            let e = parse_after(bad).unwrap_err();
            assert!(e.to_string().contains("is not a job id"), "{bad}: {e}");
        }
    }
}
