//! The one error type of slurm-imex: a single line saying what failed, where,
//! and what to do. Everything that reaches an admin or a user goes through it.

use std::fmt;

/// A one-line, human-readable failure. The text already carries the "where"
/// (file:line:key, env var, node) and, where known, the "what to do".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    line: String,
}

impl Error {
    pub fn new(line: impl Into<String>) -> Self {
        // Keep it one line whatever the source put in it.
        let line: String = line.into();
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        let line = crate::text::cap(&line, crate::text::LINE_MAX);
        Error { line }
    }

    /// Prefix this error with more context ("while doing X: <error>").
    pub fn context(self, what: impl fmt::Display) -> Self {
        Error::new(format!("{what}: {}", self.line))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Shorthand for `Err(Error::new(format!(...)))`.
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => { return Err($crate::error::Error::new(format!($($arg)*))) };
}
