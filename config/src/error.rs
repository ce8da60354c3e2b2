//! Config errors: each names where it happened (field path or YAML position) and what was wrong.

use std::fmt;
use std::path::PathBuf;

use serde_json::Value;

/// One problem found while loading a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The file could not be read.
    Io { file: PathBuf, message: String },
    /// The text is not valid YAML (or holds more than one document).
    Syntax {
        line: u64,
        column: u64,
        message: String,
    },
    /// A field is missing, unknown, of the wrong type, or has a disallowed value.
    Field { path: String, message: String },
}

impl ConfigError {
    pub(crate) fn field(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Field {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The field path (`peers[1].holdTime`), if the error is about a field.
    pub fn path(&self) -> Option<&str> {
        match self {
            ConfigError::Field { path, .. } => Some(path),
            _ => None,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Io { file, message } => write!(f, "{}: {message}", file.display()),
            ConfigError::Syntax {
                line,
                column,
                message,
            } => write!(f, "line {line}, column {column}: {message}"),
            ConfigError::Field { path, message } if path.is_empty() => {
                write!(f, "(top level): {message}")
            }
            ConfigError::Field { path, message } => write!(f, "{path}: {message}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in one config, in document order. Never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(Vec<ConfigError>);

impl ConfigErrors {
    pub(crate) fn new(errors: Vec<ConfigError>) -> Self {
        debug_assert!(!errors.is_empty());
        ConfigErrors(errors)
    }

    pub fn errors(&self) -> &[ConfigError] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// One line per error, as printed.
    pub fn lines(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> Self {
        ConfigErrors(vec![error])
    }
}

impl IntoIterator for ConfigErrors {
    type Item = ConfigError;
    type IntoIter = std::vec::IntoIter<ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects errors while walking the document.
#[derive(Debug, Default)]
pub(crate) struct Errors(pub(crate) Vec<ConfigError>);

impl Errors {
    pub(crate) fn push(&mut self, path: &str, message: impl Into<String>) {
        self.0.push(ConfigError::field(path, message));
    }

    /// `<path>: <value> is not allowed (<rule>)`.
    pub(crate) fn not_allowed(&mut self, path: &str, value: impl fmt::Display, rule: &str) {
        self.push(path, format!("{value} is not allowed ({rule})"));
    }
}

/// A value as the user wrote it: strings quoted, collections compact and cut short.
pub(crate) fn show(value: &Value) -> String {
    const MAX: usize = 60;
    let text = match value {
        Value::Null => "null".to_owned(),
        other => serde_json::to_string(other).unwrap_or_else(|_| other.to_string()),
    };
    if text.chars().count() <= MAX {
        return text;
    }
    let cut: String = text.chars().take(MAX).collect();
    format!("{cut}…")
}

/// A string value quoted like [`show`] does, for values already extracted.
pub(crate) fn quoted(text: &str) -> String {
    show(&Value::String(text.to_owned()))
}
