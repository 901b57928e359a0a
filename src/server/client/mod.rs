//! The other end of the control socket: [`Client`] connects, sends one request and reads
//! one answer (the CLI) — within a time limit, so that a stopped or hung scheduler gives
//! a clear error instead of a command that waits for ever (`SHAREQ_TIMEOUT`, seconds;
//! 0 = no limit); [`remote::attach`] gives a console on a scheduler that runs elsewhere
//! the same snapshot receiver and `Input` sender as an in-process one.

pub mod remote;

use crate::exec::StateDir;
use crate::server::front::protocol::{Request, Response};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// `hint`: what to do about it (start one; or wait, when it is the system's and it
    /// is restarting: [`ClientError::system_restarting`]).
    #[error("no scheduler is listening on {socket}\n{hint}")]
    NotRunning {
        socket: String,
        state: String,
        hint: String,
    },
    /// The socket refused this user (SPEC §9): `why` names who it is for (its
    /// `controlSocket.group`, or its owner alone). The CLI exits 3.
    #[error("{why}")]
    NotAllowed { socket: String, why: String },
    #[error("talking to the scheduler on {socket}: {source}")]
    Io {
        socket: String,
        source: std::io::Error,
    },
    #[error("the scheduler sent an answer that is not valid: {0}")]
    BadAnswer(String),
    #[error(
        "the scheduler on {socket} did not answer within {secs} s: it may be stopped, \
         overloaded or hung (set SHAREQ_TIMEOUT=SECONDS to wait longer, 0 = for ever)"
    )]
    Timeout { socket: String, secs: u64 },
}

/// How long a request waits for its answer by default.
pub const DEFAULT_TIMEOUT_SECS: u64 = 15;

/// The answer time limit: `SHAREQ_TIMEOUT` seconds (0 = none), else the default.
pub fn answer_timeout() -> Option<std::time::Duration> {
    let secs = std::env::var("SHAREQ_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_TIMEOUT_SECS);
    (secs > 0).then(|| std::time::Duration::from_secs(secs))
}

impl ClientError {
    /// Connecting to the state directory's socket failed: no scheduler listens there, or
    /// something else went wrong.
    pub(crate) fn connecting(state: &StateDir, e: std::io::Error) -> ClientError {
        let socket = state.socket().display().to_string();
        match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                let state = state.root().display().to_string();
                ClientError::NotRunning {
                    socket,
                    hint: format!("start one with: shareq serve --config DIR --state {state}"),
                    state,
                }
            }
            std::io::ErrorKind::PermissionDenied => ClientError::NotAllowed {
                why: socket_refusal(state),
                socket,
            },
            _ => ClientError::Io { socket, source: e },
        }
    }

    /// The system scheduler of `system` is down where one was expected (a restart): no
    /// advice to start a scheduler of one's own, but to wait for it.
    pub fn system_restarting(self, system: &str) -> ClientError {
        match self {
            ClientError::NotRunning { socket, state, .. } => ClientError::NotRunning {
                socket,
                state,
                hint: format!(
                    "the system scheduler ({system}) is not answering: it may be restarting; \
                     try again in a moment (`systemctl status shareq` says more)"
                ),
            },
            other => other,
        }
    }
}

/// Why the socket of `state` refused the user running this: its mode lets in its owner
/// and, with `controlSocket.group`, that group (named); or its directory is closed.
fn socket_refusal(state: &StateDir) -> String {
    use std::os::unix::fs::MetadataExt;
    let me = crate::access::Caller::current().name;
    let socket = state.socket();
    let Ok(m) = std::fs::metadata(&socket) else {
        return format!(
            "{me} may not reach the scheduler on {}: its directory {} is closed to {me}",
            socket.display(),
            state.root().display()
        );
    };
    let owner = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(m.uid()))
        .ok()
        .flatten()
        .map_or_else(|| format!("uid {}", m.uid()), |u| u.name);
    if m.mode() & 0o060 != 0 {
        let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(m.gid()))
            .ok()
            .flatten()
            .map_or_else(|| format!("gid {}", m.gid()), |g| g.name);
        format!(
            "{me} may not reach the scheduler on {}: its socket is for the group `{group}` \
             (controlSocket.group) and {owner}; ask an admin to add {me} to `{group}`",
            socket.display()
        )
    } else {
        format!(
            "{me} may not reach the scheduler on {}: it is {owner}'s own, its socket for \
             {owner} alone (controlSocket.group opens it to a group)",
            socket.display()
        )
    }
}

