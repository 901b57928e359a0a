//! Containment (SPEC §7): each attempt runs in a cgroup of its own, so that every process
//! of it is found whatever it did (`setsid`, a double fork, a new session). Ending an
//! attempt kills the whole cgroup, and its GPUs are released only once the cgroup is
//! empty. Where a devices controller is usable (cgroup v1 `devices`), an attempt may open
//! only its own GPUs' device files.
//!
//! Which hierarchies: the unified (v2) one where it is usable — a directory we may create
//! groups in, with `cgroup.kill` — else the v1 `freezer` one (freeze, kill every member,
//! thaw), with v1 `pids` beside that one when present. Device isolation uses the v1 `devices`
//! hierarchy (a v2 device program needs BPF, which this build does not load).
//!
//! Each attempt may hold at most `limits.pidsPerJob` processes and threads (`pids.max`),
//! so that a fork bomb in one job cannot take the process slots the scheduler and the
//! other users' jobs need: in the attempt's v2 group where the unified hierarchy has the
//! `pids` controller (enabled below the scheduler's group), else in its v1 `pids` group,
//! else not at all, and [`Containment::describe`] says so.
//!
//! Where: below the scheduler's own cgroup in each hierarchy (root's, or a delegated
//! subtree such as a systemd unit with `Delegate=yes`), in `shareq-<place>-<database>/`:
//! place names the state directory and database its database, so two schedulers never
//! share groups, and a scheduler on a recreated state directory (same place, another
//! database) recognises an earlier one's live attempts. An attempt's group is
//! `j<job>a<attempt>@<unit>+<i>+<j>…`: its name says which devices it holds, so what an
//! earlier scheduler left running can be read back from the names alone.
//!
//! In the devices hierarchy an attempt has no group of its own: its supervisor enters the
//! group of its device set (`gpus+<i>+<j>…`), which holds the deny rules and is made, and
//! its rules written, once per scheduler. Writing the rules per attempt cost a write per
//! denied GPU minor (253 of them, ~4 ms of the scheduler's CPU per start); a group of its
//! own inside the set's, which the v1 controller fills with a copy of its parent's rules,
//! still cost an allocation per rule at each `mkdir` and a free per rule at each `rmdir`.
//! Membership there only decides what may be opened, and attempts that hold the same set
//! may open the same devices, so sharing the set's group changes nothing they can do;
//! attempts are still found, killed and counted in the killing hierarchy.
//!
//! A MIG job (SPEC §15) may open its instances' parent GPUs and, of the `nvidia-caps`
//! devices (their own major, read from `/proc/devices`), only its instances' access
//! capabilities: the driver's `config` and `monitor` and the other instances of its parent
//! GPUs are denied (an instance of another GPU needs that GPU's device, denied already).
//! The device set's name then says both: `gpus+0+caps+12+13`.
//!
//! Fake GPUs are isolated as real ones would be: GPU `i` is the character device of
//! NVIDIA's major number 195, minor `i` (`/dev/nvidia<i>`). A test makes such nodes with
//! `mknod` in a scratch directory: opening another attempt's node fails with EPERM, one's
//! own with ENXIO (no driver).

use std::io;
use std::path::{Path, PathBuf};

/// NVIDIA's character-device major number (`/dev/nvidia<i>` is minor `i`; the control
/// devices use the top minors, 254 `nvidia-modeset` and 255 `nvidiactl`).
pub const NVIDIA_MAJOR: u32 = 195;
/// The minors of GPUs: `/dev/nvidia0` … `/dev/nvidia253`.
const GPU_MINORS: u32 = 254;

/// How attempts are killed as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kill {
    /// cgroup v2: `cgroup.kill`.
    Unified,
    /// cgroup v1: `freezer.state` FROZEN, SIGKILL every member, THAWED.
    Freezer,
}

/// Where the scheduler may make attempt groups, and how well they contain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroups {
    kill: Kill,
    /// The base directory (the scheduler's `shareq-<scope>`) in the killing hierarchy.
    base: PathBuf,
    /// The same in v1 `pids`, when mounted and the unified hierarchy cannot limit
    /// processes.
    pids: Option<PathBuf>,
    /// The unified hierarchy limits each attempt's processes (its `pids` controller is
    /// enabled for the attempts' groups).
    pids_unified: bool,
    /// The same in v1 `devices`, when usable: device isolation.
    devices: Option<PathBuf>,
    /// Why devices are not isolated, when they are not.
    no_isolation: Option<String>,
}

/// What this machine allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Containment {
    Contained(Cgroups),
    /// Jobs run as before (their session is what is killed); the reason says why.
    NotContained(String),
}

impl Containment {
    /// Find usable hierarchies for the scheduler of `scope` (`<place>-<database>`, see
    /// [`scope`]). Nothing is created yet but the base directories.
    pub fn detect(scope: &str) -> Containment {
        detect_in(
            Path::new("/sys/fs/cgroup"),
            Path::new("/proc/self/cgroup"),
            scope,
        )
    }

