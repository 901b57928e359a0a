//! Turning YAML into a validated configuration: telling a document's kind (`document`),
//! parsing documents with positions (`parse`), checking a set of documents as one unit
//! (`validate`), loading a whole directory (`dir`), watching it for changes (`watch`),
//! summarising it (`summary`), and checking the users and groups it names against this
//! machine (`people`).

mod dir;
mod document;
mod error;
mod locate;
mod parse;
mod people;
mod schema;
mod suggest;
mod summary;
mod validate;
mod watch;

pub use dir::{DirSnapshot, FileText, LoadedConfig, is_config_file, load_dir};
pub use document::{DOCUMENT_KINDS, Document};
pub use error::{ConfigError, ConfigErrors};
pub use locate::locate;
pub use parse::{
    Origin, SourcedDocument, parse_documents, parse_documents_partial, parse_value_documents,
};
pub use people::unknown_people;
pub use suggest::{did_you_mean, edit_distance};
pub use summary::{
    UnitSummary, borrow_cap, borrow_cap_text, changes, min_runtime_notes, one_line, slice_notes,
    units, user_policy_text, warnings,
};
pub use validate::{Texts, valid_name, valid_principal, validate, validate_texts};
pub use watch::{ConfigUpdate, DEBOUNCE, Refusals, Watcher};
