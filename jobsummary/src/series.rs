//! The per-job Prometheus series: each node's report of its latest jobs as
//! the epilog writes them for node_exporter's textfile collector
//! (`slurm_imex_jobs.prom`), and the same reports rebuilt from the samples
//! a Prometheus query returns. Every series carries `jobid` and `node`; GPU
//! series add `gpu` and `serial`; the node's info series carries its
//! verdicts, blame and cause, and its IMEX events line (`imex_events`). Only the node's latest jobs are written
//! (`[metrics] job_series`), so the series per node stay bounded while
//! Prometheus keeps each job for its retention.
//!
//! Written by hand for the same reason as jobdb's metrics export: the file is
//! rebuilt from records and replaced atomically, with no live registry.

use crate::report::{Blame, GpuReport, NodeReport, XidCount};
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub const FILE_NAME: &str = "slurm_imex_jobs.prom";
/// Every series name starts with this; a query selects them by it.
pub const PREFIX: &str = "slurm_imex_job_";
/// Longest label value written (a cause line, a GPU name).
const LABEL_MAX: usize = 200;
/// Longest `imex_events` label written: the node's events line is built
/// to about 300 characters (jobdb's job_export), with room for its
/// "… (N more)".
const EVENTS_LABEL_MAX: usize = 400;

pub const NODE_INFO: &str = "slurm_imex_job_node_info";
const START: &str = "slurm_imex_job_node_start_timestamp_seconds";
const END: &str = "slurm_imex_job_node_end_timestamp_seconds";
const PROLOG_S: &str = "slurm_imex_job_prolog_duration_seconds";
const EPILOG_S: &str = "slurm_imex_job_epilog_duration_seconds";
const READY_S: &str = "slurm_imex_job_imex_ready_seconds";
pub const GPU_INFO: &str = "slurm_imex_job_gpu_info";
pub const ENERGY: &str = "slurm_imex_job_gpu_energy_joules";
pub const PROCESSES: &str = "slurm_imex_job_gpu_processes";
pub const UTIL: &str = "slurm_imex_job_gpu_utilization_percent";
const MEM_UTIL: &str = "slurm_imex_job_gpu_memory_utilization_percent";
pub const PEAK: &str = "slurm_imex_job_gpu_peak_memory_bytes";
const BUSY: &str = "slurm_imex_job_gpu_busy_seconds";
const XIDS: &str = "slurm_imex_job_gpu_xids";
const ECC: &str = "slurm_imex_job_gpu_ecc_errors";
const REMAPPED: &str = "slurm_imex_job_gpu_remapped_rows";
const REMAP_PENDING: &str = "slurm_imex_job_gpu_remap_pending";
const RECOVERY_ACTION: &str = "slurm_imex_job_gpu_recovery_action";
const THROTTLE: &str = "slurm_imex_job_gpu_throttle_seconds";
const NVLINK: &str = "slurm_imex_job_gpu_nvlink_errors";

/// Every family, with its help text, in the order written.
pub const FAMILIES: &[(&str, &str)] = &[
    (NODE_INFO, "One job on this node: user, IMEX domain and channel, prolog and epilog verdicts, who was blamed and why, what happened to the IMEX domain while it ran (always 1)."),
    (START, "When the job started on this node."),
    (END, "When the job's epilog ran on this node."),
    (PROLOG_S, "Wall time of the job's prolog on this node."),
    (EPILOG_S, "Wall time of the job's epilog on this node."),
    (READY_S, "How long the job's IMEX domain took to be UP with every node READY."),
    (GPU_INFO, "One GPU of the job: model and post-job verdict (always 1)."),
    (ENERGY, "Energy the GPU used during the job."),
    (PROCESSES, "Processes of the job that ran on the GPU (0: held, never used)."),
    (UTIL, "Time-weighted GPU utilization of the job's processes."),
    (MEM_UTIL, "Time-weighted memory utilization of the job's processes."),
    (PEAK, "Peak GPU memory of any of the job's processes."),
    (BUSY, "Time a kernel of the job's processes ran on the GPU."),
    (XIDS, "XID events during the job, by XID and NVIDIA catalog class."),
    (ECC, "Volatile ECC errors during the job (sbe, dbe)."),
    (REMAPPED, "Memory rows remapped during the job."),
    (REMAP_PENDING, "1 when a row remap was pending (GPU reset needed) after the job."),
    (RECOVERY_ACTION, "The GPU recovery action the driver asked for at the job's end, when not NONE (NVML field 230): 1 GPU_RESET, 2 NODE_REBOOT, 3 DRAIN_P2P, 4 DRAIN_AND_RESET, 5 RECOVER_IMEX_DOMAIN, 6 BUS_RESET, 7 SYSTEM_REBOOT, higher values by number."),
    (THROTTLE, "Time the GPU was throttled during the job, by reason."),
    (NVLINK, "NVLink error counters that moved during the job."),
];

