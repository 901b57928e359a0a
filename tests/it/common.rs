//! Test harness for the live scheduler: a real `shareq serve` on fake GPUs in a temporary
//! state directory, driven through the real CLI and socket; every process it started is
//! stopped when the harness is dropped.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_shareq");

/// A config with one unit of `gpus` fake devices and the given shares (YAML documents).
pub fn config(gpus: u32, grace: u32, shares: &str) -> String {
    format!(
        "kind: ServiceEnvironment\nname: test\ncapacityLimits:\n  - capacityUnit: gpu\n    maxCapacity: {gpus}\n    devices: {{fake: {gpus}}}\npreemption:\n  gracePeriodSeconds: {grace}\n---\n{shares}"
    )
}

/// A share document.
pub fn share(name: &str, limit: u32, strategy: &str, in_share: bool) -> String {
    format!(
        "kind: QuotaShare\nquotaShareName: {name}\ncapacityLimits:\n  - {{capacityUnit: gpu, maxCapacity: {limit}}}\nresourceSharingConfiguration: {{strategy: {strategy}}}\npreemptionConfiguration: {{inSharePreemption: {}}}\n",
        if in_share { "ENABLED" } else { "DISABLED" }
    )
}

pub struct Server {
    pub dir: tempfile::TempDir,
    pub state: PathBuf,
    pub config: PathBuf,
    child: Option<Child>,
    /// Variables set for `serve` (besides this process's environment).
    env: Vec<(String, String)>,
}

impl Server {
    /// Start `shareq serve --stop-jobs-on-exit` on a config given as YAML text.
    pub fn start(config_yaml: &str) -> Server {
        Server::start_with(config_yaml, &["--stop-jobs-on-exit"])
    }

    /// Start `shareq serve` with `extra` arguments on a config given as YAML text (without
    /// `--stop-jobs-on-exit` in `extra`, its jobs outlive it).
    pub fn start_with(config_yaml: &str, extra: &[&str]) -> Server {
        Server::start_with_env(config_yaml, extra, &[])
    }

