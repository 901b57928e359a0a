//! Hot reload with real files and the real watcher: every change is picked up, and the
//! config applied last is always the last good one.

use shareq::config::{ConfigUpdate, LoadedConfig, Watcher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Generous: the CI machine has two cores shared with compilers.
const TIMEOUT: Duration = Duration::from_secs(20);

const ENV: &str = "kind: ServiceEnvironment
name: lab
capacityLimits:
  - capacityUnit: gpu
    maxCapacity: 4
    devices: {fake: 4}
";

fn share(name: &str, cap: u32) -> String {
    format!(
        "kind: QuotaShare
quotaShareName: {name}
capacityLimits:
  - capacityUnit: gpu
    maxCapacity: {cap}
resourceSharingConfiguration:
  strategy: LEND_AND_BORROW
"
    )
}

#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<ConfigUpdate>>>);

impl Seen {
    fn all(&self) -> Vec<ConfigUpdate> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
    fn len(&self) -> usize {
        self.all().len()
    }
    fn last_applied(&self) -> Option<LoadedConfig> {
        self.all().into_iter().rev().find_map(|u| match u {
            ConfigUpdate::Applied(c) => Some(*c),
            ConfigUpdate::Rejected(_) => None,
        })
    }
    /// One line per update, for failure messages.
    fn describe(&self) -> String {
        self.all()
            .iter()
            .map(|u| match u {
                ConfigUpdate::Applied(c) => format!("applied {} {:?}\n", c.hash, limits_of(c)),
                ConfigUpdate::Rejected(e) => format!("rejected {e:?}\n"),
            })
            .collect()
    }
    fn rejections(&self) -> usize {
        self.all()
            .iter()
            .filter(|u| matches!(u, ConfigUpdate::Rejected(_)))
            .count()
    }
    /// Poll until `pred` holds on the updates seen; panics with what was seen otherwise.
    fn wait(&self, what: &str, pred: impl Fn(&[ConfigUpdate]) -> bool) {
        let start = Instant::now();
        while start.elapsed() < TIMEOUT {
            if pred(&self.all()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("timed out waiting for {what}; seen:\n{}", self.describe());
    }
    /// Wait until the last update is an `Applied` whose shares have these limits.
    fn wait_applied(&self, limits: &[(&str, u32)]) {
        self.wait(&format!("applied {limits:?}"), |u| {
            matches!(u.last(), Some(ConfigUpdate::Applied(c)) if limits_of(c) == limits_owned(limits))
        });
    }
}

fn limits_owned(l: &[(&str, u32)]) -> Vec<(String, u32)> {
    l.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

fn limits_of(c: &LoadedConfig) -> Vec<(String, u32)> {
    c.config
        .shares
        .iter()
        .map(|s| {
            (
                s.quota_share_name.clone(),
                s.capacity_limits[0].max_capacity,
            )
        })
        .collect()
}

fn start(dir: &Path) -> (Watcher, Seen) {
    let seen = Seen::default();
    let sink = seen.clone();
    let w = Watcher::start(
        dir.to_path_buf(),
        Box::new(move |u| {
            if let Ok(mut v) = sink.0.lock() {
                v.push(u);
            }
        }),
    )
    .expect("watcher starts");
    (w, seen)
}

fn config_dir(root: &Path) -> PathBuf {
    let dir = root.join("cfg");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("env.yaml"), ENV).expect("write env");
    std::fs::write(dir.join("shares.yaml"), share("qs1", 1)).expect("write shares");
    dir
}

#[test]
fn initial_state_is_delivered_once_and_a_plain_write_is_applied() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = config_dir(root.path());
    let (_w, seen) = start(&dir);
    // Delivered before `start` returned.
    assert_eq!(seen.len(), 1);
    assert_eq!(
        limits_of(&seen.last_applied().expect("applied")),
        limits_owned(&[("qs1", 1)])
    );
    std::fs::write(dir.join("shares.yaml"), share("qs1", 2)).expect("write");
    seen.wait_applied(&[("qs1", 2)]);
    // Saving the same bytes again is not a change.
    let n = seen.len();
    std::fs::write(dir.join("shares.yaml"), share("qs1", 2)).expect("write");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(seen.len(), n, "{}", seen.describe());
}

#[test]
fn rename_over_and_vim_style_saves_are_applied() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = config_dir(root.path());
    let (_w, seen) = start(&dir);
    // Temp file + rename over the original (most editors, `sed -i`, atomic writers).
    let tmp = dir.join(".shares.yaml.tmp");
    std::fs::write(&tmp, share("qs1", 3)).expect("write tmp");
    std::fs::rename(&tmp, dir.join("shares.yaml")).expect("rename");
    seen.wait_applied(&[("qs1", 3)]);
    // vim with `backupcopy=no`: move the original aside, write anew, delete the backup.
    std::fs::rename(dir.join("shares.yaml"), dir.join("shares.yaml~")).expect("backup");
    std::fs::write(dir.join("4913"), "").expect("probe file");
    std::fs::remove_file(dir.join("4913")).expect("rm probe");
    std::fs::write(dir.join("shares.yaml"), share("qs1", 4)).expect("write");
    std::fs::remove_file(dir.join("shares.yaml~")).expect("rm backup");
    seen.wait_applied(&[("qs1", 4)]);
    assert_eq!(seen.rejections(), 0, "{}", seen.describe());
}

#[test]
fn files_created_and_deleted_are_applied() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = config_dir(root.path());
    let (_w, seen) = start(&dir);
    std::fs::create_dir(dir.join("teams")).expect("mkdir teams");
    std::fs::write(dir.join("teams/qs2.yml"), share("qs2", 2)).expect("write");
    seen.wait_applied(&[("qs1", 1), ("qs2", 2)]);
    std::fs::remove_file(dir.join("shares.yaml")).expect("rm");
    seen.wait_applied(&[("qs2", 2)]);
    std::fs::remove_dir_all(dir.join("teams")).expect("rm teams");
    // No shares left is still a valid config (an environment alone).
    seen.wait_applied(&[]);
}

