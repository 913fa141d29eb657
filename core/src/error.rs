//! The one error type of slurm-imex: a single line saying what failed, where,
//! and what to do. Everything that reaches an admin or a user goes through it.

use std::fmt;

/// What kind of failure an [`Error`] is, for a caller that decides by it
/// (whose fault, retry or not) rather than by its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Input slurm-imex was given is wrong: a config or rack file, Slurm's
    /// environment or configuration, a value. The line says what to fix.
    Invalid,
    /// The operating system refused a file or device operation.
    Io,
    /// A program slurm-imex runs (scontrol, nvidia-imex-ctl, systemctl)
    /// failed or could not be run.
    Command,
    /// Something did not happen in time (`crate::poll`).
    Timeout,
    /// Not said (an error built with [`Error::new`]).
    Other,
}

/// A one-line, human-readable failure, and its [`Kind`]. The text already
/// carries the "where" (file:line:key, env var, node) and, where known, the
/// "what to do"; `Display` is that one line, whatever the kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: Kind,
    line: String,
}

impl Error {
    /// An error of no particular kind.
    pub fn new(line: impl Into<String>) -> Self {
        Error::of(Kind::Other, line)
    }

    /// An error of `kind`.
    pub fn of(kind: Kind, line: impl Into<String>) -> Self {
        // Keep it one line whatever the source put in it.
        let line: String = line.into();
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        let line = crate::text::cap(&line, crate::text::LINE_MAX);
        Error { kind, line }
    }

    /// Wrong input ([`Kind::Invalid`]).
    pub fn invalid(line: impl Into<String>) -> Self {
        Error::of(Kind::Invalid, line)
    }

    /// A refused file or device operation ([`Kind::Io`]).
    pub fn io(line: impl Into<String>) -> Self {
        Error::of(Kind::Io, line)
    }

    /// A program that failed ([`Kind::Command`]).
    pub fn command(line: impl Into<String>) -> Self {
        Error::of(Kind::Command, line)
    }

    /// Something that did not happen in time ([`Kind::Timeout`]).
    pub fn timeout(line: impl Into<String>) -> Self {
        Error::of(Kind::Timeout, line)
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Prefix this error with more context ("while doing X: <error>"); the
    /// kind stays.
    pub fn context(self, what: impl fmt::Display) -> Self {
        Error::of(self.kind, format!("{what}: {}", self.line))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line)
    }
}

// Hand-written rather than thiserror's derive: one struct, and the derive
// would replace these two impls only.
impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Shorthand for `Err(Error::new(format!(...)))`.
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => { return Err($crate::error::Error::new(format!($($arg)*))) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_one_line_whatever_its_kind() {
        let e = Error::invalid("imex.toml:3: [imex]\n  channel_count:\tnot a number");
        assert_eq!(e.kind(), Kind::Invalid);
        assert_eq!(
            e.to_string(),
            "imex.toml:3: [imex] channel_count: not a number"
        );
        assert_eq!(Error::new("x").kind(), Kind::Other);
    }

    #[test]
    fn context_keeps_the_kind() {
        let e = Error::timeout("gave up waiting for nvidia-imex to exit after 5s")
            .context("epilog on n1");
        assert_eq!(e.kind(), Kind::Timeout);
        assert_eq!(
            e.to_string(),
            "epilog on n1: gave up waiting for nvidia-imex to exit after 5s"
        );
        assert_ne!(e, Error::new(e.to_string()), "kinds tell errors apart");
    }
}