/// The exposition text for these (job id, report) pairs.
pub fn render(reports: &[(u32, NodeReport)]) -> String {
    let mut lines: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (job_id, r) in reports {
        node_lines(*job_id, r, &mut |name, labels, v| {
            lines
                .entry(name)
                .or_default()
                .push(format!("{name}{{{labels}}} {v}"))
        });
    }
    let mut out = String::new();
    for (name, help) in FAMILIES {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for l in lines.get(name).into_iter().flatten() {
            let _ = writeln!(out, "{l}");
        }
    }
    out
}

type Emit<'a> = dyn FnMut(&'static str, String, String) + 'a;

fn node_lines(job_id: u32, r: &NodeReport, emit: &mut Emit) {
    let id = format!("jobid=\"{job_id}\",node=\"{}\"", escape(&r.node));
    let opt = |v: &Option<String>| escape(v.as_deref().unwrap_or(""));
    let info = format!(
        "{id},user=\"{}\",imex=\"{}\",domain=\"{}\",channel=\"{}\",prolog=\"{}\",epilog=\"{}\",blame=\"{}\",cause=\"{}\",imex_events=\"{}\"",
        opt(&r.user),
        r.imex,
        opt(&r.domain),
        r.channel.map(|c| c.to_string()).unwrap_or_default(),
        opt(&r.prolog),
        opt(&r.epilog),
        r.blame.as_str(),
        opt(&r.cause),
        escape_label(&slurm_imex_core::text::cap(
            r.imex_events.as_deref().unwrap_or(""),
            EVENTS_LABEL_MAX
        )),
    );
    emit(NODE_INFO, info, "1".into());
    emit(START, id.clone(), r.start_ts.to_string());
    if let Some(end) = r.end_ts {
        emit(END, id.clone(), end.to_string());
    }
    let secs = |ms: u64| format!("{:.3}", ms as f64 / 1000.0);
    for (name, ms) in [
        (PROLOG_S, r.prolog_ms),
        (EPILOG_S, r.epilog_ms),
        (READY_S, r.imex_ready_ms),
    ] {
        if let Some(ms) = ms {
            emit(name, id.clone(), secs(ms));
        }
    }
    for g in &r.gpus {
        gpu_lines(&id, g, emit);
    }
}

fn gpu_lines(node_id: &str, g: &GpuReport, emit: &mut Emit) {
    let id = format!(
        "{node_id},gpu=\"{}\",serial=\"{}\"",
        g.index,
        escape(&g.serial)
    );
    emit(
        GPU_INFO,
        format!(
            "{id},name=\"{}\",verdict=\"{}\"",
            escape(&g.name),
            escape(&g.verdict)
        ),
        "1".into(),
    );
    let mut value = |name: &'static str, v: Option<String>| {
        if let Some(v) = v {
            emit(name, id.clone(), v)
        }
    };
    value(ENERGY, g.energy_j.map(|j| format!("{j:.3}")));
    value(PROCESSES, g.processes.map(|p| p.to_string()));
    value(UTIL, g.gpu_util_pct.map(|u| format!("{u:.2}")));
    value(MEM_UTIL, g.mem_util_pct.map(|u| format!("{u:.2}")));
    value(PEAK, g.peak_memory_bytes.map(|b| b.to_string()));
    value(BUSY, g.busy_s.map(|s| format!("{s:.3}")));
    value(REMAPPED, g.remapped_rows.map(|r| r.to_string()));
    value(REMAP_PENDING, Some((g.remap_pending as u8).to_string()));
    value(
        RECOVERY_ACTION,
        g.recovery_action.filter(|a| *a != 0).map(|a| a.to_string()),
    );
    for (kind, n) in [("sbe", g.ecc_sbe), ("dbe", g.ecc_dbe)] {
        if let Some(n) = n {
            emit(ECC, format!("{id},type=\"{kind}\""), n.to_string());
        }
    }
    for x in &g.xids {
        emit(
            XIDS,
            format!("{id},xid=\"{}\",class=\"{}\"", x.xid, escape(&x.class)),
            x.count.to_string(),
        );
    }
    for (reason, s) in &g.throttle_s {
        emit(
            THROTTLE,
            format!("{id},reason=\"{}\"", escape(reason)),
            format!("{s:.3}"),
        );
    }
    for (counter, n) in &g.nvlink_errors {
        emit(
            NVLINK,
            format!("{id},counter=\"{}\"", escape(counter)),
            n.to_string(),
        );
    }
}

