//! Every broken config under `tests/invalid_configs/NAME/` must be rejected with exactly
//! the text in its `expected.txt` (one error per line, paths relative to the case).
//! `BLESS=1 cargo test --test it config_invalid` rewrites the expected files for review.

use shareq::config::load_dir;
use std::path::Path;

fn render(case: &Path) -> String {
    match load_dir(case) {
        Ok(_) => "(accepted)\n".to_string(),
        Err(errors) => {
            let prefix = format!("{}/", case.display());
            let mut out = String::new();
            for e in errors {
                let line = e.to_string().replace(&prefix, "");
                out.push_str(&line.replace(&case.display().to_string(), "."));
                out.push('\n');
            }
            out
        }
    }
}

#[test]
fn invalid_configs_give_their_expected_errors() {
    let root = Path::new("tests/invalid_configs");
    let mut cases: Vec<_> = std::fs::read_dir(root)
        .expect("tests/invalid_configs")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 20, "only {} cases", cases.len());
    let bless = std::env::var_os("BLESS").is_some();
    let mut failures = Vec::new();
    for case in &cases {
        let got = render(case);
        let expected_path = case.join("expected.txt");
        if bless {
            std::fs::write(&expected_path, &got).expect("write expected.txt");
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        assert_ne!(got, "(accepted)\n", "{} was accepted", case.display());
        if got != expected {
            failures.push(format!(
                "{}:\n--- expected\n{expected}--- got\n{got}",
                case.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
