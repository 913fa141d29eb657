//! The query API's two endpoints as Prometheus serves them
//! (`web/api/v1/api.go`): `/api/v1/query` (`query`, `time`) and
//! `/api/v1/query_range` (`query`, `start`, `end`, `step`), by GET or POST;
//! each parameter checked and refused with Prometheus's words
//! (`invalid parameter "step": …`, 400 `bad_data`), then the test's
//! [`Reply`] rendered at the evaluation time.

use crate::reply::{self, ErrorType, Eval, Reply};
use crate::request::{Request, Response};
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// Most points a range query may ask per series (Prometheus's limit).
const MAX_POINTS: i64 = 11_000;

/// The response to `req`, whose answer is `answer`'s.
pub(crate) fn respond(req: &Request, answer: &dyn Fn(&Request) -> Reply) -> Response {
    let range = match req.path.as_str() {
        "/api/v1/query" => false,
        "/api/v1/query_range" => true,
        _ => return Response::text(404, "404 page not found"),
    };
    if !matches!(req.method.as_str(), "GET" | "POST") {
        return Response::text(405, "Method Not Allowed");
    }
    let eval = if range {
        range_times(req)
    } else {
        instant_time(req)
    };
    let (reply, eval) = match eval {
        Err(refusal) => (refusal, Eval::Instant { at_ms: now_ms() }),
        Ok(eval) if req.query().trim().is_empty() => (
            Reply::error(
                ErrorType::BadData,
                "invalid parameter \"query\": 1:1: parse error: no expression found in input",
            ),
            eval,
        ),
        Ok(eval) => (answer(req), eval),
    };
    render(&reply, eval)
}

/// `reply` as the API writes it, its keys in Prometheus's order
/// (`status` first; `resultType` before `result`).
fn render(reply: &Reply, eval: Eval) -> Response {
    let text = |v: &str| Value::String(v.into()).to_string();
    match reply {
        Reply::Success { data, warnings } => match reply::data_json(data, eval) {
            Ok((kind, result)) => {
                let warnings = if warnings.is_empty() {
                    String::new()
                } else {
                    format!(r#","warnings":{}"#, json!(warnings))
                };
                Response::json(
                    200,
                    format!(
                        r#"{{"status":"success","data":{{"resultType":{},"result":{result}}}{warnings}}}"#,
                        text(kind)
                    ),
                )
            }
            Err(refusal) => render(&refusal, eval),
        },
        Reply::Error { error_type, error } => Response::json(
            error_type.status(),
            format!(
                r#"{{"status":"error","errorType":{},"error":{}}}"#,
                text(error_type.name()),
                text(error)
            ),
        ),
        Reply::Raw {
            status,
            content_type,
            body,
        } => Response::new(*status, content_type, body.as_bytes()),
    }
}

fn invalid(param: &str, why: &str) -> Reply {
    Reply::error(
        ErrorType::BadData,
        &format!("invalid parameter {param:?}: {why}"),
    )
}

/// An instant query's evaluation time: `time`, else the server's now.
fn instant_time(req: &Request) -> Result<Eval, Reply> {
    let at_ms = match req.param("time") {
        None | Some("") => now_ms(),
        Some(t) => parse_time(t)
            .ok_or_else(|| invalid("time", &format!("cannot parse {t:?} to a valid timestamp")))?,
    };
    Ok(Eval::Instant { at_ms })
}

/// A range query's steps: `start`, `end` and `step`, each required.
fn range_times(req: &Request) -> Result<Eval, Reply> {
    let time = |name: &str| {
        let t = req.param(name).unwrap_or_default();
        parse_time(t)
            .ok_or_else(|| invalid(name, &format!("cannot parse {t:?} to a valid timestamp")))
    };
    let start_ms = time("start")?;
    let end_ms = time("end")?;
    if end_ms < start_ms {
        return Err(invalid(
            "end",
            "end timestamp must not be before start time",
        ));
    }
    let step = req.param("step").unwrap_or_default();
    let step_ms = parse_duration(step).ok_or_else(|| {
        invalid(
            "step",
            &format!("cannot parse {step:?} to a valid duration"),
        )
    })?;
    if step_ms <= 0 {
        return Err(invalid(
            "step",
            "zero or negative query resolution step widths are not accepted. Try a positive integer",
        ));
    }
    if (end_ms - start_ms) / step_ms > MAX_POINTS {
        return Err(Reply::error(
            ErrorType::BadData,
            "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)",
        ));
    }
    Ok(Eval::Range {
        start_ms,
        end_ms,
        step_ms,
    })
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// `<rfc3339 | unix_timestamp>` in milliseconds: seconds with an optional
/// fraction, or `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`.
pub fn parse_time(t: &str) -> Option<i64> {
    if let Ok(s) = t.parse::<f64>() {
        return s.is_finite().then(|| (s * 1000.0).round() as i64);
    }
    let (date, clock) = t.split_once(['T', 't'])?;
    let mut ymd = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (ymd.next()??, ymd.next()??, ymd.next()??);
    let (clock, offset_s) = if let Some(c) = clock.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else {
        let at = clock.rfind(['+', '-'])?;
        let (c, off) = clock.split_at(at);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let (oh, om) = off[1..].split_once(':')?;
        (
            c,
            sign * (oh.parse::<i64>().ok()? * 3600 + om.parse::<i64>().ok()? * 60),
        )
    };
    let mut hms = clock.splitn(3, ':');
    let (h, mi) = (
        hms.next()?.parse::<i64>().ok()?,
        hms.next()?.parse::<i64>().ok()?,
    );
    let s: f64 = hms.next()?.parse().ok()?;
    if !(1..=12).contains(&m)
        || !(1..=31).contains(&d)
        || h > 23
        || mi > 59
        || !(0.0..61.0).contains(&s)
    {
        return None;
    }
    let days = days_from_civil(y, m, d);
    let whole = days * 86_400 + h * 3600 + mi * 60 - offset_s;
    Some(whole * 1000 + (s * 1000.0).round() as i64)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `<duration | float>` in milliseconds: seconds with an optional fraction,
/// or Prometheus's `1h30m`, `5m`, `250ms` (units ms s m h d w y).
pub fn parse_duration(t: &str) -> Option<i64> {
    if let Ok(s) = t.parse::<f64>() {
        return s.is_finite().then(|| (s * 1000.0).round() as i64);
    }
    if t.is_empty() {
        return None;
    }
    let mut total = 0i64;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let n: i64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = ["ms", "s", "m", "h", "d", "w", "y"]
            .into_iter()
            .find(|u| rest.starts_with(u))?;
        rest = &rest[unit.len()..];
        let ms = match unit {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            _ => 365 * 86_400_000,
        };
        total = total.checked_add(n.checked_mul(ms)?)?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations_read_as_prometheus_reads_them() {
        assert_eq!(parse_time("1435781451.781"), Some(1_435_781_451_781));
        assert_eq!(
            parse_time("2015-07-01T20:10:51.781Z"),
            Some(1_435_781_451_781)
        );
        assert_eq!(
            parse_time("2015-07-01T22:10:51+02:00"),
            Some(1_435_781_451_000)
        );
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time(""), None);
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(parse_duration("15s"), Some(15_000));
        assert_eq!(parse_duration("1h30m"), Some(5_400_000));
        assert_eq!(parse_duration("250ms"), Some(250));
        assert_eq!(parse_duration("0.5"), Some(500));
        assert_eq!(parse_duration("5x"), None);
        assert_eq!(parse_duration(""), None);
    }
}
