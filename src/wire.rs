//! The key names of the JSON shareq writes for programs (control socket answers and
//! streams, `--json` outputs, the decision stream): camelCase, as the AWS Batch API and
//! SPEC's documents spell them.
//!
//! The types keep their Rust field names; a field's name on the wire is [`camel`] of it,
//! made where the JSON is written: [`Wire`] for a typed value, [`line`] for a line already
//! written as text (the decision stream's). For one release every renamed key's old
//! snake_case name is written beside the new one, with the same value, so scripts keep
//! working; docs/API.md lists the old names as deprecated. When they go, the types take
//! `#[serde(rename_all = "camelCase")]` and this module goes with them.
//!
//! Only field names are renamed: keys that are data (share, user and unit names,
//! environment variables, job states: the keys of maps) are written as they are. The
//! replay's own output (SPEC §6) and what the scheduler stores do not pass through here.

use serde::ser::{self, Serialize, Serializer};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;

/// `gpu_seconds_used` → `gpuSecondsUsed`; a name without `_` is returned as it is.
pub fn camel(name: &str) -> Cow<'_, str> {
    if !name.contains('_') {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = !out.is_empty();
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Is `key` the camelCase name [`line`] or [`Wire`] added beside an old one present in the
/// same object (`keys`)?
pub fn is_new_twin<'a>(key: &str, keys: impl IntoIterator<Item = &'a str>) -> bool {
    keys.into_iter()
        .any(|k| k != key && k.contains('_') && camel(k) == key)
}

/// The wire name of a field name, as a `&'static str` (serde's struct fields need one):
/// each distinct name is made once per thread and kept (field names are a fixed set).
fn camel_static(name: &'static str) -> &'static str {
    if !name.contains('_') {
        return name;
    }
    thread_local! {
        static NAMES: RefCell<HashMap<&'static str, &'static str>> = RefCell::new(HashMap::new());
    }
    NAMES.with(|n| {
        *n.borrow_mut()
            .entry(name)
            .or_insert_with(|| match camel(name) {
                Cow::Borrowed(b) => b,
                Cow::Owned(o) => Box::leak(o.into_boxed_str()),
            })
    })
}

/// A value written with wire names: serialize `Wire(&x)` where `x` would be.
pub struct Wire<'a, T: ?Sized>(pub &'a T);

impl<T: ?Sized + Serialize> Serialize for Wire<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(Names(s))
    }
}

/// `serde_json::to_vec` with wire names.
pub fn to_vec<T: ?Sized + Serialize>(v: &T) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&Wire(v))
}

/// `serde_json::to_string` with wire names.
pub fn to_string<T: ?Sized + Serialize>(v: &T) -> serde_json::Result<String> {
    serde_json::to_string(&Wire(v))
}

/// `serde_json::to_string_pretty` with wire names (the CLI's `--json`).
pub fn to_string_pretty<T: ?Sized + Serialize>(v: &T) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&Wire(v))
}

/// `serde_json::to_writer` with wire names.
pub fn to_writer<W: std::io::Write, T: ?Sized + Serialize>(w: W, v: &T) -> serde_json::Result<()> {
    serde_json::to_writer(w, &Wire(v))
}

/// A JSON object already written as text (one decision stream line: flat, its keys all
/// field names) with each snake_case key's camelCase name added after it, with the same
/// value text; keys that have their camelCase name already are left alone. Anything that
/// is not such an object comes back as it was.
pub fn line(text: &str) -> Cow<'_, str> {
    let Some(fields) = top_level_fields(text) else {
        return Cow::Borrowed(text);
    };
    let twins: Vec<(usize, String, &str)> = fields
        .iter()
        .filter_map(|(key, value, end)| {
            let new = camel(key);
            let has = fields.iter().any(|(k, _, _)| *k == new);
            (!has).then(|| (*end, new.into_owned(), *value))
        })
        .collect();
    if twins.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 32 * twins.len());
    let mut from = 0;
    for (end, new, value) in twins {
        out.push_str(&text[from..end]);
        out.push_str(",\"");
        out.push_str(&new);
        out.push_str("\":");
        out.push_str(value);
        from = end;
    }
    out.push_str(&text[from..]);
    Cow::Owned(out)
}

