//! Where the prolog, epilog and CLI log: journald when it is there, stderr
//! otherwise; every event carries the JOB_ID and NODE fields when known.

use tracing_subscriber::prelude::*;

/// Install the global subscriber. Safe to call once per process; a second
/// call is ignored. `RUST_LOG` overrides the level (default info).
pub fn init(program: &'static str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let journald = std::path::Path::new("/run/systemd/journal/socket")
        .exists()
        .then(|| tracing_journald::layer().ok())
        .flatten()
        .map(|l| l.with_syslog_identifier(program.to_string()));
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

/// A span whose fields journald records as JOB_ID and NODE on every event.
pub fn job_span(job_id: u32, node: &str) -> tracing::Span {
    tracing::info_span!("job", job_id = job_id, node = node)
}
