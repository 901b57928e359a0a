//! One YAML document of a config directory (or of a scenario's `config:` list): its `kind`
//! says whether the rest is a `ServiceEnvironment` or a `QuotaShare` (SPEC §1). Here, not in
//! `model`, because telling the two apart buffers YAML values (the core knows no YAML).

use crate::model::{QuotaShare, ServiceEnvironment};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One document of a config directory (or of a scenario's `config:` list).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind")]
pub enum Document {
    ServiceEnvironment(ServiceEnvironment),
    QuotaShare(QuotaShare),
}

/// The kinds a document may have, for error messages and did-you-mean.
pub const DOCUMENT_KINDS: &[&str] = &["ServiceEnvironment", "QuotaShare"];

// `kind` decides the type of the rest of the document. Deserializing through
// `MapAccessDeserializer` when `kind` comes first keeps serde_yaml's line/column on every
// error inside the document; otherwise the document is buffered (positions are coarser).
impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Document;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a document with `kind: ServiceEnvironment` or `kind: QuotaShare`")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
                let Some(first) = map.next_key::<String>()? else {
                    return Err(de::Error::missing_field("kind"));
                };
                if first == "kind" {
                    let kind: String = map.next_value()?;
                    let rest = de::value::MapAccessDeserializer::new(map);
                    return match kind.as_str() {
                        "ServiceEnvironment" => {
                            ServiceEnvironment::deserialize(rest).map(Document::ServiceEnvironment)
                        }
                        "QuotaShare" => QuotaShare::deserialize(rest).map(Document::QuotaShare),
                        other => Err(de::Error::unknown_variant(other, DOCUMENT_KINDS)),
                    };
                }
                // `kind` is not first: buffer the document, then dispatch.
                let mut m = serde_yaml::Mapping::new();
                let v: serde_yaml::Value = map.next_value()?;
                m.insert(serde_yaml::Value::String(first), v);
                while let Some((k, v)) = map.next_entry::<serde_yaml::Value, serde_yaml::Value>()? {
                    m.insert(k, v);
                }
                let kind = m
                    .remove("kind")
                    .ok_or_else(|| de::Error::missing_field("kind"))?;
                let kind = kind.as_str().unwrap_or_default().to_string();
                let rest = serde_yaml::Value::Mapping(m);
                match kind.as_str() {
                    "ServiceEnvironment" => serde_yaml::from_value(rest)
                        .map(Document::ServiceEnvironment)
                        .map_err(de::Error::custom),
                    "QuotaShare" => serde_yaml::from_value(rest)
                        .map(Document::QuotaShare)
                        .map_err(de::Error::custom),
                    other => Err(de::Error::unknown_variant(other, DOCUMENT_KINDS)),
                }
            }
        }
        d.deserialize_map(V)
    }
}
