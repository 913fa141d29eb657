//! The nodes' per-job series, from Prometheus's HTTP API (`/api/v1/query`):
//! the last value of every `slurm_imex_job_*` series of the given jobs
//! within a window, folded into the nodes' reports
//! (slurm_imex_jobsummary::series).
//!
//! Asked in parts, one series family at a time: an 18,432-node job's
//! 73,728 GPUs make about 1.3 million series, a few hundred MiB of JSON
//! in one answer, while one family's answer is at most about 20 MiB. Each
//! part is folded into the reports before the next is asked, so memory
//! grows with the job's reports, not with its series. `[job] query_timeout`
//! bounds the whole read, every part together.

use crate::client::Client;
use crate::config::http_url;
use serde::Deserialize;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::text::{cap, PIECE_MAX};
use slurm_imex_jobsummary::report::{NodeReport, NodeStatus, Totals};
use slurm_imex_jobsummary::series::{self, Fold, Reports, Sample, FAMILIES};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Jobs asked for in one query (the selector is a regex of their ids).
pub const JOBS_PER_QUERY: usize = 100;
/// Most nodes of the jobs asked for in one query of several jobs (a job
/// is never split): one family's answer for 4,096 nodes is about 5 MiB.
pub const NODES_PER_JOBS_QUERY: usize = 4096;
/// Most bytes of one answer read: one family of an 18,432-node job's
/// series is about 20 MiB.
const ANSWER_MAX: u64 = 256 << 20;

/// Where, how and how long to ask.
pub struct Server<'a> {
    pub url: &'a str,
    pub timeout: Duration,
    /// TLS roots and credentials ([`Client::from_config`]).
    pub client: &'a Client,
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

/// The PromQL for one family of these jobs' series: each series's last
/// value in the `range_s` seconds before the evaluation time
/// (last_over_time keeps the series name).
pub fn query_text(family: &str, job_ids: &[u32], range_s: u64) -> String {
    let ids: Vec<String> = job_ids.iter().map(u32::to_string).collect();
    format!(
        "last_over_time({{__name__=\"{family}\",jobid=~\"{}\"}}[{}s])",
        ids.join("|"),
        range_s.max(60)
    )
}

/// The server's queries for one read, within one budget: `[job]
/// query_timeout` bounds every part of the read together, and a read past
/// it is one line naming Prometheus, the part it was at, and what to do.
struct Reader<'a> {
    base: &'a str,
    client: &'a Client,
    timeout: Duration,
    deadline: Instant,
    part: usize,
}