/// The fields of a JSON object written as text: (key, the value's text, where the value
/// ends), for an object whose keys need no escapes; `None` for anything else.
fn top_level_fields(text: &str) -> Option<Vec<(&str, &str, usize)>> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    let mut out = Vec::new();
    if b.get(i) == Some(&b'}') {
        return Some(out);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = i + 1 + text[i + 1..].find('"')?;
        let key = &text[i + 1..key_end];
        if key.contains('\\') {
            return None;
        }
        i = skip_ws(b, key_end + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(b, i + 1);
        let end = value_end(b, start)?;
        out.push((key, &text[start..end], end));
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return Some(out),
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// Where the JSON value starting at `i` ends (exclusive).
fn value_end(b: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let start = i;
    while let Some(&c) = b.get(i) {
        if in_string {
            match c {
                b'\\' => i += 1,
                b'"' => {
                    in_string = false;
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        } else {
            match c {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' if depth == 0 => return (i > start).then_some(i),
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                b',' if depth == 0 => return (i > start).then_some(i),
                c if c.is_ascii_whitespace() && depth == 0 => {
                    return (i > start).then_some(i);
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// The serializer that renames: every struct field (and every field of a flattened
/// struct) goes out under its camelCase name, then, when that differs, under its old one.
struct Names<S>(S);

/// A compound being written (a sequence, a map, a struct, ...), its parts renamed.
struct Parts<C> {
    inner: C,
    /// In a map: the old name of the key just written, to write the value under again.
    old_key: Option<&'static str>,
}

impl<C> Parts<C> {
    fn new(inner: C) -> Parts<C> {
        Parts {
            inner,
            old_key: None,
        }
    }
}

impl<S: Serializer> Serializer for Names<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Parts<S::SerializeSeq>;
    type SerializeTuple = Parts<S::SerializeTuple>;
    type SerializeTupleStruct = Parts<S::SerializeTupleStruct>;
    type SerializeTupleVariant = Parts<S::SerializeTupleVariant>;
    type SerializeMap = Parts<S::SerializeMap>;
    type SerializeStruct = Parts<S::SerializeStruct>;
    type SerializeStructVariant = Parts<S::SerializeStructVariant>;

    fn serialize_bool(self, v: bool) -> Result<S::Ok, S::Error> {
        self.0.serialize_bool(v)
    }
    fn serialize_i8(self, v: i8) -> Result<S::Ok, S::Error> {
        self.0.serialize_i8(v)
    }
    fn serialize_i16(self, v: i16) -> Result<S::Ok, S::Error> {
        self.0.serialize_i16(v)
    }
    fn serialize_i32(self, v: i32) -> Result<S::Ok, S::Error> {
        self.0.serialize_i32(v)
    }
    fn serialize_i64(self, v: i64) -> Result<S::Ok, S::Error> {
        self.0.serialize_i64(v)
    }
    fn serialize_i128(self, v: i128) -> Result<S::Ok, S::Error> {
        self.0.serialize_i128(v)
    }
    fn serialize_u8(self, v: u8) -> Result<S::Ok, S::Error> {
        self.0.serialize_u8(v)
    }
    fn serialize_u16(self, v: u16) -> Result<S::Ok, S::Error> {
        self.0.serialize_u16(v)
    }
    fn serialize_u32(self, v: u32) -> Result<S::Ok, S::Error> {
        self.0.serialize_u32(v)
    }
    fn serialize_u64(self, v: u64) -> Result<S::Ok, S::Error> {
        self.0.serialize_u64(v)
    }
    fn serialize_u128(self, v: u128) -> Result<S::Ok, S::Error> {
        self.0.serialize_u128(v)
    }
    fn serialize_f32(self, v: f32) -> Result<S::Ok, S::Error> {
        self.0.serialize_f32(v)
    }
    fn serialize_f64(self, v: f64) -> Result<S::Ok, S::Error> {
        self.0.serialize_f64(v)
    }
    fn serialize_char(self, v: char) -> Result<S::Ok, S::Error> {
        self.0.serialize_char(v)
    }
    fn serialize_str(self, v: &str) -> Result<S::Ok, S::Error> {
        self.0.serialize_str(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<S::Ok, S::Error> {
        self.0.serialize_bytes(v)
    }
    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.0.serialize_none()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<S::Ok, S::Error> {
        self.0.serialize_some(&Wire(v))
    }
    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.0.serialize_unit()
    }
    fn serialize_unit_struct(self, name: &'static str) -> Result<S::Ok, S::Error> {
        self.0.serialize_unit_struct(name)
    }
    fn serialize_unit_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        self.0.serialize_unit_variant(name, index, variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        v: &T,
    ) -> Result<S::Ok, S::Error> {
        self.0.serialize_newtype_struct(name, &Wire(v))
    }
    /// A variant's name is a value (`{"full":...}` of the `subscribe` stream): kept.
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<S::Ok, S::Error> {
        self.0
            .serialize_newtype_variant(name, index, variant, &Wire(v))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        self.0.serialize_seq(len).map(Parts::new)
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, S::Error> {
        self.0.serialize_tuple(len).map(Parts::new)
    }
    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        self.0.serialize_tuple_struct(name, len).map(Parts::new)
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        self.0
            .serialize_tuple_variant(name, index, variant, len)
            .map(Parts::new)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        // A flattened struct's fields come as entries, some written twice: no count.
        let _ = len;
        self.0.serialize_map(None).map(Parts::new)
    }
    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        self.0.serialize_struct(name, len).map(Parts::new)
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        self.0
            .serialize_struct_variant(name, index, variant, len)
            .map(Parts::new)
    }
    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

impl<C: ser::SerializeSeq> ser::SerializeSeq for Parts<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), C::Error> {
        self.inner.serialize_element(&Wire(v))
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: ser::SerializeTuple> ser::SerializeTuple for Parts<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), C::Error> {
        self.inner.serialize_element(&Wire(v))
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: ser::SerializeTupleStruct> ser::SerializeTupleStruct for Parts<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), C::Error> {
        self.inner.serialize_field(&Wire(v))
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: ser::SerializeTupleVariant> ser::SerializeTupleVariant for Parts<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), C::Error> {
        self.inner.serialize_field(&Wire(v))
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

/// A map's keys are data (share or user names, environment variables), written as they
/// are; but serde writes a `#[serde(flatten)]`ed struct's fields as entries of a map,
/// each key a `&'static str` field name where a map of data has owned keys (`String`,
/// enums): those are renamed as struct fields are.
impl<C: ser::SerializeMap> ser::SerializeMap for Parts<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), C::Error> {
        if std::any::type_name::<T>() == "str"
            && let Some(name) = field_name(key)
            && name.contains('_')
        {
            self.old_key = Some(name);
            return self.inner.serialize_key(camel_static(name));
        }
        self.inner.serialize_key(key)
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), C::Error> {
        self.inner.serialize_value(&Wire(v))?;
        if let Some(old) = self.old_key.take() {
            self.inner.serialize_key(old)?;
            self.inner.serialize_value(&Wire(v))?;
        }
        Ok(())
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: ser::SerializeStruct> ser::SerializeStruct for Parts<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), C::Error> {
        self.inner.serialize_field(camel_static(key), &Wire(v))?;
        if key.contains('_') {
            self.inner.serialize_field(key, &Wire(v))?;
        }
        Ok(())
    }
    fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
        self.inner.skip_field(key)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: ser::SerializeStructVariant> ser::SerializeStructVariant for Parts<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), C::Error> {
        self.inner.serialize_field(camel_static(key), &Wire(v))?;
        if key.contains('_') {
            self.inner.serialize_field(key, &Wire(v))?;
        }
        Ok(())
    }
    fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
        self.inner.skip_field(key)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

/// The field name a flattened struct's entry key is (a `&'static str` serialized as a
/// string), interned so that it lives as long as serde's own field names.
fn field_name<T: ?Sized + Serialize>(key: &T) -> Option<&'static str> {
    let text = key.serialize(KeyText).ok()?;
    thread_local! {
        static KEYS: RefCell<HashMap<String, &'static str>> = RefCell::new(HashMap::new());
    }
    Some(KEYS.with(|k| {
        let mut k = k.borrow_mut();
        match k.get(&text) {
            Some(s) => *s,
            None => {
                let s: &'static str = Box::leak(text.clone().into_boxed_str());
                k.insert(text, s);
                s
            }
        }
    }))
}

/// Reads a key that is a string; anything else is refused.
struct KeyText;

#[derive(Debug, thiserror::Error)]
#[error("not a string key")]
struct NotText;

impl ser::Error for NotText {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        NotText
    }
}

impl Serializer for KeyText {
    type Ok = String;
    type Error = NotText;
    type SerializeSeq = ser::Impossible<String, NotText>;
    type SerializeTuple = ser::Impossible<String, NotText>;
    type SerializeTupleStruct = ser::Impossible<String, NotText>;
    type SerializeTupleVariant = ser::Impossible<String, NotText>;
    type SerializeMap = ser::Impossible<String, NotText>;
    type SerializeStruct = ser::Impossible<String, NotText>;
    type SerializeStructVariant = ser::Impossible<String, NotText>;

    fn serialize_str(self, v: &str) -> Result<String, NotText> {
        Ok(v.to_string())
    }
    fn serialize_bool(self, _: bool) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_i8(self, _: i8) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_i16(self, _: i16) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_i32(self, _: i32) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_i64(self, _: i64) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_u8(self, _: u8) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_u16(self, _: u16) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_u32(self, _: u32) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_u64(self, _: u64) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_f32(self, _: f32) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_f64(self, _: f64) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_char(self, _: char) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_none(self) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_unit(self) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, NotText> {
        Err(NotText)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, NotText> {
        Err(NotText)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, NotText> {
        Err(NotText)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, NotText> {
        Err(NotText)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, NotText> {
        Err(NotText)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, NotText> {
        Err(NotText)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, NotText> {
        Err(NotText)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, NotText> {
        Err(NotText)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::collections::BTreeMap;

    #[test]
    fn camel_joins_words() {
        assert_eq!(camel("gpu_seconds_used"), "gpuSecondsUsed");
        assert_eq!(camel("env_name"), "envName");
        assert_eq!(camel("ok"), "ok");
        assert_eq!(camel("lostGpuSeconds"), "lostGpuSeconds");
        assert_eq!(camel("p50_ms"), "p50Ms");
    }

    #[derive(serde::Serialize)]
    struct Inner {
        ran_for: u64,
        name: String,
    }

    #[derive(serde::Serialize)]
    struct Flat {
        gib_seconds_used: f64,
    }

    #[derive(serde::Serialize)]
    struct Outer {
        env_name: String,
        inner: Vec<Inner>,
        maybe_inner: Option<Inner>,
        /// Data: its keys are names, not fields.
        by_share: BTreeMap<String, Inner>,
        #[serde(flatten)]
        flat: Flat,
        #[serde(rename = "callerIsAdmin")]
        caller_is_admin: bool,
    }

    #[derive(serde::Serialize)]
    #[allow(dead_code)]
    enum Update {
        #[serde(rename = "full_picture")]
        Full { grace_period_seconds: u32 },
    }

    /// Fields at every depth go out under their camelCase name, then their old one;
    /// map keys (data) and variant names (values) as they are.
    #[test]
    fn fields_are_renamed_and_kept_and_data_keys_are_not() {
        let inner = || Inner {
            ran_for: 5,
            name: "x".into(),
        };
        let v = Outer {
            env_name: "t".into(),
            inner: vec![inner()],
            maybe_inner: Some(inner()),
            by_share: [("qs_one".to_string(), inner())].into(),
            flat: Flat {
                gib_seconds_used: 1.5,
            },
            caller_is_admin: true,
        };
        let got: Value = serde_json::from_slice(&to_vec(&v).unwrap()).unwrap();
        let inner_json = json!({"ranFor": 5, "ran_for": 5, "name": "x"});
        assert_eq!(
            got,
            json!({
                "envName": "t", "env_name": "t",
                "inner": [inner_json],
                "maybeInner": inner_json, "maybe_inner": inner_json,
                "byShare": {"qs_one": inner_json}, "by_share": {"qs_one": inner_json},
                "gibSecondsUsed": 1.5, "gib_seconds_used": 1.5,
                "callerIsAdmin": true,
            })
        );
        // The new name comes first, the old one right after it.
        let text = to_string(&v).unwrap();
        assert!(
            text.starts_with("{\"envName\":\"t\",\"env_name\":\"t\","),
            "{text}"
        );
        let u = to_string(&Update::Full {
            grace_period_seconds: 3,
        })
        .unwrap();
        assert_eq!(
            u,
            "{\"full_picture\":{\"gracePeriodSeconds\":3,\"grace_period_seconds\":3}}"
        );
        // Plain serde_json is untouched (the replay, the store).
        assert!(
            serde_json::to_string(&v)
                .unwrap()
                .starts_with("{\"env_name\"")
        );
    }

    #[test]
    fn a_line_gets_its_camel_case_twins_with_the_same_text() {
        let l = "{\"t\":5.000,\"event\":\"preempted\",\"by_share\":\"qs,2}\",\"devices\":[0, {\"a_b\":1}],\"by_id\":3}";
        assert_eq!(
            line(l),
            "{\"t\":5.000,\"event\":\"preempted\",\"by_share\":\"qs,2}\",\"byShare\":\"qs,2}\",\"devices\":[0, {\"a_b\":1}],\"by_id\":3,\"byId\":3}"
        );
        // Twice is once; a line with no old names, or not an object, is left as it is.
        let once = line(l).into_owned();
        assert_eq!(line(&once), once);
        for same in [
            "{\"t\":1,\"event\":\"x\"}",
            "{}",
            "[1]",
            "not json",
            "{\"a_b\":",
        ] {
            assert_eq!(line(same), same);
        }
    }

    #[test]
    fn twins_are_told() {
        let keys = ["by_id", "byId", "event"];
        assert!(is_new_twin("byId", keys));
        assert!(!is_new_twin("by_id", keys));
        assert!(!is_new_twin("event", keys));
    }
}
