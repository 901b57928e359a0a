//! The report channel (SPEC §7, §10): how a supervisor that may not write the state
//! directory — one running inside a Slurm allocation as the job's submitter — hands the
//! scheduler what it records of its attempt: its start (pid), the job's output, its
//! exit status. The scheduler writes the run files and the log itself, with the log cap
//! and the free-space reserve, so the job still cannot create or grow files on the state
//! filesystem. This module is the wire (frames, messages, the address a supervisor is
//! given); [`relay`] is the scheduler's end, [`client`] the supervisor's.
//!
//! A frame is one kind byte, a big-endian `u32` length and that many bytes. The
//! supervisor speaks first (`Hello` with the attempt's token, which only the root-private
//! launch spec in the state directory and the batch script hold); the scheduler answers
//! `Hello`, `Started`, `Checkpoint` and `Exit` with one byte ([`OK`], [`REFUSED`],
//! [`LOST`]). A job on the node reports its checkpoints to its supervisor
//! ([`job_socket`]), which carries them on the same channel (SPEC §14).

pub mod client;
pub mod job_socket;
pub mod relay;

use crate::exec::state::runfiles::ReportTo;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// What a supervisor sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// JSON [`Hello`]; answered.
    Hello = b'H',
    /// JSON [`Started`]: the supervisor is about to run the command; answered ([`LOST`]:
    /// a restarted scheduler declared the attempt lost, do not run it).
    Started = b'S',
    /// Job output, as it came.
    Log = b'L',
    /// A line of the supervisor's own.
    Note = b'N',
    /// JSON `ExitStatus`: every process of the attempt is gone; answered.
    Exit = b'E',
    /// Nothing: the supervisor is alive (a connection silent for [`SILENT_LIMIT`] is
    /// dropped by the scheduler).
    Beat = b'B',
    /// JSON [`Saved`]: the job reported a checkpoint (`shareq checkpoint` on the node,
    /// checked by the supervisor against the attempt's token); answered.
    Checkpoint = b'C',
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        [
            Kind::Hello,
            Kind::Started,
            Kind::Log,
            Kind::Note,
            Kind::Exit,
            Kind::Beat,
            Kind::Checkpoint,
        ]
        .into_iter()
        .find(|k| *k as u8 == b)
    }

    /// Does the scheduler answer this frame?
    pub fn answered(self) -> bool {
        matches!(
            self,
            Kind::Hello | Kind::Started | Kind::Exit | Kind::Checkpoint
        )
    }
}

pub const OK: u8 = b'k';
pub const REFUSED: u8 = b'x';
pub const LOST: u8 = b'l';

/// The largest frame (log output is sent in pieces of at most 64 KiB).
pub const MAX_FRAME: u32 = 256 << 10;
/// How often an idle supervisor says it is alive, and how long the scheduler waits for a
/// word before it drops the connection.
pub const BEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(15);
pub const SILENT_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub job: u64,
    pub attempt: u32,
    pub token: String,
    /// A gang's rank (SPEC §16): which node's supervisor speaks; 0 for a plain job.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rank: u32,
}

fn is_zero(r: &u32) -> bool {
    *r == 0
}

/// A checkpoint report carried for the job: its note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    pub pid: u32,
    /// Its start time on its node (field 22 of `/proc/PID/stat`).
    pub start: u64,
}

pub fn write_frame(w: &mut impl Write, kind: Kind, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|&l| l <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    let mut head = [0u8; 5];
    head[0] = kind as u8;
    head[1..].copy_from_slice(&len.to_be_bytes());
    w.write_all(&head)?;
    w.write_all(payload)?;
    w.flush()
}

/// One frame; `None` at a clean end of the stream.
pub fn read_frame(r: &mut impl Read) -> io::Result<Option<(Kind, Vec<u8>)>> {
    let mut head = [0u8; 5];
    match r.read_exact(&mut head[..1]) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    r.read_exact(&mut head[1..])?;
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let kind = Kind::from_byte(head[0]).ok_or_else(|| bad(format!("frame kind {}", head[0])))?;
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    if len > MAX_FRAME {
        return Err(bad(format!("frame of {len} bytes")));
    }
    let mut payload = vec![0u8; len as usize];
    r.read_exact(&mut payload)?;
    Ok(Some((kind, payload)))
}

/// A fresh token: 32 bytes from the kernel's random source, hex.
pub fn new_token() -> io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Equal tokens, compared in time that does not depend on where they differ.
pub fn same_token(a: &str, b: &str) -> bool {
    crate::exec::state::runfiles::same_secret(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_ones_are_errors() {
        let mut buf = Vec::new();
        write_frame(&mut buf, Kind::Log, b"hello\n").unwrap();
        write_frame(&mut buf, Kind::Beat, b"").unwrap();
        let mut r = &buf[..];
        assert_eq!(
            read_frame(&mut r).unwrap(),
            Some((Kind::Log, b"hello\n".to_vec()))
        );
        assert_eq!(read_frame(&mut r).unwrap(), Some((Kind::Beat, Vec::new())));
        assert_eq!(read_frame(&mut r).unwrap(), None);
        let mut junk: &[u8] = b"Z\0\0\0\0";
        assert!(read_frame(&mut junk).is_err());
        let mut huge: &[u8] = &[b'L', 0xff, 0xff, 0xff, 0xff];
        assert!(read_frame(&mut huge).is_err());
        let mut cut: &[u8] = &[b'L', 0, 0, 0, 9, b'a'];
        assert!(read_frame(&mut cut).is_err());
    }

    #[test]
    fn tokens_are_fresh_and_compared_whole() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(same_token(&a, &a.clone()));
        assert!(!same_token(&a, &b));
        assert!(!same_token(&a, &a[..63]));
    }
}