#[test]
fn an_invalid_edit_is_rejected_and_the_fix_applied() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = config_dir(root.path());
    let (_w, seen) = start(&dir);
    let bad = share("qs1", 2).replace("LEND_AND_BORROW", "LEND_AND_BOROW");
    std::fs::write(dir.join("shares.yaml"), bad).expect("write");
    seen.wait("the rejection", |u| {
        matches!(u.last(), Some(ConfigUpdate::Rejected(e))
            if e.len() == 1 && e[0].to_string().ends_with(
                "shares.yaml:7:3: resourceSharingConfiguration.strategy: unknown value `LEND_AND_BOROW`: did you mean `LEND_AND_BORROW`? (expected one of `RESERVE`, `LEND`, `LEND_AND_BORROW`)"))
    });
    // The config in force is still the last good one.
    assert_eq!(
        limits_of(&seen.last_applied().expect("applied")),
        limits_owned(&[("qs1", 1)])
    );
    // The editor's swap file changes nothing: the same rejection is not repeated.
    let n = seen.len();
    std::fs::write(dir.join(".shares.yaml.swp"), "b0VIM 9.0").expect("write swap");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(seen.len(), n, "{}", seen.describe());
    std::fs::write(dir.join("shares.yaml"), share("qs1", 2)).expect("write");
    seen.wait_applied(&[("qs1", 2)]);
}

#[test]
fn a_removed_and_recreated_directory_is_watched_again() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = config_dir(root.path());
    let (_w, seen) = start(&dir);
    std::fs::remove_dir_all(&dir).expect("rm dir");
    seen.wait("the rejection of the missing directory", |u| {
        matches!(u.last(), Some(ConfigUpdate::Rejected(e))
            if e[0].message.contains("cannot read config directory"))
    });
    assert_eq!(
        limits_of(&seen.last_applied().expect("applied")),
        limits_owned(&[("qs1", 1)])
    );
    std::fs::create_dir(&dir).expect("mkdir again");
    std::fs::write(dir.join("env.yaml"), ENV).expect("write env");
    std::fs::write(dir.join("shares.yaml"), share("qs1", 3)).expect("write");
    seen.wait_applied(&[("qs1", 3)]);
    // And the new directory's watch works for later edits too.
    std::fs::write(dir.join("shares.yaml"), share("qs1", 4)).expect("write");
    seen.wait_applied(&[("qs1", 4)]);
}

