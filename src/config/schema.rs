//! The shape of each document kind (field names, required fields, types and enum
//! values), checked on the raw YAML tree so that *every* such error in a document is
//! reported at once, each unknown name with a did-you-mean. Serde then only turns a
//! tree that passed into the typed documents; cross-field rules live in `validate`.

use super::DOCUMENT_KINDS;
use super::suggest::{did_you_mean, hint};
use serde_yaml::Value;

pub enum Shape {
    Map(&'static [Field]),
    List(&'static Shape),
    Enum(&'static [&'static str]),
    /// A string (quoted or not).
    Text,
    /// `true` or `false`.
    Flag,
    /// A whole number 0..=u32::MAX.
    Count,
    /// A whole number (may be negative).
    Int,
    /// Any number (a fraction allowed).
    Number,
    /// `auto`, a list of GPU indices, `{fake: N}`, `{mig: P}` or `{fake: N, mig: P}`.
    Devices,
    /// A mapping from names the user chooses (capacity units) to values of a shape.
    Keyed(&'static Shape),
    /// The document's `kind`, checked before the rest.
    Kind,
}

pub struct Field {
    name: &'static str,
    shape: Shape,
    required: bool,
}

const fn req(name: &'static str, shape: Shape) -> Field {
    Field {
        name,
        shape,
        required: true,
    }
}

const fn opt(name: &'static str, shape: Shape) -> Field {
    Field {
        name,
        shape,
        required: false,
    }
}

const TOGGLE: Shape = Shape::Enum(&["ENABLED", "DISABLED"]);

pub const SERVICE_ENVIRONMENT: Shape = Shape::Map(&[
    req("kind", Shape::Kind),
    req("name", Shape::Text),
    req(
        "capacityLimits",
        Shape::List(&Shape::Map(&[
            req("capacityUnit", Shape::Text),
            req("maxCapacity", Shape::Count),
            opt("devices", Shape::Devices),
            opt(
                "slicing",
                Shape::Map(&[
                    req("memoryGiB", Shape::Count),
                    opt("overuse", Shape::Enum(&["REPORT", "STOP"])),
                ]),
            ),
        ])),
    ),
    opt(
        "preemption",
        Shape::Map(&[
            opt("gracePeriodSeconds", Shape::Count),
            opt("spreadSeconds", Shape::Count),
        ]),
    ),
    opt("reserveAfterSeconds", Shape::Count),
    opt("admins", Shape::List(&Shape::Text)),
    opt("controlSocket", Shape::Map(&[opt("group", Shape::Text)])),
    opt(
        "metrics",
        Shape::Map(&[req("listen", Shape::Text), opt("userLabels", Shape::Flag)]),
    ),
    opt("history", Shape::Map(&[opt("retainDays", Shape::Count)])),
    opt(
        "nodes",
        Shape::List(&Shape::Map(&[
            req("name", Shape::Text),
            req("devices", Shape::Keyed(&Shape::Devices)),
        ])),
    ),
    opt(
        "executor",
        Shape::Map(&[
            req("kind", Shape::Enum(&["local", "slurm"])),
            opt("partition", Shape::Text),
            opt("start", Shape::Enum(&["sbatch", "srun"])),
        ]),
    ),
    opt(
        "logs",
        Shape::Map(&[
            opt("maxMiBPerAttempt", Shape::Count),
            opt("minFreeMiB", Shape::Count),
            opt("maxMiBPerUser", Shape::Count),
        ]),
    ),
    opt(
        "limits",
        Shape::Map(&[
            opt("maxQueuedJobsPerUser", Shape::Count),
            opt("maxConnectionsPerUser", Shape::Count),
            opt("pidsPerJob", Shape::Count),
            opt("maxDataMiBPerUser", Shape::Count),
        ]),
    ),
]);

pub const QUOTA_SHARE: Shape = Shape::Map(&[
    req("kind", Shape::Kind),
    req("quotaShareName", Shape::Text),
    req(
        "capacityLimits",
        Shape::List(&Shape::Map(&[
            req("capacityUnit", Shape::Text),
            req("maxCapacity", Shape::Count),
        ])),
    ),
    req(
        "resourceSharingConfiguration",
        Shape::Map(&[
            req(
                "strategy",
                Shape::Enum(&["RESERVE", "LEND", "LEND_AND_BORROW"]),
            ),
            opt("borrowLimit", Shape::Int),
        ]),
    ),
    opt(
        "preemptionConfiguration",
        Shape::Map(&[
            opt("inSharePreemption", TOGGLE),
            opt("minRuntimeSeconds", Shape::Count),
            opt("gracePeriodSeconds", Shape::Count),
            opt(
                "notice",
                Shape::Map(&[
                    req("signal", Shape::Enum(crate::model::NoticeSignal::NAMES)),
                    req("seconds", Shape::Count),
                ]),
            ),
        ]),
    ),
    opt("state", TOGGLE),
    opt("members", Shape::List(&Shape::Text)),
    opt(
        "fairShare",
        Shape::Map(&[
            opt("halfLifeSeconds", Shape::Count),
            opt("weights", Shape::Keyed(&Shape::Number)),
        ]),
    ),
    opt("userLimit", Shape::Count),
]);

/// A problem found by the shape check: the field path (from the document root) and
/// what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeError {
    pub field: String,
    pub message: String,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn quoted(list: &[&str]) -> String {
    list.iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a value is, in words, for "expected X, found Y".
fn found(v: &Value) -> String {
    match v {
        Value::Null => "nothing".into(),
        Value::Bool(b) => format!("`{b}`"),
        Value::Number(n) => format!("the number `{n}`"),
        Value::String(s) => format!("the text `{s}`"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => format!("a value tagged `{}`", t.tag),
    }
}

fn expected(out: &mut Vec<ShapeError>, path: &str, what: &str, v: &Value) {
    out.push(ShapeError {
        field: path.to_string(),
        message: format!("expected {what}, found {}", found(v)),
    });
}

fn is_count(v: &Value) -> bool {
    v.as_u64().is_some_and(|n| u32::try_from(n).is_ok())
}

fn walk(v: &Value, shape: &Shape, path: &str, out: &mut Vec<ShapeError>) {
    match (shape, v) {
        (Shape::Map(fields), Value::Mapping(m)) => {
            for (k, child) in m {
                let Some(key) = k.as_str() else {
                    out.push(ShapeError {
                        field: path.to_string(),
                        message: format!("a field name must be text, found {}", found(k)),
                    });
                    continue;
                };
                match fields.iter().find(|f| f.name == key) {
                    Some(f) => walk(child, &f.shape, &join(path, key), out),
                    None if key == "<<" => out.push(ShapeError {
                        field: join(path, key),
                        message: "YAML merge keys (`<<`) are not supported: write the fields out"
                            .into(),
                    }),
                    None => {
                        let names: Vec<&str> = fields.iter().map(|f| f.name).collect();
                        let h = hint(key, &names);
                        let message = if h.is_empty() {
                            format!("unknown field `{key}` (allowed here: {})", quoted(&names))
                        } else {
                            format!("unknown field `{key}`{h}")
                        };
                        out.push(ShapeError {
                            field: join(path, key),
                            message,
                        });
                    }
                }
            }
            // A misspelt required field was reported as unknown, with the right name.
            let names: Vec<&str> = fields.iter().map(|f| f.name).collect();
            let misspelt: Vec<&str> = m
                .keys()
                .filter_map(Value::as_str)
                .filter(|k| !names.contains(k))
                .filter_map(|k| did_you_mean(k, &names))
                .collect();
            for f in fields
                .iter()
                .filter(|f| f.required && !m.contains_key(f.name) && !misspelt.contains(&f.name))
            {
                out.push(ShapeError {
                    field: join(path, f.name),
                    message: format!("missing required field `{}`", f.name),
                });
            }
        }
        (Shape::Map(_), v) => expected(out, path, "a mapping of fields", v),
        (Shape::List(item), Value::Sequence(items)) => {
            for (i, child) in items.iter().enumerate() {
                walk(child, item, &format!("{path}[{i}]"), out);
            }
        }
        // `members:` with nothing after it is not an empty list (and absent means
        // everyone): say how to write what was probably meant.
        (Shape::List(_), Value::Null) => out.push(ShapeError {
            field: path.to_string(),
            message:
                "expected a list, found nothing: write `[]` for an empty list, or remove the line"
                    .into(),
        }),
        (Shape::List(_), v) => expected(out, path, "a list", v),
        (Shape::Enum(values), Value::String(s)) => {
            if !values.contains(&s.as_str()) {
                out.push(ShapeError {
                    field: path.to_string(),
                    message: format!(
                        "unknown value `{s}`{} (expected one of {})",
                        hint(s, values),
                        quoted(values)
                    ),
                });
            }
        }
        (Shape::Enum(values), v) => {
            expected(out, path, &format!("one of {}", quoted(values)), v);
        }
        (Shape::Text, Value::String(_)) | (Shape::Kind, _) => {}
        (Shape::Text, v) => expected(out, path, "text", v),
        (Shape::Flag, Value::Bool(_)) => {}
        (Shape::Flag, v) => expected(out, path, "`true` or `false`", v),
        (Shape::Count, v) if is_count(v) => {}
        (Shape::Count, v) => expected(out, path, "a whole number >= 0", v),
        (Shape::Int, v) if v.as_i64().is_some() => {}
        (Shape::Int, v) => expected(out, path, "a whole number", v),
        (Shape::Number, v) if v.as_f64().is_some() => {}
        (Shape::Number, v) => expected(out, path, "a number", v),
        (Shape::Devices, v) => devices(v, path, out),
        (Shape::Keyed(item), Value::Mapping(m)) => {
            for (k, child) in m {
                match k.as_str() {
                    Some(key) => walk(child, item, &join(path, key), out),
                    None => out.push(ShapeError {
                        field: path.to_string(),
                        message: format!("a name must be text, found {}", found(k)),
                    }),
                }
            }
        }
        (Shape::Keyed(item), v) => {
            let what = match item {
                Shape::Number => "a mapping from user name to weight",
                _ => "a mapping from capacity unit to devices",
            };
            expected(out, path, what, v)
        }
    }
}

fn devices(v: &Value, path: &str, out: &mut Vec<ShapeError>) {
    const WHAT: &str = "`auto`, a list of GPU indices such as [0, 1], {fake: N}, {mig: PROFILE} or {fake: N, mig: PROFILE}";
    match v {
        Value::String(s) if s == "auto" => {}
        Value::Sequence(items) => {
            for (i, item) in items.iter().enumerate() {
                if !is_count(item) {
                    expected(
                        out,
                        &format!("{path}[{i}]"),
                        "a GPU index (a whole number >= 0)",
                        item,
                    );
                }
            }
        }
        Value::Mapping(m) => {
            for (k, child) in m {
                match k.as_str() {
                    Some("fake") if is_count(child) => {}
                    Some("fake") => {
                        expected(out, &join(path, "fake"), "a whole number >= 0", child)
                    }
                    Some("mig") if matches!(child, Value::String(_)) => {}
                    Some("mig") => expected(
                        out,
                        &join(path, "mig"),
                        "a MIG profile such as `1g.10gb`",
                        child,
                    ),
                    Some(other) => out.push(ShapeError {
                        field: join(path, other),
                        message: format!(
                            "unknown field `{other}`{} (devices take {WHAT})",
                            hint(other, &["fake", "mig"])
                        ),
                    }),
                    None => expected(out, path, WHAT, v),
                }
            }
            if !m.contains_key("fake") && !m.contains_key("mig") {
                expected(out, path, WHAT, v);
            }
        }
        v => expected(out, path, WHAT, v),
    }
}

/// Check one document's tree. `Err` when the document's kind itself is wrong (nothing
/// else can be checked then).
pub fn check_document(v: &Value) -> Vec<ShapeError> {
    let Value::Mapping(m) = v else {
        return vec![ShapeError {
            field: String::new(),
            message: format!(
                "a document must be a mapping that starts with `kind: {}`",
                DOCUMENT_KINDS.join("` or `kind: ")
            ),
        }];
    };
    let shape = match m.get("kind") {
        None => {
            return vec![ShapeError {
                field: "kind".into(),
                message: format!(
                    "missing field `kind`: say which document this is (one of {})",
                    quoted(DOCUMENT_KINDS)
                ),
            }];
        }
        Some(Value::String(k)) if k == "ServiceEnvironment" => &SERVICE_ENVIRONMENT,
        Some(Value::String(k)) if k == "QuotaShare" => &QUOTA_SHARE,
        Some(Value::String(k)) => {
            return vec![ShapeError {
                field: "kind".into(),
                message: format!(
                    "unknown kind `{k}`{} (expected one of {})",
                    hint(k, DOCUMENT_KINDS),
                    quoted(DOCUMENT_KINDS)
                ),
            }];
        }
        Some(other) => {
            return vec![ShapeError {
                field: "kind".into(),
                message: format!(
                    "`kind` must be text, one of {}; found {other:?}",
                    quoted(DOCUMENT_KINDS)
                ),
            }];
        }
    };
    let mut out = Vec::new();
    walk(v, shape, "", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Document;
    use crate::model::{QuotaShare, ServiceEnvironment};

    fn keys(v: &Value, path: &str, out: &mut Vec<String>) {
        match v {
            Value::Mapping(m) => {
                for (k, c) in m {
                    let k = k.as_str().unwrap_or_default();
                    let p = join(path, k);
                    out.push(p.clone());
                    if k != "devices" {
                        keys(c, &p, out);
                    }
                }
            }
            Value::Sequence(s) => {
                for (i, c) in s.iter().enumerate() {
                    keys(c, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }

    /// The shape must know every field the serde types can write, or valid documents
    /// would be refused.
    #[test]
    fn shape_covers_every_serde_field() {
        let env: ServiceEnvironment = serde_yaml::from_str(
            "{name: e, capacityLimits: [{capacityUnit: gpu, maxCapacity: 1, devices: {fake: 1}}],
              preemption: {gracePeriodSeconds: 5}, admins: [root], history: {retainDays: 3}}",
        )
        .expect("env");
        let qs: QuotaShare = serde_yaml::from_str(
            "{quotaShareName: q, capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}],
              resourceSharingConfiguration: {strategy: LEND_AND_BORROW, borrowLimit: 5},
              preemptionConfiguration: {inSharePreemption: ENABLED}, state: DISABLED,
              members: [a]}",
        )
        .expect("share");
        for doc in [Document::ServiceEnvironment(env), Document::QuotaShare(qs)] {
            let v = serde_yaml::to_value(&doc).expect("to value");
            let mut all = Vec::new();
            keys(&v, "", &mut all);
            assert!(all.len() > 6);
            assert_eq!(check_document(&v), vec![], "{all:?}");
        }
    }

    #[test]
    fn every_unknown_field_is_reported() {
        let v: Value = serde_yaml::from_str(
            "{kind: QuotaShare, quotaShareNam: q, capacityLimits: [{capacityUnit: gpu, maxCapcity: 1}],
              resourceSharingConfiguration: {strategy: LEND_AND_BOROW}, state: enabled}",
        )
        .expect("yaml");
        let e = check_document(&v);
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "quotaShareNam",
                "capacityLimits[0].maxCapcity",
                "resourceSharingConfiguration.strategy",
                "state"
            ]
        );
        let v: Value = serde_yaml::from_str(
            "{kind: QuotaShare, quotaShareName: 7, capacityLimits: [{capacityUnit: gpu, maxCapacity: -2}, {maxCapacity: 1}],
              resourceSharingConfiguration: {borrowLimit: many}, members: }",
        )
        .expect("yaml");
        let typed: Vec<String> = check_document(&v)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        assert_eq!(
            typed,
            [
                "quotaShareName: expected text, found the number `7`",
                "capacityLimits[0].maxCapacity: expected a whole number >= 0, found the number `-2`",
                "capacityLimits[1].capacityUnit: missing required field `capacityUnit`",
                "resourceSharingConfiguration.borrowLimit: expected a whole number, found the text `many`",
                "resourceSharingConfiguration.strategy: missing required field `strategy`",
                "members: expected a list, found nothing: write `[]` for an empty list, or remove the line",
            ]
        );
        assert!(e[2].message.contains("did you mean `LEND_AND_BORROW`?"));
        assert!(e[3].message.contains("did you mean `ENABLED`?"));
    }
}
