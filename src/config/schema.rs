//! The shape of each document kind (field names and enum values), checked on the raw
//! YAML tree so that *every* unknown field, kind or value in a document is reported at
//! once, each with a did-you-mean. Types and ranges are left to serde and `validate`.

use super::suggest::hint;
use crate::model::DOCUMENT_KINDS;
use serde_yaml::Value;

pub enum Shape {
    Map(&'static [(&'static str, Shape)]),
    List(&'static Shape),
    Enum(&'static [&'static str]),
    /// Checked elsewhere (scalars, `devices`).
    Any,
}

const TOGGLE: Shape = Shape::Enum(&["ENABLED", "DISABLED"]);

pub const SERVICE_ENVIRONMENT: Shape = Shape::Map(&[
    ("kind", Shape::Any),
    ("name", Shape::Any),
    (
        "capacityLimits",
        Shape::List(&Shape::Map(&[
            ("capacityUnit", Shape::Any),
            ("maxCapacity", Shape::Any),
            ("devices", Shape::Any),
        ])),
    ),
    (
        "preemption",
        Shape::Map(&[("gracePeriodSeconds", Shape::Any)]),
    ),
    ("admins", Shape::Any),
    ("history", Shape::Map(&[("retainDays", Shape::Any)])),
]);

pub const QUOTA_SHARE: Shape = Shape::Map(&[
    ("kind", Shape::Any),
    ("quotaShareName", Shape::Any),
    (
        "capacityLimits",
        Shape::List(&Shape::Map(&[
            ("capacityUnit", Shape::Any),
            ("maxCapacity", Shape::Any),
        ])),
    ),
    (
        "resourceSharingConfiguration",
        Shape::Map(&[
            (
                "strategy",
                Shape::Enum(&["RESERVE", "LEND", "LEND_AND_BORROW"]),
            ),
            ("borrowLimit", Shape::Any),
        ]),
    ),
    (
        "preemptionConfiguration",
        Shape::Map(&[("inSharePreemption", TOGGLE)]),
    ),
    ("state", TOGGLE),
    ("members", Shape::Any),
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

fn walk(v: &Value, shape: &Shape, path: &str, out: &mut Vec<ShapeError>) {
    match (shape, v) {
        (Shape::Map(fields), Value::Mapping(m)) => {
            for (k, child) in m {
                let Some(key) = k.as_str() else {
                    out.push(ShapeError {
                        field: path.to_string(),
                        message: format!("a field name must be text, found {k:?}"),
                    });
                    continue;
                };
                match fields.iter().find(|(name, _)| *name == key) {
                    Some((_, s)) => walk(child, s, &join(path, key), out),
                    None => {
                        let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
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
        }
        (Shape::List(item), Value::Sequence(items)) => {
            for (i, child) in items.iter().enumerate() {
                walk(child, item, &format!("{path}[{i}]"), out);
            }
        }
        (Shape::Enum(values), Value::String(s)) if !values.contains(&s.as_str()) => {
            out.push(ShapeError {
                field: path.to_string(),
                message: format!(
                    "unknown value `{s}`{} (expected one of {})",
                    hint(s, values),
                    quoted(values)
                ),
            });
        }
        // A wrong type is reported by serde, with the expected type.
        _ => {}
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
    use crate::model::{Document, QuotaShare, ServiceEnvironment};

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
        assert!(e[2].message.contains("did you mean `LEND_AND_BORROW`?"));
        assert!(e[3].message.contains("did you mean `ENABLED`?"));
    }
}
