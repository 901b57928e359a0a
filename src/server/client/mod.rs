//! The other end of the control socket: [`Client`] connects, sends one request and reads
//! one answer (the CLI); [`remote::attach`] gives a console on a scheduler that runs
//! elsewhere the same snapshot receiver and `Input` sender as an in-process one.

pub mod remote;

use crate::exec::StateDir;
use crate::server::front::protocol::{Request, Response};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "no scheduler is listening on {socket}\nstart one with: shareq serve --config DIR --state {state}"
    )]
    NotRunning { socket: String, state: String },
    #[error("talking to the scheduler on {socket}: {source}")]
    Io {
        socket: String,
        source: std::io::Error,
    },
    #[error("the scheduler sent an answer that is not valid: {0}")]
    BadAnswer(String),
}

impl ClientError {
    /// Connecting to the state directory's socket failed: no scheduler listens there, or
    /// something else went wrong.
    pub(crate) fn connecting(state: &StateDir, e: std::io::Error) -> ClientError {
        let socket = state.socket().display().to_string();
        match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ClientError::NotRunning {
                    socket,
                    state: state.root().display().to_string(),
                }
            }
            _ => ClientError::Io { socket, source: e },
        }
    }
}

/// A connection to a running scheduler.
pub struct Client {
    socket: String,
    writer: UnixStream,
    reader: BufReader<UnixStream>,
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
        Ok(Client {
            socket,
            writer: stream,
            reader: BufReader::new(reader),
        })
    }

    /// Send one request and wait for its answer.
    pub fn call(&mut self, req: &Request) -> Result<Response, ClientError> {
        let mut line =
            serde_json::to_vec(req).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        line.push(b'\n');
        self.raw(&line)
    }

    /// Send a request that switches the connection to a stream (`events`); then read
    /// its lines with [`Client::next_line`].
    pub fn send(&mut self, req: &Request) -> Result<(), ClientError> {
        let mut line =
            serde_json::to_vec(req).map_err(|e| ClientError::BadAnswer(e.to_string()))?;
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .map_err(|source| ClientError::Io {
                socket: self.socket.clone(),
                source,
            })
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
        let io = |source| ClientError::Io {
            socket: self.socket.clone(),
            source,
        };
        self.writer.write_all(line).map_err(io)?;
        let mut answer = String::new();
        let n = self
            .reader
            .read_line(&mut answer)
            .map_err(|source| ClientError::Io {
                socket: self.socket.clone(),
                source,
            })?;
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