    /// [`Server::start_with`], with `env` set for `serve`.
    pub fn start_with_env(config_yaml: &str, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("config");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("config.yaml"), config_yaml).unwrap();
        Server::start_in(dir, config, extra, env)
    }

    /// Start on an existing config directory.
    pub fn start_dir(dir: tempfile::TempDir, config: PathBuf, extra: &[&str]) -> Server {
        Server::start_in(dir, config, extra, &[])
    }

    fn start_in(
        dir: tempfile::TempDir,
        config: PathBuf,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let state = dir.path().join("state");
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        let mut s = Server {
            dir,
            state,
            config,
            child: None,
            env: env.collect(),
        };
        s.spawn(extra);
        s
    }

    /// Stop the scheduler (SIGTERM) and start it again on the same directories.
    pub fn restart(&mut self, extra: &[&str]) {
        self.stop();
        self.spawn(extra);
    }

    /// Start `shareq serve` (stderr appended to `serve.err`) and wait for its socket.
    pub fn spawn(&mut self, extra: &[&str]) {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("serve.err"))
            .unwrap();
        let child = Command::new(BIN)
            .arg("serve")
            .arg("--config")
            .arg(&self.config)
            .arg("--state")
            .arg(&self.state)
            .args(extra)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start shareq serve");
        self.child = Some(child);
        let sock = self.state.join("shareq.sock");
        let t = Instant::now();
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "scheduler did not start: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The scheduler process, if it runs.
    pub fn child(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.err")).unwrap_or_default()
    }

    /// Run `shareq SUBCOMMAND --state STATE REST...`.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(&args[..1])
            .arg("--state")
            .arg(&self.state)
            .args(&args[1..])
            .stdin(Stdio::null())
            .output()
            .expect("run shareq")
    }

    /// `shareq submit OPTS -- CMD`; returns the job id.
    pub fn submit(&self, opts: &[&str], cmd: &[&str]) -> u64 {
        let mut args = vec!["submit"];
        args.extend_from_slice(opts);
        args.push("--state");
        let state = self.state.display().to_string();
        args.push(&state);
        args.push("--");
        args.extend_from_slice(cmd);
        let out = Command::new(BIN)
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "submit failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    /// `shareq jobs --all --json`.
    pub fn jobs(&self) -> Value {
        self.jobs_json(&["--all"])
    }

    /// `shareq jobs --json ARGS...`.
    pub fn jobs_json(&self, args: &[&str]) -> Value {
        let mut all = vec!["jobs", "--json"];
        all.extend_from_slice(args);
        let out = self.cli(&all);
        assert!(
            out.status.success(),
            "jobs failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The job's view (from queue, running, PENDING, arrays or finished).
    pub fn job(&self, id: u64) -> Value {
        let j = self.jobs();
        for list in ["running", "queue", "pending", "arrays", "finished"] {
            if let Some(v) = j[list]
                .as_array()
                .and_then(|a| a.iter().find(|v| v["id"] == id))
            {
                return v.clone();
            }
        }
        panic!("job {id} not listed: {j}");
    }

    pub fn state_of(&self, id: u64) -> String {
        self.job(id)["state"].as_str().unwrap_or("").to_string()
    }

    /// Wait until job `id` is in `state` (fails after `secs`).
    pub fn wait_state(&self, id: u64, state: &str, secs: u64) -> Value {
        let t = Instant::now();
        loop {
            let j = self.job(id);
            if j["state"] == state {
                return j;
            }
            assert!(
                t.elapsed() < Duration::from_secs(secs),
                "job {id} did not reach {state}: {j}\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self, id: u64, attempt: u32) -> String {
        std::fs::read_to_string(self.state.join(format!("logs/{id}/{attempt}.log")))
            .unwrap_or_default()
    }

    /// The attempt's exit code, as the database has it.
    pub fn exit_code(&self, id: u64, attempt: u32) -> Option<i64> {
        stored_exit_code(&self.state, id, attempt)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// SIGTERM the scheduler and wait for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(c.id().to_string())
                .status();
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(15) {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        kill_supervisors_of(&self.state);
    }
}

/// SIGKILL every process whose command line names this state directory (the
/// supervisors this test started) and their process groups.
pub fn kill_supervisors_of(state: &Path) {
    for e in std::fs::read_dir(state.join("runs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((id, attempt)) = name.split_once('.') else {
            continue;
        };
        let (Ok(id), Ok(attempt)) = (id.parse(), attempt.parse()) else {
            continue;
        };
        let Some(pid) = record_pid(state, id, attempt).filter(|&p| p > 0 && alive(p)) else {
            continue;
        };
        // SIGUSR1 makes a supervisor SIGKILL its job's group; then end it too.
        let _ = Command::new("kill")
            .args(["-USR1", &pid.to_string()])
            .status();
        std::thread::sleep(Duration::from_millis(100));
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    tidy_cgroups(state);
}

/// Kill what is left in the attempt groups of the scheduler of `state` and remove its
/// groups (as root, where attempts get groups): a test that ends with `kill -9` of its
/// scheduler leaves them, and no scheduler of that state directory comes to tidy them.
pub fn tidy_cgroups(state: &Path) {
    if !nix::unistd::Uid::effective().is_root() {
        return;
    }
    let Ok(db) = rusqlite::Connection::open_with_flags(
        state.join("shareq.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    ) else {
        return;
    };
    let Ok(id) = db.query_row("SELECT value FROM meta WHERE key = 'db_id'", [], |r| {
        r.get::<_, String>(0)
    }) else {
        return;
    };
    let scope = shareq::exec::containment::cgroup::scope(state, &id);
    if let Some(cg) = shareq::exec::containment::cgroup::Containment::detect(&scope).cgroups() {
        for group in cg.attempts() {
            shareq::exec::containment::cgroup::drain(&group);
        }
        cg.tidy();
    }
}

/// The supervisor's pid an attempt's record names (`runs/<id>.<attempt>`, first line).
pub fn record_pid(state: &Path, id: u64, attempt: u32) -> Option<i32> {
    let text = std::fs::read_to_string(state.join(format!("runs/{id}.{attempt}"))).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The exit code a supervisor left in its attempt's record (second line): only when no
/// scheduler took it over the channel.
pub fn exit_in_record(state: &Path, id: u64, attempt: u32) -> Option<i64> {
    let text = std::fs::read_to_string(state.join(format!("runs/{id}.{attempt}"))).ok()?;
    let line = text.lines().find(|l| l.starts_with('{'))?;
    serde_json::from_str::<Value>(line).ok()?["code"].as_i64()
}

/// The exit code the database holds for an attempt.
pub fn stored_exit_code(state: &Path, id: u64, attempt: u32) -> Option<i64> {
    let db = rusqlite::Connection::open_with_flags(
        state.join("shareq.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .ok()?;
    db.query_row(
        "SELECT exit_code FROM attempts WHERE job = ?1 AND attempt = ?2",
        [id as i64, i64::from(attempt)],
        |r| r.get::<_, Option<i64>>(0),
    )
    .ok()
    .flatten()
}

/// The name of the user running the tests (what the scheduler records as submitter).
pub fn me() -> String {
    let out = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Is a process alive (and not a zombie)?
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let rest = &s[s.rfind(')').map_or(0, |i| i + 1)..];
            !rest.trim_start().starts_with('Z')
        }
        Err(_) => false,
    }
}

/// Is `pid` a spawner of supervisors (by its name, which its copies do not keep)?
pub fn is_spawner(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|c| c.trim_end() == shareq::exec::start::spawner::NAME)
}

/// The live spawners of supervisors whose parent is `parent` (a `serve`).
pub fn spawners_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            is_spawner(pid)
                && shareq::exec::containment::session::ProcStat::read(pid)
                    .is_some_and(|p| p.ppid == parent && p.is_live())
        })
        .collect()
}

/// Wait up to `secs` for `f` to hold.
pub fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `shareq serve` child process (its stderr to a file), killed with SIGKILL on drop.
pub struct Serve {
    pub child: Option<Child>,
}

impl Serve {
    pub fn start(state: &Path, config: &Path, err: &Path) -> Serve {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(err)
            .unwrap();
        let child = Command::new(BIN)
            .args(["serve", "--config"])
            .arg(config)
            .arg("--state")
            .arg(state)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let s = Serve { child: Some(child) };
        let t = Instant::now();
        // The socket file of a killed scheduler stays behind: wait for a live one.
        while std::os::unix::net::UnixStream::connect(state.join("shareq.sock")).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "serve did not start: {}",
                std::fs::read_to_string(err).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        s
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Ends every process of the state directory when the test ends (also on failure).
pub struct Cleanup(pub PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        kill_supervisors_of(&self.0);
    }
}

/// A small tmpfs mounted at a path (root only: `None`, with a message, elsewhere), mode
/// 0755 as a state directory must be, unmounted on drop (what runs from it killed first).
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    pub fn mount(at: &Path, mib: u32) -> Option<Tmpfs> {
        if !nix::unistd::Uid::effective().is_root() {
            eprintln!("skipped: mounting a tmpfs needs root");
            return None;
        }
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={mib}m,mode=0755"),
                "tmpfs",
            ])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: cannot mount a tmpfs here");
            return None;
        }
        Some(Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        kill_supervisors_of(&self.0);
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
