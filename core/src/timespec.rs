//! Time as admins write and read it: `--since 7d`, `--since 2026-11-01`,
//! `--until "2026-11-02 08:00"`, and timestamps printed as UTC.

use crate::error::{Error, Result};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A relative age (`7d`, `12h`, `90m`) back from `now`, or an absolute UTC
/// date/time (`2026-11-01`, `2026-11-01T08:00`, `2026-11-01 08:00:00`).
pub fn parse_point(spec: &str, now: i64, flag: &str) -> Result<i64> {
    let s = spec.trim();
    if let Ok(d) = humantime::parse_duration(s) {
        return i64::try_from(d.as_secs())
            .ok()
            .and_then(|age| now.checked_sub(age))
            .filter(|t| *t >= 0)
            .ok_or_else(|| {
                Error::new(format!(
                    "{flag} \"{}\" reaches back before 1970: give a shorter age or a date",
                    crate::text::cap(spec, 64)
                ))
            });
    }
    let full = match s.len() {
        10 => format!("{s}T00:00:00Z"),
        16 => format!("{s}:00Z"),
        _ => format!("{s}Z"),
    };
    humantime::parse_rfc3339_weak(&full.replace(' ', "T"))
        .or_else(|_| humantime::parse_rfc3339_weak(s))
        .map(|t| t.duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0))
        .map_err(|_| {
            Error::new(format!(
                "{flag} \"{}\" is neither an age (7d, 12h, 30m) nor a UTC date (2026-11-01, 2026-11-01T08:00)",
                crate::text::cap(spec, 64)
            ))
        })
}

/// The last second humantime (RFC 3339, four-digit years) can print.
const MAX_PRINTABLE_TS: i64 = 253_402_300_799;

/// `2026-11-22T02:10:00Z`; a value outside years 1970..=9999 (a corrupt or
/// hand-edited database) prints as it is stored, `@<seconds>`.
pub fn format_ts(ts: i64) -> String {
    if !(0..=MAX_PRINTABLE_TS).contains(&ts) {
        return format!("@{ts}");
    }
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(ts as u64)).to_string()
}

/// `02:10:00`, the time of day (UTC) of `ts`, for event lines whose date
/// the job already says; out of range as [`format_ts`].
pub fn clock_time(ts: i64) -> String {
    let full = format_ts(ts);
    match full.get(11..19) {
        Some(clock) if full.len() == 20 => clock.to_string(),
        _ => full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_dates() {
        let now = 1_800_000_000;
        assert_eq!(parse_point("7d", now, "--since").unwrap(), now - 7 * 86400);
        assert_eq!(parse_point("12h", now, "--since").unwrap(), now - 12 * 3600);
        assert_eq!(
            parse_point("2026-11-01", now, "--since").unwrap(),
            1_793_491_200
        );
        assert_eq!(
            parse_point("2026-11-01T08:00", now, "--since").unwrap(),
            1_793_491_200 + 8 * 3600
        );
        assert_eq!(
            parse_point("2026-11-01 08:00:30", now, "--since").unwrap(),
            1_793_491_200 + 8 * 3600 + 30
        );
        let e = parse_point("last week", now, "--since")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--since \"last week\""), "{e}");
        assert_eq!(format_ts(1_793_491_200), "2026-11-01T00:00:00Z");
        assert_eq!(format_ts(i64::MAX), format!("@{}", i64::MAX));
        assert_eq!(format_ts(-5), "@-5");
        assert_eq!(clock_time(1_793_491_200 + 8 * 3600 + 30), "08:00:30");
        assert_eq!(clock_time(-5), "@-5");
        let e = parse_point("100000000000y", now, "--since").unwrap_err();
        assert!(e.to_string().contains("before 1970"), "{e}");
    }
}
