//! The supervisor's end of the report channel: a thread that keeps one connection to the
//! scheduler's relay and sends what the supervisor records, in order, so that the
//! supervisor's own loop (signals, the job's pipe) never waits on the network. A lost
//! connection is made again (a restarted scheduler listens on the same port) and the
//! claim is repeated on it; each message is tried for [`GIVE_UP`]. While connected, output
//! waits for room in a queue of [`QUEUE_LIMIT`] bytes (the job is held back no longer than
//! the scheduler takes to write); while the scheduler cannot be reached, what does not fit
//! is dropped, and that is said in the log once the output flows again (the job never
//! stalls for a scheduler that is away).

use super::{BEAT_EVERY, Hello, Kind, LOST, OK, ReportTo, Started, write_frame};
use crate::exec::ExitStatus;
use std::io::{self, Read};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one message is tried before the supervisor gives up on it.
pub const GIVE_UP: Duration = Duration::from_secs(600);
/// Output waiting to be sent, at most.
const QUEUE_LIMIT: u64 = 8 << 20;
/// The largest piece of output in one frame.
const PIECE: usize = 64 << 10;

type Answer = mpsc::Sender<io::Result<u8>>;

struct Msg {
    kind: Kind,
    body: Vec<u8>,
    answer: Option<Answer>,
}

/// The supervisor's handle on the channel.
pub struct Reporter {
    tx: mpsc::Sender<Msg>,
    queued: Arc<AtomicU64>,
    /// The sending thread holds a connection now.
    up: Arc<AtomicBool>,
    dropped: u64,
}

impl Reporter {
    /// Start the sending thread for attempt `attempt` of job `job` (a gang's `rank`, SPEC
    /// §16; 0 for a plain job).
    pub fn start(to: ReportTo, job: u64, attempt: u32, rank: u32) -> io::Result<Reporter> {
        let (tx, rx) = mpsc::channel();
        let queued = Arc::new(AtomicU64::new(0));
        let hello = serde_json::to_vec(&Hello {
            job,
            attempt,
            token: to.token.clone(),
            rank,
        })
        .map_err(io::Error::other)?;
        let up = Arc::new(AtomicBool::new(false));
        let mut link = Link {
            to,
            hello,
            conn: None,
            claim: None,
            refused: false,
            up: up.clone(),
        };
        let q = queued.clone();
        std::thread::Builder::new()
            .name("shareq-report".to_string())
            .spawn(move || link.run(rx, &q))?;
        Ok(Reporter {
            tx,
            queued,
            up,
            dropped: 0,
        })
    }

    fn ask(&self, kind: Kind, body: Vec<u8>) -> io::Result<u8> {
        let (answer, got) = mpsc::channel();
        self.tx
            .send(Msg {
                kind,
                body,
                answer: Some(answer),
            })
            .map_err(|_| io::Error::other("the report thread is gone"))?;
        got.recv()
            .map_err(|_| io::Error::other("the report thread is gone"))?
    }

    /// Claim the attempt for this supervisor: false when a restarted scheduler declared
    /// it lost (the command must not run then).
    pub fn started(&self, pid: u32, start: u64) -> io::Result<bool> {
        let body = serde_json::to_vec(&Started { pid, start }).map_err(io::Error::other)?;
        match self.ask(Kind::Started, body)? {
            OK => Ok(true),
            LOST => Ok(false),
            other => Err(io::Error::other(format!(
                "the scheduler refused the claim ({})",
                other as char
            ))),
        }
    }

    /// Hand over the exit status; returns once the scheduler has written it.
    pub fn exit(&self, status: ExitStatus) -> io::Result<()> {
        let body = serde_json::to_vec(&status).map_err(io::Error::other)?;
        match self.ask(Kind::Exit, body)? {
            OK => Ok(()),
            other => Err(io::Error::other(format!(
                "the scheduler refused the exit status ({})",
                other as char
            ))),
        }
    }

    /// A handle that reports the job's checkpoints on this channel from another thread
    /// ([`super::job_socket`]).
    pub fn checkpoints(&self) -> CheckpointSender {
        CheckpointSender(self.tx.clone())
    }

    fn send(&self, kind: Kind, body: Vec<u8>) {
        let _ = self.tx.send(Msg {
            kind,
            body,
            answer: None,
        });
    }
}

impl crate::exec::state::log_sink::LogOut for Reporter {
    fn write(&mut self, buf: &[u8]) {
        for piece in buf.chunks(PIECE) {
            let len = piece.len() as u64;
            let full = || self.queued.load(Ordering::SeqCst) + len > QUEUE_LIMIT;
            while full() && self.up.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            if full() {
                self.dropped += len;
                continue;
            }
            if self.dropped > 0 {
                let note = format!(
                    "{} bytes of output were dropped while the scheduler could not be reached",
                    std::mem::take(&mut self.dropped)
                );
                self.send(Kind::Note, note.into_bytes());
            }
            self.queued.fetch_add(len, Ordering::SeqCst);
            self.send(Kind::Log, piece.to_vec());
        }
    }

