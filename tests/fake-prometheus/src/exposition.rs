//! What Prometheus keeps of a scrape: the text exposition format (what a
//! node's textfile or `/metrics` holds) read into the samples a query then
//! answers with, label values unescaped (`\\`, `\"`, `\n`).
//!
//! One departure, on purpose: Prometheus keeps an escape the format does not
//! define (`\t`) as it is written; here it fails the scrape, so a test of
//! what writes the exposition sees the writer's mistake.

use crate::reply::Sample;
use std::collections::BTreeMap;

/// The samples of `text`, each with its `__name__`; comment and blank lines
/// skipped, a sample's timestamp dropped. A line that does not parse fails
/// the whole scrape, as it does in Prometheus, naming the line.
pub fn scrape(text: &str) -> Result<Vec<Sample>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| sample(l).ok_or_else(|| format!("not a sample: {l:?}")))
        .collect()
}

/// One line: `name[{label="value",…}] value [timestamp]`.
fn sample(line: &str) -> Option<Sample> {
    let line = line.trim();
    let (name, mut rest) = line.split_at(line.find(['{', ' ', '\t']).unwrap_or(line.len()));
    if name.is_empty() {
        return None;
    }
    let mut labels = BTreeMap::from([("__name__".to_string(), name.to_string())]);
    if let Some(mut left) = rest.strip_prefix('{') {
        loop {
            left = left.trim_start_matches([',', ' ']);
            if let Some(after) = left.strip_prefix('}') {
                rest = after;
                break;
            }
            let (key, quoted) = left.split_once("=\"")?;
            let (value, after) = unquote(quoted)?;
            labels.insert(key.trim().to_string(), value);
            left = after;
        }
    }
    let value = parse_value(rest.split_whitespace().next()?)?;
    Some(Sample::new(labels, value))
}

/// A label value to its closing quote, unescaped, and what follows the
/// quote.
fn unquote(s: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &s[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                c @ ('\\' | '"') => value.push(c),
                _ => return None,
            },
            c => value.push(c),
        }
    }
    None
}

/// A sample value as Prometheus reads it (`+Inf`, `-Inf`, `NaN` too).
fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => v.parse().ok(),
    }
}
