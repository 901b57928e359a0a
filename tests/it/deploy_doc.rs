//! docs/DEPLOY.md, run as written (issue 25 item 1): step 2's commands, with `sudo` left
//! out and `/etc/shareq`, `/var/lib/shareq` moved under a scratch root, then the unit's
//! `ExecStart` on the result. The config they install must hold the example's shares, and
//! the scheduler must come up with them and with step 3's permissions. A config with no
//! share at all is valid but warned about, by `check` and in `serve`'s log. Needs root
//! (the doc's commands are root's); skips with a message otherwise.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_shareq");

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The first ```sh block after the heading `heading` in docs/DEPLOY.md.
fn sh_block(heading: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/DEPLOY.md"))
        .expect("docs/DEPLOY.md");
    let after = &doc[doc
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?}"))..];
    let start = after.find("```sh\n").expect("a sh block") + 6;
    let block = &after[start..];
    let end = block.find("```").expect("the block ends");
    block[..end].lines().map(str::to_string).collect()
}

/// A doc line as run here: no `sudo`, the system paths under `root`.
fn localise(line: &str, root: &Path) -> String {
    let r = root.display();
    line.replace("sudo ", "")
        .replace("/etc/shareq", &format!("{r}/etc/shareq"))
        .replace("/var/lib/shareq", &format!("{r}/var/lib/shareq"))
}

/// Run `line` with bash in the repository, `shareq` being this build.
fn run(line: &str) -> std::process::Output {
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("bash")
        .args(["-euo", "pipefail", "-c", line])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .expect("bash runs")
}

#[test]
fn deploy_step_2_installs_every_share_and_the_unit_starts_on_it() {
    if !is_root() {
        eprintln!("not root: skipping the DEPLOY.md walk-through (its commands are root's)");
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let mut check_out = String::new();
    for line in sh_block("## 2. The config directory") {
        let line = localise(&line, root);
        let out = run(&line);
        assert!(
            out.status.success(),
            "`{line}` failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if line.contains("shareq check") {
            check_out = String::from_utf8_lossy(&out.stdout).into_owned();
        }
    }
    assert!(
        check_out.contains("(5 files, 4 quota shares"),
        "step 2 installs the example's environment and its four teams:\n{check_out}"
    );
    assert!(!check_out.contains("no QuotaShare"), "{check_out}");
    let etc = root.join("etc/shareq");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&etc), 0o755);
    assert_eq!(mode(&etc.join("teams")), 0o755);
    assert_eq!(mode(&etc.join("teams/vision.yaml")), 0o644);

    // Step 3: the unit's ExecStart, on the installed config.
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/assets/shareq.service"
    ))
    .unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    let exec = localise(exec, root).replace("/usr/local/bin/shareq", BIN);
    let log = root.join("serve.err");
    let mut serve = Command::new("bash")
        .args(["-c", &format!("exec {exec} 2>{}", log.display())])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let state = root.join("var/lib/shareq");
    let sock = state.join("shareq.sock");
    let t = Instant::now();
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        if t.elapsed() > Duration::from_secs(20) {
            let _ = serve.kill();
            panic!(
                "the unit's serve did not start: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = Command::new(BIN)
        .args(["status", "--state"])
        .arg(&state)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    let dir_mode = mode(&state);
    let sock_mode = mode(&sock);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let _ = serve.wait();
    for share in ["vision", "nlp", "students", "interactive"] {
        assert!(text.contains(share), "status lists {share}:\n{text}");
    }
    assert_eq!(dir_mode, 0o711, "drwx--x--x as step 3 shows");
    assert_eq!(sock_mode, 0o666, "srw-rw-rw- as step 3 shows");
}

/// The doc's old step 2 (`cp …/*.yaml`, which leaves `teams/` behind): `check` still says
/// valid, but warns that there is no share, and so does `serve` at start.
#[test]
fn a_config_without_shares_is_warned_about_by_check_and_serve() {
    let scratch = tempfile::tempdir().unwrap();
    let cfg = scratch.path().join("config");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/sample-configs/lab-8gpu/environment.yaml"
        ),
        cfg.join("environment.yaml"),
    )
    .unwrap();
    let out = Command::new(BIN).arg("check").arg(&cfg).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("0 quota shares"), "{text}");
    assert!(
        text.contains("warnings:") && text.contains("no QuotaShare in this config"),
        "{text}"
    );
    let state = scratch.path().join("state");
    let log = scratch.path().join("serve.err");
    let mut serve = Command::new(BIN)
        .arg("serve")
        .arg("--config")
        .arg(&cfg)
        .arg("--state")
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let said = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("no QuotaShare in this config") || t.elapsed() > Duration::from_secs(20) {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(said.contains("no QuotaShare in this config"), "{said}");
}
