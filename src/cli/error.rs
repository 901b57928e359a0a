//! How a command fails: one [`CliError`] carrying the exit code docs/CLI.md documents
//! ([`ExitKind`]) and the line to print on stderr. A command returns `Result<(), CliError>`;
//! [`exit_code`] prints the message and ends the process with its code.

use crate::server::Response;
use std::process::ExitCode;

/// The documented exit codes other than 0 (docs/CLI.md, "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// 1: failed (the scheduler is not reachable, a job id was unknown, …).
    Failed = 1,
    /// 2: the command line or a file given to it is wrong.
    Usage = 2,
    /// 3: not allowed (SPEC §9).
    NotAllowed = 3,
}

/// Why a command failed, and its exit code.
#[derive(Debug, thiserror::Error)]
#[error("{}", .message.as_deref().unwrap_or_default())]
pub struct CliError {
    pub exit: ExitKind,
    /// The whole stderr line (`None`: the command printed what it had to say already).
    message: Option<String>,
}

impl CliError {
    /// Exit 1 with this line.
    pub fn failed(message: impl Into<String>) -> CliError {
        CliError {
            exit: ExitKind::Failed,
            message: Some(message.into()),
        }
    }

    /// Exit 2 with this line.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError {
            exit: ExitKind::Usage,
            message: Some(message.into()),
        }
    }

    /// The scheduler refused a request: exit 3 when the rules of SPEC §9 refused it
    /// ([`crate::access::EXIT_NOT_ALLOWED`]), 1 otherwise.
    pub fn refused(r: &Response, message: impl Into<String>) -> CliError {
        CliError {
            exit: if r.not_allowed {
                ExitKind::NotAllowed
            } else {
                ExitKind::Failed
            },
            message: Some(message.into()),
        }
    }

    /// Asking the scheduler failed: exit 3 when its socket refused this user (SPEC §9,
    /// `controlSocket.group`), 1 otherwise.
    pub fn client(e: &anyhow::Error, message: impl Into<String>) -> CliError {
        let refused = matches!(
            e.downcast_ref::<crate::server::ClientError>(),
            Some(crate::server::ClientError::NotAllowed { .. })
        );
        CliError {
            exit: if refused {
                ExitKind::NotAllowed
            } else {
                ExitKind::Failed
            },
            message: Some(message.into()),
        }
    }

    /// The command printed its reasons itself (several lines, a report): only the code.
    pub fn printed(exit: ExitKind) -> CliError {
        CliError {
            exit,
            message: None,
        }
    }

    /// The same message with another code.
    pub fn with_exit(self, exit: ExitKind) -> CliError {
        CliError { exit, ..self }
    }

    pub fn code(&self) -> u8 {
        self.exit as u8
    }
}

/// Print a failed command's message and give its exit code.
pub fn exit_code(result: Result<(), CliError>) -> ExitCode {
    ExitCode::from(exit_code_of(result))
}

/// [`exit_code`] as a number (the message printed the same way), for a process that
/// ends with `std::process::exit` (a supervisor copied from the spawner).
pub fn exit_code_of(result: Result<(), CliError>) -> u8 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            if let Some(m) = &e.message {
                eprintln!("{m}");
            }
            e.code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_are_the_documented_ones() {
        assert_eq!(CliError::failed("x").code(), 1);
        assert_eq!(CliError::usage("x").code(), 2);
        let denied = Response {
            not_allowed: true,
            ..Response::default()
        };
        assert_eq!(CliError::refused(&denied, "x").code(), 3);
        assert_eq!(
            crate::access::EXIT_NOT_ALLOWED,
            ExitKind::NotAllowed as u8,
            "the socket's code and the CLI's agree"
        );
        assert_eq!(CliError::refused(&Response::default(), "x").code(), 1);
        assert_eq!(CliError::printed(ExitKind::Usage).to_string(), "");
        assert_eq!(
            CliError::usage("shareq jobs: bad").to_string(),
            "shareq jobs: bad"
        );
    }
}