    fn note(&mut self, line: &str) {
        self.send(Kind::Note, line.as_bytes().to_vec());
    }
}

/// Reports checkpoints on the channel (SPEC §14); see [`Reporter::checkpoints`].
#[derive(Clone)]
pub struct CheckpointSender(mpsc::Sender<Msg>);

impl CheckpointSender {
    /// Carry one report: `true` once the scheduler took it, `false` when it refused it.
    pub fn report(&self, note: Option<&str>) -> io::Result<bool> {
        let body = serde_json::to_vec(&super::Saved {
            note: note.map(str::to_string),
        })
        .map_err(io::Error::other)?;
        let (answer, got) = mpsc::channel();
        let gone = || io::Error::other("the report thread is gone");
        self.0
            .send(Msg {
                kind: Kind::Checkpoint,
                body,
                answer: Some(answer),
            })
            .map_err(|_| gone())?;
        Ok(got.recv().map_err(|_| gone())?? == OK)
    }
}

/// The sending thread's connection.
struct Link {
    to: ReportTo,
    hello: Vec<u8>,
    conn: Option<TcpStream>,
    /// The claim, repeated on every new connection.
    claim: Option<Vec<u8>>,
    /// The scheduler refused this attempt: nothing more is sent.
    refused: bool,
    /// Shared with the [`Reporter`]: a connection is held.
    up: Arc<AtomicBool>,
}

impl Link {
    fn run(&mut self, rx: mpsc::Receiver<Msg>, queued: &AtomicU64) {
        loop {
            let msg = match rx.recv_timeout(BEAT_EVERY) {
                Ok(m) => m,
                Err(mpsc::RecvTimeoutError::Timeout) => Msg {
                    kind: Kind::Beat,
                    body: Vec::new(),
                    answer: None,
                },
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            };
            let got = self.deliver(msg.kind, &msg.body);
            if msg.kind == Kind::Started && got.is_ok() {
                self.claim = Some(msg.body.clone());
            }
            if msg.kind == Kind::Log {
                queued.fetch_sub(msg.body.len() as u64, Ordering::SeqCst);
            }
            if let Some(a) = msg.answer {
                let _ = a.send(got);
            }
        }
    }

    /// Send one frame (and read its answer), making the connection again as needed.
    fn deliver(&mut self, kind: Kind, body: &[u8]) -> io::Result<u8> {
        let until = Instant::now() + GIVE_UP;
        loop {
            if self.refused {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "the scheduler refused this attempt's reports",
                ));
            }
            let sent = self.connected().and_then(|c| {
                write_frame(c, kind, body)?;
                if kind.answered() { answer(c) } else { Ok(OK) }
            });
            match sent {
                Ok(a) => return Ok(a),
                Err(e) if Instant::now() >= until => {
                    self.drop_conn();
                    return Err(e);
                }
                Err(_) => {
                    self.drop_conn();
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
        }
    }

    fn drop_conn(&mut self) {
        self.conn = None;
        self.up.store(false, Ordering::SeqCst);
    }

    fn connected(&mut self) -> io::Result<&mut TcpStream> {
        if self.conn.is_none() {
            let mut c = connect(&self.to)?;
            write_frame(&mut c, Kind::Hello, &self.hello)?;
            if answer(&mut c)? != OK {
                self.refused = true;
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "the scheduler refused this attempt",
                ));
            }
            if let Some(claim) = &self.claim {
                write_frame(&mut c, Kind::Started, claim)?;
                answer(&mut c)?;
            }
            self.conn = Some(c);
            self.up.store(true, Ordering::SeqCst);
        }
        Ok(self.conn.as_mut().expect("connected above"))
    }
}

fn connect(to: &ReportTo) -> io::Result<TcpStream> {
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} has no address", to.host),
    );
    for addr in (to.host.as_str(), to.port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(c) => {
                // A scheduler that stops reading is one that is away: the connection is
                // made again, and output is dropped meanwhile rather than held back.
                c.set_read_timeout(Some(Duration::from_secs(30)))?;
                c.set_write_timeout(Some(Duration::from_secs(30)))?;
                c.set_nodelay(true)?;
                return Ok(c);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn answer(c: &mut TcpStream) -> io::Result<u8> {
    let mut b = [0u8; 1];
    c.read_exact(&mut b)?;
    Ok(b[0])
}