    /// What a scheduler started by this user here would get, read without making
    /// anything (for `shareq gpus` and `check`): one line. `starts_inside`: whether
    /// supervisors can be started inside their group here (`exec::start::clone_into`),
    /// so that no start waits for a move into it.
    pub fn describe(starts_inside: bool) -> String {
        let root = Path::new("/sys/fs/cgroup");
        let slow = slow_unified(root).is_some() && !starts_inside;
        describe_in(root, nix::unistd::geteuid().is_root(), slow)
    }

    /// Moving a process into a group of the unified hierarchy waits for an RCU grace
    /// period (≈10 ms) there unless it is mounted with `favordynmods`: a line for the log
    /// saying so, when it applies (supervisors that cannot be started inside their group,
    /// `exec::start::clone_into`; `starts_inside` says whether they can here).
    pub fn slow_moves(&self, starts_inside: bool) -> Option<String> {
        let c = self.cgroups()?;
        if c.kill != Kill::Unified || starts_inside {
            return None;
        }
        let mount = slow_unified(Path::new("/sys/fs/cgroup"))?
            .display()
            .to_string();
        Some(format!(
            "each start waits ≈10 ms for the kernel to move its supervisor into its cgroup: \
             mounting {mount} with favordynmods (mount -o remount,favordynmods {mount}) \
             removes that wait (see docs/DEPLOY.md)"
        ))
    }

    pub fn cgroups(&self) -> Option<&Cgroups> {
        match self {
            Containment::Contained(c) => Some(c),
            Containment::NotContained(_) => None,
        }
    }

    /// One line for `shareq gpus`, `check` and the console header when something is
    /// missing: `None` when jobs are contained and GPUs isolated.
    pub fn warning(&self) -> Option<String> {
        match self {
            Containment::NotContained(why) => Some(format!(
                "jobs are not contained ({why}); GPUs are not isolated: CUDA_VISIBLE_DEVICES is advisory"
            )),
            Containment::Contained(c) => c.no_isolation.as_ref().map(|why| {
                format!("GPUs are not isolated ({why}): CUDA_VISIBLE_DEVICES is advisory")
            }),
        }
    }
}

/// One `/proc/self/mountinfo` line as (mount point, filesystem type, super options).
fn mount_of(line: &str) -> Option<(&str, &str, &str)> {
    let (before, after) = line.split_once(" - ")?;
    let point = before.split(' ').nth(4)?;
    let mut rest = after.split(' ');
    let fs = rest.next()?;
    let _source = rest.next()?;
    Some((point, fs, rest.next().unwrap_or("")))
}

/// The unified hierarchy's mount under `root` (`root` itself, or its `unified` on a hybrid
/// machine) when it is mounted without `favordynmods`: what `describe` and the start's
/// log line both say.
fn slow_unified(root: &Path) -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    [root.to_path_buf(), root.join("unified")]
        .into_iter()
        .find(|m| slow_moves(&mountinfo, m))
}

/// Is `mount` a cgroup2 hierarchy mounted without `favordynmods` (so that each move of
/// a process into a group waits for an RCU grace period)?
fn slow_moves(mountinfo: &str, mount: &Path) -> bool {
    mountinfo.lines().filter_map(mount_of).any(|(m, fs, opts)| {
        fs == "cgroup2" && Path::new(m) == mount && !opts.split(',').any(|o| o == "favordynmods")
    })
}

fn describe_in(root: &Path, is_root: bool, slow: bool) -> String {
    let cgroup = |p: PathBuf| p.join("cgroup.procs").exists();
    let unified = [root.to_path_buf(), root.join("unified")]
        .into_iter()
        .find(|m| m.join("cgroup.controllers").exists());
    let kill = match (is_root, unified.as_ref(), cgroup(root.join("freezer"))) {
        (false, _, _) => None,
        (true, Some(_), _) => Some("cgroup v2"),
        (true, None, true) => Some("cgroup v1 freezer"),
        (true, None, false) => None,
    };
    let Some(kill) = kill else {
        let why = if is_root {
            "no usable cgroup hierarchy (neither v2 nor v1 freezer)"
        } else {
            "a scheduler run by this user may not manage cgroups: run it as root, or in a delegated cgroup"
        };
        return format!(
            "jobs are not contained ({why}); GPUs are not isolated: CUDA_VISIBLE_DEVICES is advisory"
        );
    };
    let pids = match unified.as_deref() {
        Some(u)
            if kill == "cgroup v2"
                && std::fs::read_to_string(u.join("cgroup.controllers"))
                    .is_ok_and(|t| t.split_whitespace().any(|c| c == "pids")) =>
        {
            "processes per attempt limited (cgroup v2 pids, limits.pidsPerJob)".to_string()
        }
        _ if cgroup(root.join("pids")) => {
            "processes per attempt limited (cgroup v1 pids, limits.pidsPerJob)".to_string()
        }
        _ => NO_PIDS.to_string(),
    };
    let kill = if slow && kill == "cgroup v2" {
        "cgroup v2 without favordynmods: each start waits ≈10 ms to enter it"
    } else {
        kill
    };
    if cgroup(root.join("devices")) {
        format!(
            "jobs are contained ({kill}, one cgroup per attempt); {pids}; GPUs are isolated (cgroup v1 devices)"
        )
    } else {
        format!(
            "jobs are contained ({kill}, one cgroup per attempt); {pids}; GPUs are not isolated (no cgroup v1 devices controller): CUDA_VISIBLE_DEVICES is advisory"
        )
    }
}

