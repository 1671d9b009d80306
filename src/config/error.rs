//! The configuration error: which file, which JSON path, and why.

use std::fmt;

/// A configuration file that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file that was being loaded.
    pub file: String,
    /// JSON path of the offending value (`$` for the whole document).
    pub path: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ConfigError {
    /// Builds an error for `file` at `path`.
    pub fn new(file: &str, path: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            file: file.to_string(),
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.file, self.path, self.reason)
    }
}

impl std::error::Error for ConfigError {}
