//! What the fake answers a query with, in the API's JSON: the envelope
//! (`status`, `data`, `errorType`, `error`, `warnings`), the result shapes
//! (`vector`, `matrix`, `scalar`, `string`), timestamps as Prometheus writes
//! them (seconds, to the millisecond) and sample values as strings
//! (`"+Inf"`, `"NaN"`), and an error's type with its status code.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// One series of an instant vector: its labels (`__name__` among them) and
/// its value; the fake stamps the evaluation time.
#[derive(Clone, Debug)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    /// The value as the API writes it (a string).
    pub value: String,
}

/// One series of a range vector: labels and `(unix seconds, value)` points.
#[derive(Clone, Debug)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<(f64, String)>,
}

/// The `errorType` of an error answer, which sets its status code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    /// 400: a parameter missing or wrong (a query that does not parse).
    BadData,
    /// 422: an expression that cannot be executed.
    Execution,
    /// 503: the query timed out.
    Timeout,
    /// 503: the query was canceled.
    Canceled,
    /// 500
    Internal,
    /// 503
    Unavailable,
    /// 404
    NotFound,
}

impl ErrorType {
    /// Its name in the answer.
    pub fn name(self) -> &'static str {
        match self {
            ErrorType::BadData => "bad_data",
            ErrorType::Execution => "execution",
            ErrorType::Timeout => "timeout",
            ErrorType::Canceled => "canceled",
            ErrorType::Internal => "internal",
            ErrorType::Unavailable => "unavailable",
            ErrorType::NotFound => "not_found",
        }
    }

    /// The status code Prometheus answers it with.
    pub fn status(self) -> u16 {
        match self {
            ErrorType::BadData => 400,
            ErrorType::Execution => 422,
            ErrorType::Timeout | ErrorType::Canceled | ErrorType::Unavailable => 503,
            ErrorType::Internal => 500,
            ErrorType::NotFound => 404,
        }
    }
}

/// What a query's result is.
#[derive(Clone, Debug)]
pub enum Data {
    /// An instant vector; over a range query, each series's value at
    /// every step (a matrix), as Prometheus evaluates it.
    Vector(Vec<Sample>),
    /// A range vector (`up[5m]`), or a range query's result as given.
    Matrix(Vec<Series>),
    /// A number; over a range query, one series without labels.
    Scalar(String),
    /// A string literal (an instant query only).
    String(String),
}

/// The answer to one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200, `"status":"success"`, with any warnings.
    Success { data: Data, warnings: Vec<String> },
    /// `"status":"error"`, with its type's status code.
    Error {
        error_type: ErrorType,
        error: String,
    },
    /// Anything at all in place of the API's answer: a proxy's login page,
    /// a truncated body, an answer built by hand.
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
}

impl Reply {
    /// No series matched.
    pub fn empty() -> Reply {
        Self::vector(Vec::new())
    }

    pub fn vector(samples: Vec<Sample>) -> Reply {
        Self::success(Data::Vector(samples))
    }

    pub fn matrix(series: Vec<Series>) -> Reply {
        Self::success(Data::Matrix(series))
    }

    pub fn scalar(value: f64) -> Reply {
        Self::success(Data::Scalar(number(value)))
    }

    fn success(data: Data) -> Reply {
        Reply::Success {
            data,
            warnings: Vec::new(),
        }
    }

    /// A success with `warning` among its warnings.
    pub fn warn(self, warning: &str) -> Reply {
        match self {
            Reply::Success { data, mut warnings } => {
                warnings.push(warning.into());
                Reply::Success { data, warnings }
            }
            other => other,
        }
    }

    pub fn error(error_type: ErrorType, error: &str) -> Reply {
        Reply::Error {
            error_type,
            error: error.into(),
        }
    }

    /// `body` with `status`, as `content_type`.
    pub fn raw(status: u16, content_type: &str, body: &str) -> Reply {
        Reply::Raw {
            status,
            content_type: content_type.into(),
            body: body.into(),
        }
    }

    /// `body` with `status`, as `application/json` (whatever it holds).
    pub fn json(status: u16, body: &str) -> Reply {
        Self::raw(status, "application/json", body)
    }
}

