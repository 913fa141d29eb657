//! One node's report of one job, and the whole job's summary built from the
//! reports of all its nodes: what the epilog knew (prolog and epilog
//! verdicts, who was blamed, the IMEX domain and channel, each GPU's use and
//! health, what happened to its IMEX domain while it ran) and the notes a
//! user reads first (idle GPUs, low utilization, XIDs their code caused
//! versus the hardware's, nodes that never reported).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Who a node's failure was blamed on (docs/blame.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Blame {
    /// Nothing failed here.
    #[default]
    None,
    /// The node: Slurm drained it.
    Node,
    /// The job: it failed, the node stayed in service.
    Job,
}

impl Blame {
    pub fn as_str(self) -> &'static str {
        match self {
            Blame::None => "none",
            Blame::Node => "node",
            Blame::Job => "job",
        }
    }

    pub fn parse(s: &str) -> Option<Blame> {
        match s {
            "none" => Some(Blame::None),
            "node" => Some(Blame::Node),
            "job" => Some(Blame::Job),
            _ => None,
        }
    }
}

/// One job on one node, as its epilog recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct NodeReport {
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    pub start_ts: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ts: Option<i64>,
    pub imex: bool,
    /// The NVLink block of the job's IMEX domain here; None: the whole job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<u32>,
    /// How long the IMEX domain took to be UP with every node READY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imex_ready_ms: Option<u64>,
    /// PASS, WARN or DRAIN; None when that hook left no verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prolog: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epilog: Option<String>,
    pub blame: Blame,
    /// Why, in one line, when something failed or was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prolog_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epilog_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuReport>,
    /// What happened to the job's IMEX domain here while it ran, as the
    /// domain watcher recorded it, in one line ("IMEX daemon died at
    /// 12:03:04 (killed by signal 9); IMEX daemon restarted at 12:03:04");
    /// None when nothing did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imex_events: Option<String>,
}

/// One GPU of the job on one node. Counts are over the job; None: not known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GpuReport {
    pub index: u32,
    pub serial: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub verdict: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Processes that ran on it (0: held, never used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_util_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_util_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_s: Option<f64>,
    /// XID events, by XID number: its catalog class and how many.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xids: Vec<XidCount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_sbe: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_dbe: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remapped_rows: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remap_pending: bool,
    /// Seconds throttled, by reason (only reasons that happened).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub throttle_s: BTreeMap<String, f64>,
    /// NVLink error counters (only those that moved).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nvlink_errors: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidCount {
    pub xid: u32,
    /// NVIDIA's catalog class (RESTART_APP, RESET_GPU, REBOOT, …).
    pub class: String,
    pub count: u64,
}

impl NodeReport {
    /// The IMEX domain this node was in: its rack's (block's) name, `job`
    /// for one domain of the whole job; None without `--imex`.
    pub fn domain_name(&self) -> Option<String> {
        self.imex
            .then(|| self.domain.clone().unwrap_or_else(|| "job".into()))
    }
}

impl XidCount {
    /// RESTART_APP XIDs are the application's (its code or its input):
    /// everything else points at the GPU, the driver or the fabric.
    pub fn caused_by_application(&self) -> bool {
        self.class == "RESTART_APP"
    }
}

/// The whole job, as stored once in Slurm's accounting and shown by
/// `slurm-imex job`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct JobSummary {
    pub job_id: u32,
    pub nodes: Vec<NodeReport>,
    /// Nodes of the job (from Slurm's accounting) that never reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Healthy GPUs left out to fit Slurm's field (`comment::MAX_LEN`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trimmed_gpus: u32,
    /// Nodes whose IMEX events line was left out to fit Slurm's field (the
    /// first thing left out; `slurm-imex show JOBID` on the node has them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trimmed_imex_events: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Mean GPU utilization below this is called out (jobstats does the same).
pub const LOW_UTIL_PCT: f64 = 25.0;

