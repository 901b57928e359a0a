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

/// `shareq man --dir DIR` writes the main page and one page per subcommand, every page the
/// main one names exists, and `man -l` renders each without a warning (issue 25 item 6).
/// Needs `man`: without it the test says so and passes, unless `SHAREQ_REQUIRE_MAN=1`
/// (CI sets it).
#[test]
fn man_dir_writes_a_page_per_subcommand_and_man_renders_each() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("share/man/man1");
    let (ok, _, err) = shareq(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    let main = std::fs::read_to_string(dir.join("shareq.1")).expect("shareq.1");
    for sub in ["submit", "jobs", "tui", "whatif", "man", "completions"] {
        assert!(
            dir.join(format!("shareq-{sub}.1")).exists(),
            "no shareq-{sub}.1"
        );
    }
    assert!(!dir.join("shareq-__supervise.1").exists());
    // Every shareq-X(1) the main page (printed or written) refers to is there.
    let (ok, printed, _) = shareq(&["man"]);
    assert!(ok);
    for page in [&main, &printed] {
        // roff writes `shareq\-slurm\-conf(1)`.
        let named: Vec<String> = page
            .split("shareq\\-")
            .skip(1)
            .filter_map(|tail| tail.split_once("(1)"))
            .map(|(name, _)| name.replace("\\-", "-"))
            .filter(|name| name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
            .collect();
        assert!(
            named.len() > 10,
            "the main page lists the subcommands' pages"
        );
        for name in named {
            assert!(
                dir.join(format!("shareq-{name}.1")).exists(),
                "the main page names shareq-{name}(1), which is not written"
            );
        }
    }
    if std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("SHAREQ_REQUIRE_MAN").is_none(),
            "SHAREQ_REQUIRE_MAN is set but man is not installed"
        );
        eprintln!("man is not installed: skipping the rendering of the pages");
        return;
    }
    let mut pages = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let out = std::process::Command::new("man")
            .arg("-l")
            .arg(&path)
            .env("MANWIDTH", "80")
            .env("MAN_KEEP_STDERR", "1")
            .env("MANROFFSEQ", "")
            .output()
            .expect("man runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {err}", path.display());
        assert!(err.trim().is_empty(), "{}: {err}", path.display());
        assert!(text.contains("NAME"), "{}:\n{text}", path.display());
        pages += 1;
    }
    assert!(pages > 10, "{pages} pages");
}

/// An unknown `--theme` is refused before the console takes the screen, with the whole
/// list of themes (issue 25 item 11): the header would have cut it.
#[test]
fn an_unknown_theme_is_refused_with_every_choice() {
    for sub in ["tui", "demo"] {
        let (ok, _, err) = shareq(&[sub, "--theme", "solarised"]);
        assert!(!ok, "{sub}");
        for name in [
            "dark",
            "light",
            "high-contrast",
            "colour-blind-safe",
            ".yaml",
        ] {
            assert!(err.contains(name), "{sub}: {err}");
        }
        assert!(err.contains("docs/CONSOLE.md"), "{err}");
    }
}

/// Every subcommand that takes `--state` says what it is (issue 46 item 6): its line in
/// `--help` carries text, not only the option's name.
#[test]
fn every_state_option_has_help_text() {
    let (ok, out, err) = shareq(&["--help"]);
    assert!(ok, "{err}");
    let subs: Vec<String> = out
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|s| s != "help")
        .collect();
    assert!(subs.len() > 10, "{out}");
    let mut with_state = 0;
    for sub in &subs {
        let (ok, out, err) = shareq(&[sub, "--help"]);
        assert!(ok, "{sub}: {err}");
        let lines: Vec<&str> = out.lines().collect();
        let Some(i) = lines.iter().position(|l| l.contains("--state <")) else {
            continue;
        };
        with_state += 1;
        let after = lines[i].split_once('>').map_or("", |(_, rest)| rest).trim();
        let next = lines.get(i + 1).map_or("", |l| l.trim());
        assert!(
            !after.is_empty() || (!next.is_empty() && !next.starts_with('-')),
            "`shareq {sub} --help` says nothing about --state:\n{out}"
        );
    }
    assert!(
        with_state >= 12,
        "only {with_state} subcommands take --state"
    );
}
