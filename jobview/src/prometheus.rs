//! The nodes' per-job series, from Prometheus's HTTP API (`/api/v1/query`):
//! the last value of every `slurm_imex_job_*` series of the given jobs
//! within a window, as samples (slurm_imex_jobsummary::series).

use serde::Deserialize;
use slurm_imex_core::config::http_url;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::text::{cap, PIECE_MAX};
use slurm_imex_jobsummary::series::{Sample, PREFIX};
use std::collections::BTreeMap;
use std::time::Duration;

/// Jobs asked for in one query (the selector is a regex of their ids).
pub const JOBS_PER_QUERY: usize = 100;
/// Most bytes of one answer read (a 1,000-node job's series fit well inside).
const ANSWER_MAX: u64 = 256 << 20;

/// Where and how long to ask.
pub struct Server<'a> {
    pub url: &'a str,
    pub timeout: Duration,
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Option<Data>,
}

#[derive(Deserialize)]
struct Data {
    result: Vec<Series>,
}

#[derive(Deserialize)]
struct Series {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// The PromQL for these jobs' series: each series's last value in the
/// `range_s` seconds before the evaluation time (last_over_time keeps the
/// series name).
pub fn query_text(job_ids: &[u32], range_s: u64) -> String {
    let ids: Vec<String> = job_ids.iter().map(u32::to_string).collect();
    format!(
        "last_over_time({{__name__=~\"{PREFIX}.+\",jobid=~\"{}\"}}[{}s])",
        ids.join("|"),
        range_s.max(60)
    )
}

/// The samples of `job_ids`' series, looking back `range_s` from the
/// server's own now (not this host's: a `time` a little behind the
/// server's clock would miss the newest scrape).
pub fn job_samples(server: &Server, job_ids: &[u32], range_s: u64) -> Result<Vec<Sample>> {
    let base = server.url.trim_end_matches('/');
    // Checked when the config is read; this is for a server given otherwise.
    if let Some(why) = http_url::problem(base) {
        return Err(Error::invalid(format!(
            "[job] prometheus_url = {:?} {why}",
            cap(base, PIECE_MAX)
        )));
    }
    let url = format!("{base}/api/v1/query");
    let agent = ureq::AgentBuilder::new().timeout(server.timeout).build();
    let response = agent
        .get(&url)
        .query("query", &query_text(job_ids, range_s))
        .call();
    let body = match response {
        Ok(r) => r,
        // Prometheus answers a bad query with 400 and a JSON error.
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => {
            return Err(Error::new(format!(
                "Prometheus at {base} did not answer: {}",
                cap(&e.to_string(), PIECE_MAX)
            )))
        }
    };
    let answer: Answer =
        serde_json::from_reader(std::io::Read::take(body.into_reader(), ANSWER_MAX)).map_err(
            |e| {
                Error::new(format!(
                    "Prometheus at {base} answered something that is not its API's JSON: {}",
                    cap(&e.to_string(), PIECE_MAX)
                ))
            },
        )?;
    samples_of(answer, base)
}

/// The samples of an API answer from `base`; an error answer is the
/// command's failure, naming the server and Prometheus's own words. Every
/// piece of its text (the error, each label) is cut to [`PIECE_MAX`] here,
/// before it can reach a line or a table.
fn samples_of(answer: Answer, base: &str) -> Result<Vec<Sample>> {
    if answer.status != "success" {
        let why = answer
            .error
            .unwrap_or_else(|| format!("status {}", answer.status));
        return Err(Error::new(format!(
            "Prometheus at {base}: {}",
            cap(&why, PIECE_MAX)
        )));
    }
    let series = answer.data.map(|d| d.result).unwrap_or_default();
    Ok(series
        .into_iter()
        .filter_map(|mut s| {
            let name = s.metric.remove("__name__")?;
            let value = s.value.1.parse().ok()?;
            let labels = s
                .metric
                .into_iter()
                .map(|(k, v)| (cap(&k, PIECE_MAX), cap(&v, PIECE_MAX)))
                .collect();
            Some(Sample {
                name: cap(&name, PIECE_MAX),
                labels,
                value,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_selects_only_these_jobs_series() {
        assert_eq!(
            query_text(&[7, 42], 30),
            "last_over_time({__name__=~\"slurm_imex_job_.+\",jobid=~\"7|42\"}[60s])"
        );
    }

    #[test]
    fn an_api_answer_becomes_samples() {
        let text = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"slurm_imex_job_gpu_energy_joules","jobid":"7","node":"n1","gpu":"0","serial":"S"},"value":[1790000000.5,"12.5"]},
            {"metric":{"jobid":"7"},"value":[1790000000.5,"1"]}]}}"#;
        let s = samples_of(serde_json::from_str(text).unwrap(), "http://p").unwrap();
        assert_eq!(s.len(), 1, "a series without its name is dropped");
        assert_eq!(
            (s[0].name.as_str(), s[0].value),
            ("slurm_imex_job_gpu_energy_joules", 12.5)
        );
        let err = r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert_eq!(
            samples_of(serde_json::from_str(err).unwrap(), "http://p")
                .unwrap_err()
                .to_string(),
            "Prometheus at http://p: parse error"
        );
    }

    #[test]
    fn outside_text_in_an_answer_is_cut_to_a_piece() {
        let mib = "x".repeat(1 << 20);
        let err = format!(r#"{{"status":"error","error":"{mib}"}}"#);
        let line = samples_of(serde_json::from_str(&err).unwrap(), "http://p")
            .unwrap_err()
            .to_string();
        assert!(line.len() < PIECE_MAX + 64, "{} bytes", line.len());
        assert!(line.ends_with("more bytes)"), "says what was cut");
        let ok = format!(
            r#"{{"status":"success","data":{{"result":[{{"metric":{{"__name__":"slurm_imex_job_node_info","jobid":"7","cause":"{mib}"}},"value":[1,"1"]}}]}}}}"#
        );
        let s = samples_of(serde_json::from_str(&ok).unwrap(), "http://p").unwrap();
        assert!(s[0].labels["cause"].len() < PIECE_MAX + 32);
        assert_eq!(s[0].labels["jobid"], "7");
    }
}