impl Sample {
    /// A series with `labels` and value `value`.
    pub fn new<K: Into<String>, V: Into<String>>(
        labels: impl IntoIterator<Item = (K, V)>,
        value: f64,
    ) -> Sample {
        Self::with_text(labels, &number(value))
    }

    /// A series whose value is `text` as it is (a value no Prometheus
    /// would write, for a test of what the client makes of it).
    pub fn with_text<K: Into<String>, V: Into<String>>(
        labels: impl IntoIterator<Item = (K, V)>,
        text: &str,
    ) -> Sample {
        Sample {
            labels: labels_of(labels),
            value: text.into(),
        }
    }
}

impl Series {
    /// A series with `labels` and `(unix seconds, value)` points.
    pub fn new<K: Into<String>, V: Into<String>>(
        labels: impl IntoIterator<Item = (K, V)>,
        points: impl IntoIterator<Item = (f64, f64)>,
    ) -> Series {
        Series {
            labels: labels_of(labels),
            points: points.into_iter().map(|(t, v)| (t, number(v))).collect(),
        }
    }
}

fn labels_of<K: Into<String>, V: Into<String>>(
    labels: impl IntoIterator<Item = (K, V)>,
) -> BTreeMap<String, String> {
    labels
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}

/// A sample value as Prometheus writes it (Go's `FormatFloat(v, 'f', -1,
/// 64)`, and `+Inf`, `-Inf`, `NaN`).
pub fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        v.to_string()
    }
}

/// A timestamp in milliseconds as the API writes it: seconds, with the
/// milliseconds as a fraction only when there are any.
pub(crate) fn timestamp(ms: i64) -> Value {
    if ms % 1000 == 0 {
        json!(ms / 1000)
    } else {
        json!(ms as f64 / 1000.0)
    }
}

/// A point: `[<time>, "<value>"]`.
fn point(ms: i64, value: &str) -> Value {
    json!([timestamp(ms), value])
}

fn metric(labels: &BTreeMap<String, String>) -> Value {
    Value::Object(
        labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect::<Map<_, _>>(),
    )
}

/// When a query is evaluated: at one time, or at each step of a range.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Eval {
    Instant {
        at_ms: i64,
    },
    Range {
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
    },
}

impl Eval {
    fn steps(self) -> Vec<i64> {
        match self {
            Eval::Instant { at_ms } => vec![at_ms],
            Eval::Range {
                start_ms,
                end_ms,
                step_ms,
            } => (0..)
                .map(|k| start_ms + k * step_ms)
                .take_while(|t| *t <= end_ms)
                .collect(),
        }
    }
}

/// `data` evaluated at `eval`: its `resultType` and its `result`; an
/// error where Prometheus would not evaluate it (a string over a range).
pub(crate) fn data_json(data: &Data, eval: Eval) -> Result<(&'static str, Value), Reply> {
    let range = matches!(eval, Eval::Range { .. });
    let steps = eval.steps();
    let at = steps.first().copied().unwrap_or_default();
    let series = |labels: &BTreeMap<String, String>, values: Vec<Value>| json!({"metric": metric(labels), "values": values});
    Ok(match data {
        Data::Vector(samples) if range => (
            "matrix",
            samples
                .iter()
                .map(|s| {
                    series(
                        &s.labels,
                        steps.iter().map(|t| point(*t, &s.value)).collect(),
                    )
                })
                .collect(),
        ),
        Data::Vector(samples) => (
            "vector",
            samples
                .iter()
                .map(|s| json!({"metric": metric(&s.labels), "value": point(at, &s.value)}))
                .collect(),
        ),
        Data::Matrix(all) => (
            "matrix",
            all.iter()
                .map(|s| {
                    let values = s.points.iter();
                    series(
                        &s.labels,
                        values
                            .map(|(t, v)| point((t * 1000.0).round() as i64, v))
                            .collect(),
                    )
                })
                .collect(),
        ),
        Data::Scalar(v) if range => (
            "matrix",
            json!([series(
                &BTreeMap::new(),
                steps.iter().map(|t| point(*t, v)).collect()
            )]),
        ),
        Data::Scalar(v) => ("scalar", point(at, v)),
        Data::String(_) if range => return Err(Reply::error(
            ErrorType::BadData,
            "invalid expression type \"string\" for range query, must be Scalar or instant Vector",
        )),
        Data::String(s) => ("string", point(at, s)),
    })
}
