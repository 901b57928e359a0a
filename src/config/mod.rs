//! Turning YAML into a validated configuration: parsing documents with positions
//! (`parse`), checking a set of documents as one unit (`validate`), loading a whole
//! directory (`dir`).

mod dir;
mod error;
mod parse;
mod validate;

pub use dir::{LoadedConfig, is_config_file, load_dir};
pub use error::{ConfigError, ConfigErrors};
pub use parse::{Origin, SourcedDocument, parse_documents, parse_value_documents};
pub use validate::{ValidConfig, validate};
