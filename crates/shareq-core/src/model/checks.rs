//! The checks of a submission that need no I/O and no scheduler state (SPEC §8, §9): a
//! command is given and not empty, command and environment fit [`MAX_JOB_BYTES`], and a
//! client token has its shape. Whether `workingDirectory` is a directory takes the file
//! system: the submitter asks it (off the scheduler's task) and words a "no" with
//! [`SpecError::NotADirectory`].

use super::{Command, JobSpec};
use std::fmt;

/// The most a job's command and environment may take together (SPEC §9, limits): every
/// byte of it is kept in the database and handed to its supervisor.
pub const MAX_JOB_BYTES: usize = 64 << 10;

/// The longest client token accepted (SPEC §8).
pub const MAX_TOKEN: usize = 128;

/// What is wrong with a submission's own fields. Its `Display` is the error the submitter
/// reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecError {
    /// No `command`.
    NoCommand,
    /// An empty argv list, or a shell line of blanks.
    EmptyCommand,
    /// `workingDirectory` (as given) is not a directory on the scheduler's host.
    NotADirectory(String),
    /// Command and environment take `bytes`, more than [`MAX_JOB_BYTES`] (a limit).
    TooLarge { bytes: usize },
    /// `clientToken` is not 1 to [`MAX_TOKEN`] printable ASCII characters.
    ClientToken,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            SpecError::NoCommand => f.write_str("command is required"),
            SpecError::EmptyCommand => f.write_str("command is empty"),
            SpecError::NotADirectory(dir) => {
                write!(f, "workingDirectory `{dir}` is not a directory")
            }
            SpecError::TooLarge { bytes } => write!(
                f,
                "the job's command and environment take {} KiB, more than the {} KiB a job \
                 may carry (limit: command + env); pass large data in a file",
                bytes.div_ceil(1024),
                MAX_JOB_BYTES >> 10
            ),
            SpecError::ClientToken => write!(
                f,
                "clientToken must be 1 to {MAX_TOKEN} printable ASCII characters without spaces"
            ),
        }
    }
}

impl std::error::Error for SpecError {}

impl JobSpec {
    /// A command is given and is not empty.
    pub fn check_command(&self) -> Result<(), SpecError> {
        match &self.command {
            None => Err(SpecError::NoCommand),
            Some(Command::Argv(v)) if v.is_empty() => Err(SpecError::EmptyCommand),
            Some(Command::Shell(s)) if s.trim().is_empty() => Err(SpecError::EmptyCommand),
            Some(_) => Ok(()),
        }
    }

    /// The bytes command and environment take (as kept: an argv argument and an
    /// environment entry with their separators).
    pub fn carried_bytes(&self) -> usize {
        let command = match &self.command {
            Some(Command::Argv(v)) => v.iter().map(|a| a.len() + 1).sum(),
            Some(Command::Shell(s)) => s.len(),
            None => 0,
        };
        let env: usize = self.env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        command + env
    }

    /// Command and environment within [`MAX_JOB_BYTES`].
    pub fn check_size(&self) -> Result<(), SpecError> {
        match self.carried_bytes() {
            bytes if bytes > MAX_JOB_BYTES => Err(SpecError::TooLarge { bytes }),
            _ => Ok(()),
        }
    }

    /// The client token, if any, has its shape ([`check_client_token`]).
    pub fn check_client_token(&self) -> Result<(), SpecError> {
        self.client_token
            .as_deref()
            .map_or(Ok(()), check_client_token)
    }
}

/// Is the token well-formed? 1 to [`MAX_TOKEN`] printable ASCII characters.
pub fn check_client_token(token: &str) -> Result<(), SpecError> {
    let shaped = !token.is_empty()
        && token.len() <= MAX_TOKEN
        && token.bytes().all(|b| b.is_ascii_graphic());
    if shaped {
        Ok(())
    } else {
        Err(SpecError::ClientToken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(command: Option<Command>) -> JobSpec {
        JobSpec {
            job_name: "j".into(),
            quota_share_name: "qs".into(),
            capacity_unit: None,
            quantity: 1,
            scheduling_priority: 0,
            command,
            env: Default::default(),
            working_directory: None,
            preemption_retries_before_termination: None,
            retry_strategy: None,
            timeout_seconds: None,
            client_token: None,
            submitter: None,
            depends_on: Vec::new(),
            array_properties: None,
            checkpoint_every_seconds: None,
        }
    }

    #[test]
    fn a_command_is_required_and_not_empty() {
        assert_eq!(spec(None).check_command(), Err(SpecError::NoCommand));
        let argv = |v: &[&str]| Some(Command::Argv(v.iter().map(|a| a.to_string()).collect()));
        assert_eq!(
            spec(argv(&[])).check_command(),
            Err(SpecError::EmptyCommand)
        );
        let shell = |s: &str| Some(Command::Shell(s.to_string()));
        assert_eq!(
            spec(shell(" \t")).check_command(),
            Err(SpecError::EmptyCommand)
        );
        assert_eq!(spec(argv(&["true"])).check_command(), Ok(()));
        assert_eq!(spec(shell("echo hi")).check_command(), Ok(()));
    }

    #[test]
    fn command_and_environment_fit_the_limit() {
        // An argv argument counts its separator; an environment entry its `=` and end.
        let mut s = spec(Some(Command::Argv(vec!["ab".into(), "c".into()])));
        s.env.insert("K".into(), "vv".into());
        assert_eq!(s.carried_bytes(), 3 + 2 + 1 + 2 + 2);
        assert_eq!(s.check_size(), Ok(()));
        let exactly = spec(Some(Command::Shell("x".repeat(MAX_JOB_BYTES))));
        assert_eq!(exactly.check_size(), Ok(()));
        let over = spec(Some(Command::Shell("x".repeat(MAX_JOB_BYTES + 1))));
        let e = over.check_size().unwrap_err();
        assert_eq!(
            e,
            SpecError::TooLarge {
                bytes: MAX_JOB_BYTES + 1
            }
        );
        assert_eq!(
            e.to_string(),
            "the job's command and environment take 65 KiB, more than the 64 KiB a job may \
             carry (limit: command + env); pass large data in a file"
        );
    }

    #[test]
    fn a_client_token_is_1_to_128_printable_characters() {
        assert_eq!(check_client_token("a-1_b.c"), Ok(()));
        assert_eq!(check_client_token(&"t".repeat(MAX_TOKEN)), Ok(()));
        for bad in ["", "has space", "tab\t", "é", &"t".repeat(MAX_TOKEN + 1)] {
            assert_eq!(
                check_client_token(bad),
                Err(SpecError::ClientToken),
                "{bad:?}"
            );
        }
        let mut s = spec(None);
        assert_eq!(s.check_client_token(), Ok(()));
        s.client_token = Some(String::new());
        assert_eq!(s.check_client_token(), Err(SpecError::ClientToken));
        assert_eq!(
            SpecError::ClientToken.to_string(),
            "clientToken must be 1 to 128 printable ASCII characters without spaces"
        );
    }

    #[test]
    fn the_messages_read_as_before() {
        assert_eq!(SpecError::NoCommand.to_string(), "command is required");
        assert_eq!(SpecError::EmptyCommand.to_string(), "command is empty");
        assert_eq!(
            SpecError::NotADirectory("/no".into()).to_string(),
            "workingDirectory `/no` is not a directory"
        );
    }
}