impl JobSummary {
    pub fn gpus(&self) -> impl Iterator<Item = (&NodeReport, &GpuReport)> {
        self.nodes
            .iter()
            .flat_map(|n| n.gpus.iter().map(move |g| (n, g)))
    }

    /// The job's IMEX domains: (block or "job", channel, slowest readiness).
    pub fn domains(&self) -> Vec<(String, Option<u32>, Option<u64>)> {
        let mut by: BTreeMap<String, (Option<u32>, Option<u64>)> = BTreeMap::new();
        for n in &self.nodes {
            let Some(name) = n.domain_name() else {
                continue;
            };
            let e = by.entry(name).or_insert((n.channel, None));
            e.0 = e.0.or(n.channel);
            e.1 = e.1.max(n.imex_ready_ms);
        }
        by.into_iter().map(|(d, (c, r))| (d, c, r)).collect()
    }

    /// Mean utilization over the GPUs whose use is known (an idle GPU
    /// counts 0), the peak memory of any GPU, and the total energy.
    pub fn totals(&self) -> Totals {
        let utils: Vec<f64> = self
            .gpus()
            .filter_map(|(_, g)| match g.processes {
                Some(0) => Some(0.0),
                Some(_) => g.gpu_util_pct,
                None => None,
            })
            .collect();
        Totals {
            gpus: self.gpus().count() as u32 + self.trimmed_gpus,
            gpu_util_pct: (!utils.is_empty())
                .then(|| utils.iter().sum::<f64>() / utils.len() as f64),
            peak_memory_bytes: self.gpus().filter_map(|(_, g)| g.peak_memory_bytes).max(),
            energy_j: self
                .gpus()
                .filter_map(|(_, g)| g.energy_j)
                .reduce(|a, b| a + b),
        }
    }

    /// What a user should read first, most important first.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for n in &self.nodes {
            match n.blame {
                Blame::Node => notes.push(format!(
                    "{} was drained (a node fault, not your job's): {}",
                    n.node,
                    n.cause.as_deref().unwrap_or("see its journal")
                )),
                Blame::Job => notes.push(format!(
                    "the job failed on {}: {}",
                    n.node,
                    n.cause
                        .as_deref()
                        .unwrap_or("see slurm-imex show on that node")
                )),
                Blame::None => {}
            }
        }
        if self.trimmed_imex_events > 0 {
            notes.push(format!(
                "the IMEX events of {} nodes were left out of the stored summary (Slurm's field holds {} characters); slurm-imex show {} on each node has them",
                self.trimmed_imex_events,
                crate::comment::MAX_LEN,
                self.job_id
            ));
        }
        if self.trimmed_gpus > 0 {
            notes.push(format!(
                "{} healthy GPUs were left out of the stored summary (Slurm's field holds {} characters); their totals are not in the summary line",
                self.trimmed_gpus,
                crate::comment::MAX_LEN
            ));
        }
        if !self.missing.is_empty() {
            notes.push(format!(
                "no report from {} (its epilog did not run, or its export was not scraped)",
                self.missing.join(",")
            ));
        }
        let (app, hw) = self.xid_split();
        if !app.is_empty() {
            notes.push(format!(
                "XIDs your code caused (application errors, restart it): {}",
                app.join(", ")
            ));
        }
        if !hw.is_empty() {
            notes.push(format!(
                "XIDs of the GPU, driver or fabric (not your code): {}",
                hw.join(", ")
            ));
        }
        let idle: Vec<String> = self
            .gpus()
            .filter(|(_, g)| g.processes == Some(0))
            .map(|(n, g)| format!("{}/gpu{}", n.node, g.index))
            .collect();
        if !idle.is_empty() {
            notes.push(format!(
                "{} of {} GPUs were never used: {} (request fewer GPUs)",
                idle.len(),
                self.totals().gpus,
                idle.join(", ")
            ));
        }
        if let Some(u) = self.totals().gpu_util_pct.filter(|u| *u < LOW_UTIL_PCT) {
            notes.push(format!(
                "mean GPU utilization was {u:.0}% (below {LOW_UTIL_PCT:.0}%)"
            ));
        }
        notes
    }

    /// XIDs as `N on node/gpuI (xK)`, split by who caused them.
    fn xid_split(&self) -> (Vec<String>, Vec<String>) {
        let (mut app, mut hw) = (Vec::new(), Vec::new());
        for (n, g) in self.gpus() {
            for x in &g.xids {
                let times = if x.count > 1 {
                    format!(" (x{})", x.count)
                } else {
                    String::new()
                };
                let line = format!("{} {} on {}/gpu{}{times}", x.xid, x.class, n.node, g.index);
                if x.caused_by_application() {
                    app.push(line);
                } else {
                    hw.push(line);
                }
            }
        }
        (app, hw)
    }
}

