//! The documented range of every duration and count in the config
//! (conf-examples/imex.toml states each one), and the check each section
//! runs on its own keys with it. Values are checked once at load, so no
//! later arithmetic on them can overflow: the largest duration allowed is
//! 100 years, far inside `Instant` and `SystemTime` range, and the largest
//! busy timeout fits SQLite's `int` milliseconds. This module lists the
//! bounds of the keys core reads (`[slurm]`'s; `[imex]`'s channel count is
//! bounded by its type); every other section lists its own beside its
//! schema.

use super::Config;
use std::time::Duration;

pub const MS: Duration = Duration::from_millis(1);
pub const S: Duration = Duration::from_secs(1);
pub const MIN: Duration = Duration::from_secs(60);
pub const HOUR: Duration = Duration::from_secs(3600);
pub const DAY: Duration = Duration::from_secs(86400);

/// A duration key and its inclusive range; `zero_ok` allows 0 as a
/// documented special value outside the range.
pub struct DurationBound {
    pub key: &'static str,
    pub min: Duration,
    pub max: Duration,
    pub zero_ok: Option<&'static str>,
}

impl DurationBound {
    /// `key`'s value `v` must lie in `min..=max`.
    pub fn of(key: &'static str, min: Duration, max: Duration, v: Duration) -> (Self, Duration) {
        let zero_ok = None;
        (
            DurationBound {
                key,
                min,
                max,
                zero_ok,
            },
            v,
        )
    }
}

/// A count key and its inclusive range.
pub struct CountBound {
    pub key: &'static str,
    pub min: u64,
    pub max: u64,
}

impl CountBound {
    /// `key`'s value `v` must lie in `min..=max`.
    pub fn of(key: &'static str, min: u64, max: u64, v: u64) -> (Self, u64) {
        (CountBound { key, min, max }, v)
    }
}

/// The bounds of the plugin's keys: `[slurm] scontrol_timeout`.
pub fn durations(c: &Config) -> Vec<(DurationBound, Duration)> {
    let timeout = c.slurm.scontrol_timeout.0;
    vec![DurationBound::of(
        "slurm.scontrol_timeout",
        S,
        5 * MIN,
        timeout,
    )]
}

/// The first value out of its range, as (key, the reason and the fix).
pub fn first_violation(
    durations: Vec<(DurationBound, Duration)>,
    counts: Vec<(CountBound, u64)>,
) -> Option<(&'static str, String)> {
    for (b, v) in durations {
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
    for (b, v) in counts {
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

    fn first(c: &Config) -> Option<(&'static str, String)> {
        first_violation(durations(c), Vec::new())
    }

    #[test]
    fn defaults_are_in_range_and_extremes_are_not() {
        let mut c = Config::default();
        assert!(first(&c).is_none());
        c.slurm.scontrol_timeout.0 = Duration::from_secs(86400);
        assert_eq!(first(&c).unwrap().0, "slurm.scontrol_timeout");
    }
}
