//! The documented range of every duration and count in the config
//! (conf-examples/imex.toml states each one). Values are checked once at
//! load, so no later arithmetic on them can overflow: the largest duration
//! allowed is 100 years, far inside `Instant` and `SystemTime` range, and
//! the largest busy timeout fits SQLite's `int` milliseconds.

use super::Config;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const S: Duration = Duration::from_secs(1);
const MIN: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86400);

/// A duration key and its inclusive range; `zero_ok` allows 0 as a
/// documented special value outside the range.
pub struct DurationBound {
    pub key: &'static str,
    pub min: Duration,
    pub max: Duration,
    pub zero_ok: Option<&'static str>,
}

/// A count key and its inclusive range.
pub struct CountBound {
    pub key: &'static str,
    pub min: u64,
    pub max: u64,
}

/// Upper bound on `[imex] max_nodes` (and so on any hostlist's expansion).
pub const MAX_NODES_LIMIT: u64 = 16384;

pub fn durations(c: &Config) -> Vec<(DurationBound, Duration)> {
    let d = |key, min, max, v: Duration| {
        (
            DurationBound {
                key,
                min,
                max,
                zero_ok: None,
            },
            v,
        )
    };
    vec![
        d("imex.ready_timeout", 100 * MS, HOUR, c.imex.ready_timeout.0),
        d("imex.ready_poll_max", MS, MIN, c.imex.ready_poll_max.0),
        d(
            "imex.watch.interval",
            100 * MS,
            10 * MIN,
            c.imex.watch.interval.0,
        ),
        d(
            "imex.daemon.stop_timeout",
            100 * MS,
            10 * MIN,
            c.imex.daemon.stop_timeout.0,
        ),
        d(
            "imex.daemon.start_timeout",
            S,
            10 * MIN,
            c.imex.daemon.start_timeout.0,
        ),
        d(
            "imex.daemon.ctl_timeout",
            100 * MS,
            5 * MIN,
            c.imex.daemon.ctl_timeout.0,
        ),
        d(
            "health.gate_timeout",
            100 * MS,
            10 * MIN,
            c.health.gate_timeout.0,
        ),
        d(
            "slurm.scontrol_timeout",
            S,
            5 * MIN,
            c.slurm.scontrol_timeout.0,
        ),
        d(
            "database.busy_timeout",
            Duration::ZERO,
            10 * MIN,
            c.database.busy_timeout.0,
        ),
        d(
            "metrics.job_series_for",
            MIN,
            7 * DAY,
            c.metrics.job_series_for.0,
        ),
        d("job.query_timeout", S, 5 * MIN, c.job.query_timeout.0),
        d("job.store_wait", Duration::ZERO, DAY, c.job.store_wait.0),
        d(
            "job.store_backfill",
            HOUR,
            366 * DAY,
            c.job.store_backfill.0,
        ),
        (
            DurationBound {
                key: "database.retention",
                min: HOUR,
                max: 36500 * DAY,
                zero_ok: Some("0 keeps every record forever"),
            },
            c.database.retention.0,
        ),
    ]
}

pub fn counts(c: &Config) -> Vec<(CountBound, u64)> {
    vec![
        (
            CountBound {
                key: "imex.max_nodes",
                min: 1,
                max: MAX_NODES_LIMIT,
            },
            c.imex.max_nodes as u64,
        ),
        (
            CountBound {
                key: "imex.watch.max_restarts",
                min: 0,
                max: 100,
            },
            c.imex.watch.max_restarts as u64,
        ),
        (
            CountBound {
                key: "health.expected_gpus",
                min: 0,
                max: 1024,
            },
            c.health.expected_gpus as u64,
        ),
        (
            CountBound {
                key: "metrics.job_series",
                min: 0,
                max: 256,
            },
            c.metrics.job_series as u64,
        ),
    ]
}

/// The first value out of its range, as (key, the reason and the fix).
pub fn first_violation(c: &Config) -> Option<(&'static str, String)> {
    for (b, v) in durations(c) {
        if v.is_zero() && b.zero_ok.is_some() {
            continue;
        }
        if v < b.min || v > b.max {
            let zero = b
                .zero_ok
                .map(|z| format!(", or 0 ({z})"))
                .unwrap_or_default();
            return Some((
                b.key,
                format!(
                    "{} is out of range: use {} to {}{zero}",
                    humantime::format_duration(v),
                    humantime::format_duration(b.min),
                    humantime::format_duration(b.max)
                ),
            ));
        }
    }
    for (b, v) in counts(c) {
        if v < b.min || v > b.max {
            return Some((
                b.key,
                format!("{v} is out of range: use {} to {}", b.min, b.max),
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_in_range_and_extremes_are_not() {
        let mut c = Config::default();
        assert!(first_violation(&c).is_none());
        c.database.busy_timeout.0 = Duration::from_secs(30 * 86400);
        let (k, why) = first_violation(&c).unwrap();
        assert_eq!(k, "database.busy_timeout");
        assert!(why.contains("10m"), "{why}");
        c = Config::default();
        c.database.retention.0 = Duration::ZERO;
        assert!(first_violation(&c).is_none(), "0 = keep forever");
        c.imex.max_nodes = usize::MAX;
        assert_eq!(first_violation(&c).unwrap().0, "imex.max_nodes");
    }
}
