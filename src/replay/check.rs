//! `shareq replay --check`: compare a run's lines with the scenario's `expect:` and explain
//! any difference in a form a person can read.

use super::scenario::Expect;
use serde_json::{Map, Value};

/// The verdict, and the readable diff when it fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    pub ok: bool,
    pub text: String,
}

fn matches(expected: &Map<String, Value>, actual: &Map<String, Value>) -> bool {
    expected.iter().all(|(k, v)| actual.get(k) == Some(v))
}

fn show(m: &Map<String, Value>) -> String {
    Value::Object(m.clone()).to_string()
}

/// The fields of `actual` that `expected` names, for a compact side-by-side.
fn project(expected: &Map<String, Value>, actual: &Map<String, Value>) -> Map<String, Value> {
    expected
        .keys()
        .map(|k| (k.clone(), actual.get(k).cloned().unwrap_or(Value::Null)))
        .collect()
}

/// Check the lines of a run against `expect`.
pub fn check(expect: &Expect, lines: &[String]) -> CheckReport {
    let parsed: Vec<Map<String, Value>> = lines
        .iter()
        .filter_map(|l| match serde_json::from_str::<Value>(l) {
            Ok(Value::Object(m)) => Some(m),
            _ => None,
        })
        .collect();
    let mut text = String::new();
    let mut ok = true;
    if let Some(exp) = &expect.preempted {
        let actual: Vec<&Map<String, Value>> = parsed
            .iter()
            .filter(|m| m.get("event").and_then(Value::as_str) == Some("preempted"))
            .collect();
        let same = exp.len() == actual.len() && exp.iter().zip(&actual).all(|(e, a)| matches(e, a));
        if !same {
            ok = false;
            text.push_str(&format!(
                "preemptions differ: expected {}, got {}\n",
                exp.len(),
                actual.len()
            ));
            for i in 0..exp.len().max(actual.len()) {
                let e = exp.get(i);
                let a = actual.get(i);
                let mark = match (e, a) {
                    (Some(e), Some(a)) if matches(e, a) => "  ",
                    _ => "≠ ",
                };
                let es = e.map_or("(none)".to_string(), show);
                let as_ = match (e, a) {
                    (Some(e), Some(a)) => show(&project(e, a)),
                    (None, Some(a)) => show(a),
                    (_, None) => "(none)".to_string(),
                };
                text.push_str(&format!(
                    "{mark}#{}\n    expected {es}\n    actual   {as_}\n",
                    i + 1
                ));
            }
        }
    }
    for e in &expect.include {
        if parsed.iter().any(|a| matches(e, a)) {
            continue;
        }
        ok = false;
        text.push_str(&format!("missing line: {}\n", show(e)));
        // The closest lines: same event and job.
        let near: Vec<&Map<String, Value>> = parsed
            .iter()
            .filter(|a| {
                a.get("job") == e.get("job")
                    && (e.get("event").is_none() || a.get("event") == e.get("event"))
            })
            .take(5)
            .collect();
        if near.is_empty() {
            let job = e.get("job").map(Value::to_string).unwrap_or_default();
            text.push_str(&format!("    no line has that event for job {job}\n"));
        }
        for a in near {
            text.push_str(&format!("    nearest: {}\n", show(a)));
        }
    }
    if ok {
        text.push_str("ok: every expectation holds\n");
    }
    CheckReport { ok, text }
}
