//! End to end in a real terminal: `shareq demo --seed 5` (the real runtime, real `sleep`
//! processes on fake GPUs, the demo load generator) driven in tmux with send-keys /
//! capture-pane. Submit through the form, cancel it, raise a priority so that a preemption
//! shows in the log, resize, quit (stopping all jobs), and check that the terminal settings
//! are restored. A console attached to a `shareq serve` rides out a restart of the
//! scheduler, shows the utilisation history, and never offers to stop every job. Needs
//! tmux: without it the test says so and passes, unless `SHAREQ_REQUIRE_TMUX=1` (CI sets
//! it) makes a missing tmux a failure.

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn capture(session: &str) -> String {
    tmux(&["capture-pane", "-p", "-t", session])
}

fn wait_for(session: &str, needle: &str) -> String {
    let start = Instant::now();
    loop {
        let screen = capture(session);
        if screen.contains(needle) {
            return screen;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{needle:?} never appeared:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Is tmux installed? Without it the test says so and passes, unless
/// `SHAREQ_REQUIRE_TMUX` (CI) makes a missing tmux a failure.
fn tmux_here(test: &str) -> bool {
    if Command::new("tmux").arg("-V").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var_os("SHAREQ_REQUIRE_TMUX").is_none(),
        "SHAREQ_REQUIRE_TMUX is set but tmux is not installed"
    );
    eprintln!("tmux is not installed: skipping {test}");
    false
}

/// A detached tmux session of `w`×`h` running `script`.
fn new_session(session: &str, w: u16, h: u16, script: &str) {
    let (w, h) = (w.to_string(), h.to_string());
    tmux(&[
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        &w,
        "-y",
        &h,
        script,
    ]);
}

fn keys(session: &str, keys: &[&str]) {
    for k in keys {
        tmux(&["send-keys", "-t", session, k]);
        std::thread::sleep(Duration::from_millis(60));
    }
}

#[test]
fn demo_submit_cancel_raise_resize_quit_in_tmux() {
    if !tmux_here("the terminal end-to-end test") {
        return;
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_shareq"));
    let dir = std::env::temp_dir().join(format!("shareq-tmux-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (before, after, exit) = (dir.join("before"), dir.join("after"), dir.join("exit"));
    let session = format!("shareq-e2e-{}", std::process::id());
    let script = format!(
        "stty -a > {b}; {bin} demo --seed 5; echo $? > {e}; stty -a > {a}; sleep 60",
        b = before.display(),
        a = after.display(),
        e = exit.display(),
        bin = bin.display()
    );
    new_session(&session, 160, 48, &script);
    let _cleanup = Cleanup(session.clone());
    wait_for(&session, "Queue (");
    // Submit through the form.
    keys(&session, &["s", "Tab", "Tab", "Tab"]);
    tmux(&["send-keys", "-t", &session, "-l", "e2e-probe"]);
    keys(&session, &["Tab"]);
    tmux(&["send-keys", "-t", &session, "-l", "sleep 300"]);
    wait_for(&session, "⇒");
    keys(&session, &["Enter"]);
    wait_for(&session, "e2e-probe submitted");
    // Cancel it, wherever it is by now (queued, or started on borrowed capacity): filter
    // to it, and move to Running if the queue does not have it.
    keys(&session, &["/"]);
    tmux(&["send-keys", "-t", &session, "-l", "e2e-probe"]);
    keys(&session, &["Enter"]);
    // The probe may be queued or running by now (and may move): focus the pane that
    // shows it and ask to cancel, until the confirmation names it.
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "could not ask to cancel the probe:\n{}",
            capture(&session)
        );
        let screen = capture(&session);
        let pane = if screen.contains("Queue (1 of") {
            "Queue"
        } else {
            "Running"
        };
        focus(&session, pane);
        keys(&session, &["c"]);
        std::thread::sleep(Duration::from_millis(500));
        let screen = capture(&session);
        if screen.contains("? y/n") && screen.contains("e2e-probe (qs1, ") {
            break;
        }
        keys(&session, &["Escape"]);
        // Escape also clears the filter: set it again.
        if !capture(&session).contains("filter: e2e-probe") {
            keys(&session, &["/"]);
            tmux(&["send-keys", "-t", &session, "-l", "e2e-probe"]);
            keys(&session, &["Enter"]);
        }
    }
    keys(&session, &["y"]);
    wait_for(&session, "cancelled");
    raise_a_priority_until_it_preempts(&session);
    // Resize to the smallest supported screen: still a full console.
    tmux(&["resize-window", "-t", &session, "-x", "80", "-y", "24"]);
    // Poll: a capture may catch the redraw half done.
    let start = Instant::now();
    loop {
        let screen = capture(&session);
        let first = screen.lines().next().unwrap_or("").to_string();
        if first.starts_with(" shareq")
            && first.chars().count() <= 80
            && screen.contains("Preemptions")
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no 80×24 console:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Quit: jobs run, so it asks; stop them all (the demo leaves nothing behind).
    keys(&session, &["q"]);
    wait_for(&session, "Leave how?");
    keys(&session, &["s"]);
    let start = Instant::now();
    while std::fs::metadata(&after).map_or(true, |m| m.len() == 0)
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let code = std::fs::read_to_string(&exit).unwrap_or_default();
    assert_eq!(code.trim(), "0", "the console exits cleanly");
    // Same terminal modes as before (the size line differs: the window was resized).
    let strip = |p: &PathBuf| -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.contains("rows"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(strip(&before), strip(&after), "terminal modes restored");
    assert!(!strip(&after).is_empty());
    std::fs::remove_dir_all(&dir).ok();
}

/// Focus the queue, show qs1's queued jobs, raise the first one's priority to the top and
/// wait for the preemption it causes in the log. The demo keeps qs1 busy with lower
/// priorities, so this happens within a few tries.
fn raise_a_priority_until_it_preempts(session: &str) {
    keys(session, &["Escape"]);
    for _ in 0..8 {
        if capture(session).contains("┏ Queue") {
            break;
        }
        keys(session, &["Tab"]);
    }
    assert!(
        capture(session).contains("┏ Queue"),
        "the queue takes the focus"
    );
    keys(session, &["/"]);
    tmux(&["send-keys", "-t", session, "-l", "share:qs1"]);
    keys(session, &["Enter"]);
    let start = Instant::now();
    let mut tried: Vec<String> = Vec::new();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "no preemption followed a raised priority (tried {tried:?}):\n{}",
            capture(session)
        );
        let screen = capture(session);
        if let Some(name) = tried.last()
            && screen.contains(&format!("← {name} (qs1)"))
        {
            return;
        }
        // The first queued qs1 job: the row under the queue's header.
        let mut lines = screen.lines().skip_while(|l| !l.contains(" id name"));
        let first = lines
            .nth(1)
            .and_then(|l| l.split_whitespace().nth(2))
            .map(str::to_string);
        match first {
            Some(name)
                if !tried.contains(&name)
                    && name.chars().all(|c| c.is_alphanumeric() || c == '-') =>
            {
                keys(session, &["g", "p"]);
                tmux(&["send-keys", "-t", session, "-l", "9999"]);
                keys(session, &["Enter"]);
                tried.push(name);
                // Give the runtime time to preempt and the log to show it.
                let wait = Instant::now();
                while wait.elapsed() < Duration::from_secs(8) {
                    let name = tried.last().map(String::as_str).unwrap_or_default();
                    if capture(session).contains(&format!("← {name} (qs1)")) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// Tab until the pane titled `pane` has the focus (its border turns heavy).
fn focus(session: &str, pane: &str) {
    let mark = format!("┏ {pane}");
    for _ in 0..10 {
        if capture(session).contains(&mark) {
            return;
        }
        keys(session, &["Tab"]);
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{pane} never took the focus:\n{}", capture(session));
}

struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        tmux(&["kill-session", "-t", &self.0]);
    }
}

/// Closing the demo's terminal (SIGHUP) stops its jobs and removes its directory
/// (issue 15 item 7): nothing is left running in a temp directory nobody knows about.
#[test]
fn closing_the_demos_terminal_stops_its_jobs_and_removes_its_directory() {
    if !tmux_here("the hang-up test") {
        return;
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_shareq"));
    let tmp = tempfile::tempdir().unwrap();
    let session = format!("shareq-hup-{}", std::process::id());
    let script = format!(
        "TMPDIR={t} {bin} demo --seed 5",
        t = tmp.path().display(),
        bin = bin.display()
    );
    new_session(&session, 100, 30, &script);
    wait_for(&session, "train-a");
    let demo_dir = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("shareq-demo-"))
        .expect("the demo's directory");
    // The demo's live supervisors, by the pids their attempt records name.
    let runs = demo_dir.join("state/runs");
    let supervisors = || {
        std::fs::read_dir(&runs)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let (id, attempt) = name.split_once('.')?;
                common::record_pid(
                    &demo_dir.join("state"),
                    id.parse().ok()?,
                    attempt.parse().ok()?,
                )
            })
            .filter(|&p| p > 0 && common::alive(p))
            .count()
    };
    let start = Instant::now();
    while supervisors() == 0 {
        assert!(start.elapsed() < Duration::from_secs(20), "no job started");
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux(&["kill-session", "-t", &session]);
    let start = Instant::now();
    while supervisors() > 0 || demo_dir.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "after the hang-up: {} supervisors left, directory exists: {}",
            supervisors(),
            demo_dir.exists()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A console attached to `shareq serve` (issue 15 items 1, 2 and 10): its history view
/// reads the scheduler's samples over the socket, its quit dialog offers no "stop all",
/// and a restart of serve shows "reconnecting" and then the live picture again.
#[test]
fn an_attached_console_rides_out_a_serve_restart_in_tmux() {
    if !tmux_here("the attached-console end-to-end test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config");
    std::fs::create_dir_all(&cfg).unwrap();
    let shares = format!(
        "{}---\n{}",
        common::share("alpha", 1, "LEND_AND_BORROW", false),
        common::share("beta", 3, "LEND", false)
    );
    std::fs::write(cfg.join("config.yaml"), common::config(4, 1, &shares)).unwrap();
    let serve_args = ["--sample-seconds", "1"];
    let mut s = common::Server::start_dir(dir, cfg.clone(), &serve_args);
    let a = s.submit(
        &["--share", "alpha", "--name", "attach-probe", "--gpus", "2"],
        &["sleep", "300"],
    );
    s.wait_state(a, "RUNNING", 20);
    let exit = s.path("console.exit");
    let session = format!("shareq-attach-{}", std::process::id());
    let script = format!(
        "{bin} tui --config {cfg} --state {state}; echo $? > {e}; sleep 60",
        bin = env!("CARGO_BIN_EXE_shareq"),
        cfg = cfg.display(),
        state = s.state.display(),
        e = exit.display()
    );
    // Run from a file: the tmux server keeps the command line of the `new-session` that
    // started it, and the server's cleanup kills every process whose command line names
    // the state directory, which would end the other tests' sessions too.
    let run = s.path("console.sh");
    std::fs::write(&run, script).unwrap();
    new_session(&session, 100, 30, &format!("sh {}", run.display()));
    let _cleanup = Cleanup(session.clone());
    wait_for(&session, "attach-probe");
    // h: the history the scheduler samples every second, over the socket. The view asks
    // again every 30 s; pressing 1 asks now.
    keys(&session, &["h"]);
    wait_for(&session, "Utilisation: last hour");
    let start = Instant::now();
    let screen = loop {
        let screen = capture(&session);
        if screen.contains("GPUs in use per share") {
            break screen;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no history shown:\n{screen}"
        );
        keys(&session, &["1"]);
        std::thread::sleep(Duration::from_millis(500));
    };
    let alpha = screen
        .lines()
        .find(|l| l.contains("alpha ") && l.contains('.'))
        .unwrap_or_else(|| panic!("no alpha row:\n{screen}"));
    // OWN and BORROWED: alpha's job always held 1 of each (a bucket may average in
    // samples from before it started).
    let figures: Vec<&str> = alpha
        .trim_matches(|c: char| c == '│' || c.is_whitespace())
        .split_whitespace()
        .skip(1)
        .collect();
    assert!(
        figures.len() > 2 && figures[0] == figures[1] && figures[0] != "0.0",
        "alpha holds 1 own + 1 borrowed:\n{screen}"
    );
    keys(&session, &["2"]);
    wait_for(&session, "Utilisation: last day");
    keys(&session, &["Escape"]);
    wait_for(&session, "Queue (");
    // q: the scheduler and its jobs stay; stopping them all is not offered.
    keys(&session, &["q"]);
    let screen = wait_for(&session, "Quitting leaves it and its jobs running");
    assert!(!screen.contains("stop all"), "{screen}");
    keys(&session, &["Escape"]);
    // Restart serve under the console: it says it is reconnecting, then shows the live
    // picture again (the job kept running under its supervisor and was adopted).
    s.stop();
    wait_for(&session, "reconnecting");
    s.spawn(&serve_args);
    let start = Instant::now();
    while capture(&session).contains("reconnecting") {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "still reconnecting:\n{}",
            capture(&session)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let b = s.submit(
        &["--share", "beta", "--name", "after-restart"],
        &["sleep", "300"],
    );
    wait_for(&session, "after-restart");
    assert_eq!(s.state_of(a), "RUNNING");
    // Leave: the console ends, the scheduler and both jobs keep running.
    keys(&session, &["q"]);
    wait_for(&session, "d / q leave");
    keys(&session, &["d"]);
    let start = Instant::now();
    while std::fs::read_to_string(&exit).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the console did not end"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read_to_string(&exit).unwrap().trim(), "0");
    assert_eq!(s.state_of(a), "RUNNING");
    assert_eq!(s.state_of(b), "RUNNING");
}

/// `shareq tui --state S` with no config directory at all attaches to the scheduler that
/// runs there (issue 25 items 2 and 3): the header names that serve's pid, and the `/`
/// filter finds jobs by share and by user, negates, and names an unknown key.
#[test]
fn tui_state_attaches_without_a_config_and_the_filter_finds_people_in_tmux() {
    if !tmux_here("the attach-without-config test") {
        return;
    }
    let shares = format!(
        "{}---\n{}",
        common::share("alpha", 1, "LEND_AND_BORROW", false),
        common::share("beta", 1, "LEND", false)
    );
    let mut s = common::Server::start(&common::config(2, 1, &shares));
    let a = s.submit(
        &["--share", "alpha", "--name", "probe-one"],
        &["sleep", "300"],
    );
    let b = s.submit(
        &["--share", "beta", "--name", "probe-two"],
        &["sleep", "300"],
    );
    s.wait_state(a, "RUNNING", 20);
    s.wait_state(b, "RUNNING", 20);
    let pid = s.child().expect("serve runs").id();
    // A user with no ~/.config/shareq: only --state says where to look.
    let home = s.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let session = format!("shareq-noconf-{}", std::process::id());
    let script = format!(
        "env HOME={home} XDG_CONFIG_HOME= SHAREQ_STATE= {bin} tui --state {state}; sleep 60",
        home = home.display(),
        bin = env!("CARGO_BIN_EXE_shareq"),
        state = s.state.display(),
    );
    new_session(&session, 160, 40, &script);
    let _cleanup = Cleanup(session.clone());
    let screen = wait_for(&session, "probe-two");
    assert!(
        screen.contains(&format!("attached to serve (pid {pid}, since ")),
        "the header names the attached scheduler:\n{screen}"
    );
    let me = common::me();
    // A job row of the queue or running list (with its user; the GPUs pane has none).
    let listed = |screen: &str, name: &str| {
        screen
            .lines()
            .any(|l| l.contains(name) && l.contains(&format!(" {me} ")))
    };
    assert!(
        listed(&screen, "probe-one") && listed(&screen, "probe-two"),
        "{screen}"
    );
    // Free text matches the share: `beta` finds probe-two, whose name does not say beta.
    keys(&session, &["/", "b", "e", "t", "a", "Enter"]);
    let screen = wait_for(&session, "filter: beta");
    assert!(
        listed(&screen, "probe-two") && !listed(&screen, "probe-one"),
        "{screen}"
    );
    // `!user:ME` hides every job of mine; an unknown key is named in the footer.
    let mut typed = vec!["/", "C-u"];
    let query = format!("!user:{me}");
    let chars: Vec<String> = query.chars().map(String::from).collect();
    typed.extend(chars.iter().map(String::as_str));
    typed.push("Enter");
    keys(&session, &typed);
    let screen = wait_for(&session, &format!("filter: {query}"));
    assert!(
        !listed(&screen, "probe-one") && !listed(&screen, "probe-two"),
        "{screen}"
    );
    keys(&session, &["/", "C-u", "o", "w", "n", "e", "r", ":", "x"]);
    wait_for(&session, "unknown filter key `owner:`");
}

/// `F` in a real terminal, attached to a real `serve` (issue 46 items 3 and 5): a job that
/// exits 3, one killed with `kill -9` from outside and one that succeeds leave the running
/// list and show in the ended jobs with their outcome and reason; the filter narrows the
/// view, enter opens the killed job's details (esc comes back), `l` reads its log.
#[test]
fn f_lists_ended_jobs_with_their_reasons_in_tmux() {
    if !tmux_here("the ended-jobs test") {
        return;
    }
    let shares = common::share("alpha", 3, "LEND", false);
    let s = common::Server::start(&common::config(3, 1, &shares));
    let d = s.dir.path().display().to_string();
    let killed = s.submit(
        &["--share", "alpha", "--name", "kill-probe"],
        &[&format!(
            "echo log-of-kill-probe; echo $$ > {d}/probe.pid; exec sleep 300"
        )],
    );
    let failed = s.submit(&["--share", "alpha", "--name", "fail-probe"], &["exit 3"]);
    let done = s.submit(&["--share", "alpha", "--name", "ok-probe"], &["true"]);
    s.wait_state(killed, "RUNNING", 20);
    common::wait_for(10, "the probe's pid", || s.path("probe.pid").exists());
    let pid: i32 = std::fs::read_to_string(s.path("probe.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    s.wait_state(killed, "FAILED", 20);
    s.wait_state(failed, "FAILED", 20);
    s.wait_state(done, "SUCCEEDED", 20);
    let hold = s.submit(
        &["--share", "alpha", "--name", "holds-a-gpu"],
        &["sleep", "300"],
    );
    s.wait_state(hold, "RUNNING", 20);
    let session = format!("shareq-ended-{}", std::process::id());
    let script = format!(
        "{bin} tui --state {state}; sleep 60",
        bin = env!("CARGO_BIN_EXE_shareq"),
        state = s.state.display(),
    );
    // From a file, as above: the tmux server keeps the command line that started it.
    let run = s.path("console.sh");
    std::fs::write(&run, script).unwrap();
    new_session(&session, 160, 40, &format!("sh {}", run.display()));
    let _cleanup = Cleanup(session.clone());
    // The GPU a job holds is a fake one, and says so (issue 46 item 6), not `n/a`.
    let screen = wait_for(&session, "fake GPU");
    assert!(!screen.contains("n/a"), "{screen}");
    keys(&session, &["F"]);
    let screen = wait_for(&session, "Ended jobs (3)");
    let row = |screen: &str, name: &str| {
        screen
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no {name} row:\n{screen}"))
            .to_string()
    };
    let k = row(&screen, "kill-probe");
    assert!(
        k.contains("killed") && k.contains("killed by SIGKILL (not by shareq)"),
        "{screen}"
    );
    let f = row(&screen, "fail-probe");
    assert!(
        f.contains("failed") && f.contains("exit code 3"),
        "{screen}"
    );
    assert!(row(&screen, "ok-probe").contains("succeeded"), "{screen}");
    // The filter, typed in the view, narrows it; the view stays open.
    keys(&session, &["/"]);
    tmux(&["send-keys", "-t", &session, "-l", "kill"]);
    keys(&session, &["Enter"]);
    let screen = wait_for(&session, "Ended jobs (1)");
    assert!(
        screen.contains("kill-probe") && !screen.contains("fail-probe"),
        "{screen}"
    );
    // Enter: the details of the killed job; esc comes back to the view.
    keys(&session, &["Enter"]);
    let screen = wait_for(&session, &format!("Job {killed} "));
    assert!(
        screen.contains("killed by SIGKILL (not by shareq)"),
        "{screen}"
    );
    assert!(screen.contains("ended"), "{screen}");
    keys(&session, &["Escape"]);
    wait_for(&session, "Ended jobs (1)");
    // l: its log, as for any other job.
    keys(&session, &["l"]);
    wait_for(&session, "log-of-kill-probe");
    keys(&session, &["Escape"]);
    wait_for(&session, "Ended jobs (1)");
    keys(&session, &["Escape"]);
    let start = Instant::now();
    while capture(&session).contains("Ended jobs") {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "esc did not close the view:\n{}",
            capture(&session)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