impl<'a> Reader<'a> {
    fn new(server: &'a Server) -> Result<Reader<'a>> {
        let base = server.url.trim_end_matches('/');
        // Checked when the config is read; this is for a server given otherwise.
        if let Some(why) = http_url::problem(base) {
            return Err(Error::invalid(format!(
                "[job] prometheus_url = {:?} {why}",
                cap(base, PIECE_MAX)
            )));
        }
        Ok(Reader {
            base,
            client: server.client,
            timeout: server.timeout,
            deadline: Instant::now() + server.timeout,
            part: 0,
        })
    }

    /// The answer to `query`, the read's part `what`.
    fn ask(&mut self, what: &str, query: &str) -> Result<Answer> {
        self.part += 1;
        let late = || {
            Error::timeout(format!(
                "Prometheus at {} did not answer within {:?} ([job] query_timeout, every part of the job's series \
                 together; it was at part {}, {what}): it is overloaded or the job very large; ask again later, \
                 or raise [job] query_timeout in imex.toml",
                self.base, self.timeout, self.part
            ))
        };
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        ask(self.client, self.base, left, query).map_err(|e| {
            if Instant::now() >= self.deadline || e.to_string().contains("timed out") {
                late()
            } else {
                e
            }
        })
    }

    /// The samples answering `query` (part `what`).
    fn samples(&mut self, what: &str, query: &str) -> Result<Vec<Sample>> {
        let answer = self.ask(what, query)?;
        samples_of(answer, self.base)
    }
}

/// The reports of `job_ids`' nodes, looking back `range_s` from the
/// server's own now (not this host's: a `time` a little behind the
/// server's clock would miss the newest scrape), asked one family at a
/// time within `server.timeout` in all.
pub fn job_reports(server: &Server, job_ids: &[u32], range_s: u64) -> Result<Reports> {
    let mut reader = Reader::new(server)?;
    let mut fold = Fold::default();
    for (family, _) in FAMILIES {
        for sample in reader.samples(family, &query_text(family, job_ids, range_s))? {
            // Only this family's: a server (or a proxy) answering more is
            // not counted twice.
            if sample.name == *family {
                fold.add(&sample);
            }
        }
    }
    Ok(fold.finish())
}

/// Nodes named in one query of [`big_job`] (a regex of their names: about
/// 12 KiB of query, sent in a POST body, so no proxy's URL limit applies).
pub const NODES_PER_QUERY: usize = 1024;

/// A big job read in aggregate ([`big_job`]).
#[derive(Debug, Default)]
pub struct BigJob {
    /// Every node that reported: whole for the nodes that did not pass,
    /// only their info series (verdicts, blame, domain) for the others.
    pub nodes: BTreeMap<String, NodeReport>,
    /// Totals over every GPU of the job, summed by Prometheus.
    pub totals: Totals,
}

/// Job `job_id` as a big job is read, in five to a few dozen queries
/// whatever its size, rather than its every series (an 18,432-node job has
/// 1.3 million, and Prometheus takes about 1 s of CPU per 73,728 it
/// encodes): every node's info series (its verdicts and blame), the GPUs
/// whose verdict is not PASS, then every series of the nodes that did not
/// pass (a batch of [`NODES_PER_QUERY`] at a time), and the job's totals
/// summed by Prometheus itself. Within `server.timeout` in all.
pub fn big_job(server: &Server, job_id: u32, range_s: u64) -> Result<BigJob> {
    let mut reader = Reader::new(server)?;
    let range = range_s.max(60);
    let mut nodes = node_verdicts(&mut reader, job_id, range)?;
    let flagged: Vec<String> = nodes
        .values()
        .filter(|n| n.status() != NodeStatus::Pass)
        .map(|n| n.node.clone())
        .collect();
    for (name, whole) in flagged_whole(&mut reader, job_id, range, &flagged)? {
        if let Some(light) = nodes.get_mut(&name) {
            add_series(light, whole);
        }
    }
    let totals = totals(&mut reader, job_id, range)?;
    Ok(BigJob { nodes, totals })
}

/// Every node's info series (verdicts, blame, domain) and the GPUs whose
/// verdict is not PASS: two queries.
fn node_verdicts(
    reader: &mut Reader,
    job_id: u32,
    range: u64,
) -> Result<BTreeMap<String, NodeReport>> {
    let sel = |family: &str, more: &str| {
        format!("last_over_time({family}{{jobid=\"{job_id}\"{more}}}[{range}s])")
    };
    let mut fold = Fold::default();
    let info = series::NODE_INFO;
    for s in reader.samples(info, &sel(info, ""))? {
        fold.add(&s);
    }
    let gpu_info = series::GPU_INFO;
    for s in reader.samples(gpu_info, &sel(gpu_info, ",verdict!=\"PASS\""))? {
        if s.name == gpu_info {
            fold.add(&s);
        }
    }
    Ok(fold.finish().remove(&job_id).unwrap_or_default())
}

/// Every series of the `flagged` nodes, [`NODES_PER_QUERY`] nodes a query.
fn flagged_whole(
    reader: &mut Reader,
    job_id: u32,
    range: u64,
    flagged: &[String],
) -> Result<BTreeMap<String, NodeReport>> {
    let info = series::NODE_INFO;
    let mut fold = Fold::default();
    for batch in flagged.chunks(NODES_PER_QUERY) {
        let names: Vec<String> = batch.iter().map(|n| regex_quote(n)).collect();
        let q = format!(
            "last_over_time({{__name__=~\"{}.+\",__name__!=\"{info}\",jobid=\"{job_id}\",node=~\"{}\"}}[{range}s])",
            series::PREFIX,
            names.join("|")
        );
        for s in reader.samples("the series of the nodes that did not pass", &q)? {
            fold.add(&s);
        }
    }
    Ok(fold.finish().remove(&job_id).unwrap_or_default())
}

/// A node's GPUs, times and durations from its `whole` read, onto the
/// report its info series made (which keeps its verdicts and blame).
fn add_series(light: &mut NodeReport, whole: NodeReport) {
    light.gpus = whole.gpus;
    light.start_ts = whole.start_ts;
    light.end_ts = whole.end_ts;
    light.prolog_ms = whole.prolog_ms;
    light.epilog_ms = whole.epilog_ms;
    light.imex_ready_ms = whole.imex_ready_ms;
}

/// A node name as a regex matching only itself (Prometheus's RE2,
/// anchored): its metacharacters escaped.
fn regex_quote(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push_str("\\\\");
        } else if c == '"' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The job's totals over every GPU, as Prometheus sums them (one query,
/// each figure a series labelled `t`). Mean utilization counts a GPU held
/// and never used as 0 and leaves out a GPU whose use is not known, as
/// [`JobSummary::totals`](slurm_imex_jobsummary::report::JobSummary::totals) does.
fn totals(reader: &mut Reader, job_id: u32, range: u64) -> Result<Totals> {
    let v = |family: &str| format!("last_over_time({family}{{jobid=\"{job_id}\"}}[{range}s])");
    let used = format!(
        "({} and on(node,gpu) ({} > 0))",
        v(series::UTIL),
        v(series::PROCESSES)
    );
    let parts = [
        ("gpus", format!("count({})", v(series::GPU_INFO))),
        ("energy", format!("sum({})", v(series::ENERGY))),
        ("peak", format!("max({})", v(series::PEAK))),
        ("idle", format!("count({} == 0)", v(series::PROCESSES))),
        ("used_sum", format!("sum({used})")),
        ("used_count", format!("count({used})")),
    ];
    let q = parts
        .iter()
        .map(|(t, e)| format!("label_replace({e}, \"t\", \"{t}\", \"\", \"\")"))
        .collect::<Vec<_>>()
        .join(" or ");
    let answer = reader.ask("the job's totals", &q)?;
    let base = reader.base;
    if answer.status != "success" {
        samples_of(answer, base)?;
        return Ok(Totals::default());
    }
    let mut got: BTreeMap<String, f64> = BTreeMap::new();
    for s in answer.data.map(|d| d.result).unwrap_or_default() {
        if let (Some(t), Ok(v)) = (s.metric.get("t"), s.value.1.parse::<f64>()) {
            if v.is_finite() && v >= 0.0 {
                got.insert(t.clone(), v);
            }
        }
    }
    let count = |t: &str| got.get(t).map_or(0, |v| *v as u32);
    let known = count("idle") + count("used_count");
    Ok(Totals {
        gpus: count("gpus"),
        gpu_util_pct: (known > 0)
            .then(|| got.get("used_sum").copied().unwrap_or(0.0) / known as f64),
        peak_memory_bytes: got.get("peak").map(|b| *b as u64),
        energy_j: got.get("energy").copied(),
        idle_gpus: count("idle"),
    })
}

/// One query's answer, parsed; an error names the server. The query goes
/// in a form body (POST, which Prometheus's API takes as it takes GET): a
/// big job's node regex is tens of KiB, past what proxies take in a URL
/// (414).
fn ask(client: &Client, base: &str, timeout: Duration, query: &str) -> Result<Answer> {
    let url = format!("{base}/api/v1/query");
    // Prometheus answers a bad query with 400 and a JSON error.
    let body = client.post_form(base, &url, timeout, &[("query", query)])?;
    let status = (body.status(), body.status_text().to_string());
    serde_json::from_reader(std::io::Read::take(body.into_reader(), ANSWER_MAX)).map_err(|e| {
        let what = match status {
            (200, _) => "something that is not its API's JSON".to_string(),
            (code, text) => format!(
                "{code} {} without its API's JSON (is [job] prometheus_url the query API's base URL?)",
                cap(&text, PIECE_MAX)
            ),
        };
        Error::new(format!(
            "Prometheus at {base} answered {what}: {}",
            cap(&e.to_string(), PIECE_MAX)
        ))
    })
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
    use fake_prometheus::{self as fake, ErrorType, FakePrometheus, Reply};

    /// Prometheus played on 127.0.0.1 (the tests' fake): each query is
    /// answered by `answer` (given the whole query) after `delay`. A query
    /// sent any other way than in a POST form body is refused: none
    /// should be.
    fn serve(
        delay: Duration,
        answer: impl Fn(&str) -> Reply + Send + Sync + 'static,
    ) -> FakePrometheus {
        FakePrometheus::builder()
            .delay(delay)
            .answer(move |r| {
                if r.is_form_post() {
                    answer(r.query())
                } else {
                    Reply::error(ErrorType::BadData, "not a POST of a form")
                }
            })
            .start()
    }

    /// [`serve`], answering by the family a query asks (`__name__=`).
    fn fake(
        delay: Duration,
        answer: impl Fn(&str) -> Reply + Send + Sync + 'static,
    ) -> FakePrometheus {
        serve(delay, move |query| {
            let family = query
                .split_once("__name__=\"")
                .and_then(|(_, r)| r.split_once('"'))
                .map(|(f, _)| f.to_string())
                .unwrap_or_default();
            answer(&family)
        })
    }

    /// One family's answer for job 7 on `nodes` nodes of 4 GPUs, plus one
    /// XID series of another family whatever was asked (as a proxy that
    /// ignores the selector would).
    fn answer(family: &str, nodes: usize) -> Reply {
        let mut series = Vec::new();
        for n in 0..nodes {
            let node = format!("gb-r{}-{:02}", n / 18 + 1, n % 18 + 1);
            if family.contains("_gpu_") {
                for g in 0..4 {
                    let (gpu, serial) = (g.to_string(), format!("S{n}-{g}"));
                    series.push(fake::Sample::new(
                        [
                            ("__name__", family),
                            ("jobid", "7"),
                            ("node", &node),
                            ("gpu", &gpu),
                            ("serial", &serial),
                            ("name", "GB200"),
                            ("verdict", "PASS"),
                        ],
                        if family.ends_with("_processes") {
                            1.0
                        } else {
                            2.0
                        },
                    ));
                }
            } else {
                series.push(fake::Sample::new(
                    [
                        ("__name__", family),
                        ("jobid", "7"),
                        ("node", &node),
                        ("blame", "none"),
                        ("prolog", "PASS"),
                        ("epilog", "PASS"),
                    ],
                    1_790_000_000.0,
                ));
            }
        }
        series.push(fake::Sample::new(
            [
                ("__name__", "slurm_imex_job_gpu_xids"),
                ("jobid", "7"),
                ("node", "gb-r1-01"),
                ("gpu", "0"),
                ("xid", "13"),
                ("class", "RESTART_APP"),
            ],
            1.0,
        ));
        Reply::vector(series)
    }

    #[test]
    fn a_job_is_asked_one_family_at_a_time_and_folded() {
        let prom = fake(Duration::ZERO, |f| answer(f, 40));
        let server = Server {
            url: prom.url(),
            timeout: Duration::from_secs(20),
            client: &Client::default(),
        };
        let mut reports = job_reports(&server, &[7], 600).unwrap();
        let asked = prom.queries();
        assert_eq!(asked.len(), FAMILIES.len(), "{asked:?}");
        for ((family, _), q) in FAMILIES.iter().zip(&asked) {
            assert_eq!(q, &query_text(family, &[7], 600));
        }
        assert!(prom.requests().iter().all(|r| r.is_form_post()));
        let nodes = reports.remove(&7).unwrap();
        assert!(reports.is_empty());
        assert_eq!(nodes.len(), 40);
        let n1 = &nodes["gb-r1-01"];
        assert_eq!(
            (n1.prolog.as_deref(), n1.start_ts),
            (Some("PASS"), 1_790_000_000)
        );
        assert_eq!(n1.gpus.len(), 4);
        assert_eq!(
            (n1.gpus[2].serial.as_str(), n1.gpus[2].processes),
            ("S0-2", Some(1))
        );
        assert_eq!(n1.gpus[0].verdict, "PASS");
        assert_eq!(
            n1.gpus[0].xids.len(),
            1,
            "a series answered outside its part is not counted again: {:?}",
            n1.gpus[0].xids
        );
    }

    #[test]
    fn a_slow_prometheus_is_one_line_naming_it_and_the_fix() {
        // Each part quick, together past the budget.
        let prom = fake(Duration::from_millis(60), |f| answer(f, 1));
        let url = prom.url();
        let server = Server {
            url,
            timeout: Duration::from_millis(400),
            client: &Client::default(),
        };
        let e = job_reports(&server, &[7], 600).unwrap_err();
        let line = e.to_string();
        assert_eq!(e.kind(), slurm_imex_core::error::Kind::Timeout, "{line}");
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.starts_with(&format!("Prometheus at {url} did not answer within 400ms ([job] query_timeout, every part of the job's series together; it was at part")),
            "{line}"
        );
        assert!(
            line.contains("raise [job] query_timeout in imex.toml"),
            "{line}"
        );
        assert!(prom.queries().len() < FAMILIES.len());
        // One part that never ends.
        let prom = fake(Duration::from_secs(5), |f| answer(f, 1));
        let server = Server {
            url: prom.url(),
            timeout: Duration::from_millis(300),
            client: &Client::default(),
        };
        let started = Instant::now();
        let line = job_reports(&server, &[7], 600).unwrap_err().to_string();
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(
            line.contains("it was at part 1, slurm_imex_job_node_info)"),
            "{line}"
        );
    }