/// The job's GPUs taken together.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Totals {
    pub gpus: u32,
    pub gpu_util_pct: Option<f64>,
    pub peak_memory_bytes: Option<u64>,
    pub energy_j: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn gpu(index: u32, processes: Option<u32>, util: Option<f64>) -> GpuReport {
        GpuReport {
            index,
            serial: format!("16509240010{index:02}"),
            verdict: "PASS".into(),
            processes,
            gpu_util_pct: util,
            energy_j: Some(1000.0),
            peak_memory_bytes: Some(1 << 30),
            ..Default::default()
        }
    }

    #[test]
    fn notes_say_idle_gpus_low_use_and_who_caused_each_xid() {
        let mut g0 = gpu(0, Some(2), Some(30.0));
        g0.xids = vec![XidCount {
            xid: 13,
            class: "RESTART_APP".into(),
            count: 2,
        }];
        let mut g1 = gpu(1, Some(0), None);
        g1.xids = vec![XidCount {
            xid: 79,
            class: "REBOOT".into(),
            count: 1,
        }];
        let s = JobSummary {
            job_id: 7,
            nodes: vec![NodeReport {
                node: "gb-r1-01".into(),
                gpus: vec![g0, g1],
                ..Default::default()
            }],
            missing: vec!["gb-r1-02".into()],
            trimmed_gpus: 0,
            trimmed_imex_events: 0,
        };
        let notes = s.notes().join("\n");
        assert!(notes.contains("no report from gb-r1-02"), "{notes}");
        assert!(notes.contains("XIDs your code caused (application errors, restart it): 13 RESTART_APP on gb-r1-01/gpu0 (x2)"), "{notes}");
        assert!(
            notes.contains("not your code): 79 REBOOT on gb-r1-01/gpu1"),
            "{notes}"
        );
        assert!(
            notes.contains("1 of 2 GPUs were never used: gb-r1-01/gpu1"),
            "{notes}"
        );
        assert!(notes.contains("mean GPU utilization was 15%"), "{notes}");
        assert_eq!(s.totals().energy_j, Some(2000.0));
    }

    #[test]
    fn unknown_use_is_not_counted_as_idle() {
        let s = JobSummary {
            job_id: 7,
            nodes: vec![NodeReport {
                node: "n1".into(),
                gpus: vec![gpu(0, None, None)],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(s.totals().gpu_util_pct, None);
        assert!(s.notes().is_empty(), "{:?}", s.notes());
    }

    #[test]
    fn domains_take_the_slowest_readiness_per_block() {
        let node = |name: &str, ready| NodeReport {
            node: name.into(),
            imex: true,
            domain: Some("rack1".into()),
            channel: Some(5),
            imex_ready_ms: Some(ready),
            ..Default::default()
        };
        let s = JobSummary {
            job_id: 1,
            nodes: vec![node("a", 800), node("b", 1200)],
            ..Default::default()
        };
        assert_eq!(
            s.domains(),
            vec![("rack1".to_string(), Some(5), Some(1200))]
        );
    }
}
