//! Parsing YAML text (one or several `---` documents) into `Document`s that remember where
//! they came from, so that later errors can point at the file, line and column.

use super::Document;
use super::error::ConfigError;
use super::locate::{document_lines, locate};
use super::schema::check_document;
use serde::Deserialize;

/// Where a document came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Origin {
    pub file: Option<String>,
    /// 1-based line of the document's first node (its first key); `config::locate`
    /// finds fields of the document from it.
    pub line: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SourcedDocument {
    pub origin: Origin,
    pub doc: Document,
}

/// serde_yaml writes `path: message at line X column Y`; split that into its parts.
fn split_message(e: &serde_yaml::Error) -> (Option<String>, String) {
    let mut msg = e.to_string();
    if let Some(i) = msg.find(" at line ") {
        // libyaml adds context after the position ("..., while parsing a block mapping at
        // line 2 column 1"): keep the context, drop the first position only.
        let rest = msg[i + 9..]
            .find(", ")
            .map(|j| msg[i + 9 + j..].to_string())
            .unwrap_or_default();
        msg.truncate(i);
        msg.push_str(&rest);
    }
    if let Some((head, tail)) = msg.split_once(": ") {
        let is_path = !head.is_empty()
            && head
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.[]".contains(c));
        if is_path {
            return (Some(head.to_string()), tail.to_string());
        }
    }
    (None, msg)
}

/// Plain words for serde's type names.
fn friendly(message: &str) -> String {
    message
        .replace("expected u32", "expected a whole number >= 0")
        .replace("expected u64", "expected a whole number >= 0")
        .replace("expected i64", "expected a whole number")
        .replace("expected a string", "expected text")
}

/// The key written on a line (`  - maxCapacity: 3` → `maxCapacity`), to name the field
/// of a syntax error.
fn key_on_line(text: &str, line: usize) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let l = l.trim_start().trim_start_matches('-').trim_start();
    let (key, _) = l.split_once(':')?;
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    ok.then(|| key.to_string())
}

fn syntax_error(e: &serde_yaml::Error, text: &str, file: Option<&str>) -> ConfigError {
    let (line, col) = e
        .location()
        .map_or((None, None), |l| (Some(l.line()), Some(l.column())));
    let (_, mut msg) = split_message(e);
    if let Some(key) = msg.strip_prefix("duplicate entry with key ") {
        msg = format!("{key} is written twice in the same mapping: keep one");
    }
    let tab = line
        .and_then(|l| text.lines().nth(l.saturating_sub(1)))
        .is_some_and(|l| l.starts_with(|c: char| c.is_whitespace()) && l.contains('\t'));
    if tab {
        msg.push_str(" (a tab is used for indentation: YAML needs spaces)");
    } else if msg.contains("did not find expected")
        || msg.contains("mapping values are not allowed")
        || msg.contains("block sequence entries are not allowed")
    {
        msg.push_str(" (check the indentation of this line and the lines above it)");
    }
    let mut err = ConfigError::new(format!("invalid YAML: {msg}")).at(file, line, col);
    if let Some(k) = line.and_then(|l| key_on_line(text, l)) {
        err = err.field(k);
    }
    err
}

fn typed_error(
    e: &serde_yaml::Error,
    text: &str,
    doc_line: Option<usize>,
    file: Option<&str>,
) -> ConfigError {
    let (path, msg) = split_message(e);
    let mut field = path.filter(|p| p != ".");
    let mut msg = friendly(&msg);
    if let Some(rest) = msg.strip_prefix("missing field `") {
        let name = rest.trim_end_matches('`').to_string();
        field = Some(match field {
            Some(p) => format!("{p}.{name}"),
            None => name.clone(),
        });
        msg = format!("missing required field `{name}`");
    }
    // Messages from our own deserializers may repeat the field name; it is shown already.
    if let Some(last) = field.as_deref().and_then(|f| f.rsplit('.').next())
        && let Some(rest) = msg.strip_prefix(&format!("{last}: "))
    {
        msg = rest.to_string();
    }
    let pos = field
        .as_deref()
        .and_then(|f| doc_line.and_then(|d| locate(text, d, f)))
        .or_else(|| e.location().map(|l| (l.line(), l.column())));
    let mut err = ConfigError::new(msg).at(file, pos.map(|p| p.0), pos.map(|p| p.1));
    if let Some(f) = field {
        err = err.field(f);
    }
    err
}

/// An error about `field` of the document starting on `doc_line`, placed on the field.
pub fn at_field(
    text: &str,
    doc_line: Option<usize>,
    file: Option<&str>,
    field: &str,
    message: String,
) -> ConfigError {
    let pos = doc_line.and_then(|d| locate(text, d, field).or(Some((d, 1))));
    let err = ConfigError::new(message).at(file, pos.map(|p| p.0), pos.map(|p| p.1));
    if field.is_empty() {
        err
    } else {
        err.field(field)
    }
}

/// Parse every document of `text`. Empty documents are skipped. Every unknown field,
/// kind and value of every document is reported; beyond that, the first type error of
/// each document.
pub fn parse_documents(
    text: &str,
    file: Option<&str>,
) -> Result<Vec<SourcedDocument>, Vec<ConfigError>> {
    let (docs, errors) = parse_documents_partial(text, file);
    if errors.is_empty() {
        Ok(docs)
    } else {
        Err(errors)
    }
}

