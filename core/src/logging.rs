//! Where the prolog, epilog and CLI log: journald when it is there, stderr
//! otherwise; every event carries the JOB_ID and NODE fields when known.

use tracing_subscriber::prelude::*;

static TO_JOURNALD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Install the global subscriber. Safe to call once per process; a second
/// call is ignored. `RUST_LOG` overrides the level (default info to
/// journald; without journald, warnings and errors only, so a failure is
/// still one line on stderr).
pub fn init(program: &'static str) {
    let journald = std::path::Path::new("/run/systemd/journal/socket")
        .exists()
        .then(|| tracing_journald::layer().ok())
        .flatten()
        // Our fields under their own names (JOB_ID, NODE, VERDICT, …), not
        // tracing-journald's default F_ prefix.
        .map(|l| {
            l.with_syslog_identifier(program.to_string())
                .with_field_prefix(None)
        });
    let _ = TO_JOURNALD.set(journald.is_some());
    let default_level = if journald.is_some() { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let stderr = journald.is_none().then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_target(false)
    });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(journald)
        .with(stderr)
        .try_init();
}

/// Report a failure once: to journald (when there) and as one plain line
/// on stderr, the same printable, bounded line in both ([`stderr_line`]).
pub fn report_error(line: &str) {
    let line = crate::text::shown(line, crate::text::LINE_MAX);
    if TO_JOURNALD.get().copied().unwrap_or(false) {
        tracing::error!("{line}");
    }
    stderr_line(&line);
}

/// Write `line` to stderr as one printable line of at most
/// [`LINE_MAX`](crate::text::LINE_MAX) bytes ([`crate::text::shown`]): the
/// hooks' and the watcher's one way to stderr, which slurmd logs and an
/// admin reads on a terminal. Whatever outside text the line carries (a
/// state file's `left_down`, a daemon's answer, an argument) stays one
/// line, with no control byte, whoever built it.
pub fn stderr_line(line: &str) {
    use std::io::Write;
    let shown = crate::text::shown(line, crate::text::LINE_MAX);
    let _ = writeln!(std::io::stderr().lock(), "{shown}");
}

/// A warning for the journal only: an admin's notice (a deprecated key)
/// that must not add a line to a hook's stderr. Dropped without journald.
pub fn warn_to_journal(line: &str) {
    if TO_JOURNALD.get().copied().unwrap_or(false) {
        tracing::warn!("{line}");
    }
}

/// A span whose fields journald records as JOB_ID and NODE on every event.
pub fn job_span(job_id: u32, node: &str) -> tracing::Span {
    tracing::info_span!("job", job_id = job_id, node = node)
}
