//! docs/API.md is the protocol of the control socket: its field tables are compared with
//! the serde field names of the types the scheduler reads and writes, its list of error
//! codes with [`ErrorCode`], and its list of requests with [`Request`]'s operations, so the
//! document cannot drift from the code.

use serde::de::{self, Deserialize, Deserializer, Visitor};
use shareq::model::{JobId, JobSpec};
use shareq::server::{ErrorCode, Request};
use std::collections::{BTreeMap, BTreeSet};

/// A deserializer that only asks a struct for its field names (as serde writes them:
/// renames applied) and then stops.
struct Fields<'a>(&'a mut Option<(&'static str, &'static [&'static str])>);

#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stop")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Stop
    }
}

impl<'de> Deserializer<'de> for Fields<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        *self.0 = Some((name, fields));
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The serde field names of struct `T`.
fn fields<'de, T: Deserialize<'de>>() -> BTreeSet<String> {
    let mut seen = None;
    let _ = T::deserialize(Fields(&mut seen));
    let (_, f) = seen.unwrap_or_else(|| {
        panic!(
            "{} is not a plain struct: list its fields another way",
            std::any::type_name::<T>()
        )
    });
    f.iter().map(|s| s.to_string()).collect()
}

/// The field tables of docs/API.md: for each `### name` (the first `code` in the heading,
/// or its text) under each `## section`, the first cell of each table row, and for a
/// section without subheadings its own rows.
fn doc_tables() -> BTreeMap<(String, String), BTreeSet<String>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/API.md");
    let text = std::fs::read_to_string(path).expect("docs/API.md");
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let (mut section, mut name) = (String::new(), String::new());
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            section = h.trim().to_string();
            name = String::new();
        } else if let Some(h) = line.strip_prefix("### ") {
            name = match h.split('`').nth(1) {
                Some(code) => code.to_string(),
                None => h.trim().to_string(),
            };
            out.entry((section.clone(), name.clone())).or_default();
        } else if let Some(row) = line.strip_prefix("| `") {
            let cell = row.split('`').next().unwrap_or_default();
            out.entry((section.clone(), name.clone()))
                .or_default()
                .insert(cell.to_string());
        }
    }
    out
}