    #[test]
    fn a_big_job_is_read_in_aggregate() {
        let node = |n: usize| format!("gb-r{}-{:02}", n / 18 + 1, n % 18 + 1);
        // Answers by what the query asks (the family-keyed fake above reads
        // only `__name__=`): 40 nodes, node 3 drained, node 5's gpu1 WARN.
        let prom = serve(Duration::ZERO, move |q| {
            let series: Vec<fake::Sample> = if q.contains("label_replace") {
                [
                    ("gpus", 160.0),
                    ("energy", 3200.5),
                    ("peak", 1024.0),
                    ("idle", 4.0),
                    ("used_sum", 7800.0),
                    ("used_count", 96.0),
                ]
                .iter()
                .map(|(t, v)| fake::Sample::new([("t", *t)], *v))
                .collect()
            } else if q.contains("node_info{") {
                (0..40)
                    .map(|n| {
                        let blame = if n == 3 { "node" } else { "none" };
                        let (name, rack) = (node(n), format!("rack{}", n / 18 + 1));
                        fake::Sample::new(
                            [
                                ("__name__", "slurm_imex_job_node_info"),
                                ("jobid", "7"),
                                ("node", &name),
                                ("blame", blame),
                                ("prolog", "PASS"),
                                ("epilog", "PASS"),
                                ("imex", "true"),
                                ("domain", &rack),
                            ],
                            1.0,
                        )
                    })
                    .collect()
            } else if q.contains("gpu_info{") {
                vec![fake::Sample::new(
                    [
                        ("__name__", "slurm_imex_job_gpu_info"),
                        ("jobid", "7"),
                        ("node", &node(5)),
                        ("gpu", "1"),
                        ("serial", "S5-1"),
                        ("verdict", "WARN"),
                    ],
                    1.0,
                )]
            } else if q.contains("node=~") {
                [3, 5]
                    .iter()
                    .flat_map(|n| (0..4).map(move |g| (*n, g)))
                    .flat_map(|(n, g)| {
                        let (name, gpu, serial) = (node(n), g.to_string(), format!("S{n}-{g}"));
                        let verdict = if n == 5 && g == 1 { "WARN" } else { "PASS" };
                        [
                            fake::Sample::new(
                                [
                                    ("__name__", "slurm_imex_job_gpu_info"),
                                    ("jobid", "7"),
                                    ("node", &name),
                                    ("gpu", &gpu),
                                    ("serial", &serial),
                                    ("verdict", verdict),
                                ],
                                1.0,
                            ),
                            fake::Sample::new(
                                [
                                    ("__name__", "slurm_imex_job_node_start_timestamp_seconds"),
                                    ("jobid", "7"),
                                    ("node", &name),
                                ],
                                1_790_000_000.0,
                            ),
                        ]
                    })
                    .collect()
            } else {
                Vec::new()
            };
            Reply::vector(series)
        });
        let server = Server {
            url: prom.url(),
            timeout: Duration::from_secs(20),
            client: &Client::default(),
        };
        let big = big_job(&server, 7, 600).unwrap();
        let asked = prom.queries();
        assert_eq!(asked.len(), 4, "{asked:#?}");
        assert!(
            asked[2].contains(r#"node=~"gb-r1-04|gb-r1-06""#),
            "{}",
            asked[2]
        );
        assert_eq!(big.nodes.len(), 40);
        let flagged: Vec<&str> = big
            .nodes
            .values()
            .filter(|n| n.status() != NodeStatus::Pass)
            .map(|n| n.node.as_str())
            .collect();
        assert_eq!(flagged, ["gb-r1-04", "gb-r1-06"]);
        let n5 = &big.nodes["gb-r1-06"];
        assert_eq!(
            n5.gpus.len(),
            4,
            "the nodes that did not pass are read whole"
        );
        assert_eq!(
            (n5.gpus[1].verdict.as_str(), n5.start_ts),
            ("WARN", 1_790_000_000)
        );
        assert_eq!(
            n5.domain.as_deref(),
            Some("rack1"),
            "their info series kept"
        );
        assert!(
            big.nodes["gb-r1-01"].gpus.is_empty(),
            "PASS nodes: info only"
        );
        let t = big.totals;
        assert_eq!(
            (t.gpus, t.idle_gpus, t.peak_memory_bytes),
            (160, 4, Some(1024))
        );
        assert_eq!(t.energy_j, Some(3200.5));
        assert_eq!(
            t.gpu_util_pct,
            Some(78.0),
            "7800 over 96 used and 4 idle GPUs"
        );
        assert_eq!(regex_quote("a.b|c"), "a\\\\.b\\\\|c");
    }

    #[test]
    fn a_bad_answer_in_any_part_is_one_line() {
        for (bad, says) in [
            (Reply::json(200, "not json"), "not its API's JSON"),
            (
                Reply::error(ErrorType::Execution, "query too large"),
                "query too large",
            ),
            (
                Reply::json(
                    200,
                    r#"{"status":"success","data":{"result":[{"metric":{}}]}}"#,
                ),
                "not its API's JSON",
            ),
        ] {
            let prom = fake(Duration::ZERO, move |f| {
                if f.ends_with("_gpu_info") {
                    bad.clone()
                } else {
                    answer(f, 2)
                }
            });
            let url = prom.url();
            let server = Server {
                url,
                timeout: Duration::from_secs(20),
                client: &Client::default(),
            };
            let line = job_reports(&server, &[7], 600).unwrap_err().to_string();
            assert!(line.starts_with(&format!("Prometheus at {url}")), "{line}");
            assert!(line.contains(says), "{line}");
            assert!(!line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn the_query_selects_only_these_jobs_series() {
        assert_eq!(
            query_text("slurm_imex_job_gpu_info", &[7, 42], 30),
            "last_over_time({__name__=\"slurm_imex_job_gpu_info\",jobid=~\"7|42\"}[60s])"
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
