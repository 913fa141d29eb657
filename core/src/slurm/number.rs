//! A number in a Slurm config file, read as Slurm reads it: a 32-bit value
//! (`S_P_UINT32`, which `FirstJobId` and `MaxJobId` are) goes through
//! `s_p_handle_uint32` in `src/common/parse_value.c`, which is
//! `strtoul(value, &end, 0)` plus a `k`/`K` suffix and two words. Hand-written:
//! Rust's `str::parse` has none of strtoul's rules (base prefixes, leading
//! blanks, a sign), and no crate reproduces them.

use crate::error::{Error, Result};

/// Slurm's `INFINITE` (`slurm/slurm.h`), what `UNLIMITED` and `INFINITE` read as.
pub const INFINITE: u32 = 0xffff_ffff;

/// `s_p_handle_uint32` (parse_value.c):
/// - `strtoul(value, &end, 0)`: leading blanks skipped, an optional sign, then
///   `0x`/`0X` hex, a leading `0` octal, else decimal;
/// - one `k` or `K` right after the digits multiplies by 1024;
/// - anything left over is refused, unless the whole value is `UNLIMITED` or
///   `INFINITE` (any case), which read as 0xffffffff;
/// - an overflow of `unsigned long`, a value starting with `-`, and a value
///   above 4294967295 are refused.
///
/// The Err is Slurm's own complaint, worded as parse_value.c words it
/// ([`Kind::Invalid`](crate::error::Kind::Invalid)).
pub fn parse_u32(key: &str, value: &str) -> Result<u32> {
    let (num, rest, overflow) = strtoul(value);
    let (num, rest) = match rest.strip_prefix(['k', 'K']) {
        Some(after) => (num.wrapping_mul(1024), after),
        None => (num, rest),
    };
    if !rest.is_empty() {
        return if value.eq_ignore_ascii_case("UNLIMITED") || value.eq_ignore_ascii_case("INFINITE")
        {
            Ok(INFINITE)
        } else {
            Err(Error::invalid(format!(
                "{key} value ({value}) is not a valid number"
            )))
        };
    }
    if overflow {
        return Err(Error::invalid(format!(
            "{key} value ({value}) is out of range"
        )));
    }
    if value.starts_with('-') {
        return Err(Error::invalid(format!(
            "{key} value ({value}) is less than zero"
        )));
    }
    u32::try_from(num)
        .map_err(|_| Error::invalid(format!("{key} value ({value}) is greater than 4294967295")))
}

/// glibc's `strtoul(s, &end, 0)` on a 64-bit `unsigned long`: the value (a
/// negative one wrapped, as C does), what `end` points at, and ERANGE.
fn strtoul(s: &str) -> (u64, &str, bool) {
    let body = s.trim_start_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b');
    let (negative, body) = match body.as_bytes().first() {
        Some(b'-') => (true, &body[1..]),
        Some(b'+') => (false, &body[1..]),
        _ => (false, body),
    };
    let hex_digits = body
        .strip_prefix("0x")
        .or_else(|| body.strip_prefix("0X"))
        .filter(|r| r.starts_with(|c: char| c.is_ascii_hexdigit()));
    let (radix, digits) = match hex_digits {
        Some(r) => (16, r),
        None if body.starts_with('0') => (8, body),
        None => (10, body),
    };
    let len = digits
        .bytes()
        .take_while(|b| (*b as char).is_digit(radix))
        .count();
    if len == 0 {
        // No conversion: `end` is the start of the string.
        return (0, s, false);
    }
    let mut value: u64 = 0;
    let mut overflow = false;
    for b in digits[..len].bytes() {
        let d = u64::from((b as char).to_digit(radix).unwrap_or(0));
        match value
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(d))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
    }
    if overflow {
        return (u64::MAX, &digits[len..], true);
    }
    let value = if negative {
        value.wrapping_neg()
    } else {
        value
    };
    (value, &digits[len..], false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row is what slurmctld makes of `FirstJobId=<value>`
    /// (parse_value.c, s_p_handle_uint32; glibc strtoul).
    #[test]
    fn numbers_read_as_strtoul_base_0_with_a_k_suffix() {
        let ok = [
            ("2047", 2047),
            ("0x7ff", 2047),
            ("0X7FF", 2047),
            ("03777", 2047),
            ("0", 0),
            ("00", 0),
            ("+12", 12),
            (" 12", 12),
            ("2k", 2048),
            ("2K", 2048),
            ("0x2k", 2048),
            ("4294967295", u32::MAX),
            ("UNLIMITED", INFINITE),
            ("infinite", INFINITE),
            ("", 0),
        ];
        for (value, want) in ok {
            assert_eq!(parse_u32("FirstJobId", value), Ok(want), "{value:?}");
        }
    }

    #[test]
    fn what_slurm_refuses_it_refuses_in_its_own_words() {
        let bad = [
            ("08", "is not a valid number"),
            ("0x", "is not a valid number"),
            ("12abc", "is not a valid number"),
            ("2kk", "is not a valid number"),
            ("2M", "is not a valid number"),
            ("1.5", "is not a valid number"),
            ("-1", "is less than zero"),
            ("-0", "is less than zero"),
            ("4294967296", "is greater than 4294967295"),
            ("99999999999999999999", "is out of range"),
            ("5000000k", "is greater than 4294967295"),
        ];
        for (value, why) in bad {
            let e = parse_u32("MaxJobId", value).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("MaxJobId value ({value}) {why}"),
                "{value:?}"
            );
            assert_eq!(e.kind(), crate::error::Kind::Invalid);
        }
    }
}