fn table(
    docs: &BTreeMap<(String, String), BTreeSet<String>>,
    section: &str,
    name: &str,
) -> BTreeSet<String> {
    docs.get(&(section.to_string(), name.to_string()))
        .unwrap_or_else(|| panic!("docs/API.md has no `### {name}` under `## {section}`"))
        .clone()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Field names as answers write them (`shareq::wire`: camelCase).
fn wire(names: &BTreeSet<String>) -> BTreeSet<String> {
    names
        .iter()
        .map(|n| shareq::wire::camel(n).into_owned())
        .collect()
}

/// Every request, each field given (so optional ones are written too).
fn every_request() -> Vec<Request> {
    let mut job = JobSpec::new("a", "qs1", 1, 0);
    job.command = Some(shareq::model::Command::Argv(vec!["true".into()]));
    let file = shareq::whatif::ConfigFile {
        path: "new/shares.yaml".into(),
        text: "kind: QuotaShare".into(),
    };
    vec![
        Request::Hello { api: Some(1) },
        Request::Submit { job: job.clone() },
        Request::Cancel {
            ids: vec![JobId(1)],
        },
        Request::Priority {
            id: JobId(1),
            priority: 3,
        },
        Request::Jobs {
            all: true,
            since: Some(1),
            until: Some(2),
        },
        Request::History {
            window: shareq::snapshot::usage::Window::Day,
        },
        Request::Status,
        Request::Reload,
        Request::Job { id: JobId(1) },
        Request::Log {
            id: JobId(1),
            attempt: Some(1),
            offset: 0,
            rank: Some(1),
        },
        Request::Audit { limit: 5 },
        Request::Subscribe,
        Request::Predict { job },
        Request::Events {
            after: 1,
            since: 2,
            follow: true,
        },
        Request::Report {
            since: 1,
            until: 2,
            users: Some(true),
        },
        Request::PutConfig {
            file: "shares.yaml".into(),
            text: "kind: QuotaShare".into(),
            dry_run: true,
        },
        Request::Whatif {
            config: vec![file.clone()],
            current: Some(vec![file.clone()]),
            since: 1,
        },
        Request::DryRun { config: vec![file] },
        Request::Checkpoint {
            job: JobId(1),
            attempt: 1,
            token: Some(shareq::exec::state::runfiles::AttemptToken("ab".into())),
            note: Some("step7".into()),
        },
    ]
}

/// Does not compile when a request or one of its fields is added: add it to
/// [`every_request`] and to docs/API.md.
#[allow(dead_code)]
fn every_request_is_listed(r: Request) {
    match r {
        Request::Hello { api: _ }
        | Request::Submit { job: _ }
        | Request::Cancel { ids: _ }
        | Request::Priority { id: _, priority: _ }
        | Request::Jobs {
            all: _,
            since: _,
            until: _,
        }
        | Request::History { window: _ }
        | Request::Status
        | Request::Reload
        | Request::Job { id: _ }
        | Request::Log {
            id: _,
            attempt: _,
            offset: _,
            rank: _,
        }
        | Request::Audit { limit: _ }
        | Request::Subscribe
        | Request::Predict { job: _ }
        | Request::Events {
            after: _,
            since: _,
            follow: _,
        }
        | Request::Report {
            since: _,
            until: _,
            users: _,
        }
        | Request::PutConfig {
            file: _,
            text: _,
            dry_run: _,
        }
        | Request::Whatif {
            config: _,
            current: _,
            since: _,
        }
        | Request::DryRun { config: _ }
        | Request::Checkpoint {
            job: _,
            attempt: _,
            token: _,
            note: _,
        } => {}
    }
}

/// Every error code. Does not compile when one is added: add it here and to docs/API.md.
fn every_code() -> Vec<ErrorCode> {
    let all = vec![
        ErrorCode::NotAllowed,
        ErrorCode::Rejected,
        ErrorCode::Limit,
        ErrorCode::NotFound,
        ErrorCode::ShuttingDown,
        ErrorCode::BadRequest,
        ErrorCode::Unavailable,
        ErrorCode::UnsupportedApi,
    ];
    for c in &all {
        match c {
            ErrorCode::NotAllowed
            | ErrorCode::Rejected
            | ErrorCode::Limit
            | ErrorCode::NotFound
            | ErrorCode::ShuttingDown
            | ErrorCode::BadRequest
            | ErrorCode::Unavailable
            | ErrorCode::UnsupportedApi => {}
        }
    }
    all
}

/// The wire names of the error codes.
fn code_names() -> BTreeSet<String> {
    every_code()
        .into_iter()
        .map(|c| {
            serde_json::to_value(c)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// Does not compile when `Report` gets a field of its own (its figures are `Summary`'s).
#[allow(dead_code)]
fn report_fields(r: shareq::report::Report) {
    let shareq::report::Report {
        since: _,
        until: _,
        users_shown: _,
        fair_share: _,
        summary: _,
    } = r;
}

#[test]
fn every_request_and_its_fields_are_documented() {
    let docs = doc_tables();
    let mut ops = BTreeSet::new();
    for r in every_request() {
        let v = serde_json::to_value(&r).unwrap();
        let mut keys: BTreeSet<String> = v.as_object().unwrap().keys().cloned().collect();
        assert!(keys.remove("op"), "{v}");
        let op = v["op"].as_str().unwrap().to_string();
        assert_eq!(
            keys,
            table(&docs, "Requests", &op),
            "the fields of request `{op}` in docs/API.md"
        );
        // What the docs show is what the scheduler reads back.
        assert_eq!(serde_json::from_value::<Request>(v).unwrap(), r);
        ops.insert(op);
    }
    let documented: BTreeSet<String> = docs
        .keys()
        .filter(|(s, n)| s == "Requests" && !n.is_empty())
        .map(|(_, n)| n.clone())
        .collect();
    assert_eq!(documented, ops, "the requests of docs/API.md");
}

#[test]
fn every_type_and_its_fields_are_documented() {
    use shareq::*;
    let docs = doc_tables();
    let mut report = fields::<replay::Summary>();
    report.extend(set(&["since", "until", "users_shown", "fair_share"]));
    let types: Vec<(&str, BTreeSet<String>)> = vec![
        ("JobSpec", fields::<model::JobSpec>()),
        ("RetryStrategy", fields::<model::RetryStrategy>()),
        ("Dependency", fields::<model::Dependency>()),
        ("ArrayProperties", fields::<model::ArrayProperties>()),
        ("DependencyView", fields::<snapshot::DependencyView>()),
        ("ArrayView", fields::<snapshot::ArrayView>()),
        ("Submitter", fields::<model::Submitter>()),
        ("JobsAnswer", fields::<server::JobsAnswer>()),
        ("JobView", fields::<snapshot::JobView>()),
        ("CheckpointView", fields::<snapshot::CheckpointView>()),
        ("PreemptionRecord", fields::<snapshot::PreemptionRecord>()),
        ("LostWork", fields::<snapshot::LostWork>()),
        ("Placement", fields::<snapshot::Placement>()),
        ("CancelOutcome", fields::<server::CancelOutcome>()),
        ("LogChunk", fields::<server::front::protocol::LogChunk>()),
        ("Hello", fields::<server::Hello>()),
        ("StatusAnswer", fields::<server::StatusAnswer>()),
        ("ConfigStatus", fields::<snapshot::ConfigStatus>()),
        ("UnitView", fields::<snapshot::UnitView>()),
        ("ReservationView", fields::<snapshot::ReservationView>()),
        ("WaitFigures", fields::<shareq::replay::WaitFigures>()),
        ("UserStanding", fields::<sched::UserStanding>()),
        ("DeviceView", fields::<snapshot::DeviceView>()),
        ("MigView", fields::<snapshot::MigView>()),
        ("ShareView", fields::<sched::ShareUnitStats>()),
        ("LendEdge", fields::<sched::LendEdge>()),
        ("Prediction", fields::<forecast::Prediction>()),
        ("ConfigWritten", fields::<server::ConfigWritten>()),
        ("ConfigFile", fields::<whatif::ConfigFile>()),
        ("WhatIfAnswer", fields::<whatif::WhatIfAnswer>()),
        ("DryRunAnswer", fields::<whatif::DryRunAnswer>()),
        ("AuditEntry", fields::<server::runtime::audit::AuditEntry>()),
        ("UsageHistory", fields::<snapshot::usage::UsageHistory>()),
        ("ShareSeries", fields::<snapshot::usage::ShareSeries>()),
        ("UsagePoint", fields::<snapshot::usage::UsagePoint>()),
        ("Report", report),
        ("GroupSummary", fields::<replay::GroupSummary>()),
        ("EventLine", fields::<events::EventLine>()),
    ];
    for (name, serde_fields) in &types {
        assert_eq!(
            table(&docs, "Types", name),
            wire(serde_fields),
            "the fields of {name} in docs/API.md"
        );
    }
    let documented: BTreeSet<&str> = docs
        .keys()
        .filter(|(s, n)| s == "Types" && !n.is_empty())
        .map(|(_, n)| n.as_str())
        .collect();
    let checked: BTreeSet<&str> = types.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        documented, checked,
        "every type docs/API.md describes is checked"
    );
    assert_eq!(
        table(&docs, "Answers", "Response"),
        wire(&fields::<server::Response>()),
        "the fields of an answer in docs/API.md"
    );
    // Every field whose name changed is listed as deprecated under its old name.
    let old: BTreeSet<String> = types
        .iter()
        .flat_map(|(_, f)| f.iter())
        .chain(&fields::<server::Response>())
        .filter(|n| n.contains('_'))
        .cloned()
        .collect();
    let listed = deprecated();
    let unlisted: Vec<&String> = old.iter().filter(|n| !listed.contains_key(*n)).collect();
    assert!(
        unlisted.is_empty(),
        "renamed fields missing from docs/API.md's deprecated names: {unlisted:?}"
    );
}

/// docs/API.md's deprecated key names: old name → the name written now.
pub fn deprecated() -> BTreeMap<String, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/API.md");
    let text = std::fs::read_to_string(path).expect("docs/API.md");
    let mut section = "";
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            section = h.trim();
        } else if section == "Key names"
            && let Some(row) = line.strip_prefix("| `")
        {
            let cells: Vec<&str> = row.split('`').collect();
            out.insert(cells[0].to_string(), cells[2].to_string());
        }
    }
    out
}