/// The scope of a scheduler's groups: a hash of its state directory's path and the first
/// characters of its database identity.
pub fn scope(state: &Path, db: &str) -> String {
    let path = std::fs::canonicalize(state).unwrap_or_else(|_| state.to_path_buf());
    // FNV-1a: stable across runs and builds.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let db: String = db
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(16)
        .collect();
    format!("{:08x}-{db}", h as u32)
}

fn detect_in(root: &Path, self_cgroup: &Path, scope: &str) -> Containment {
    let own = std::fs::read_to_string(self_cgroup).unwrap_or_default();
    // `hierarchy-id:controllers:path` per line; v2 is `0::path`.
    let own_path = |want: &str| -> Option<String> {
        own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
            let hit = if want.is_empty() {
                ctrls.is_empty()
            } else {
                ctrls.split(',').any(|c| c == want)
            };
            hit.then(|| path.trim_start_matches('/').to_string())
        })
    };
    let dir_name = format!("shareq-{scope}");
    // Our base directory in a hierarchy mounted at `mount`, made if need be, when the
    // mount is a cgroup hierarchy and a group made there has `marker` (a controller's
    // file: so the controller is really there).
    let usable = |mount: PathBuf, rel: Option<String>, marker: &str| -> Option<PathBuf> {
        if !mount.join("cgroup.procs").exists() {
            return None;
        }
        let own = mount.join(rel?);
        // Moving a supervisor from our group into one below needs write access to our
        // group's `cgroup.procs` (the common ancestor's): without it nothing could enter.
        let movable =
            nix::unistd::access(&own.join("cgroup.procs"), nix::unistd::AccessFlags::W_OK).is_ok();
        if !movable {
            return None;
        }
        let base = own.join(&dir_name);
        std::fs::create_dir_all(&base).ok()?;
        if base.join(marker).exists() {
            Some(base)
        } else {
            let _ = std::fs::remove_dir(&base);
            None
        }
    };
    // The unified hierarchy: pure v2 at the root, or the hybrid one at `unified`.
    let unified = [root.to_path_buf(), root.join("unified")]
        .into_iter()
        .find(|m| m.join("cgroup.controllers").exists());
    let mut kill = None;
    if let Some(m) = unified
        && let Some(base) = usable(m, own_path(""), "cgroup.kill")
    {
        kill = Some((Kill::Unified, base));
    }
    if kill.is_none()
        && let Some(base) = usable(root.join("freezer"), own_path("freezer"), "freezer.state")
    {
        kill = Some((Kill::Freezer, base));
    }
    let Some((kill, base)) = kill else {
        let why = if nix::unistd::geteuid().is_root() {
            "no usable cgroup hierarchy (neither v2 with cgroup.kill nor v1 freezer)"
        } else {
            "the scheduler may not manage cgroups: run it as root, or in a delegated cgroup"
        };
        return Containment::NotContained(why.to_string());
    };
    // The process limit: in the attempt's own v2 group where the unified hierarchy has
    // `pids`; else v1 `pids` (with the v1 freezer, SPEC §7: "else v1 freezer/pids", and
    // beside a unified hierarchy without it: one more group to make, enter and remove
    // per start, the price of the limit).
    let pids_unified = kill == Kill::Unified && enable_unified_pids(&base);
    let pids = if pids_unified {
        None
    } else {
        usable(root.join("pids"), own_path("pids"), "pids.max")
    };
    let devices = usable(root.join("devices"), own_path("devices"), "devices.deny");
    let no_isolation = devices.is_none().then(|| {
        "no usable devices controller (cgroup v1 `devices`; a v2 device program is not supported)"
            .to_string()
    });
    Containment::Contained(Cgroups {
        kill,
        base,
        pids,
        pids_unified,
        devices,
        no_isolation,
    })
}

/// What `describe` and the log say where no `pids` controller is usable.
const NO_PIDS: &str = "no usable pids controller (cgroup v2 `pids` below the scheduler's \
                       group, or v1 `pids`): a job's processes are not limited \
                       (limits.pidsPerJob), a fork bomb can take every process slot";

/// Make the unified hierarchy's `pids` controller available to the attempt groups below
/// `base` (the scheduler's `shareq-<scope>`, which holds no process itself): enabled in
/// the parent's `cgroup.subtree_control` when it is not yet (only a group without
/// processes of its own, such as the root, accepts that), then in `base`'s. False when
/// it cannot be.
fn enable_unified_pids(base: &Path) -> bool {
    let listed = |file: PathBuf| {
        std::fs::read_to_string(file).is_ok_and(|t| t.split_whitespace().any(|c| c == "pids"))
    };
    if !listed(base.join("cgroup.controllers"))
        && let Some(parent) = base.parent()
    {
        let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+pids");
    }
    listed(base.join("cgroup.controllers"))
        && (listed(base.join("cgroup.subtree_control"))
            || std::fs::write(base.join("cgroup.subtree_control"), "+pids").is_ok())
}

