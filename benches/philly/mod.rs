//! The Philly trace scaled down, shared by the benches that replay it (`semantics`,
//! `forecast`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Replay a scenario file with `--summary`: its output lines, the summary line parsed, and
/// how long the replay took.
pub fn replay_summary(path: &Path) -> (String, serde_json::Value, std::time::Duration) {
    let sc = shareq::replay::Scenario::load(path).expect("scenario loads");
    let start = std::time::Instant::now();
    let mut out = Vec::new();
    shareq::replay::run(
        &sc,
        &mut out,
        shareq::replay::Options {
            summary: true,
            keep_lines: false,
        },
    )
    .expect("runs");
    let elapsed = start.elapsed();
    let text = String::from_utf8(out).expect("utf-8");
    let summary = serde_json::from_str(text.lines().last().expect("summary")).expect("json");
    (text, summary, elapsed)
}

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

/// The trace with a `checkpointEverySeconds` column (SPEC §14): `every` for each job that
/// runs longer than `longer_than` seconds, empty (no checkpoints) for the others.
pub fn with_checkpoints(csv: &str, longer_than: i64, every: u64) -> String {
    let mut out = String::with_capacity(csv.len() + csv.len() / 8);
    let mut duration_col = 1;
    for (i, line) in csv.lines().enumerate() {
        out.push_str(line);
        if i == 0 {
            duration_col = line.split(',').position(|c| c == "duration").unwrap_or(1);
            out.push_str(",checkpointEverySeconds");
        } else {
            let d: i64 = line
                .split(',')
                .nth(duration_col)
                .and_then(|d| d.parse().ok())
                .unwrap_or(0);
            out.push(',');
            if d > longer_than {
                out.push_str(&every.to_string());
            }
        }
        out.push('\n');
    }
    out
}

/// The 1/8 scenario with checkpoints ([`with_checkpoints`], when `every` is given) and a
/// notice of `notice` seconds (SIGUSR1) on every share.
pub fn write_checkpoint_variant(
    dir: &Path,
    name: &str,
    every: Option<(i64, u64)>,
    notice: Option<u32>,
) -> PathBuf {
    let path = write_variant(dir, name, false, &[]);
    let text = std::fs::read_to_string(&path).expect("scenario");
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
    if let (Some(secs), Some(configs)) = (
        notice,
        doc.get_mut("config").and_then(|c| c.as_sequence_mut()),
    ) {
        for c in configs.iter_mut() {
            if c.get("kind").and_then(|k| k.as_str()) != Some("QuotaShare") {
                continue;
            }
            let Some(m) = c.as_mapping_mut() else {
                continue;
            };
            let pc = m
                .entry("preemptionConfiguration".into())
                .or_insert_with(|| serde_yaml::Mapping::new().into());
            if let Some(pc) = pc.as_mapping_mut() {
                let mut n = serde_yaml::Mapping::new();
                n.insert("signal".into(), "SIGUSR1".into());
                n.insert("seconds".into(), u64::from(secs).into());
                pc.insert("notice".into(), n.into());
            }
        }
    }
    if let Some((longer_than, c)) = every {
        let trace = dir.join(format!("{name}.csv"));
        let csv = std::fs::read_to_string(&trace).expect("trace");
        std::fs::write(&trace, with_checkpoints(&csv, longer_than, c)).expect("write trace");
    }
    std::fs::write(&path, serde_yaml::to_string(&doc).expect("yaml")).expect("write");
    path
}

/// Users per share in [`with_users`].
pub const USERS_PER_SHARE: usize = 8;

/// The trace with a `user` column: each job's submitter is one of [`USERS_PER_SHARE`]
/// users of its share (`<share>/u0` … `u7`), drawn from a Zipf law (user k with weight
/// 1/(k+1), so u0 submits about a third of a share's jobs and u7 a twentieth) by a fixed
/// xorshift seed: the trace has no user column, and every run and build sees the same
/// users.
pub fn with_users(csv: &str) -> String {
    let weights: Vec<f64> = (0..USERS_PER_SHARE).map(|k| 1.0 / (k + 1) as f64).collect();
    let total: f64 = weights.iter().sum();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut out = String::with_capacity(csv.len() + csv.len() / 4);
    let mut share_col = 3;
    for (i, line) in csv.lines().enumerate() {
        out.push_str(line);
        if i == 0 {
            share_col = line
                .split(',')
                .position(|c| c == "quotaShareName")
                .unwrap_or(3);
            out.push_str(",user");
        } else {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut x = (state >> 11) as f64 / (1u64 << 53) as f64 * total;
            let mut k = 0;
            while k + 1 < USERS_PER_SHARE && x >= weights[k] {
                x -= weights[k];
                k += 1;
            }
            let share = line.split(',').nth(share_col).unwrap_or("?");
            out.push_str(&format!(",{share}/u{k}"));
        }
        out.push('\n');
    }
    out
}

/// The Philly scenario at 1/8 with the users of [`with_users`], and with `fairShare`
/// (`halfLifeSeconds`) on every share when given.
pub fn write_with_users(dir: &Path, name: &str, half_life: Option<u64>) -> PathBuf {
    let path = write_variant(dir, name, false, &[]);
    let trace = dir.join(format!("{name}.csv"));
    let csv = std::fs::read_to_string(&trace).expect("trace");
    std::fs::write(&trace, with_users(&csv)).expect("write trace");
    if let Some(h) = half_life {
        let text = std::fs::read_to_string(&path).expect("scenario");
        let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
        if let Some(configs) = doc.get_mut("config").and_then(|c| c.as_sequence_mut()) {
            for c in configs.iter_mut() {
                if c.get("kind").and_then(|k| k.as_str()) == Some("QuotaShare")
                    && let Some(m) = c.as_mapping_mut()
                {
                    let mut fs = serde_yaml::Mapping::new();
                    fs.insert("halfLifeSeconds".into(), h.into());
                    m.insert("fairShare".into(), fs.into());
                }
            }
        }
        std::fs::write(&path, serde_yaml::to_string(&doc).expect("yaml")).expect("write");
    }
    path
}