#[test]
fn each_deprecated_name_is_the_old_spelling_of_its_new_one() {
    let listed = deprecated();
    assert!(listed.len() > 20, "{listed:?}");
    for (old, new) in &listed {
        assert!(old.contains('_'), "{old} is not an old name");
        assert_eq!(&shareq::wire::camel(old), new, "docs/API.md: {old}");
    }
}

#[test]
fn every_error_code_is_documented() {
    assert_eq!(table(&doc_tables(), "Error codes", ""), code_names());
}

#[test]
fn the_api_version_is_the_documented_one() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/API.md")).unwrap();
    let title = text.lines().next().unwrap_or_default();
    assert_eq!(
        title,
        format!(
            "# The control socket API (version {})",
            shareq::server::API_VERSION
        )
    );
}

/// The Python client (`clients/python`) raises its own exception for every documented
/// code. Skipped, saying so, when no python3 runs.
#[test]
fn the_python_client_knows_every_error_code() {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/python/src");
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, shareq.errors as e; print(json.dumps(sorted(e._BY_CODE)))",
        ])
        .env("PYTHONPATH", src)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => panic!("python3: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            eprintln!("skipping the Python client's codes: no python3 ({e})");
            return;
        }
    };
    let codes: BTreeSet<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(codes, code_names());
}