/// One attempt's group, in every hierarchy used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptGroup {
    kill: Kill,
    /// The group in the killing hierarchy (membership is read here).
    main: PathBuf,
    /// The same group in the other hierarchies (pids).
    others: Vec<PathBuf>,
    /// In the devices hierarchy, the group of its device set (shared, never removed
    /// with the attempt).
    devices: Option<PathBuf>,
    /// Its `pids.max` (in the v2 group or the v1 `pids` one), where processes are limited.
    pids_max: Option<PathBuf>,
}

/// The name of an attempt's group: job, attempt and the devices it holds.
pub fn group_name(job: u64, attempt: u32, unit: &str, devices: &[u32]) -> String {
    let mut name = format!("j{job}a{attempt}@{unit}");
    for d in devices {
        name.push('+');
        name.push_str(&d.to_string());
    }
    name
}

/// The job and attempt a group's name says (`j12a3@gpu+0` → (12, 3)).
pub fn parse_attempt_name(name: &str) -> Option<(u64, u32)> {
    let (head, _) = name.split_once('@')?;
    let (job, attempt) = head.strip_prefix('j')?.split_once('a')?;
    Some((job.parse().ok()?, attempt.parse().ok()?))
}

/// What an earlier scheduler's group says it holds: (unit, devices).
pub fn parse_group_name(name: &str) -> Option<(String, Vec<u32>)> {
    let (_, rest) = name.split_once('@')?;
    let mut parts = rest.split('+');
    let unit = parts.next()?.to_string();
    let devices = parts
        .map(|d| d.parse().ok())
        .collect::<Option<Vec<u32>>>()?;
    Some((unit, devices))
}

/// What an attempt may open: GPU minors of NVIDIA's major, and for a MIG job the
/// `nvidia-caps` minors of its instances.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceRules {
    pub gpus: Vec<u32>,
    /// `Some` for a MIG job: its caps minors (every other MIG capability is denied).
    pub caps: Option<Vec<u32>>,
}

impl DeviceRules {
    /// Whole GPUs: their minors.
    pub fn gpus(gpus: &[u32]) -> DeviceRules {
        DeviceRules {
            gpus: gpus.to_vec(),
            caps: None,
        }
    }

    /// The rules of an attempt's devices: its MIG instances' when it has some.
    pub fn of(devices: &[u32], mig: Option<&super::mig_caps::MigAccess>) -> DeviceRules {
        match mig {
            Some(m) => DeviceRules {
                gpus: m.gpus.clone(),
                caps: Some(m.caps.clone()),
            },
            None => DeviceRules::gpus(devices),
        }
    }

    /// The name of the device set's group: `gpus+<i>+<j>…`, with `+caps+<n>…` for MIG.
    pub fn set_name(&self) -> String {
        let mut set = String::from("gpus");
        for d in &self.gpus {
            set.push('+');
            set.push_str(&d.to_string());
        }
        if let Some(caps) = &self.caps {
            set.push_str("+caps");
            for c in caps {
                set.push('+');
                set.push_str(&c.to_string());
            }
        }
        set
    }

    /// The `devices.deny` lines: every GPU minor but its own, and for a MIG job every
    /// MIG capability minor of `all_caps` but its own (of major `caps_major`).
    pub fn deny_lines(&self, caps_major: Option<u32>, all_caps: &[u32]) -> io::Result<Vec<String>> {
        let mut out: Vec<String> = (0..GPU_MINORS)
            .filter(|m| !self.gpus.contains(m))
            .map(|m| format!("c {NVIDIA_MAJOR}:{m} rwm"))
            .collect();
        if let Some(own) = &self.caps {
            let others: Vec<&u32> = all_caps.iter().filter(|m| !own.contains(m)).collect();
            if !others.is_empty() {
                let Some(major) = caps_major else {
                    return Err(io::Error::other(
                        "MIG instances cannot be isolated: no `nvidia-caps` major in /proc/devices",
                    ));
                };
                out.extend(others.iter().map(|m| format!("c {major}:{m} rwm")));
            }
        }
        Ok(out)
    }
}

/// The device set's group an attempt group `name` sits in, in the devices hierarchy,
/// from its name (the GPUs it may open): what an adopted attempt is found by.
fn device_set(name: &str) -> String {
    DeviceRules::gpus(&parse_group_name(name).map(|(_, d)| d).unwrap_or_default()).set_name()
}

/// The caps major and the MIG capability minors that matter to a job that may open
/// `parents` (none without a MIG driver).
fn mig_caps(parents: &[u32]) -> (Option<u32>, Vec<u32>) {
    use super::mig_caps as mig;
    let major = std::fs::read_to_string("/proc/devices")
        .ok()
        .and_then(|t| mig::caps_major(&t));
    let all = std::fs::read_to_string(mig::MIG_MINORS)
        .map(|t| mig::parse_mig_minors(&t, parents))
        .unwrap_or_default();
    (major, all)
}

