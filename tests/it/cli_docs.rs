//! Shell completions and the manual page, generated from the command line itself, so they
//! can never drift from it.

use std::process::Command;

fn shareq(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shareq"))
        .args(args)
        .output()
        .expect("shareq runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn completions_know_every_subcommand() {
    for (shell, marker) in [
        ("bash", "_shareq()"),
        ("zsh", "#compdef shareq"),
        ("fish", "complete -c shareq"),
    ] {
        let (ok, out, err) = shareq(&["completions", shell]);
        assert!(ok, "{shell}: {err}");
        assert!(out.contains(marker), "{shell}:\n{out}");
        for sub in [
            "submit", "cancel", "jobs", "replay", "check", "serve", "audit", "history", "since",
            "until",
        ] {
            assert!(out.contains(sub), "{shell} completion lacks {sub}");
        }
        assert!(
            !out.contains("__supervise"),
            "the hidden supervisor is not offered"
        );
    }
    let (ok, _, err) = shareq(&["completions", "tcsh"]);
    assert!(!ok && err.contains("possible values"), "{err}");
}

#[test]
fn the_man_page_describes_the_commands() {
    let (ok, out, err) = shareq(&["man"]);
    assert!(ok, "{err}");
    assert!(out.contains(".TH shareq 1"), "{out}");
    for sub in ["submit", "replay", "demo", "history"] {
        assert!(out.contains(sub), "the man page lacks {sub}");
    }
}
