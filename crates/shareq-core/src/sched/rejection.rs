//! Why a submission is refused (SPEC §2, and §10 for a request no node can hold): one
//! variant per reason, worded as the replay's `rejected` line and the CLI show it; and
//! why a priority change is.

use crate::model::JobId;
use std::fmt;

/// Why a submission was refused. Its `Display` is the error the operator reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The share does not exist; `known`: the shares that do.
    UnknownShare { share: String, known: Vec<String> },
    /// The share is DISABLED.
    ShareDisabled { share: String },
    /// `jobName` is empty or longer than 128 characters.
    JobName,
    /// `quantity < 1`.
    Quantity,
    /// `schedulingPriority` above the maximum.
    Priority { priority: u32, max: u32 },
    /// `retryStrategy.attempts` outside 1..10.
    RetryAttempts { attempts: u32 },
    /// The job names a unit the environment does not declare; `units`: those it does.
    UnknownUnit { unit: String, units: Vec<String> },
    /// No unit named while the environment has several.
    UnitRequired { units: Vec<String> },
    /// The share has no limit for the job's unit.
    NoLimit { share: String, unit: String },
    /// More than the share could ever hold (`max(s,u)`, SPEC §2).
    LimitExceeded {
        quantity: u32,
        share: String,
        max: i64,
    },
    /// More than the largest node has of the unit (SPEC §10).
    LargerThanAnyNode(LargerThanAnyNode),
    /// Its `dependsOn` or `arrayProperties` cannot be met (SPEC §13).
    Links(String),
    /// A multi-node job the environment cannot take (SPEC §16): `numNodes` out of 2..64,
    /// no `nodes`, a sliced unit, or more nodes than could ever hold it.
    Gang(String),
}

/// `needs 8 a100 on one node; the largest node has 4`: a rejection at submission, and the
/// reason a queued job waits when a reload makes it true (SPEC §10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LargerThanAnyNode {
    pub quantity: u32,
    pub unit: String,
    pub largest: u32,
    /// The unit is sliced by memory (SPEC §15): `largest` is a device's GiB.
    pub sliced: bool,
}

/// The words of the "larger than any node" rejection and reason, by which the replay's
/// summary counts such rejections.
const LARGER_THAN_ANY_NODE: &str = "on one node; the largest node has";

/// Was this rejection (its message) "larger than any node"?
pub fn is_larger_than_any_node(error: &str) -> bool {
    error.contains(LARGER_THAN_ANY_NODE)
}

impl fmt::Display for LargerThanAnyNode {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let LargerThanAnyNode {
            quantity,
            unit,
            largest,
            sliced,
        } = self;
        if *sliced {
            return write!(
                f,
                "needs {quantity} GiB of {unit} on one device; each {unit} device has {largest} GiB"
            );
        }
        write!(
            f,
            "needs {quantity} {unit} {LARGER_THAN_ANY_NODE} {largest}"
        )
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Rejection::Links(why) | Rejection::Gang(why) => f.write_str(why),
            Rejection::UnknownShare { share, known } => write!(
                f,
                "quota share `{share}` does not exist (shares: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
            Rejection::ShareDisabled { share } => {
                write!(
                    f,
                    "quota share `{share}` is DISABLED: it accepts no new jobs"
                )
            }
            Rejection::JobName => f.write_str("jobName must be 1 to 128 characters"),
            Rejection::Quantity => f.write_str("quantity must be at least 1"),
            Rejection::Priority { priority, max } => {
                write!(f, "schedulingPriority {priority} is out of range 0..{max}")
            }
            Rejection::RetryAttempts { attempts } => {
                write!(f, "retryStrategy.attempts {attempts} is out of range 1..10")
            }
            Rejection::UnknownUnit { unit, units } => write!(
                f,
                "capacity unit `{unit}` is not declared (units: {})",
                units.join(", ")
            ),
            Rejection::UnitRequired { units } => write!(
                f,
                "capacityUnit is required: the environment has several units ({})",
                units.join(", ")
            ),
            Rejection::NoLimit { share, unit } => {
                write!(f, "quota share `{share}` has no limit for unit `{unit}`")
            }
            Rejection::LimitExceeded {
                quantity,
                share,
                max,
            } => write!(
                f,
                "QUOTA_MANAGEMENT_LIMIT_EXCEEDED: needs {quantity}, {share} may hold at most {}",
                (*max).max(0)
            ),
            Rejection::LargerThanAnyNode(why) => why.fmt(f),
        }
    }
}

impl std::error::Error for Rejection {}

/// Why a priority change was refused. Its `Display` is the error the caller reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriorityError {
    /// Above `max` (an argument out of range).
    OutOfRange { priority: u32, max: u32 },
    /// No such job in the scheduler's tables.
    NoJob(JobId),
}

impl fmt::Display for PriorityError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            PriorityError::OutOfRange { priority, max } => {
                write!(f, "priority {priority} is out of range 0..{max}")
            }
            PriorityError::NoJob(id) => write!(f, "no job {id}"),
        }
    }
}

impl std::error::Error for PriorityError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages are the operator's and the scenarios': each variant's words, exactly.
    #[test]
    fn every_reason_reads_as_before() {
        let s = |x: &str| x.to_string();
        let cases = [
            (
                Rejection::UnknownShare {
                    share: s("x"),
                    known: vec![s("a"), s("b")],
                },
                "quota share `x` does not exist (shares: a, b)",
            ),
            (
                Rejection::UnknownShare {
                    share: s("x"),
                    known: vec![],
                },
                "quota share `x` does not exist (shares: none)",
            ),
            (
                Rejection::ShareDisabled { share: s("a") },
                "quota share `a` is DISABLED: it accepts no new jobs",
            ),
            (Rejection::JobName, "jobName must be 1 to 128 characters"),
            (Rejection::Quantity, "quantity must be at least 1"),
            (
                Rejection::Priority {
                    priority: 10_000,
                    max: 9999,
                },
                "schedulingPriority 10000 is out of range 0..9999",
            ),
            (
                Rejection::RetryAttempts { attempts: 11 },
                "retryStrategy.attempts 11 is out of range 1..10",
            ),
            (
                Rejection::UnknownUnit {
                    unit: s("tpu"),
                    units: vec![s("a100"), s("h100")],
                },
                "capacity unit `tpu` is not declared (units: a100, h100)",
            ),
            (
                Rejection::UnitRequired {
                    units: vec![s("a100"), s("h100")],
                },
                "capacityUnit is required: the environment has several units (a100, h100)",
            ),
            (
                Rejection::NoLimit {
                    share: s("a"),
                    unit: s("h100"),
                },
                "quota share `a` has no limit for unit `h100`",
            ),
            (
                Rejection::LimitExceeded {
                    quantity: 4,
                    share: s("qs3"),
                    max: 2,
                },
                "QUOTA_MANAGEMENT_LIMIT_EXCEEDED: needs 4, qs3 may hold at most 2",
            ),
            (
                Rejection::LimitExceeded {
                    quantity: 1,
                    share: s("qs3"),
                    max: -1,
                },
                "QUOTA_MANAGEMENT_LIMIT_EXCEEDED: needs 1, qs3 may hold at most 0",
            ),
            (
                Rejection::LargerThanAnyNode(LargerThanAnyNode {
                    quantity: 8,
                    unit: s("a100"),
                    largest: 4,
                    sliced: false,
                }),
                "needs 8 a100 on one node; the largest node has 4",
            ),
        ];
        for (r, text) in cases {
            assert_eq!(r.to_string(), text);
        }
        assert!(is_larger_than_any_node(
            "needs 8 a100 on one node; the largest node has 4"
        ));
    }
}