/// The device sets' groups whose rules this process has written (a group left by an
/// earlier process gets them again once: it may have stopped halfway).
static DEVICE_SETS: std::sync::Mutex<std::collections::BTreeSet<PathBuf>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Make the group of a device set with its rules (deny every GPU minor of NVIDIA's major
/// but `allowed`'s, and for MIG every other capability; the control devices stay open),
/// once per process.
fn ensure_device_set(dir: &Path, allowed: &DeviceRules) -> io::Result<()> {
    let mut ready = DEVICE_SETS.lock().unwrap_or_else(|e| e.into_inner());
    if ready.contains(dir) && dir.is_dir() {
        return Ok(());
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let (major, all_caps) = if allowed.caps.is_some() {
        mig_caps(&allowed.gpus)
    } else {
        (None, Vec::new())
    };
    for rule in allowed.deny_lines(major, &all_caps)? {
        std::fs::write(dir.join("devices.deny"), rule.as_bytes())?;
    }
    ready.insert(dir.to_path_buf());
    Ok(())
}

impl Cgroups {
    /// The group of one attempt (not created yet), its device set read from its name.
    pub fn attempt(&self, name: &str) -> AttemptGroup {
        self.attempt_in(name, &device_set(name))
    }

    /// The group of one attempt that may open `rules`' devices (not created yet).
    pub fn attempt_with(&self, name: &str, rules: &DeviceRules) -> AttemptGroup {
        self.attempt_in(name, &rules.set_name())
    }

    fn attempt_in(&self, name: &str, set: &str) -> AttemptGroup {
        let devices = self.devices.as_ref().map(|b| b.join(set));
        let others: Vec<PathBuf> = self.pids.iter().map(|b| b.join(name)).collect();
        let main = self.base.join(name);
        let pids_max = if self.pids_unified {
            Some(main.join("pids.max"))
        } else {
            others.first().map(|g| g.join("pids.max"))
        };
        AttemptGroup {
            kill: self.kill.clone(),
            main,
            others,
            devices,
            pids_max,
        }
    }

    /// The live attempt groups of other schedulers beside ours (a state directory
    /// recreated under a running attempt of the one before, SPEC §8), with the devices
    /// they hold.
    pub fn foreign_held(&self) -> Vec<ForeignGroup> {
        let Some(parent) = self.base.parent() else {
            return Vec::new();
        };
        let Some(ours) = self.base.file_name().and_then(|n| n.to_str()) else {
            return Vec::new();
        };
        // `shareq-<place>-<database>`: the same state directory, another database.
        let Some((place, _)) = ours.rsplit_once('-') else {
            return Vec::new();
        };
        let mut held = Vec::new();
        for scope in list_dirs(parent) {
            if !scope.starts_with(&format!("{place}-")) || scope == ours {
                continue;
            }
            for name in list_dirs(&parent.join(&scope)) {
                let dir = parent.join(&scope).join(&name);
                if members(&dir).is_empty() {
                    continue;
                }
                if let Some((unit, devices)) = parse_group_name(&name) {
                    held.push(ForeignGroup { dir, unit, devices });
                }
            }
        }
        held
    }

    /// The group of attempt `attempt` of `job`, found by its name's prefix (a restarted
    /// scheduler adopting it knows no more).
    pub fn find(&self, job: u64, attempt: u32) -> Option<AttemptGroup> {
        let prefix = format!("j{job}a{attempt}@");
        list_dirs(&self.base)
            .into_iter()
            .find(|n| n.starts_with(&prefix))
            .map(|n| self.attempt(&n))
    }

    /// The attempt (job, attempt) whose group process `pid` is in, in the killing
    /// hierarchy (`/proc/PID/cgroup`), when it is one of this scheduler's: how a process
    /// shows the scheduler which attempt it belongs to (SPEC §14, `shareq checkpoint`). A
    /// group the job made inside its own still names the attempt.
    pub fn attempt_of_process(&self, pid: i32) -> Option<(u64, u32)> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let scope = self.base.file_name()?.to_str()?;
        let path = text.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
            let ours = match self.kill {
                Kill::Unified => id == "0" && controllers.is_empty(),
                Kill::Freezer => controllers.split(',').any(|c| c == "freezer"),
            };
            ours.then_some(path)
        })?;
        let mut parts = path.split('/').skip_while(|p| *p != scope);
        parts.next()?;
        parse_attempt_name(parts.next()?)
    }

    /// Every attempt group of this scheduler (by the names in the killing hierarchy).
    pub fn attempts(&self) -> Vec<AttemptGroup> {
        list_dirs(&self.base)
            .into_iter()
            .filter(|n| parse_group_name(n).is_some())
            .map(|n| self.attempt(&n))
            .collect()
    }

    /// Remove the groups nothing runs in — attempts that ended while no scheduler
    /// watched them, the device sets' groups — then the base directories when nothing is
    /// left in them. A group something runs in is refused by the kernel and stays (a live
    /// attempt, adopted by the scheduler starting).
    pub fn tidy(&self) {
        for b in std::iter::once(&self.base)
            .chain(&self.pids)
            .chain(&self.devices)
        {
            for group in list_dirs(b) {
                let _ = std::fs::remove_dir(b.join(group));
            }
            let _ = std::fs::remove_dir(b);
        }
    }

    /// Is device isolation in force?
    pub fn isolates(&self) -> bool {
        self.devices.is_some()
    }

    /// Why an attempt's processes are not limited (`limits.pidsPerJob`), when they are
    /// not: no usable `pids` controller.
    pub fn no_pids_limit(&self) -> Option<&'static str> {
        (self.pids.is_none() && !self.pids_unified).then_some(NO_PIDS)
    }
}