/// [`parse_documents`], also returning the documents that did parse when others did
/// not, so that the set can still be checked for further errors.
pub fn parse_documents_partial(
    text: &str,
    file: Option<&str>,
) -> (Vec<SourcedDocument>, Vec<ConfigError>) {
    if let Some(e) = too_deep(text, file) {
        return (Vec::new(), vec![e]);
    }
    // YAML syntax first: after a syntax error the rest of the stream cannot be trusted.
    let mut values = Vec::new();
    for de in serde_yaml::Deserializer::from_str(text) {
        match serde_yaml::Value::deserialize(de) {
            Ok(v) => values.push(v),
            Err(e) => return (Vec::new(), vec![syntax_error(&e, text, file)]),
        }
    }
    let lines = document_lines(text);
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    // Typed pass straight from the text, so that serde's errors keep their positions.
    for (i, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let Some(value) = values.get(i).filter(|v| !v.is_null()) else {
            continue;
        };
        let doc_line = lines.get(i).copied().flatten();
        let shape = check_document(value);
        if !shape.is_empty() {
            for s in shape {
                errors.push(at_field(text, doc_line, file, &s.field, s.message));
            }
            continue;
        }
        match Document::deserialize(de) {
            Ok(doc) => docs.push(SourcedDocument {
                origin: Origin {
                    file: file.map(str::to_string),
                    line: doc_line,
                },
                doc,
            }),
            Err(e) => errors.push(typed_error(&e, text, doc_line, file)),
        }
    }
    (docs, errors)
}

/// Documents given inline as YAML values (a scenario's `config:` list). Positions are
/// the list index, since values carry no lines.
pub fn parse_value_documents(
    values: &[serde_yaml::Value],
    file: Option<&str>,
) -> Result<Vec<SourcedDocument>, Vec<ConfigError>> {
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let shape = check_document(v);
        if !shape.is_empty() {
            for s in shape {
                errors.push(
                    ConfigError::new(s.message)
                        .at(file, None, None)
                        .field(format!("config[{i}].{}", s.field)),
                );
            }
            continue;
        }
        match Document::deserialize(v.clone()) {
            Ok(doc) => docs.push(SourcedDocument {
                origin: Origin {
                    file: file.map(str::to_string),
                    line: None,
                },
                doc,
            }),
            Err(e) => errors.push(
                ConfigError::new(friendly(&e.to_string()))
                    .at(file, None, None)
                    .field(format!("config[{i}]")),
            ),
        }
    }
    if errors.is_empty() {
        Ok(docs)
    } else {
        Err(errors)
    }
}

/// How deeply a config document may nest (a real one nests 4 or 5 levels).
pub const MAX_DEPTH: usize = 32;

/// An error when the text nests deeper than [`MAX_DEPTH`], found by a linear scan before
/// the YAML parser sees it (deep nesting is what makes parsing slow, and nothing valid
/// needs it). Counts block levels by indentation and `- ` items, plus flow brackets.
fn too_deep(text: &str, file: Option<&str>) -> Option<ConfigError> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    for (n, line) in text.lines().enumerate() {
        let body = line.trim_start_matches(' ');
        if flow == 0 {
            if body.is_empty() || body.starts_with('#') || body.starts_with("---") {
                continue;
            }
            let mut indent = line.len() - body.len();
            let mut rest = body;
            loop {
                while indents.last().is_some_and(|&top| top >= indent) {
                    indents.pop();
                }
                indents.push(indent);
                match rest.strip_prefix("- ") {
                    Some(r) => {
                        let r2 = r.trim_start_matches(' ');
                        indent += 2 + (r.len() - r2.len());
                        rest = r2;
                    }
                    None => break,
                }
            }
        }
        let (mut quote, mut prev) = (None, ' ');
        let mut deepest = flow;
        for c in line.chars() {
            match (quote, c) {
                (None, '#') if prev == ' ' => break,
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), _) if c == q => quote = None,
                (None, '[' | '{') => flow += 1,
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
            deepest = deepest.max(flow);
            prev = c;
        }
        if indents.len() + deepest > MAX_DEPTH {
            return Some(
                ConfigError::new(format!(
                    "nested more than {MAX_DEPTH} levels deep: a shareq config needs only a few"
                ))
                .at(file, Some(n + 1), None),
            );
        }
    }
    None
}

#[cfg(test)]
mod depth_tests {
    use super::{MAX_DEPTH, too_deep};

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let flow = format!("x: {}1{}\n", "[".repeat(40), "]".repeat(40));
        assert!(too_deep(&flow, Some("f.yaml")).is_some());
        let mut block = String::new();
        for i in 0..MAX_DEPTH + 2 {
            block.push_str(&format!("{}k{i}:\n", "  ".repeat(i)));
        }
        let e = too_deep(&block, None).unwrap();
        assert!(e.to_string().contains("nested more than"), "{e}");
        let ok = "kind: QuotaShare\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 1}\nmembers: [a, 'b[', \"c{\"]\n";
        assert!(too_deep(ok, None).is_none());
    }
}