/// A connection to a running scheduler.
pub struct Client {
    socket: String,
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    timeout: Option<std::time::Duration>,
}

impl Client {
    pub fn connect(state: &StateDir) -> Result<Client, ClientError> {
        let path = state.socket();
        let socket = path.display().to_string();
        let stream = UnixStream::connect(&path).map_err(|e| ClientError::connecting(state, e))?;
        let reader = stream.try_clone().map_err(|source| ClientError::Io {
            socket: socket.clone(),
            source,
        })?;
        let timeout = answer_timeout();
        // The socket's own timeouts (shared by both handles): a read or write that waits
        // longer fails with `WouldBlock`/`TimedOut`, reported as `Timeout`.
        let io = |source| ClientError::Io {
            socket: socket.clone(),
            source,
        };
        stream.set_read_timeout(timeout).map_err(io)?;
        stream.set_write_timeout(timeout).map_err(io)?;
        Ok(Client {
            socket,
            writer: stream,
            reader: BufReader::new(reader),
            timeout,
        })
    }

    /// An I/O error, as a `Timeout` when the time limit ran out.
    fn io(&self, source: std::io::Error) -> ClientError {
        match (source.kind(), self.timeout) {
            (std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut, Some(t)) => {
                ClientError::Timeout {
                    socket: self.socket.clone(),
                    secs: t.as_secs(),
                }
            }
            _ => ClientError::Io {
                socket: self.socket.clone(),
                source,
            },
        }
    }

    /// Send one request and wait for its answer.
    pub fn call(&mut self, req: &Request) -> Result<Response, ClientError> {
        let mut line =
            serde_json::to_vec(req).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        line.push(b'\n');
        self.raw(&line)
    }

    /// Send a request that switches the connection to a stream (`events`); then read
    /// its lines with [`Client::next_line`]. A stream may be quiet for long: its reads
    /// have no time limit.
    pub fn send(&mut self, req: &Request) -> Result<(), ClientError> {
        let mut line =
            serde_json::to_vec(req).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        line.push(b'\n');
        self.writer.write_all(&line).map_err(|e| self.io(e))?;
        self.writer.set_read_timeout(None).map_err(|e| self.io(e))
    }

    /// The next line of a stream (without its newline); `None` when the scheduler closed it.
    pub fn next_line(&mut self) -> Result<Option<String>, ClientError> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Ok(None),
            Ok(_) => {
                while line.ends_with('\n') || line.ends_with('\r') {
                    line.pop();
                }
                Ok(Some(line))
            }
            Err(source) => Err(ClientError::Io {
                socket: self.socket.clone(),
                source,
            }),
        }
    }

    /// Send raw bytes (one line) and read one answer line.
    pub fn raw(&mut self, line: &[u8]) -> Result<Response, ClientError> {
        if let Err(e) = self.writer.write_all(line) {
            return Err(self.io(e));
        }
        let mut answer = String::new();
        let read = self.reader.read_line(&mut answer);
        let n = read.map_err(|e| self.io(e))?;
        if n == 0 {
            return Err(ClientError::Io {
                socket: self.socket.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the scheduler closed the connection",
                ),
            });
        }
        serde_json::from_str(&answer).map_err(|e| ClientError::BadAnswer(e.to_string()))
    }
}