/// A live attempt group of another scheduler of this state directory: the devices it
/// holds are not this scheduler's to hand out until nothing runs in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignGroup {
    dir: PathBuf,
    pub unit: String,
    pub devices: Vec<u32>,
}

impl ForeignGroup {
    /// Has everything in it ended? Then the (empty) group is removed, so that nothing
    /// names its devices again.
    pub fn ended(&self) -> bool {
        if !members(&self.dir).is_empty() {
            return false;
        }
        let _ = std::fs::remove_dir(&self.dir);
        true
    }
}

fn list_dirs(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    out.sort();
    out
}

/// The pids in a group (`cgroup.procs`).
fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

impl AttemptGroup {
    /// Make the group in every hierarchy; with device isolation, the group of its device
    /// set when this scheduler has not made it yet ([`ensure_device_set`]).
    pub fn create(&self, allowed: &DeviceRules) -> io::Result<()> {
        if let Some(set) = &self.devices {
            ensure_device_set(set, allowed)?;
        }
        for dir in self.own_dirs() {
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Let the attempt hold at most `most` processes and threads at once (made, before
    /// its supervisor starts the command); nothing where processes are not limited
    /// ([`Cgroups::no_pids_limit`]).
    pub fn limit_pids(&self, most: u64) -> io::Result<()> {
        match &self.pids_max {
            Some(file) => std::fs::write(file, most.to_string()).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot limit the processes in {}: {e}", file.display()),
                )
            }),
            None => Ok(()),
        }
    }

    /// The group's directory in every hierarchy (what the supervisor enters).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.own_dirs().chain(self.devices.clone()).collect()
    }

    /// The attempt's own groups: made with it and removed with it.
    fn own_dirs(&self) -> impl Iterator<Item = PathBuf> + '_ {
        std::iter::once(&self.main).chain(&self.others).cloned()
    }

    /// The group's directory in the unified (v2) hierarchy, when that is the killing one:
    /// a process can be started straight into it (`exec::start::clone_into`).
    pub fn unified(&self) -> Option<&Path> {
        (self.kill == Kill::Unified).then_some(self.main.as_path())
    }

    /// Put process `pid` (the supervisor, before it starts the command) in the group.
    pub fn enter(&self, pid: u32) -> io::Result<()> {
        for dir in self.dirs() {
            std::fs::write(dir.join("cgroup.procs"), pid.to_string())?;
        }
        Ok(())
    }

    /// The group's processes.
    pub fn members(&self) -> Vec<i32> {
        members(&self.main)
    }

    /// Does the group exist (a restart finds its attempts again by their groups)?
    pub fn exists(&self) -> bool {
        self.main.is_dir()
    }

    /// Kill every process of the group (whatever session it is in); returns how many
    /// were left to kill.
    pub fn kill(&self) -> usize {
        let left = self.members();
        if left.is_empty() {
            return 0;
        }
        match self.kill {
            Kill::Unified => {
                let _ = std::fs::write(self.main.join("cgroup.kill"), "1");
            }
            Kill::Freezer => {
                // Frozen, nobody can fork a new member while the others are killed.
                let state = self.main.join("freezer.state");
                let _ = std::fs::write(&state, "FROZEN");
                for pid in self.members() {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                let _ = std::fs::write(&state, "THAWED");
            }
        }
        left.len()
    }

    /// Remove the group if it is empty (the kernel refuses to remove one that is not,
    /// which is cheaper to ask than reading its members first); false when something
    /// still runs in it.
    pub fn remove_if_empty(&self) -> bool {
        match std::fs::remove_dir(&self.main) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(_) if self.main.is_dir() => return false,
            Err(_) => {}
        }
        self.remove();
        true
    }

    /// Remove the (empty) group from every hierarchy (the device set's group stays).
    pub fn remove(&self) {
        for dir in self.own_dirs() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Put this process in the attempt's group (`dirs` from the launch spec): the supervisor
/// does this first, so that the command and everything it starts belong to the group.
///
/// How it moves matters for the start's latency. Writing a pid to `cgroup.procs` moves a
/// whole thread group, under the kernel's global `cgroup_threadgroup_rwsem`, whose write
/// side waits for an RCU grace period (8–16 ms measured here, per burst of moves). A v1
/// hierarchy also has `tasks`, where `0` moves only the writing thread, and the kernel
/// (6.1 and later) takes no global lock for that: 0.1 ms. While this process has one
/// thread, that thread is the process, so the result is the same; otherwise (or on the
/// unified hierarchy, which has no `tasks`) it writes `cgroup.procs`.
pub fn enter_self(dirs: &[PathBuf]) -> io::Result<()> {
    let me = std::process::id().to_string();
    let alone = single_threaded();
    for dir in dirs {
        let tasks = dir.join("tasks");
        let moved = if alone && tasks.exists() {
            std::fs::write(&tasks, "0")
        } else {
            std::fs::write(dir.join("cgroup.procs"), &me)
        };
        moved.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot enter the cgroup {}: {e}", dir.display()),
            )
        })?;
    }
    Ok(())
}

