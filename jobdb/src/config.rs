//! `[database]` and `[metrics]`: where the node's job database is and how
//! long it keeps records, and the Prometheus textfile export built from it.
//! Their schema, defaults and bounds live here, beside the code that reads
//! them; the programs assemble them with the rest of the file
//! (`slurm-imex-settings`).

use serde::{Deserialize, Serialize};
use slurm_imex_core::config::bounds::{first_violation, CountBound, DurationBound};
use slurm_imex_core::config::bounds::{DAY, HOUR, MIN};
use slurm_imex_core::config::{
    must_be_absolute, AutoPath, Documented, HumanDuration, Key, Section,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    pub path: PathBuf,
    /// Records older than this are deleted (at most once a day, by the epilog).
    pub retention: HumanDuration,
    /// How long a writer waits for a lock held by another prolog/epilog.
    pub busy_timeout: HumanDuration,
}

impl Documented for DatabaseConfig {
    const TABLE: &'static str = "database";
    const READ_BY: &'static str =
        "the epilog, the watcher, `slurm-imex check`, the CLI's history, show and gpus";
    const KEYS: &'static [Key] = &[
        Key::new("path", r#""/var/lib/slurm-imex/jobs.db""#, "The node's job database (SQLite), root's, mode 0600."),
        Key::new("retention", r#""180d""#, "Records older than this are deleted by the epilog, at most once a day (1h to 36500d, or 0: keep every record)."),
        Key::new("busy_timeout", r#""10s""#, "How long a writer waits for the lock of a concurrent prolog or epilog (0s to 10m)."),
    ];
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            path: "/var/lib/slurm-imex/jobs.db".into(),
            retention: HumanDuration(Duration::from_secs(180 * 86400)),
            busy_timeout: HumanDuration(Duration::from_secs(10)),
        }
    }
}

/// Debian's prometheus-node-exporter reads this directory by default.
pub const DEBIAN_TEXTFILE_DIR: &str = "/var/lib/prometheus/node-exporter";

/// The Prometheus textfile export (slurm_imex_jobdb::metrics).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// node_exporter's textfile collector directory: "auto" (Debian's
    /// /var/lib/prometheus/node-exporter, only when it exists), "none", or
    /// a path (must exist).
    pub textfile_dir: AutoPath,
    /// How many of this node's latest jobs the per-job export
    /// (slurm_imex_jobs.prom) keeps, so Prometheus scrapes each at least
    /// once while the series per node stay bounded; 0: no per-job export.
    pub job_series: u32,
    /// A job leaves the per-job export this long after its epilog (or
    /// sooner, when `job_series` newer jobs push it out).
    pub job_series_for: HumanDuration,
}

impl MetricsConfig {
    /// Where the export goes, if anywhere: `auto` exports only when Debian's
    /// node_exporter directory exists; a configured path always (it must exist).
    pub fn textfile_dir(&self) -> Option<PathBuf> {
        match &self.textfile_dir {
            AutoPath::None => None,
            AutoPath::Path(p) => Some(p.clone()),
            AutoPath::Auto => {
                let p = Path::new(DEBIAN_TEXTFILE_DIR);
                p.is_dir().then(|| p.to_path_buf())
            }
        }
    }
}

impl Documented for MetricsConfig {
    const TABLE: &'static str = "metrics";
    const READ_BY: &'static str =
        "the epilog, the watcher and `slurm-imex check` (the Prometheus textfile export)";
    const KEYS: &'static [Key] = &[
        Key::new("textfile_dir", r#""auto""#, "node_exporter's textfile directory: \"auto\" (Debian's, when it exists), \"none\", or a root-owned path."),
        Key::new("job_series", "16", "How many of this node's latest jobs the per-job export keeps (0 to 256; 0: none)."),
        Key::new("job_series_for", r#""30m""#, "How long a job stays in the per-job export after its epilog (1m to 7d)."),
    ];
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            textfile_dir: AutoPath::Auto,
            job_series: 16,
            job_series_for: HumanDuration(Duration::from_secs(30 * 60)),
        }
    }
}

impl Section for DatabaseConfig {
    fn first_problem(&self) -> Option<(&'static str, String)> {
        let busy = DurationBound::of(
            "database.busy_timeout",
            Duration::ZERO,
            10 * MIN,
            self.busy_timeout.0,
        );
        let (mut retention, kept) =
            DurationBound::of("database.retention", HOUR, 36500 * DAY, self.retention.0);
        retention.zero_ok = Some("0 keeps every record forever");
        first_violation(vec![busy, (retention, kept)], vec![]).or_else(|| {
            let relative = !self.path.is_absolute();
            relative.then(|| ("database.path", must_be_absolute(&self.path)))
        })
    }
}

impl Section for MetricsConfig {
    fn first_problem(&self) -> Option<(&'static str, String)> {
        let held = self.job_series_for.0;
        let durations = vec![DurationBound::of(
            "metrics.job_series_for",
            MIN,
            7 * DAY,
            held,
        )];
        let series = self.job_series as u64;
        let counts = vec![CountBound::of("metrics.job_series", 0, 256, series)];
        first_violation(durations, counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_in_range_and_extremes_are_not() {
        let mut c = DatabaseConfig::default();
        assert!(c.first_problem().is_none());
        assert!(MetricsConfig::default().first_problem().is_none());
        c.busy_timeout.0 = Duration::from_secs(30 * 86400);
        let (k, why) = c.first_problem().unwrap();
        assert_eq!(k, "database.busy_timeout");
        assert!(why.contains("10m"), "{why}");
        c = DatabaseConfig::default();
        c.retention.0 = Duration::ZERO;
        assert!(c.first_problem().is_none(), "0 = keep forever");
    }
}
