//! Limits that keep the control socket usable under abuse: a cap on open connections (and
//! one per user, `limits.maxConnectionsPerUser`, so that one user cannot take them all;
//! root and admins are exempt), an idle timeout for a connection that sends no request, and file descriptors held back
//! for the scheduler's own work (a job start needs a few: a pipe, the log, `/proc`
//! reads), so that no number of connections can make a job fail to start. The soft
//! open-file limit is raised to the hard one at start.

use std::time::Duration;

/// Descriptors never used for connections.
pub const FD_RESERVE: u64 = 512;

/// The control socket's limits (`shareq serve --max-connections`, `--idle-timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketLimits {
    /// At most this many connections at once (fewer when the fd limit is low).
    pub max_connections: usize,
    /// A connection that sends no request for this long is closed (a subscriber, which
    /// only reads, is not idle).
    pub idle: Duration,
}

impl Default for SocketLimits {
    fn default() -> Self {
        SocketLimits {
            max_connections: 1024,
            idle: Duration::from_secs(60),
        }
    }
}

impl SocketLimits {
    /// The connection cap under the current fd limit: `max_connections`, but always
    /// leaving [`FD_RESERVE`] descriptors (and at least 1 connection).
    pub fn cap(&self) -> usize {
        let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map_or(1024, |(soft, _)| soft);
        let room = soft.saturating_sub(FD_RESERVE).max(1);
        self.max_connections
            .min(usize::try_from(room).unwrap_or(usize::MAX))
            .max(1)
    }
}

/// Raise the soft open-file limit to the hard one; returns the soft limit now in force.
pub fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => hard,
            Err(e) => {
                tracing::warn!(soft, hard, "cannot raise the open-file limit: {e}");
                soft
            }
        },
        Ok((soft, _)) => soft,
        Err(_) => 1024,
    }
}

/// The answer a connection over the cap gets before it is closed.
pub fn refusal(cap: usize) -> Vec<u8> {
    let msg = format!(
        "{{\"ok\":false,\"code\":\"limit\",\"error\":\"too many connections to the scheduler (at most {cap}): try again shortly\"}}\n"
    );
    msg.into_bytes()
}

/// The answer a user over their connection cap gets before the connection is closed.
pub fn user_refusal(user: &str, most: u64) -> Vec<u8> {
    let v = serde_json::json!({
        "ok": false,
        "code": "limit",
        "error": format!(
            "too many connections from {user}: at most {most} per user \
             (limits.maxConnectionsPerUser); close some and try again"
        ),
    });
    let mut out = v.to_string().into_bytes();
    out.push(b'\n');
    out
}
