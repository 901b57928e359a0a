//! The processes of one attempt, as the kernel shows them in `/proc`: each supervisor
//! starts its own session (its pid is the session id) and runs the job's command in a
//! process group inside it, so every process the job starts carries the attempt's session
//! id even after the supervisor is gone. When a supervisor dies without recording an exit
//! status (`kill -9`), the scheduler kills what is left of its session and keeps the
//! attempt's GPUs until nothing of it runs (SPEC §7).
//!
//! A session id stays reserved while any process carries it (Linux does not hand out a pid
//! that is still some process's session or group id), so it never names someone else's
//! processes. A process that starts a session of its own leaves the attempt's session;
//! while the supervisor lives it still reaps it (it is a child subreaper), after a
//! `kill -9` such a process is out of reach (only a cgroup would hold it).

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io;

/// The fields of `/proc/PID/stat` that shareq uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: u32,
    /// The state letter (`R`, `S`, `Z`, ...).
    pub state: char,
    pub ppid: u32,
    pub session: u32,
    /// Start time in clock ticks since boot (field 22).
    pub start: u64,
    /// The top of its main thread's stack (field 28; 0 where absent, or where the reader
    /// may not see its memory): placed afresh, at random, by every `exec`, kept by a copy.
    pub stack: usize,
}

impl ProcStat {
    /// Parse a `/proc/PID/stat` line. The command name (field 2) is in parentheses and may
    /// itself hold spaces and parentheses: fields restart after the last `)`.
    pub fn parse(line: &str) -> Option<ProcStat> {
        let pid = line.split(' ').next()?.parse().ok()?;
        let rest = &line[line.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_ascii_whitespace().collect();
        // `f[0]` is field 3 (state); field N is `f[N - 3]`.
        Some(ProcStat {
            pid,
            state: f.first()?.chars().next()?,
            ppid: f.get(1)?.parse().ok()?,
            session: f.get(3)?.parse().ok()?,
            start: f.get(19)?.parse().ok()?,
            stack: f.get(25).and_then(|v| v.parse().ok()).unwrap_or(0),
        })
    }

    pub fn read(pid: u32) -> Option<ProcStat> {
        ProcStat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Not a zombie (a zombie has exited; only its parent has not reaped it yet).
    pub fn is_live(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// The start time of a process (field 22 of `/proc/PID/stat`).
pub fn start_time(pid: u32) -> io::Result<u64> {
    ProcStat::read(pid)
        .map(|s| s.start)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no process {pid}")))
}

/// Every live process on the machine.
pub fn all() -> Vec<ProcStat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(ProcStat::read)
        .filter(ProcStat::is_live)
        .collect()
}

/// The live processes of session `sid`.
pub fn members(sid: u32) -> Vec<u32> {
    all()
        .into_iter()
        .filter(|p| p.session == sid)
        .map(|p| p.pid)
        .collect()
}

/// The live processes whose parent is `parent`.
pub fn children(parent: u32) -> Vec<u32> {
    all()
        .into_iter()
        .filter(|p| p.ppid == parent)
        .map(|p| p.pid)
        .collect()
}

/// SIGKILL every live process of the session `sid` whose leader is dead; returns how
/// many there were. When a live process has the pid `sid`, it is not the dead leader but
/// a process that got its pid later, which the kernel allows only once no process is
/// left in the old session: then nothing is killed.
pub fn kill_members(sid: u32) -> usize {
    if ProcStat::read(sid).is_some_and(|s| s.is_live()) {
        return 0;
    }
    let left = members(sid);
    for &pid in &left {
        if let Ok(p) = i32::try_from(pid) {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
    }
    left.len()
}

/// Kill what is left of the session `sid` (its leader dead) and wait until none of it runs, at most `limit`.
/// True when nothing is left. For recovery at start, before any GPU is handed out again.
pub fn kill_and_wait(sid: u32, limit: std::time::Duration) -> bool {
    let until = std::time::Instant::now() + limit;
    loop {
        if kill_members(sid) == 0 {
            return true;
        }
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The signals a terminal sends its foreground process group (and a hangup its session).
pub fn terminal_signals() -> nix::sys::signal::SigSet {
    let mut set = nix::sys::signal::SigSet::empty();
    for s in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGQUIT,
        nix::sys::signal::Signal::SIGTSTP,
        nix::sys::signal::Signal::SIGHUP,
    ] {
        set.add(s);
    }
    set
}

/// The supervisor's first step: a session of its own (it is then the leader of the
/// session and of its process group, both named by its pid), then the terminal signals
/// `exec::start::launch` had blocked are dropped if they came before, and unblocked. Only for a
/// supervisor that `exec::start::launch` started (never a group leader, so `setsid` cannot fail
/// for it); one that Slurm started keeps the session and group Slurm tracks it by.
pub fn enter_own_session() -> nix::Result<()> {
    use nix::sys::signal::{SigHandler, signal};
    nix::unistd::setsid()?;
    let terminal = terminal_signals();
    for s in terminal.iter() {
        // SAFETY: the dispositions set are SIG_IGN and SIG_DFL, no handler runs.
        // Ignoring a signal discards a pending one; then back to the default.
        unsafe {
            signal(s, SigHandler::SigIgn)?;
            signal(s, SigHandler::SigDfl)?;
        }
    }
    nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_UNBLOCK,
        Some(&terminal),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_parentheses_in_the_name() {
        let line = "42 (a) b) c) S 1 42 40 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 \
                    1000 10 18446744073709551615";
        let s = ProcStat::parse(line).unwrap();
        assert_eq!(
            (s.pid, s.state, s.ppid, s.session, s.start),
            (42, 'S', 1, 40, 123456)
        );
        assert_eq!(ProcStat::parse("42 (x"), None);
        assert_eq!(ProcStat::parse("42 (x) Z 1 2"), None);
    }

    #[test]
    fn this_process_is_found_in_its_session() {
        let me = ProcStat::read(std::process::id()).unwrap();
        assert!(me.is_live());
        assert!(members(me.session).contains(&std::process::id()));
        assert_eq!(start_time(std::process::id()).unwrap(), me.start);
    }
}
