//! The supervisor's channel to the scheduler that started it (its standard input and
//! output), as both ends name it: the hidden subcommand and its argument, and the lines
//! that carry the exit status and the scheduler's answer that it is stored, and the
//! signal that asks for a preemption with notice. The
//! scheduler's end is `exec::start`, the supervisor's [`crate::exec::supervisor`].

/// The hidden subcommand that runs a supervisor.
pub const SUPERVISE_SUBCOMMAND: &str = "__supervise";
/// Its argument when the spec comes on the runtime's channel.
pub const SPEC_ON_CHANNEL: &str = "--channel";
/// The supervisor's line with the exit status (then the `ExitRecord`'s JSON).
pub const EXIT_LINE: &str = "exit ";
/// The runtime's answer once the exit status is stored.
pub const STORED_LINE: &str = "stored";
/// The signal that asks a supervisor for a preemption with notice (`Stop::Notice`):
/// SIGURG, which a job's processes ignore unless they handle it, since a Slurm signal
/// sent to reach a batch script reaches them too.
pub const NOTICE_REQUEST: nix::sys::signal::Signal = nix::sys::signal::Signal::SIGURG;
/// [`NOTICE_REQUEST`] as `scancel --signal` names it.
pub const NOTICE_REQUEST_NAME: &str = "URG";