/// A label value in the exposition format: `\`, `"` and newlines escaped
/// (jobdb's node-wide export uses it too).
pub fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A label value of a report, bounded to `LABEL_MAX`, then escaped.
fn escape(v: &str) -> String {
    escape_label(&slurm_imex_core::text::cap(v, LABEL_MAX))
}

/// One sample of a query result: its series name, labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// Reports by job id, then node.
pub type Reports = BTreeMap<u32, BTreeMap<String, NodeReport>>;

/// The reports these samples make, by job id then node. Samples of other
/// families, or without a job id and node, are ignored; a node's GPU
/// series without its info series still make a report.
pub fn reports_from(samples: &[Sample]) -> Reports {
    let mut fold = Fold::default();
    for s in samples {
        fold.add(s);
    }
    fold.finish()
}

/// The reports built a sample at a time, so that a query answered in parts
/// (a family or a batch of nodes at a time) never holds more than one
/// part's samples: memory grows with the reports, not with the series.
#[derive(Debug, Default)]
pub struct Fold {
    jobs: Reports,
}

impl Fold {
    /// Fold one sample in (ignored without a job id and node).
    pub fn add(&mut self, s: &Sample) {
        let (Some(job_id), Some(node)) = (
            s.label("jobid").and_then(|j| j.parse().ok()),
            s.label("node"),
        ) else {
            return;
        };
        let nodes = self.jobs.entry(job_id).or_default();
        let report = match nodes.get_mut(node) {
            Some(r) => r,
            None => nodes.entry(node.to_string()).or_insert_with(|| NodeReport {
                node: node.to_string(),
                ..Default::default()
            }),
        };
        match s.label("gpu").and_then(|g| g.parse::<u32>().ok()) {
            Some(index) => apply_gpu(gpu_of(report, index, s), s),
            None => apply_node(report, s),
        }
    }

    /// The reports, each node's GPUs and XIDs in order.
    pub fn finish(mut self) -> Reports {
        for nodes in self.jobs.values_mut() {
            for r in nodes.values_mut() {
                r.gpus.sort_by_key(|g| g.index);
                for g in &mut r.gpus {
                    g.xids.sort_by_key(|x| x.xid);
                }
            }
        }
        self.jobs
    }
}

fn gpu_of<'a>(r: &'a mut NodeReport, index: u32, s: &Sample) -> &'a mut GpuReport {
    let at = match r.gpus.iter().position(|g| g.index == index) {
        Some(i) => i,
        None => {
            r.gpus.push(GpuReport {
                index,
                serial: s.label("serial").unwrap_or_default().to_string(),
                ..Default::default()
            });
            r.gpus.len() - 1
        }
    };
    &mut r.gpus[at]
}

fn ms(seconds: f64) -> Option<u64> {
    (seconds.is_finite() && seconds >= 0.0).then(|| (seconds * 1000.0).round() as u64)
}

fn count(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0).then_some(v as u64)
}

