//! What one user's job can reach of the scheduler and of the others (issue 44: 2, 6, 8),
//! with real users and real processes under a root scheduler (the `multi_user` lab):
//! no descriptor that serve inherited reaches a job, and a setuid program gives a job
//! nothing (`no_new_privs`); a fork bomb stops at `limits.pidsPerJob` while the scheduler
//! answers and another user's job runs; `--cwd` is checked as the submitter (a directory
//! they may not enter reads as a missing one) and a relative one is the caller's.

use super::multi_user::{Lab, Users, id_of, skip_reason, text};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

macro_rules! root_only {
    () => {
        if let Some(why) = skip_reason() {
            eprintln!(
                "skipping {}: {why} (these tests need root to create users)",
                module_path!()
            );
            return;
        }
    };
}

/// The lab's config: `open` lets everyone submit; with `limits` in the environment.
fn config(limits: &str) -> String {
    format!(
        "kind: ServiceEnvironment\nname: lab\ncapacityLimits:\n  - {{capacityUnit: gpu, maxCapacity: 4, devices: {{fake: 4}}}}\n\
         preemption: {{gracePeriodSeconds: 1}}\n{limits}---\n\
         kind: QuotaShare\nquotaShareName: open\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 4}}]\n\
         resourceSharingConfiguration: {{strategy: LEND_AND_BORROW}}\n"
    )
}

/// The CLI as `user` in directory `dir`.
fn cli_in(lab: &Lab, user: &str, dir: &Path, args: &[&str]) -> Output {
    Command::new("runuser")
        .args(["-u", user, "--"])
        .arg(&lab.bin)
        .args(&args[..1])
        .arg("--state")
        .arg(&lab.state)
        .args(&args[1..])
        .current_dir(dir)
        .env_remove("SHAREQ_STATE")
        .stdin(Stdio::null())
        .output()
        .expect("run the shareq CLI")
}

