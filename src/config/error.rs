//! A configuration error that names the file, line, column and field, and how to fix it.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or scenario) the error is in, when known.
    pub file: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// The field path, e.g. `qs1.resourceSharingConfiguration.borrowLimit`.
    pub field: Option<String>,
    pub message: String,
}

impl ConfigError {
    pub fn new(message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: None,
            line: None,
            column: None,
            field: None,
            message: message.into(),
        }
    }

    pub fn at(mut self, file: Option<&str>, line: Option<usize>, column: Option<usize>) -> Self {
        if self.file.is_none() {
            self.file = file.map(str::to_string);
        }
        if self.line.is_none() {
            self.line = line;
            self.column = column;
        }
        self
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let mut wrote = false;
        if let Some(file) = &self.file {
            write!(f, "{file}")?;
            wrote = true;
        }
        if let Some(line) = self.line {
            write!(f, "{}{line}", if wrote { ":" } else { "line " })?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
            wrote = true;
        }
        if wrote {
            f.write_str(": ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Every error found in one config set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
