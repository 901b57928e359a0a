//! A non-root admin runs `whatif` and `check --against` on the system scheduler, whose
//! database only root can read (issue 46): the CLI asks the scheduler, which serves them
//! to admins; everyone else is refused with both causes (the database is root's, and who
//! may ask). Real users of a root scheduler, as in `multi_user`.

use crate::multi_user::{Lab, Users, id_of, skip_reason, text};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};

fn config(u: &Users, qs2: &str) -> String {
    format!(
        "kind: ServiceEnvironment\nname: lab\ncapacityLimits:\n  - {{capacityUnit: gpu, maxCapacity: 2, devices: {{fake: 2}}}}\n\
         admins: [\"@{group}\"]\n---\n\
         kind: QuotaShare\nquotaShareName: qs1\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 1}}]\n\
         resourceSharingConfiguration: {{strategy: LEND_AND_BORROW}}\n---\n\
         kind: QuotaShare\nquotaShareName: qs2\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 1}}]\n\
         resourceSharingConfiguration: {{strategy: {qs2}}}\n",
        group = u.group(),
    )
}

/// The CLI as `user`, arguments as given (`check` takes no `--state`).
fn run_as(lab: &Lab, user: &str, args: &[&str]) -> Output {
    Command::new("runuser")
        .args(["-u", user, "--"])
        .arg(lab.bin())
        .args(args)
        .current_dir(&lab.root)
        .env_remove("SHAREQ_STATE")
        .stdin(Stdio::null())
        .output()
        .expect("run the shareq CLI")
}

#[test]
fn a_non_root_admin_gets_whatif_and_check_against_from_the_scheduler() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping {}: {why} (needs real users)", module_path!());
        return;
    }
    let u = Users::create(&["alice", "carol"], &["carol"]);
    let (alice, carol) = (u.name("alice"), u.name("carol"));
    let mut lab = Lab::new();
    lab.write_config(&config(&u, "LEND"));
    lab.serve().expect("serve");
    // Some history: two jobs that ran.
    for name in ["a", "b"] {
        let id = id_of(&lab.submit_as(&alice, "qs1", name, "true"));
        lab.wait_state(id, &["SUCCEEDED"]);
    }
    let running = id_of(&lab.submit_as(&alice, "qs2", "long", "sleep 60"));
    lab.wait_state(running, &["RUNNING"]);
    // A proposed config every user can read: qs2 keeps its GPU (RESERVE).
    let proposed = lab.root.join("proposed");
    std::fs::create_dir_all(&proposed).unwrap();
    std::fs::set_permissions(&proposed, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = proposed.join("config.yaml");
    std::fs::write(&file, config(&u, "RESERVE")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let state = lab.state().display().to_string();
    let dir = proposed.display().to_string();
    let db = lab.state().join("shareq.db").display().to_string();
    let whatif = [
        "whatif", "--config", &dir, "--since", "1h", "--state", &state,
    ];
    let check = ["check", &dir, "--against", &state];

    // The admin, not root, cannot read the database: the scheduler answers instead.
    let out = run_as(&lab, &carol, &whatif);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("what if: the last 1h of history, replayed under"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains(&format!(
            "note: only root can read the database {db}; asked the scheduler (you are an admin)"
        )),
        "{}",
        text(&out.stderr)
    );
    // The same result as root's, who reads the database itself.
    let mine = lab.cli_as(
        None,
        &["whatif", "--config", &dir, "--since", "1h", "--json"],
    );
    let theirs = run_as(&lab, &carol, &[&whatif[..], &["--json"]].concat());
    assert!(mine.status.success(), "{}", text(&mine.stderr));
    let (a, b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_slice(&mine.stdout).unwrap(),
        serde_json::from_slice(&theirs.stdout).unwrap(),
    );
    assert_eq!(
        a["current"], b["current"],
        "root's and the admin's what-ifs agree"
    );
    assert!(!a["current"].is_null(), "{a}");

    let out = run_as(&lab, &carol, &check);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains(&format!(
            "against {state} (the jobs its database holds now; nothing is changed):"
        )),
        "{said}"
    );
    let as_root = Command::new(lab.bin())
        .args(check)
        .output()
        .expect("check as root");
    let tail = |s: &str| {
        s.split_once("\nagainst ")
            .map(|(_, t)| t.to_string())
            .unwrap_or_default()
    };
    assert_eq!(tail(&said), tail(&text(&as_root.stdout)), "{said}");

    // A user who is not an admin: both causes, who may, exit 3.
    for args in [&whatif[..], &check[..]] {
        let out = run_as(&lab, &alice, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "only root can read the database {db}, and the scheduler serves this to admins only: {alice} may not"
            )) && err.contains(&format!("only admins may (admins: @{})", u.group())),
            "{args:?}: {err}"
        );
    }

    // With no scheduler to ask, the admin is told why and what to do.
    if let Some(mut c) = lab.serve.take() {
        let pid = nix::unistd::Pid::from_raw(c.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = c.wait();
    }
    let out = run_as(&lab, &carol, &whatif);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "only root can read the database {db}; the scheduler serves this to admins, but it cannot be asked"
        )),
        "{err}"
    );
}
