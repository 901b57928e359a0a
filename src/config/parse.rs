//! Parsing YAML text (one or several `---` documents) into `Document`s that remember where
//! they came from, so that later errors can point at the file and line.

use super::error::ConfigError;
use crate::model::Document;
use serde::Deserialize;

/// Where a document came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Origin {
    pub file: Option<String>,
    /// 1-based line where the document starts.
    pub line: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SourcedDocument {
    pub origin: Origin,
    pub doc: Document,
}

/// The 1-based line each document of a multi-document text starts on.
fn document_start_lines(text: &str) -> Vec<usize> {
    let mut starts = vec![1];
    for (i, l) in text.lines().enumerate() {
        if l == "---" || l.starts_with("--- ") || l.starts_with("---\t") {
            starts.push(i + 2);
        }
    }
    starts
}

fn yaml_error(e: &serde_yaml::Error, file: Option<&str>) -> ConfigError {
    let (line, col) = e
        .location()
        .map_or((None, None), |l| (Some(l.line()), Some(l.column())));
    // serde_yaml appends " at line X column Y"; we print the position up front instead.
    let mut msg = e.to_string();
    if let Some(i) = msg.find(" at line ") {
        msg.truncate(i);
    }
    ConfigError::new(msg).at(file, line, col)
}

/// Parse every document of `text`. Empty documents are skipped.
pub fn parse_documents(
    text: &str,
    file: Option<&str>,
) -> Result<Vec<SourcedDocument>, Vec<ConfigError>> {
    let starts = document_start_lines(text);
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    // First pass: YAML syntax only. After a syntax error the stream cannot be trusted.
    for de in serde_yaml::Deserializer::from_str(text) {
        if let Err(e) = serde_yaml::Value::deserialize(de) {
            errors.push(yaml_error(&e, file));
            break;
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // Second pass, typed, straight from the text so that errors keep their positions.
    for (i, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let line = starts.get(i).copied();
        match Option::<Document>::deserialize(de) {
            Ok(Some(doc)) => docs.push(SourcedDocument {
                origin: Origin {
                    file: file.map(str::to_string),
                    line,
                },
                doc,
            }),
            Ok(None) => {}
            Err(e) => errors.push(yaml_error(&e, file)),
        }
    }
    if errors.is_empty() {
        Ok(docs)
    } else {
        Err(errors)
    }
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
        match Document::deserialize(v.clone()) {
            Ok(doc) => docs.push(SourcedDocument {
                origin: Origin {
                    file: file.map(str::to_string),
                    line: None,
                },
                doc,
            }),
            Err(e) => errors.push(
                ConfigError::new(e.to_string())
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