/// A directory owned by `uid` with `mode`.
fn dir_of(path: &Path, uid: u32, mode: u32) {
    std::fs::create_dir_all(path).unwrap();
    std::os::unix::fs::chown(path, Some(uid), None).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_job_inherits_no_descriptor_of_serve_and_no_way_to_gain_privileges() {
    root_only!();
    let u = Users::create(&["alice"], &[]);
    let alice = u.name("alice");
    let mut lab = Lab::new();
    lab.write_config(&config(""));
    // A root-only file, open on descriptor 7 of whoever starts serve.
    let secret = lab.root.join("secret.txt");
    std::fs::write(&secret, "TOPSECRET\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let held = std::fs::File::open(&secret).unwrap();
    let raw = held.as_raw_fd();
    lab.serve_adjusted(&[], |cmd| {
        // SAFETY: dup2 only, in the child before its exec.
        unsafe {
            cmd.pre_exec(move || {
                if nix::libc::dup2(raw, 7) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
    .expect("serve");
    drop(held);
    // serve itself let go of it at its start.
    let pid = lab.serve.as_ref().unwrap().id();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    for fd in fds.flatten() {
        let to = std::fs::read_link(fd.path()).unwrap_or_default();
        assert_ne!(to, secret, "serve still holds the inherited descriptor");
    }

    // A job that lists its shell's descriptors, reads descriptor 7 and says whether it
    // may gain privileges; as alice (forked, privileges dropped) and as root (spawned).
    let probe = "echo BEGIN; ls /proc/$$/fd; echo END; cat <&7 || echo NO7; \
                 grep NoNewPrivs /proc/self/status";
    let as_alice = id_of(&lab.submit_as(&alice, "open", "fds", probe));
    let as_root = id_of(&lab.cli_as(
        None,
        &["submit", "--share", "open", "--name", "fds", "--", probe],
    ));
    for id in [as_alice, as_root] {
        lab.wait_state(id, &["SUCCEEDED", "FAILED"]);
        let log = lab.log(id);
        let fds: Vec<&str> = log
            .lines()
            .skip_while(|l| *l != "BEGIN")
            .skip(1)
            .take_while(|l| *l != "END")
            .collect();
        assert_eq!(fds, ["0", "1", "2"], "job {id}: {log}");
        assert!(!log.contains("TOPSECRET"), "job {id} read it: {log}");
        assert!(log.contains("NO7"), "job {id}: {log}");
        assert!(
            log.lines()
                .any(|l| l.split_whitespace().eq(["NoNewPrivs:", "1"])),
            "job {id}: {log}"
        );
    }
}

#[test]
fn a_fork_bomb_stops_at_its_limit_while_the_scheduler_and_others_go_on() {
    root_only!();
    let u = Users::create(&["alice", "bob"], &[]);
    let (alice, bob) = (u.name("alice"), u.name("bob"));
    let mut lab = Lab::new();
    lab.write_config(&config("limits: {pidsPerJob: 16}\n"));
    lab.serve().expect("serve");
    let err = std::fs::read_to_string(lab.root.join("serve.err")).unwrap_or_default();
    if err.contains("no usable pids controller") || err.contains("jobs are not contained") {
        eprintln!("skipping: processes cannot be limited here: {err}");
        return;
    }
    // 200 background processes, far past the 16 its attempt may hold; each one lives a
    // minute, so the bomb keeps its slots until the attempt ends.
    let bomb = id_of(&lab.submit_as(
        &alice,
        "open",
        "bomb",
        "i=0; while [ $i -lt 200 ]; do sleep 60 & i=$((i+1)); done; echo all forked; wait",
    ));
    // The scheduler answers, and bob's job runs meanwhile.
    let t = Instant::now();
    let other = id_of(&lab.submit_as(&bob, "open", "other", "echo bob ran"));
    lab.wait_state(other, &["SUCCEEDED"]);
    assert!(t.elapsed() < Duration::from_secs(30));
    assert_eq!(lab.log(other).trim_end(), "bob ran");
    let j = lab.wait_state(bomb, &["FAILED", "SUCCEEDED"]);
    let log = lab.log(bomb);
    assert!(
        log.to_lowercase().contains("fork") && !log.contains("all forked"),
        "the bomb was not stopped: {j} {log}"
    );
}

#[test]
fn the_working_directory_is_checked_as_the_submitter_and_a_relative_one_is_theirs() {
    root_only!();
    let u = Users::create(&["alice"], &[]);
    let alice = u.name("alice");
    let mut lab = Lab::new();
    lab.write_config(&config(""));
    lab.serve().expect("serve");
    let home = lab.root.join("alice");
    dir_of(&home, u.uid("alice"), 0o700);
    dir_of(&home.join("sub"), u.uid("alice"), 0o755);
    let hidden = lab.root.join("hidden");
    dir_of(&hidden, 0, 0o700);
    dir_of(&hidden.join("inside"), 0, 0o755);

    // A directory she may not enter reads exactly as one that does not exist.
    let refused = |dir: &str| {
        let out = cli_in(
            &lab,
            &alice,
            &home,
            &["submit", "--share", "open", "--cwd", dir, "--", "true"],
        );
        assert!(
            !out.status.success(),
            "{dir} accepted: {}",
            text(&out.stdout)
        );
        text(&out.stderr).replace(dir, "DIR")
    };
    let missing = refused("/nonexistent-shareq-dir");
    assert!(missing.contains("is not a directory"), "{missing}");
    for dir in [
        "/root".to_string(),
        hidden.display().to_string(),
        hidden.join("inside").display().to_string(),
    ] {
        if dir == "/root"
            && std::fs::metadata("/root").is_ok_and(|m| m.permissions().mode() & 0o001 != 0)
        {
            continue;
        }
        assert_eq!(refused(&dir), missing, "{dir}");
    }

    // A relative one is the caller's: `sub` of her own directory.
    let id = id_of(&cli_in(
        &lab,
        &alice,
        &home,
        &["submit", "--share", "open", "--cwd", "sub", "--", "pwd"],
    ));
    lab.wait_state(id, &["SUCCEEDED"]);
    assert_eq!(
        lab.log(id).trim_end(),
        home.join("sub").display().to_string()
    );
}
