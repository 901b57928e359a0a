//! The Philly trace scaled down, shared by the benches that replay it (`semantics`,
//! `forecast`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches/data")
        .join(name)
}

/// Divide every `maxCapacity` and `fake:` count by `div`; enable in-share preemption.
pub fn scale(value: &mut serde_yaml::Value, div: u64, in_share: bool) {
    match value {
        serde_yaml::Value::Mapping(m) => {
            for (k, v) in m.iter_mut() {
                match (k.as_str(), &*v) {
                    (Some("maxCapacity" | "fake"), serde_yaml::Value::Number(n)) => {
                        let n = n.as_u64().unwrap_or(0);
                        *v = serde_yaml::Value::from((n / div).max(1));
                    }
                    (Some("inSharePreemption"), _) if in_share => {
                        *v = serde_yaml::Value::from("ENABLED");
                    }
                    _ => scale(v, div, in_share),
                }
            }
        }
        serde_yaml::Value::Sequence(s) => s.iter_mut().for_each(|v| scale(v, div, in_share)),
        _ => {}
    }
}

/// The trace with a `schedulingPriority` column drawn from 0..=3 (a fixed xorshift seed,
/// so every run and every build sees the same priorities).
pub fn with_priorities(csv: &str) -> String {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = String::with_capacity(csv.len() + csv.len() / 8);
    for (i, line) in csv.lines().enumerate() {
        out.push_str(line);
        if i == 0 {
            out.push_str(",schedulingPriority");
        } else {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            out.push_str(&format!(",{}", state % 4));
        }
        out.push('\n');
    }
    out
}

pub fn write_scenario(dir: &Path, name: &str, priorities: bool) -> PathBuf {
    write_variant(dir, name, priorities, &[])
}

/// [`write_scenario`] with fields of the ServiceEnvironment set (a path of keys, value):
/// e.g. `(&["preemption", "spreadSeconds"], 0)` to measure a rule against its absence.
pub fn write_variant(dir: &Path, name: &str, priorities: bool, env: &[(&[&str], u64)]) -> PathBuf {
    let text = std::fs::read_to_string(data("philly.yaml")).expect("scenario");
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
    scale(&mut doc, 8, priorities);
    if let Some(configs) = doc.get_mut("config").and_then(|c| c.as_sequence_mut()) {
        for c in configs.iter_mut() {
            if c.get("kind").and_then(|k| k.as_str()) != Some("ServiceEnvironment") {
                continue;
            }
            for (path, value) in env {
                let mut at = &mut *c;
                for key in &path[..path.len() - 1] {
                    let m = at.as_mapping_mut().expect("a mapping");
                    at = m
                        .entry((*key).into())
                        .or_insert_with(|| serde_yaml::Mapping::new().into());
                }
                if let Some(m) = at.as_mapping_mut() {
                    m.insert(path[path.len() - 1].into(), (*value).into());
                }
            }
        }
    }
    let csv = std::fs::read_to_string(data("philly.csv")).expect("trace");
    let trace = format!("{name}.csv");
    let csv = if priorities {
        with_priorities(&csv)
    } else {
        csv
    };
    std::fs::write(dir.join(&trace), csv).expect("write trace");
    if let serde_yaml::Value::Mapping(m) = &mut doc {
        m.insert("trace".into(), trace.into());
        m.insert(
            "description".into(),
            format!(
                "Philly trace at 1/8 of its capacity{}",
                if priorities {
                    ", random priorities 0-3, in-share preemption enabled"
                } else {
                    ""
                }
            )
            .into(),
        );
    }
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, serde_yaml::to_string(&doc).expect("yaml")).expect("write");
    path
}