fn apply_node(r: &mut NodeReport, s: &Sample) {
    let text = |k: &str| s.label(k).map(str::to_string);
    match s.name.as_str() {
        NODE_INFO => {
            r.user = text("user");
            r.imex = s.label("imex") == Some("true");
            r.domain = text("domain");
            r.channel = s.label("channel").and_then(|c| c.parse().ok());
            r.prolog = text("prolog");
            r.epilog = text("epilog");
            r.blame = s.label("blame").and_then(Blame::parse).unwrap_or_default();
            r.cause = text("cause");
            r.imex_events = text("imex_events");
        }
        START => r.start_ts = s.value as i64,
        END => r.end_ts = Some(s.value as i64),
        PROLOG_S => r.prolog_ms = ms(s.value),
        EPILOG_S => r.epilog_ms = ms(s.value),
        READY_S => r.imex_ready_ms = ms(s.value),
        _ => {}
    }
}

fn apply_gpu(g: &mut GpuReport, s: &Sample) {
    let finite = s.value.is_finite().then_some(s.value);
    match s.name.as_str() {
        GPU_INFO => {
            g.name = s.label("name").unwrap_or_default().to_string();
            g.verdict = s.label("verdict").unwrap_or_default().to_string();
        }
        ENERGY => g.energy_j = finite,
        PROCESSES => g.processes = count(s.value).map(|p| p.min(u32::MAX as u64) as u32),
        UTIL => g.gpu_util_pct = finite,
        MEM_UTIL => g.mem_util_pct = finite,
        PEAK => g.peak_memory_bytes = count(s.value),
        BUSY => g.busy_s = finite,
        REMAPPED => g.remapped_rows = count(s.value),
        REMAP_PENDING => g.remap_pending = s.value > 0.0,
        RECOVERY_ACTION => g.recovery_action = count(s.value).filter(|a| *a != 0),
        ECC => match s.label("type") {
            Some("sbe") => g.ecc_sbe = count(s.value),
            Some("dbe") => g.ecc_dbe = count(s.value),
            _ => {}
        },
        XIDS => {
            if let (Some(xid), Some(n)) =
                (s.label("xid").and_then(|x| x.parse().ok()), count(s.value))
            {
                let class = s.label("class").unwrap_or("UNKNOWN").to_string();
                g.xids.push(XidCount {
                    xid,
                    class,
                    count: n,
                });
            }
        }
        THROTTLE => {
            if let (Some(reason), Some(v)) = (s.label("reason"), finite) {
                g.throttle_s.insert(reason.to_string(), v);
            }
        }
        NVLINK => {
            if let (Some(counter), Some(n)) = (s.label("counter"), count(s.value)) {
                g.nvlink_errors.insert(counter.to_string(), n);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exposition lines back as samples, as a Prometheus that scraped
    /// them answers them (label values unescaped: `\\`, `\"`, `\n`; any
    /// other escape fails the scrape).
    fn parse(text: &str) -> Vec<Sample> {
        fake_prometheus::scrape(text)
            .unwrap()
            .into_iter()
            .map(|mut s| Sample {
                name: s.labels.remove("__name__").unwrap(),
                labels: s.labels,
                value: s.value.parse().unwrap(),
            })
            .collect()
    }

    fn report() -> NodeReport {
        let mut g = GpuReport {
            index: 1,
            serial: "1650924001001".into(),
            name: "NVIDIA GB200".into(),
            verdict: "WARN".into(),
            energy_j: Some(5123.25),
            processes: Some(2),
            gpu_util_pct: Some(61.5),
            mem_util_pct: Some(20.25),
            peak_memory_bytes: Some(536_870_912),
            busy_s: Some(12.5),
            ecc_sbe: Some(3),
            ecc_dbe: Some(0),
            remapped_rows: Some(0),
            recovery_action: Some(5),
            ..Default::default()
        };
        g.xids.push(XidCount {
            xid: 13,
            class: "RESTART_APP".into(),
            count: 2,
        });
        g.throttle_s.insert("power".into(), 1.5);
        g.nvlink_errors.insert("replay".into(), 4);
        NodeReport {
            node: "gb-r1-01".into(),
            user: Some("alice".into()),
            start_ts: 1_790_000_000,
            end_ts: Some(1_790_000_600),
            imex: true,
            domain: Some("rack1".into()),
            channel: Some(17),
            imex_ready_ms: Some(1250),
            prolog: Some("PASS".into()),
            epilog: Some("WARN".into()),
            blame: Blame::Job,
            cause: Some("peer gb-r1-02 \"never\" connected".into()),
            prolog_ms: Some(1643),
            epilog_ms: Some(212),
            imex_events: Some(
                "IMEX daemon died at 12:03:04 (killed by signal 9); IMEX daemon restarted at 12:03:04"
                    .into(),
            ),
            gpus: vec![
                g,
                GpuReport {
                    index: 0,
                    serial: "x".into(),
                    verdict: "PASS".into(),
                    ..Default::default()
                },
            ],
        }
    }

    #[test]
    fn a_report_survives_the_textfile_and_a_query() {
        let mut r = report();
        let text = render(&[(4242, r.clone())]);
        assert!(text.contains("# TYPE slurm_imex_job_gpu_xids gauge\n"));
        assert!(text.contains("slurm_imex_job_gpu_xids{jobid=\"4242\",node=\"gb-r1-01\",gpu=\"1\",serial=\"1650924001001\",xid=\"13\",class=\"RESTART_APP\"} 2\n"), "{text}");
        assert!(text.contains("slurm_imex_job_gpu_recovery_action{jobid=\"4242\",node=\"gb-r1-01\",gpu=\"1\",serial=\"1650924001001\"} 5\n"), "{text}");
        assert_eq!(
            text.matches("\nslurm_imex_job_gpu_recovery_action{")
                .count(),
            1,
            "no series for a GPU whose action is NONE or not read"
        );
        let back = reports_from(&parse(&text));
        r.gpus.sort_by_key(|g| g.index);
        assert_eq!(back[&4242]["gb-r1-01"], r);
    }

    #[test]
    fn an_imex_events_line_survives_quotes_backslashes_and_newlines() {
        let mut r = report();
        let hostile =
            "IMEX domain left UP at 12:03:05 (n3 \"UNAVAILABLE\" C:\\x\\ \\\"\nforged 1)\\";
        r.imex_events = Some(hostile.into());
        let text = render(&[(7, r.clone())]);
        let info = text.lines().find(|l| l.starts_with(NODE_INFO)).unwrap();
        assert!(
            info.contains(",imex_events=\"IMEX domain left UP at 12:03:05 (n3 \\\"UNAVAILABLE\\\""),
            "{info}"
        );
        assert_eq!(
            text.lines().filter(|l| l.starts_with(NODE_INFO)).count(),
            1,
            "no forged line"
        );
        let back = reports_from(&parse(&text));
        assert_eq!(back[&7]["gb-r1-01"].imex_events.as_deref(), Some(hostile));
        // None stays None: an empty label is no line.
        r.imex_events = None;
        let back = reports_from(&parse(&render(&[(7, r)])));
        assert_eq!(back[&7]["gb-r1-01"].imex_events, None);
    }

    #[test]
    fn a_long_imex_events_line_is_bounded() {
        let mut r = report();
        r.imex_events = Some("IMEX peer lost at 12:00:00 (n9); ".repeat(500));
        let text = render(&[(7, r)]);
        let back = reports_from(&parse(&text));
        let line = back[&7]["gb-r1-01"].imex_events.clone().unwrap();
        assert!(line.len() <= EVENTS_LABEL_MAX + 32, "{}", line.len());
        assert!(line.ends_with("more bytes)"), "{line}");
    }

    #[test]
    fn series_stay_within_their_labels_and_bounds() {
        let mut r = report();
        r.cause = Some("x".repeat(10_000) + "\nsecond line");
        r.imex_events = Some("y".repeat(10_000) + "\nsecond line");
        let text = render(&[(1, r)]);
        assert!(text.lines().all(|l| l.len() < 1024), "a label is bounded");
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("slurm_imex_job_node_info"))
                .count(),
            1
        );
        assert!(text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .all(|l| l.starts_with(PREFIX)));
    }

    #[test]
    fn samples_without_a_job_or_node_are_ignored() {
        let s = Sample {
            name: ENERGY.into(),
            labels: BTreeMap::new(),
            value: 1.0,
        };
        assert!(reports_from(&[s]).is_empty());
    }
}
