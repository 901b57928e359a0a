//! Finding the line and column of a field (`capacityLimits[1].maxCapacity`) inside one
//! document of a YAML text, so that errors found after parsing still point at the text.
//!
//! The YAML parser is the only thing that knows where a node is, and it tells only in
//! errors. So the locator walks the document with a serde visitor that fails on purpose
//! at the node it is looking for; the parser stamps that error with the node's position.
//! This handles block and flow style, comments and quoting exactly as the parser does.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

const HERE: &str = "\u{0}shareq-locate";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// `a.b[2].c` → segments. Unparseable pieces end the path (the locator then points at
/// the deepest node it could reach).
fn segments(path: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Seg::Key(key.to_string()));
        }
        for ix in rest.split('[').filter(|s| !s.is_empty()) {
            match ix.trim_end_matches(']').parse() {
                Ok(n) => out.push(Seg::Index(n)),
                Err(_) => return out,
            }
        }
    }
    out
}

struct Nav<'p>(&'p [Seg]);

impl<'de> DeserializeSeed<'de> for Nav<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

fn here<E: de::Error>() -> E {
    E::custom(HERE)
}

impl<'de> Visitor<'de> for Nav<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any node")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Seg::Key(want), rest)) = self.0.split_first() else {
            return Err(here());
        };
        while let Some(found) = map.next_key_seed(KeySeed {
            want,
            last: rest.is_empty(),
        })? {
            if found {
                return map.next_value_seed(Nav(rest));
            }
            map.next_value::<IgnoredAny>()?;
        }
        // Not there (a missing field): the enclosing mapping is the best place to point.
        Err(here())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Seg::Index(want), rest)) = self.0.split_first() else {
            return Err(here());
        };
        for _ in 0..*want {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Err(here());
            }
        }
        seq.next_element_seed(Nav(rest))?;
        Err(here())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(here())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(here())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(here())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(here())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(here())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(here())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Err(here())
    }
}

/// Reads a key; fails (at the key's position) when it is the last segment we look for.
struct KeySeed<'a> {
    want: &'a str,
    last: bool,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        if v == self.want && self.last {
            return Err(here());
        }
        Ok(v == self.want)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

fn position(e: &serde_yaml::Error) -> Option<(usize, usize)> {
    if !e.to_string().contains(HERE) {
        return None;
    }
    e.location().map(|l| (l.line(), l.column()))
}

/// Line and column (1-based) of the first node of each document of `text`; `None` for
/// an empty document. Used as the document's identity by [`locate`].
pub fn document_lines(text: &str) -> Vec<Option<usize>> {
    serde_yaml::Deserializer::from_str(text)
        .map(|de| match Nav(&[]).deserialize(de) {
            Err(e) => position(&e).map(|(l, _)| l),
            Ok(()) => None,
        })
        .collect()
}

/// Where `field` is in the document of `text` whose first node is on `doc_line`.
/// Points at the key of the last segment, or at the deepest ancestor that exists.
pub fn locate(text: &str, doc_line: usize, field: &str) -> Option<(usize, usize)> {
    let index = document_lines(text)
        .iter()
        .position(|l| *l == Some(doc_line))?;
    let de = serde_yaml::Deserializer::from_str(text).nth(index)?;
    let segs = segments(field);
    match Nav(&segs).deserialize(de) {
        Err(e) => position(&e),
        Ok(()) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# a comment
kind: ServiceEnvironment
name: x
capacityLimits:
  - capacityUnit: gpu
    maxCapacity: 3
---

kind: QuotaShare
quotaShareName: qs1
capacityLimits: [{capacityUnit: gpu, maxCapacity: 1}, {capacityUnit: a100, maxCapacity: 2}]
resourceSharingConfiguration:
  strategy: RESERVE   # comment
  borrowLimit: 50
";

    #[test]
    fn paths() {
        assert_eq!(
            segments("a.b[2].c"),
            vec![
                Seg::Key("a".into()),
                Seg::Key("b".into()),
                Seg::Index(2),
                Seg::Key("c".into())
            ]
        );
        assert_eq!(segments("x[1][2]").len(), 3);
    }

    #[test]
    fn documents_and_fields() {
        assert_eq!(document_lines(TEXT), vec![Some(2), Some(9)]);
        assert_eq!(locate(TEXT, 2, "name"), Some((3, 1)));
        assert_eq!(
            locate(TEXT, 2, "capacityLimits[0].maxCapacity"),
            Some((6, 5))
        );
        assert_eq!(
            locate(TEXT, 9, "capacityLimits[1].capacityUnit"),
            Some((11, 56))
        );
        assert_eq!(
            locate(TEXT, 9, "resourceSharingConfiguration.borrowLimit"),
            Some((14, 3))
        );
        // Missing field: the enclosing mapping.
        assert_eq!(locate(TEXT, 9, "preemptionConfiguration"), Some((9, 1)));
        assert_eq!(locate(TEXT, 9, "capacityLimits[7]"), Some((11, 17)));
        assert_eq!(locate(TEXT, 5, "name"), None);
    }
}
