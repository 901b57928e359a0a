//! The one-line text input the console's prompts and the submit form type into; a module of
//! its own so the console state (`app`) and the form (`popups::submit`) both import it
//! without importing each other.

/// A one-line text input (cursor at the end).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineInput {
    pub text: String,
}

impl LineInput {
    pub fn new(text: &str) -> LineInput {
        LineInput { text: text.into() }
    }
}
