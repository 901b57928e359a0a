//! On a node whose supervisor reports through the channel (a Slurm allocation): the
//! socket a job's `shareq checkpoint` reaches its supervisor on (SPEC §14: "the report
//! comes back through the supervisor"). It is made in a private directory of the
//! supervisor's user (0700, under `$TMPDIR`), named to the job as `SHAREQ_SOCKET`, and
//! speaks the control socket's `checkpoint` request and answer (docs/API.md), one per
//! connection. The supervisor checks the attempt's token (`SHAREQ_ATTEMPT_TOKEN`) and the
//! caller's user, then carries the report on the channel, where the scheduler takes it.

use super::client::CheckpointSender;
use crate::exec::state::runfiles::LaunchSpec;
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::Duration;

/// The longest request line read.
const MAX_LINE: u64 = 4096;

/// The socket's directory, removed when the attempt ends.
#[derive(Debug)]
pub struct JobSocket {
    dir: PathBuf,
}

impl Drop for JobSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What a `checkpoint` request says (the control socket's `Request::Checkpoint`).
#[derive(Debug, Deserialize)]
struct Ask {
    op: String,
    job: u64,
    attempt: u32,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    note: Option<String>,
}

/// Open the socket for the attempt of `spec` and name it in the job's environment
/// (`SHAREQ_SOCKET`); reports go out through `sender`. Needs the attempt's token.
pub fn open(spec: &mut LaunchSpec, sender: CheckpointSender) -> io::Result<JobSocket> {
    let token = spec
        .token
        .clone()
        .ok_or_else(|| io::Error::other("the attempt has no token"))?;
    let random = &super::new_token()?[..16];
    let dir = std::env::temp_dir().join(format!("shareq-{}-{}-{random}", spec.job, spec.attempt));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    let guard = JobSocket { dir: dir.clone() };
    let path = dir.join(crate::exec::state::dir::SOCKET_FILE);
    let listener = UnixListener::bind(&path)?;
    let (job, attempt) = (spec.job.0, spec.attempt);
    std::thread::Builder::new()
        .name("shareq-job-socket".to_string())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(stream) = conn else { continue };
                let answer = answer(&stream, job, attempt, &token.0, &sender);
                let mut line = serde_json::to_vec(&answer).unwrap_or_default();
                line.push(b'\n');
                let _ = (&stream).write_all(&line);
            }
        })?;
    spec.env
        .insert("SHAREQ_SOCKET".to_string(), path.display().to_string());
    Ok(guard)
}

/// The answer to one connection's request.
fn answer(
    stream: &UnixStream,
    job: u64,
    attempt: u32,
    token: &str,
    to: &CheckpointSender,
) -> Value {
    let error = |code: &str, msg: String| json!({"ok": false, "error": msg, "code": code, "not_allowed": code == "not_allowed"});
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut line = String::new();
    if BufReader::new(stream.take(MAX_LINE))
        .read_line(&mut line)
        .is_err()
    {
        return error("bad_request", "no request".to_string());
    }
    let ask: Ask = match serde_json::from_str(&line) {
        Ok(a) => a,
        Err(e) => return error("bad_request", format!("malformed request: {e}")),
    };
    if ask.op != "checkpoint" {
        return error(
            "bad_request",
            format!(
                "a job's supervisor takes `checkpoint` only, not `{}`",
                ask.op
            ),
        );
    }
    // The caller runs as the supervisor's user (the directory lets no one else in).
    let me = nix::unistd::geteuid().as_raw();
    let caller = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .map(|c| c.uid());
    let same = ask.job == job
        && ask.attempt == attempt
        && ask
            .token
            .as_deref()
            .is_some_and(|t| super::same_token(t, token));
    if caller != Ok(me) || !same {
        return error(
            "not_allowed",
            format!(
                "the caller may not report a checkpoint for job {} attempt {}: it is not a \
                 process of that attempt (SHAREQ_ATTEMPT_TOKEN is not this attempt's)",
                ask.job, ask.attempt
            ),
        );
    }
    let most = crate::model::CHECKPOINT_NOTE_MAX;
    let bytes = ask.note.as_ref().map_or(0, String::len);
    if bytes > most {
        return error(
            "bad_request",
            format!(
                "--note: a checkpoint note may hold at most {most} bytes; this one has {bytes}"
            ),
        );
    }
    match to.report(ask.note.as_deref()) {
        Ok(true) => json!({
            "ok": true,
            "checkpoint": {
                "at": crate::exec::now_ms(),
                "attempt": attempt,
                "note": ask.note,
            }
        }),
        Ok(false) => error("rejected", "the scheduler refused the report".to_string()),
        Err(e) => error(
            "unavailable",
            format!("the report could not reach the scheduler: {e}"),
        ),
    }
}