/// Has this process one thread (`Threads:` in `/proc/self/status`)? Unknown is no.
fn single_threaded() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .is_some_and(|n| n.trim() == "1")
    })
}

/// Kill what is left in a group until it is empty (its GPUs are released only then),
/// then remove it. Blocking; warns now and then while something survives SIGKILL.
pub fn drain(group: &AttemptGroup) {
    kill_until_none_left(group, || group.kill());
    group.remove();
}

/// [`drain`], but for process `spared`, which stays in the group (a supervisor that
/// waits to hear its status is stored); the group is not removed.
pub fn drain_but(group: &AttemptGroup, spared: i32) {
    kill_until_none_left(group, || {
        let left: Vec<i32> = group
            .members()
            .into_iter()
            .filter(|&p| p != spared)
            .collect();
        for pid in &left {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        left.len()
    });
}

/// Run `kill_round` (which kills what it finds and says how many it found) every 20 ms
/// until it finds nothing, warning now and then while something survives SIGKILL.
fn kill_until_none_left(group: &AttemptGroup, mut kill_round: impl FnMut() -> usize) {
    let mut rounds = 0u32;
    loop {
        let left = kill_round();
        if left == 0 {
            return;
        }
        rounds += 1;
        if rounds.is_multiple_of(200) {
            tracing::warn!(
                group = %group.main.display(),
                left,
                "processes of an ended attempt still run after SIGKILL; its GPUs stay allocated"
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_name_says_what_it_holds() {
        let n = group_name(12, 3, "a100", &[0, 5]);
        assert_eq!(n, "j12a3@a100+0+5");
        assert_eq!(parse_group_name(&n), Some(("a100".into(), vec![0, 5])));
        assert_eq!(parse_group_name("j1a1@gpu"), Some(("gpu".into(), vec![])));
        assert_eq!(parse_group_name("junk"), None);
        assert_eq!(parse_group_name("j1a1@gpu+x"), None);
        assert_eq!(parse_attempt_name(&n), Some((12, 3)));
        assert_eq!(parse_attempt_name("gpus+0"), None);
        assert_eq!(parse_attempt_name("jxa1@gpu"), None);
    }

    #[test]
    fn a_mig_job_may_open_its_parent_and_its_caps_only() {
        let m = crate::exec::containment::mig_caps::MigAccess {
            uuids: vec!["MIG-a".into(), "MIG-b".into()],
            gpus: vec![0],
            caps: vec![12, 13, 21, 22],
        };
        let r = DeviceRules::of(&[0, 1], Some(&m));
        assert_eq!(r.set_name(), "gpus+0+caps+12+13+21+22");
        let lines = r
            .deny_lines(Some(235), &[1, 2, 12, 13, 21, 22, 30, 31])
            .unwrap();
        // Every GPU but the parent, and every other MIG capability (config and monitor
        // included).
        assert_eq!(lines.len(), 253 + 4);
        assert!(!lines.contains(&"c 195:0 rwm".to_string()));
        assert!(lines.contains(&"c 195:1 rwm".to_string()));
        for c in [1, 2, 30, 31] {
            assert!(lines.contains(&format!("c 235:{c} rwm")), "{c}");
        }
        for c in [12, 13, 21, 22] {
            assert!(!lines.contains(&format!("c 235:{c} rwm")), "{c}");
        }
        assert!(r.deny_lines(None, &[1, 12]).is_err());
        // Whole GPUs: the caps devices are not this job's concern (a MIG instance also
        // needs its parent, which is denied).
        let w = DeviceRules::of(&[0, 5], None);
        assert_eq!(w.set_name(), "gpus+0+5");
        assert_eq!(w.deny_lines(Some(235), &[1, 12]).unwrap().len(), 252);
        // Fake instances: no device at all.
        let fake = crate::exec::containment::mig_caps::MigAccess {
            uuids: vec!["MIG-fake-u-0".into()],
            gpus: vec![],
            caps: vec![],
        };
        let f = DeviceRules::of(&[0], Some(&fake));
        assert_eq!(f.deny_lines(None, &[]).unwrap().len(), 254);
    }

    #[test]
    fn the_description_says_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            describe_in(dir.path(), true, false).starts_with("jobs are not contained (no usable")
        );
        assert!(describe_in(dir.path(), false, false).contains("run it as root"));
        std::fs::create_dir_all(dir.path().join("unified")).unwrap();
        std::fs::write(dir.path().join("unified/cgroup.controllers"), "").unwrap();
        let d = describe_in(dir.path(), true, false);
        assert!(
            d.contains("contained (cgroup v2,") && d.contains("GPUs are not isolated"),
            "{d}"
        );
        let d = describe_in(dir.path(), true, true);
        assert!(
            d.contains("(cgroup v2 without favordynmods: each start waits"),
            "{d}"
        );
        assert!(d.contains("no usable pids controller"), "{d}");
        std::fs::write(dir.path().join("unified/cgroup.controllers"), "cpu pids").unwrap();
        let d = describe_in(dir.path(), true, false);
        assert!(d.contains("limited (cgroup v2 pids"), "{d}");
        std::fs::write(dir.path().join("unified/cgroup.controllers"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("pids")).unwrap();
        std::fs::write(dir.path().join("pids/cgroup.procs"), "").unwrap();
        let d = describe_in(dir.path(), true, false);
        assert!(d.contains("limited (cgroup v1 pids"), "{d}");
        std::fs::create_dir_all(dir.path().join("devices")).unwrap();
        std::fs::write(dir.path().join("devices/cgroup.procs"), "").unwrap();
        assert!(describe_in(dir.path(), true, false).contains("GPUs are isolated"));
    }

    #[test]
    fn a_cgroup2_mount_without_favordynmods_has_slow_moves() {
        let info = "31 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n\
                    41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                    42 31 0:39 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
        assert!(slow_moves(info, Path::new("/sys/fs/cgroup/unified")));
        assert!(!slow_moves(info, Path::new("/sys/fs/cgroup/pids")));
        assert!(!slow_moves(info, Path::new("/sys/fs/cgroup")));
        let fast = info.replace("cgroup2 rw\n", "cgroup2 rw,favordynmods\n");
        assert!(!slow_moves(&fast, Path::new("/sys/fs/cgroup/unified")));
    }

    #[test]
    fn without_any_hierarchy_jobs_are_not_contained_and_it_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let c = detect_in(dir.path(), &dir.path().join("none"), "t");
        assert!(matches!(c, Containment::NotContained(_)), "{c:?}");
        assert!(c.warning().unwrap().contains("jobs are not contained"));
    }

    /// On this machine, as root: an attempt group holds a process that escaped into a
    /// new session, kills it, and denies another GPU's device.
    #[test]
    fn a_group_kills_what_left_its_session_and_denies_other_gpus() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: managing cgroups needs root");
            return;
        }
        let scope = format!("unit{}", std::process::id());
        let c = Containment::detect(&scope);
        let Some(cg) = c.cgroups() else {
            eprintln!("skipped: {c:?}");
            return;
        };
        let g = cg.attempt(&group_name(1, 1, "gpu", &[0]));
        g.create(&DeviceRules::gpus(&[0])).unwrap();
        let mut child = std::process::Command::new("setsid")
            .args(["sleep", "300"])
            .spawn()
            .unwrap();
        g.enter(child.id()).unwrap();
        assert_eq!(g.members(), vec![child.id() as i32]);
        let dir = tempfile::tempdir().unwrap();
        let n1 = dir.path().join("nvidia1");
        // From inside the group: EPERM on another GPU.
        let denied_in = |g: &AttemptGroup| {
            let probe = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "echo $$ > {}/cgroup.procs; echo $$ > {}/cgroup.procs; exec cat {}",
                    g.main.display(),
                    g.devices.as_ref().unwrap().display(),
                    n1.display()
                ))
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&probe.stderr).into_owned();
            assert!(err.contains("Operation not permitted"), "{err}");
        };
        if cg.isolates() {
            use std::os::unix::fs::FileTypeExt;
            let mk = std::process::Command::new("mknod")
                .arg(&n1)
                .args(["c", "195", "1"])
                .status()
                .unwrap();
            assert!(mk.success());
            assert!(std::fs::metadata(&n1).unwrap().file_type().is_char_device());
            denied_in(&g);
        }
        assert!(g.kill() >= 1);
        let t = std::time::Instant::now();
        while !g.members().is_empty() {
            assert!(t.elapsed() < std::time::Duration::from_secs(5));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.wait();
        g.remove();
        assert!(!g.exists());
        if cg.isolates() {
            // The device set's group is shared by the attempts holding that set: it
            // stays, and holds no group of the attempt.
            let set = g.devices.as_ref().unwrap();
            assert!(set.is_dir());
            assert_eq!(list_dirs(set), Vec::<String>::new());
            // The rules are the device set's: a second attempt of the same GPUs starts
            // with them, nothing written for it.
            let again = cg.attempt(&group_name(2, 1, "gpu", &[0]));
            again.create(&DeviceRules::gpus(&[0])).unwrap();
            denied_in(&again);
            while again.kill() > 0 {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            again.remove();
        }
        cg.tidy();
        assert!(!cg.base.exists());
    }
}