#[test]
fn a_burst_of_saves_ends_on_the_last_one() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = config_dir(root.path());
    let (_w, seen) = start(&dir);
    for cap in 1..=40 {
        std::fs::write(dir.join("shares.yaml"), share("qs1", cap)).expect("write");
        std::thread::sleep(Duration::from_millis(2));
    }
    seen.wait_applied(&[("qs1", 40)]);
    // Debounced: far fewer deliveries than saves.
    assert!(seen.len() < 20, "{} updates", seen.len());
}

#[test]
fn a_half_written_file_is_never_applied() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = config_dir(root.path());
    let (_w, seen) = start(&dir);
    let full = format!("{}---\n{}", share("qs1", 2), share("qs2", 1));
    // Cut right after the first document: the first half alone is a *valid* config
    // (only qs1), so nothing but waiting for the writer keeps it from being applied.
    let cut = full.find("---\n").expect("cut") + 4;
    {
        use std::io::Write;
        let mut f = std::fs::File::create(dir.join("shares.yaml")).expect("create");
        f.write_all(&full.as_bytes()[..cut]).expect("write half");
        f.flush().expect("flush");
        std::thread::sleep(Duration::from_millis(40));
        f.write_all(&full.as_bytes()[cut..]).expect("write rest");
    }
    seen.wait_applied(&[("qs1", 2), ("qs2", 1)]);
    assert_eq!(
        seen.len(),
        2,
        "a partial read was delivered:\n{}",
        seen.describe()
    );
}

#[test]
fn a_missing_directory_at_start_is_applied_once_created() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("later");
    let (_w, seen) = start(&dir);
    assert!(matches!(seen.all().as_slice(), [ConfigUpdate::Rejected(_)]));
    config_dir(root.path());
    std::fs::rename(root.path().join("cfg"), &dir).expect("rename into place");
    seen.wait_applied(&[("qs1", 1)]);
}

#[test]
fn reload_now_delivers_and_drop_stops_watching() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = config_dir(root.path());
    let (w, seen) = start(&dir);
    w.reload_now();
    seen.wait("the forced reload", |u| u.len() == 2);
    drop(w);
    let n = seen.len();
    std::fs::write(dir.join("shares.yaml"), share("qs1", 3)).expect("write");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(seen.len(), n);
}

#[cfg(unix)]
#[test]
fn a_configmap_style_symlink_swap_is_applied() {
    use std::os::unix::fs::symlink;
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("cfg");
    let v1 = dir.join("..2026_v1");
    std::fs::create_dir_all(&v1).expect("mkdir");
    std::fs::write(v1.join("env.yaml"), ENV).expect("write env");
    std::fs::write(v1.join("shares.yaml"), share("qs1", 1)).expect("write shares");
    symlink("..2026_v1", dir.join("..data")).expect("link data");
    symlink("..data/env.yaml", dir.join("env.yaml")).expect("link env");
    symlink("..data/shares.yaml", dir.join("shares.yaml")).expect("link shares");
    let (_w, seen) = start(&dir);
    assert_eq!(
        limits_of(&seen.last_applied().expect("applied")),
        limits_owned(&[("qs1", 1)])
    );
    // What the kubelet does on an update: a new hidden version, then swap `..data`.
    let v2 = dir.join("..2026_v2");
    std::fs::create_dir(&v2).expect("mkdir v2");
    std::fs::write(v2.join("env.yaml"), ENV).expect("write env");
    std::fs::write(v2.join("shares.yaml"), share("qs1", 3)).expect("write shares");
    symlink("..2026_v2", dir.join("..data_tmp")).expect("link tmp");
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).expect("swap");
    std::fs::remove_dir_all(&v1).expect("rm v1");
    seen.wait_applied(&[("qs1", 3)]);
    assert_eq!(seen.rejections(), 0, "{}", seen.describe());
}

#[test]
fn the_watcher_can_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Watcher>();
}
