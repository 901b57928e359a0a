//! SPEC §9 with real users and real processes: a root scheduler on fake GPUs, test users
//! made with `useradd` (removed afterwards, also when a test fails), the CLI run as them
//! with `runuser`. Skipped, saying so, when not root or when the tools are missing.
//!
//! The shareq binary is copied into a directory every user can enter, since the build
//! tree may not be reachable for them.

use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_shareq");
const NOT_ALLOWED: i32 = 3;

pub(crate) fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not running as root".into());
    }
    for tool in ["useradd", "userdel", "groupadd", "groupdel", "runuser"] {
        let found = Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {tool}"))
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    None
}

macro_rules! root_only {
    () => {
        if let Some(why) = skip_reason() {
            eprintln!(
                "skipping {}: {why} (SPEC §9 tests need root to create users)",
                module_path!()
            );
            return;
        }
    };
}

/// Test users and one group, removed on drop.
pub(crate) struct Users {
    prefix: String,
    users: Vec<String>,
    group: String,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Users {
    /// `names` become `sqt<pid><n><name>`; those listed in `in_group` join the group.
    pub(crate) fn create(names: &[&str], in_group: &[&str]) -> Users {
        let prefix = format!(
            "sqt{}{}",
            std::process::id() % 100_000,
            SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let group = format!("{prefix}g");
        let mut u = Users {
            prefix,
            users: Vec::new(),
            group: group.clone(),
        };
        run_ok(Command::new("groupadd").arg(&group));
        for n in names {
            let name = u.name(n);
            let mut cmd = Command::new("useradd");
            cmd.args(["-M", "-N", "-s", "/bin/sh", "-d", "/nonexistent"]);
            if in_group.contains(n) {
                cmd.args(["-G", &group]);
            }
            run_ok(cmd.arg(&name));
            u.users.push(name);
        }
        u
    }

    pub(crate) fn name(&self, n: &str) -> String {
        format!("{}{n}", self.prefix)
    }

    /// The group (named in `admins` by the configs of these tests).
    pub(crate) fn group(&self) -> &str {
        &self.group
    }

    pub(crate) fn uid(&self, n: &str) -> u32 {
        nix::unistd::User::from_name(&self.name(n))
            .unwrap()
            .unwrap()
            .uid
            .as_raw()
    }
}

impl Drop for Users {
    fn drop(&mut self) {
        for u in &self.users {
            // Their leftover processes first, or userdel refuses.
            let _ = Command::new("pkill").args(["-KILL", "-u", u]).status();
            let _ = Command::new("userdel")
                .arg(u)
                .stderr(Stdio::null())
                .status();
        }
        let _ = Command::new("groupdel")
            .arg(&self.group)
            .stderr(Stdio::null())
            .status();
    }
}

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().expect("run a user-database tool");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The binary, copied where every user may run it; shared by the tests that overlap in
/// time (a copy being written cannot be executed: ETXTBSY), removed with its last user.
pub(crate) struct BinCopy {
    dir: PathBuf,
    pub(crate) bin: PathBuf,
}

impl BinCopy {
    pub(crate) fn get() -> Arc<BinCopy> {
        static SHARED: Mutex<Weak<BinCopy>> = Mutex::new(Weak::new());
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = shared.upgrade() {
            return b;
        }
        let dir = std::env::temp_dir().join(format!(
            "shareq-mu-bin-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711)).unwrap();
        let bin = dir.join("shareq");
        std::fs::copy(BIN, &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A process forked meanwhile by another test may still hold the copy open for
        // writing until it execs: give it that moment.
        std::thread::sleep(Duration::from_millis(200));
        let b = Arc::new(BinCopy { dir, bin });
        *shared = Arc::downgrade(&b);
        b
    }
}

impl Drop for BinCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A directory every user may enter (not list), holding the config and the state
/// directory; removed on drop.
pub(crate) struct Lab {
    pub(crate) root: PathBuf,
    pub(crate) bin: PathBuf,
    _copy: Arc<BinCopy>,
    pub(crate) state: PathBuf,
    config: PathBuf,
    pub(crate) serve: Option<Child>,
}

impl Lab {
    pub(crate) fn new() -> Lab {
        let root = std::env::temp_dir().join(format!(
            "shareq-mu-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o711)).unwrap();
        let copy = BinCopy::get();
        let bin = copy.bin.clone();
        let config = root.join("config");
        std::fs::create_dir_all(&config).unwrap();
        Lab {
            state: root.join("state"),
            root,
            bin,
            _copy: copy,
            config,
            serve: None,
        }
    }

    /// The state directory (made by `serve`, or mounted there before it).
    pub(crate) fn state(&self) -> &std::path::Path {
        &self.state
    }

    /// The shareq binary every user may run.
    pub(crate) fn bin(&self) -> &std::path::Path {
        &self.bin
    }

    pub(crate) fn write_config(&self, yaml: &str) {
        std::fs::write(self.config.join("config.yaml"), yaml).unwrap();
    }

    /// `shareq serve` as root; returns its exit status and stderr when it does not start.
    pub(crate) fn serve(&mut self) -> Result<(), String> {
        self.serve_with(&[])
    }

    /// `serve`, with more arguments.
    pub(crate) fn serve_with(&mut self, extra: &[&str]) -> Result<(), String> {
        self.serve_adjusted(extra, |_| {})
    }

    /// `serve_with`, its command adjusted first by `adjust` (what it inherits, say).
    pub(crate) fn serve_adjusted(
        &mut self,
        extra: &[&str],
        adjust: impl FnOnce(&mut Command),
    ) -> Result<(), String> {
        let err = self.root.join("serve.err");
        let mut cmd = Command::new(&self.bin);
        cmd.args(["serve", "--stop-jobs-on-exit"])
            .args(extra)
            .arg("--config")
            .arg(&self.config)
            .arg("--state")
            .arg(&self.state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap());
        adjust(&mut cmd);
        let child = cmd.spawn().unwrap();
        self.serve = Some(child);
        let sock = self.state.join("shareq.sock");
        let t = Instant::now();
        loop {
            if std::os::unix::net::UnixStream::connect(&sock).is_ok() {
                return Ok(());
            }
            if let Some(c) = self.serve.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                self.serve = None;
                return Err(format!(
                    "{status}: {}",
                    std::fs::read_to_string(&err).unwrap_or_default()
                ));
            }
            assert!(t.elapsed() < Duration::from_secs(20), "serve did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The CLI as `user` (`None`: root), in the lab directory.
    pub(crate) fn cli_as(&self, user: Option<&str>, args: &[&str]) -> Output {
        let mut cmd = match user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(&self.bin);
                c
            }
            None => Command::new(&self.bin),
        };
        cmd.args(&args[..1])
            .arg("--state")
            .arg(&self.state)
            .args(&args[1..])
            .current_dir(&self.root)
            .env_remove("SHAREQ_STATE")
            .stdin(Stdio::null())
            .output()
            .expect("run the shareq CLI")
    }

    pub(crate) fn submit_as(&self, user: &str, share: &str, name: &str, cmd: &str) -> Output {
        self.cli_as(
            Some(user),
            &["submit", "--share", share, "--name", name, "--", cmd],
        )
    }

    pub(crate) fn job(&self, id: u64) -> Value {
        let out = self.cli_as(None, &["jobs", "--all", "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let j: Value = serde_json::from_slice(&out.stdout).unwrap();
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

    pub(crate) fn wait_state(&self, id: u64, states: &[&str]) -> Value {
        let t = Instant::now();
        loop {
            let j = self.job(id);
            if states.iter().any(|s| j["state"] == *s) {
                return j;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "job {id} did not reach {states:?}: {j}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn log(&self, id: u64) -> String {
        std::fs::read_to_string(self.state.join(format!("logs/{id}/1.log"))).unwrap_or_default()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.serve.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(15) {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A scheduler started by a test: stopped (SIGTERM, then waited for) when dropped, also
/// when the test fails.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(15) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(crate) fn id_of(out: &Output) -> u64 {
    assert!(out.status.success(), "submit failed: {}", text(&out.stderr));
    text(&out.stdout).trim().parse().unwrap()
}

/// The lab config: `open` lets everyone submit, `private` only alice; the group is admin.
fn config(u: &Users) -> String {
    format!(
        "kind: ServiceEnvironment\nname: lab\ncapacityLimits:\n  - {{capacityUnit: gpu, maxCapacity: 4, devices: {{fake: 4}}}}\n\
         preemption: {{gracePeriodSeconds: 1}}\nadmins: [\"@{group}\"]\n---\n\
         kind: QuotaShare\nquotaShareName: open\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 2}}]\n\
         resourceSharingConfiguration: {{strategy: LEND_AND_BORROW}}\n---\n\
         kind: QuotaShare\nquotaShareName: private\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 2}}]\n\
         resourceSharingConfiguration: {{strategy: LEND}}\nmembers: [{alice}]\n",
        group = u.group,
        alice = u.name("alice"),
    )
}

#[test]
fn members_owners_and_admins_under_a_root_scheduler() {
    root_only!();
    let u = Users::create(&["alice", "bob", "carol"], &["carol"]);
    let (alice, bob, carol) = (u.name("alice"), u.name("bob"), u.name("carol"));
    let mut lab = Lab::new();
    lab.write_config(&config(&u));
    lab.serve().expect("serve");

    // A member submits; the job runs as her, with her groups and environment.
    let id = id_of(&lab.submit_as(
        &alice,
        "private",
        "whoami",
        "id -un; id -gn; echo home=$HOME user=$USER logname=$LOGNAME; pwd",
    ));
    lab.wait_state(id, &["SUCCEEDED"]);
    let log = lab.log(id);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.first(), Some(&alice.as_str()), "{log}");
    assert!(
        log.contains(&format!("user={alice} logname={alice}")),
        "{log}"
    );
    assert!(log.contains(&lab.root.display().to_string()), "cwd: {log}");
    let j = lab.job(id);
    assert_eq!(j["submitter"]["name"], alice.as_str());
    assert_eq!(j["submitter"]["uid"], u.uid("alice"));
    // Her log belongs to the scheduler, private (SPEC §7: written by the supervisor only,
    // so her job cannot create or grow files on the state filesystem).
    let logdir = std::fs::metadata(lab.state.join(format!("logs/{id}"))).unwrap();
    assert_eq!((logdir.uid(), logdir.mode() & 0o777), (0, 0o700));
    let logfile = std::fs::metadata(lab.state.join(format!("logs/{id}/1.log"))).unwrap();
    assert_eq!((logfile.uid(), logfile.mode() & 0o777), (0, 0o600));
    // And she reads it through the scheduler.
    let own = lab.cli_as(Some(&alice), &["log", &id.to_string()]);
    assert!(own.status.success(), "{}", text(&own.stderr));
    assert!(text(&own.stdout).starts_with(&alice));

    // A non-member is refused, with the rule, and nothing is queued.
    let refused = lab.submit_as(&bob, "private", "sneaky", "true");
    assert_eq!(
        refused.status.code(),
        Some(NOT_ALLOWED),
        "{}",
        text(&refused.stderr)
    );
    assert!(
        text(&refused.stderr).contains(&format!(
            "{bob} may not submit to private: members are {alice}"
        )),
        "{}",
        text(&refused.stderr)
    );
    let all = lab.cli_as(None, &["jobs", "--all", "--json"]);
    assert!(!text(&all.stdout).contains("sneaky"));

    // Bob may not touch alice's job; it is left as it was.
    let long = id_of(&lab.submit_as(&alice, "open", "long", "sleep 60"));
    lab.wait_state(long, &["RUNNING"]);
    let l = long.to_string();
    for args in [
        vec!["cancel", l.as_str()],
        vec!["priority", l.as_str(), "7"],
        vec!["log", l.as_str()],
    ] {
        let out = lab.cli_as(Some(&bob), &args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(NOT_ALLOWED), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{bob} may not"))
                && err.contains(&format!("it belongs to {alice}")),
            "{args:?}: {err}"
        );
        assert!(err.contains(&format!("(admins: @{})", u.group)), "{err}");
    }
    let j = lab.job(long);
    assert_eq!(
        (j["state"].as_str(), j["priority"].as_u64()),
        (Some("RUNNING"), Some(0))
    );
    // Nor her job that waits on it (PENDING, SPEC §13: outside the queue, where the
    // socket once did not look for its owner, and let anyone cancel it).
    let later = lab.cli_as(
        Some(&alice),
        &[
            "submit", "--share", "open", "--name", "later", "--after", &l, "--", "true",
        ],
    );
    let later = id_of(&later);
    lab.wait_state(later, &["PENDING"]);
    let w = later.to_string();
    for args in [
        vec!["cancel", w.as_str()],
        vec!["priority", w.as_str(), "7"],
    ] {
        let out = lab.cli_as(Some(&bob), &args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(NOT_ALLOWED), "{args:?}: {err}");
        assert!(
            err.contains(&format!("it belongs to {alice}")),
            "{args:?}: {err}"
        );
    }
    assert_eq!(lab.job(later)["state"], "PENDING");
    // Nor through `cancel`'s filters (issue 46 item 6): they match only what bob may
    // cancel, and say that the others' jobs were left out.
    let out = lab.cli_as(Some(&bob), &["cancel", "--status", "running", "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("1 job(s) of other users match too, left out")
            && said.contains("no queued, PENDING or running job of yours matches"),
        "{said}"
    );
    assert_eq!(lab.job(long)["state"], "RUNNING");
    // Nor reload, nor read the audit trail.
    for args in [vec!["reload"], vec!["audit"]] {
        let out = lab.cli_as(Some(&bob), &args);
        assert_eq!(
            out.status.code(),
            Some(NOT_ALLOWED),
            "{}",
            text(&out.stderr)
        );
    }

    // Carol is an admin through her group: she may do all of it.
    let p = lab.cli_as(Some(&carol), &["priority", &l, "7"]);
    assert!(p.status.success(), "{}", text(&p.stderr));
    let log = lab.cli_as(Some(&carol), &["log", &l]);
    assert!(log.status.success(), "admin log: {}", text(&log.stderr));
    let c = lab.cli_as(Some(&carol), &["cancel", &l]);
    assert!(c.status.success(), "{}", text(&c.stderr));
    let j = lab.wait_state(long, &["FAILED"]);
    assert_eq!(j["reason"], format!("CANCELLED: by {carol}"));
    let r = lab.cli_as(Some(&carol), &["reload"]);
    assert!(r.status.success(), "{}", text(&r.stderr));

    // The audit trail has every accepted action, with its caller (written within ~200 ms
    // of each answer).
    let expected = [
        (alice.clone(), "submit".to_string()),
        (carol.clone(), "priority".to_string()),
        (carol.clone(), "cancel".to_string()),
        (carol.clone(), "reload".to_string()),
    ];
    let t = Instant::now();
    let seen = loop {
        let a = lab.cli_as(Some(&carol), &["audit", "--json"]);
        assert!(a.status.success(), "{}", text(&a.stderr));
        let rows: Vec<Value> = serde_json::from_slice(&a.stdout).unwrap();
        let seen: Vec<(String, String)> = rows
            .iter()
            .map(|r| {
                (
                    r["user"].as_str().unwrap().to_string(),
                    r["action"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        if expected.iter().all(|e| seen.contains(e)) {
            break seen;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "missing from the audit trail: {expected:?} vs {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        !seen.iter().any(|(w, _)| w == &bob),
        "refusals are not accepted actions"
    );

    // A directory the submitter cannot enter is refused at submit, as a missing one.
    let closed = lab.root.join("closed");
    std::fs::create_dir(&closed).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = lab.cli_as(
        Some(&alice),
        &[
            "submit",
            "--share",
            "open",
            "--cwd",
            closed.to_str().unwrap(),
            "--",
            "true",
        ],
    );
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains(&format!(
            "workingDirectory `{}` is not a directory",
            closed.display()
        )),
        "{}",
        text(&out.stderr)
    );

    // No file in the state directory is readable by another user, except the socket
    // (which is not a plain file) — bob owns nothing there, so he may read nothing.
    let find = Command::new("runuser")
        .args(["-u", &bob, "--", "find"])
        .arg(&lab.state)
        .args(["-readable", "-type", "f"])
        .output()
        .unwrap();
    assert_eq!(text(&find.stdout), "", "readable by another user");
    let sock = std::fs::metadata(lab.state.join("shareq.sock")).unwrap();
    assert_eq!(sock.mode() & 0o777, 0o666);
    assert_eq!(std::fs::metadata(&lab.state).unwrap().mode() & 0o777, 0o711);
    for private in ["shareq.db", "runs"] {
        let m = std::fs::metadata(lab.state.join(private)).unwrap();
        assert_eq!(m.mode() & 0o077, 0, "{private} is private");
    }
}

#[test]
fn a_state_directory_of_another_user_or_writable_by_others_is_refused() {
    root_only!();
    let u = Users::create(&["alice"], &[]);
    let mut lab = Lab::new();
    lab.write_config(&config(&u));
    std::fs::create_dir(&lab.state).unwrap();
    nix::unistd::chown(
        &lab.state,
        Some(nix::unistd::Uid::from_raw(u.uid("alice"))),
        None,
    )
    .unwrap();
    let err = lab.serve().expect_err("a state directory of alice's");
    assert!(
        err.contains(&lab.state.display().to_string())
            && err.contains(&format!("belongs to {}", u.name("alice"))),
        "{err}"
    );
    nix::unistd::chown(&lab.state, Some(nix::unistd::Uid::from_raw(0)), None).unwrap();
    std::fs::set_permissions(&lab.state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = lab.serve().expect_err("a world-writable state directory");
    assert!(
        err.contains("writable by group or others") && err.contains("chmod go-w"),
        "{err}"
    );
    // A planted link to the database is refused, not followed.
    std::fs::set_permissions(&lab.state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let elsewhere = lab.root.join("elsewhere.db");
    std::os::unix::fs::symlink(&elsewhere, lab.state.join("shareq.db")).unwrap();
    let err = lab.serve().expect_err("a linked database");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!elsewhere.exists());
}

#[test]
fn a_link_planted_where_a_job_log_goes_is_not_followed() {
    root_only!();
    let u = Users::create(&["alice"], &[]);
    let alice = u.name("alice");
    let mut lab = Lab::new();
    lab.write_config(&config(&u));
    // Root prepares the state directory; alice's first job will be job 1, and once the
    // scheduler runs someone plants logs/1 pointing at a directory of root's. (Planted
    // before the start, it would be set aside as a file of no database: SPEC §8.)
    std::fs::create_dir_all(lab.state.join("logs")).unwrap();
    std::fs::set_permissions(&lab.state, std::fs::Permissions::from_mode(0o711)).unwrap();
    let target = lab.root.join("target");
    std::fs::create_dir(&target).unwrap();
    lab.serve().expect("serve");
    std::os::unix::fs::symlink(&target, lab.state.join("logs/1")).unwrap();
    let id = id_of(&lab.submit_as(&alice, "open", "victim", "echo hi"));
    assert_eq!(id, 1);
    lab.wait_state(id, &["FAILED"]);
    assert_eq!(
        std::fs::read_dir(&target).unwrap().count(),
        0,
        "nothing written through the link"
    );
    assert_eq!(
        std::fs::metadata(&target).unwrap().uid(),
        0,
        "the link's target was not handed to alice"
    );
}

#[test]
fn a_personal_scheduler_takes_jobs_only_from_its_own_user() {
    root_only!();
    let u = Users::create(&["sam", "bob", "eve"], &["sam", "bob"]);
    let (sam, bob, eve) = (u.name("sam"), u.name("bob"), u.name("eve"));
    let lab = Lab::new();
    std::fs::set_permissions(&lab.config, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Sam's own scheduler, its socket opened to the group (bob is in it).
    let yaml = config(&u).replacen(
        "admins:",
        &format!("controlSocket: {{group: {}}}\nadmins:", u.group),
        1,
    );
    lab.write_config(&yaml);
    std::fs::set_permissions(
        lab.config.join("config.yaml"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let home = lab.root.join("sam");
    std::fs::create_dir(&home).unwrap();
    // Explicitly 0755: this process's umask may be 077 (a scheduler run in-process by
    // another test of this binary sets it, as `shareq serve` does).
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    nix::unistd::chown(&home, Some(nix::unistd::Uid::from_raw(u.uid("sam"))), None).unwrap();
    let state = home.join("state");
    let err = lab.root.join("sam.err");
    let _serve = Stopped(
        Command::new("runuser")
            .args(["-u", &sam, "--"])
            .arg(&lab.bin)
            .args(["serve", "--stop-jobs-on-exit", "--config"])
            .arg(&lab.config)
            .arg("--state")
            .arg(&state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap(),
    );
    let sock = state.join("shareq.sock");
    let t = Instant::now();
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "sam's scheduler did not start: {}",
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let m = std::fs::metadata(&sock).unwrap();
    assert_eq!(m.mode() & 0o777, 0o660, "socket open to the group only");
    let as_user = |user: &str, args: &[&str]| {
        Command::new("runuser")
            .args(["-u", user, "--"])
            .arg(&lab.bin)
            .args(&args[..1])
            .arg("--state")
            .arg(&state)
            .args(&args[1..])
            .current_dir(&lab.root)
            .output()
            .unwrap()
    };
    let out = as_user(&bob, &["submit", "--share", "open", "--", "true"]);
    assert_eq!(
        out.status.code(),
        Some(NOT_ALLOWED),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains(&format!("runs jobs only as {sam}")),
        "{}",
        text(&out.stderr)
    );
    let jobs = as_user(&bob, &["jobs"]);
    assert!(
        jobs.status.success(),
        "bob may read: {}",
        text(&jobs.stderr)
    );
    // Eve is not in the group: refused with exit 3, the group named, not a bare
    // "Permission denied" (issue 46 item 6).
    for args in [
        &["jobs"][..],
        &["status"],
        &["submit", "--share", "open", "--", "true"],
    ] {
        let out = as_user(&eve, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(NOT_ALLOWED), "{args:?}: {err}");
        assert!(
            err.contains(&format!("its socket is for the group `{}`", u.group))
                && err.contains("controlSocket.group")
                && err.contains(&format!("{eve} may not reach the scheduler")),
            "{args:?}: {err}"
        );
        assert!(!err.contains("Permission denied"), "{args:?}: {err}");
    }
    let ok = as_user(
        &sam,
        &["submit", "--share", "open", "--", "echo", "personal-ok"],
    );
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    // It runs, and ends: a scheduler without cgroups starts its supervisors the plain way
    // (no `clone3` into a group), and hears their end.
    let id = id_of(&ok).to_string();
    let t = Instant::now();
    loop {
        let all = as_user(&sam, &["jobs", "--all"]);
        let line = text(&all.stdout)
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id.as_str()))
            .map(str::to_string)
            .unwrap_or_default();
        if line.contains("SUCCEEDED") {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "sam's job did not succeed: {line}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = as_user(&sam, &["log", &id]);
    assert!(
        text(&log.stdout).contains("personal-ok"),
        "{}",
        text(&log.stderr)
    );
}

/// Not root-only: a job name full of escape sequences prints inert in every table, and
/// JSON escapes it.
#[test]
fn a_job_name_with_escape_sequences_prints_inert() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir(&config).unwrap();
    std::fs::write(
        config.join("c.yaml"),
        "kind: ServiceEnvironment\nname: t\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 1, devices: {fake: 1}}\n---\n\
         kind: QuotaShare\nquotaShareName: qs\ncapacityLimits: [{capacityUnit: gpu, maxCapacity: 1}]\n\
         resourceSharingConfiguration: {strategy: LEND}\n",
    )
    .unwrap();
    let state = dir.path().join("state");
    let _serve = Stopped(
        Command::new(BIN)
            .args(["serve", "--stop-jobs-on-exit", "--config"])
            .arg(&config)
            .arg("--state")
            .arg(&state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    while std::os::unix::net::UnixStream::connect(state.join("shareq.sock")).is_err() {
        assert!(t.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    let cli = |args: &[&str]| {
        Command::new(BIN)
            .args(&args[..1])
            .arg("--state")
            .arg(&state)
            .args(&args[1..])
            .output()
            .unwrap()
    };
    let evil = "x\x1b]0;pwned\x07\x1b[2J\u{9b}31m\u{202e}";
    let out = cli(&["submit", "--share", "qs", "--name", evil, "--", "sleep 30"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = cli(&["jobs"]);
    let shown = text(&table.stdout);
    assert!(
        !table.stdout.contains(&0x1b) && !shown.contains('\u{9b}') && !shown.contains('\u{202e}')
    );
    assert!(shown.contains("x\\x1b]0;pwned\\x07"), "{shown}");
    let json = cli(&["jobs", "--json"]);
    assert!(
        !json.stdout.contains(&0x1b),
        "JSON escapes control characters"
    );
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["running"][0]["name"], evil);
}

#[test]
fn everyone_reads_the_decision_stream_and_only_admins_per_user_usage() {
    root_only!();
    let u = Users::create(&["alice", "bob", "carol"], &["carol"]);
    let (alice, bob, carol) = (u.name("alice"), u.name("bob"), u.name("carol"));
    let mut lab = Lab::new();
    lab.write_config(&config(&u));
    lab.serve().expect("serve");
    let id = id_of(&lab.submit_as(&alice, "private", "mine", "echo secret-output"));
    lab.wait_state(id, &["SUCCEEDED"]);

    // Anyone reads the stream (SPEC §9: what `jobs` shows): alice's job as bob sees it,
    // with her name as submitter, and never the command or environment.
    let out = lab.cli_as(Some(&bob), &["events", "--json", "--since", "1h"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let started = lines
        .iter()
        .find(|l| l["event"] == "started" && l["id"] == id)
        .expect("alice's start in bob's stream");
    assert_eq!(started["user"], alice.as_str());
    assert!(!text(&out.stdout).contains("secret-output"));
    assert!(
        lines
            .iter()
            .all(|l| l.get("command").is_none() && l.get("env").is_none())
    );

    // The per-share report is for everyone; per-user figures only for admins.
    let out = lab.cli_as(Some(&bob), &["report", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rep: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["users_shown"], false);
    assert_eq!(rep["users"], serde_json::json!({}));
    assert_eq!(rep["shares"]["private"]["jobs_finished"], 1);
    let out = lab.cli_as(Some(&bob), &["report", "--users"]);
    assert_eq!(
        out.status.code(),
        Some(NOT_ALLOWED),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains(&format!("{bob} may not read per-user usage figures")),
        "{}",
        text(&out.stderr)
    );
    let out = lab.cli_as(Some(&carol), &["report", "--json", "--users"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rep: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["users_shown"], true);
    assert_eq!(rep["users"][alice.as_str()]["jobs_finished"], 1);
}

#[test]
fn a_token_is_scoped_to_its_caller_and_a_job_cannot_write_beside_its_log() {
    root_only!();
    let u = Users::create(&["alice", "mallory"], &[]);
    let (alice, mallory) = (u.name("alice"), u.name("mallory"));
    let mut lab = Lab::new();
    lab.write_config(&config(&u));
    lab.serve().expect("serve");
    let submit = |user: &str, name: &str, cmd: &str| {
        lab.cli_as(
            Some(user),
            &[
                "submit",
                "--share",
                "open",
                "--name",
                name,
                "--client-token",
                "tok-42",
                "--",
                cmd,
            ],
        )
    };
    // Her job tries to write into its own log folder and to grow its log file there.
    let spill = format!(
        "echo out; touch {s}/logs/$SHAREQ_JOB_ID/spill && echo wrote; \
         echo more >> {s}/logs/$SHAREQ_JOB_ID/1.log && echo grew; true",
        s = lab.state.display()
    );
    let first = id_of(&submit(&alice, "hers", &spill));
    // Alice again with the same token: the same job.
    assert_eq!(id_of(&submit(&alice, "hers-again", "true")), first);
    // Mallory replaying her token makes a job of his own and learns nothing of hers.
    let his = id_of(&submit(&mallory, "his", "true"));
    assert_ne!(his, first);
    assert_eq!(lab.job(his)["submitter"]["name"], mallory.as_str());
    lab.wait_state(first, &["SUCCEEDED"]);
    let log = lab.cli_as(Some(&alice), &["log", &first.to_string()]);
    let shown = text(&log.stdout);
    assert!(log.status.success(), "{}", text(&log.stderr));
    assert!(shown.starts_with("out"), "{shown}");
    assert!(
        !shown.contains("wrote") && !shown.contains("grew"),
        "{shown}"
    );
    assert!(!lab.state.join(format!("logs/{first}/spill")).exists());
    // Mallory may not read it.
    let out = lab.cli_as(Some(&mallory), &["log", &first.to_string()]);
    assert_eq!(
        out.status.code(),
        Some(NOT_ALLOWED),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_state_directory_inside_a_directory_another_user_owns_is_refused() {
    root_only!();
    let u = Users::create(&["mallory"], &[]);
    let mut lab = Lab::new();
    lab.write_config(&config(&u));
    // Mallory owns the directory above the state directory: she could swap `state/`.
    let hers = lab.root.join("hers");
    std::fs::create_dir(&hers).unwrap();
    nix::unistd::chown(
        &hers,
        Some(nix::unistd::Uid::from_raw(u.uid("mallory"))),
        None,
    )
    .unwrap();
    lab.state = hers.join("state");
    let err = lab.serve().expect_err("a state directory below mallory's");
    assert!(
        err.contains(&hers.display().to_string())
            && err.contains(&format!("belongs to {}", u.name("mallory"))),
        "{err}"
    );
}

#[test]
fn a_command_is_shown_to_its_owner_and_admins_only() {
    root_only!();
    let u = Users::create(&["alice", "bob", "carol"], &["carol"]);
    let (alice, bob, carol) = (u.name("alice"), u.name("bob"), u.name("carol"));
    let mut lab = Lab::new();
    lab.write_config(&config(&u));
    lab.serve().expect("serve");
    let secret = "sleep 60 # --token=hunter2";
    let id = id_of(&lab.submit_as(&alice, "open", "train", secret));
    lab.wait_state(id, &["RUNNING"]);
    let command_seen_by = |user: &str| -> String {
        let out = lab.cli_as(Some(user), &["jobs", "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["running"][0]["command"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(command_seen_by(&alice), secret);
    assert_eq!(command_seen_by(&carol), secret, "an admin sees it");
    assert_eq!(
        command_seen_by(&bob),
        "",
        "bob must not see alice's command"
    );
    let table = lab.cli_as(Some(&bob), &["jobs"]);
    let shown = text(&table.stdout);
    assert!(
        !shown.contains("hunter2") && shown.contains("(not yours)"),
        "{shown}"
    );
    // Nor through the console's stream of the picture (its first answer is the whole
    // picture), read as bob.
    let read_stream = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({:?})\n\
         s.sendall(b'{{\"op\":\"subscribe\"}}\\n')\nf = s.makefile('rb')\n\
         print(f.readline().decode())",
        lab.state.join("shareq.sock").display().to_string()
    );
    let out = Command::new("runuser")
        .args(["-u", &bob, "--", "python3", "-c", &read_stream])
        .output()
        .unwrap();
    let stream = text(&out.stdout);
    assert!(
        stream.contains("\"train\""),
        "{stream} {}",
        text(&out.stderr)
    );
    assert!(
        !stream.contains("hunter2"),
        "the stream showed bob the command"
    );
}

#[test]
fn one_user_holding_a_thousand_connections_locks_nobody_else_out() {
    root_only!();
    let u = Users::create(&["alice", "mallory"], &[]);
    let (alice, mallory) = (u.name("alice"), u.name("mallory"));
    let mut lab = Lab::new();
    lab.write_config(&config(&u));
    lab.serve().expect("serve");
    // Mallory opens 1,024 connections and keeps them open.
    let hold = format!(
        "import socket, sys, time\n\
         held, refused, why = [], 0, ''\n\
         for i in range(1024):\n\
         \x20   s = socket.socket(socket.AF_UNIX)\n\
         \x20   s.connect({sock:?})\n\
         \x20   s.settimeout(0.1)\n\
         \x20   try:\n\
         \x20       line = s.makefile('rb').readline().decode()\n\
         \x20   except OSError:\n\
         \x20       line = ''\n\
         \x20   if line:\n\
         \x20       refused += 1; why = line\n\
         \x20   else:\n\
         \x20       held.append(s)\n\
         print(len(held), refused, why.strip(), flush=True)\n\
         time.sleep(30)\n",
        sock = lab.state.join("shareq.sock").display().to_string()
    );
    let mut holder = Command::new("runuser")
        .args(["-u", &mallory, "--", "python3", "-c", &hold])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let mut parts = line.splitn(3, ' ');
    let held: u32 = parts.next().unwrap().parse().unwrap();
    let refused: u32 = parts.next().unwrap().trim().parse().unwrap();
    let why = parts.next().unwrap_or_default();
    assert_eq!(held, 64, "{line}");
    assert_eq!(refused, 1024 - 64, "{line}");
    assert!(
        why.contains("limits.maxConnectionsPerUser") && why.contains(&mallory),
        "{why}"
    );
    // Alice and root are still served.
    let out = lab.cli_as(Some(&alice), &["status"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = lab.cli_as(None, &["status"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = holder.kill();
    let _ = holder.wait();
}

#[test]
fn one_user_may_queue_only_so_many_jobs() {
    root_only!();
    let u = Users::create(&["alice", "bob"], &[]);
    let (alice, bob) = (u.name("alice"), u.name("bob"));
    let mut lab = Lab::new();
    lab.write_config(&config(&u).replacen(
        "preemption:",
        "limits: {maxQueuedJobsPerUser: 3}\npreemption:",
        1,
    ));
    lab.serve().expect("serve");
    for i in 0..3 {
        id_of(&lab.submit_as(&alice, "open", &format!("a{i}"), "sleep 60"));
    }
    let out = lab.submit_as(&alice, "open", "a3", "sleep 60");
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("limits.maxQueuedJobsPerUser") && err.contains(&alice),
        "{err}"
    );
    // Bob is not held back by alice's jobs.
    id_of(&lab.submit_as(&bob, "open", "b0", "sleep 60"));
    // Once one of hers ends, she may queue again.
    let all = lab.cli_as(None, &["jobs", "--json"]);
    let v: Value = serde_json::from_slice(&all.stdout).unwrap();
    let first = v["running"]
        .as_array()
        .unwrap()
        .iter()
        .chain(v["queue"].as_array().unwrap())
        .find(|j| j["name"] == "a0")
        .unwrap()["id"]
        .as_u64()
        .unwrap();
    let c = lab.cli_as(Some(&alice), &["cancel", &first.to_string()]);
    assert!(c.status.success(), "{}", text(&c.stderr));
    lab.wait_state(first, &["FAILED"]);
    let t = Instant::now();
    loop {
        let out = lab.submit_as(&alice, "open", "a4", "sleep 60");
        if out.status.success() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{}",
            text(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A hostile log read by an admin through a pipe (`| less -R`) runs nothing: its control
/// characters are made visible; its owner gets it as it is, and so does `--raw`.
#[test]
fn an_admin_piping_another_users_log_gets_its_escapes_made_visible() {
    root_only!();
    let u = Users::create(&["alice", "carol"], &["carol"]);
    let (alice, carol) = (u.name("alice"), u.name("carol"));
    let mut lab = Lab::new();
    lab.write_config(&config(&u));
    lab.serve().expect("serve");
    let id = id_of(&lab.submit_as(&alice, "open", "evil", r"printf '\033]0;pwned\007hi\n'"));
    lab.wait_state(id, &["SUCCEEDED"]);
    let l = id.to_string();
    // Output captured: a pipe, for each of them.
    let admin = lab.cli_as(Some(&carol), &["log", &l]);
    assert!(admin.status.success(), "{}", text(&admin.stderr));
    assert_eq!(text(&admin.stdout), "\\x1b]0;pwned\\x07hi\n");
    let raw = lab.cli_as(Some(&carol), &["log", "--raw", &l]);
    assert_eq!(text(&raw.stdout), "\x1b]0;pwned\x07hi\n");
    let own = lab.cli_as(Some(&alice), &["log", &l]);
    assert_eq!(text(&own.stdout), "\x1b]0;pwned\x07hi\n");
}
