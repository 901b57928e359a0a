//! Entering and leaving the terminal's raw/alternate-screen mode, and making sure it is
//! left on every path: normal return, error (guard drop), and panic (hook).

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{self, Stdout};
use std::sync::Once;

pub type Term = Terminal<CrosstermBackend<Stdout>>;

/// Restores the terminal when dropped (also on `?` and early returns).
pub struct Guard {
    _private: (),
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Put the terminal in raw mode on the alternate screen; the guard undoes it.
pub fn enter(mouse: bool) -> io::Result<(Term, Guard)> {
    install_panic_hook();
    enable_raw_mode()?;
    let guard = Guard { _private: () };
    let mut out = io::stdout();
    execute!(out, EnterAlternateScreen, cursor::Hide)?;
    if mouse {
        execute!(out, EnableMouseCapture)?;
    }
    let term = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    Ok((term, guard))
}

/// Leave raw mode and the alternate screen. Safe to call more than once.
pub fn restore() {
    let mut out = io::stdout();
    let _ = execute!(out, DisableMouseCapture, LeaveAlternateScreen, cursor::Show);
    let _ = disable_raw_mode();
}

/// Restore the terminal before the default panic message prints, so it is readable.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// The terminal hung up: point standard output and error at /dev/null, so that nothing
/// written on the way out (the cursor restore, a last message) fails. `eprintln!` panics
/// when stderr is gone, and a panic then would skip stopping the jobs.
pub fn terminal_gone() {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        // An error leaves that fd as it was.
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&null);
    }
}
