//! One node's report of one job, and the whole job's summary built from the
//! reports of all its nodes: what the epilog knew (prolog and epilog
//! verdicts, who was blamed, the IMEX domain and channel, each GPU's use and
//! health, what happened to its IMEX domain while it ran) and the notes a
//! user reads first (idle GPUs, low utilization, XIDs their code caused
//! versus the hardware's, nodes that never reported). A big job is read
//! rack by rack first: [`JobSummary::rollup`] counts each rack's nodes by
//! their [`NodeStatus`].

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
    /// The GPU recovery action the driver asked for at the job's end, when
    /// it was not NONE (NVML field 230; named by
    /// `slurm_imex_core::recovery_action`). None: NONE, or not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_action: Option<u64>,
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

/// One node's outcome for the job, taken together: FAIL when it was
/// blamed (drained, or the job failed there) or a hook or GPU said DRAIN,
/// WARN when anything else was found, else PASS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeStatus {
    Pass,
    Warn,
    Fail,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Pass => "PASS",
            NodeStatus::Warn => "WARN",
            NodeStatus::Fail => "FAIL",
        }
    }

    /// A hook's or a GPU's verdict: PASS (or none) passes, DRAIN and FAIL
    /// fail, anything else (WARN, a verdict this version does not know)
    /// warns.
    fn of_verdict(v: &str) -> NodeStatus {
        match v {
            "" | "PASS" => NodeStatus::Pass,
            "DRAIN" | "FAIL" => NodeStatus::Fail,
            _ => NodeStatus::Warn,
        }
    }
}

pub use crate::rollup::RackCount;

/// The rack of a node with no IMEX block: its name up to its last number
/// (`gb-r12-05` is in `gb-r12`, `n7` in `n`), the way NVL72 racks are
/// usually named; a name that is all digits is its own rack.
pub fn rack_of_name(node: &str) -> String {
    let head = node
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .trim_end_matches(['-', '_', '.']);
    if head.is_empty() {
        node.to_string()
    } else {
        head.to_string()
    }
}

/// Order names as people count: `rack2` before `rack12`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn pieces(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (pa, pb) = (pieces(a), pieces(b));
    for (x, y) in pa.iter().zip(&pb) {
        let o = match (x, y) {
            ((true, x), (true, y)) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then(x.cmp(y))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if o.is_ne() {
            return o;
        }
    }
    pa.len().cmp(&pb.len()).then(a.cmp(b))
}

impl NodeReport {
    /// The node's outcome for the job ([`NodeStatus`]).
    pub fn status(&self) -> NodeStatus {
        if self.blame != Blame::None {
            return NodeStatus::Fail;
        }
        let hooks = [self.prolog.as_deref(), self.epilog.as_deref()]
            .into_iter()
            .flatten();
        let gpus = self.gpus.iter().map(|g| g.verdict.as_str());
        let worst = hooks
            .chain(gpus)
            .map(NodeStatus::of_verdict)
            .max()
            .unwrap_or(NodeStatus::Pass);
        if worst == NodeStatus::Pass && self.imex_events.is_some() {
            return NodeStatus::Warn;
        }
        worst
    }

    /// The rack this node is counted in: its IMEX block when the job's
    /// domain was split by rack, else [`rack_of_name`].
    pub fn rack(&self) -> String {
        match self.domain.as_deref().filter(|d| !d.is_empty()) {
            Some(block) => block.to_string(),
            None => rack_of_name(&self.node),
        }
    }

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
    /// The nodes that never reported as one Slurm hostlist, when they were
    /// too many to store one by one in Slurm's field (`missing` is then
    /// empty), and how many they are.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub missing_hostlist: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missing_count: u32,
    /// Healthy GPUs left out to fit Slurm's field (`field::MAX_LEN`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trimmed_gpus: u32,
    /// Nodes whose IMEX events line was left out to fit Slurm's field (the
    /// first thing left out; `slurm-imex show JOBID` on the node has them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trimmed_imex_events: u32,
    /// Nodes that passed, left out of a stored summary too large (every
    /// node of an 18,432-node job does not fit); `racks` still counts them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trimmed_pass_nodes: u32,
    /// Nodes that did not pass, left out when even those did not all fit
    /// (the failed ones are kept first); `racks` still counts them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trimmed_other_nodes: u32,
    /// The per-rack rollup of every node that reported, stored when nodes
    /// were left out; empty: computed from `nodes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub racks: Vec<RackCount>,
    /// The job's totals over every GPU, stored when GPUs or nodes were
    /// left out; None: computed from `nodes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_totals: Option<Totals>,
    /// The job was read from Prometheus in aggregate (too many nodes to
    /// read each series): its PASS nodes (`trimmed_pass_nodes`) were never
    /// read one by one, only counted in `racks` and `stored_totals`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pass_nodes_aggregated: bool,
}

/// Items a note lists before it says how many more there are.
pub const NOTE_ITEMS: usize = 20;

/// `n` with a comma every three digits (18,380).
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `items` joined, the first [`NOTE_ITEMS`] of them, then how many more.
fn listed(items: &[String]) -> String {
    let mut text = items
        .iter()
        .take(NOTE_ITEMS)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > NOTE_ITEMS {
        text.push_str(&format!(
            " and {} more",
            thousands((items.len() - NOTE_ITEMS) as u64)
        ));
    }
    text
}

/// A count as a u32, saturating (no job has 4 billion of anything).
pub(crate) fn count_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
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
        if let Some(t) = self.stored_totals {
            return t;
        }
        let utils: Vec<f64> = self
            .gpus()
            .filter_map(|(_, g)| match g.processes {
                Some(0) => Some(0.0),
                Some(_) => g.gpu_util_pct,
                None => None,
            })
            .collect();
        Totals {
            gpus: count_u32(self.gpus().count()).saturating_add(self.trimmed_gpus),
            gpu_util_pct: (!utils.is_empty())
                .then(|| utils.iter().sum::<f64>() / utils.len() as f64),
            peak_memory_bytes: self.gpus().filter_map(|(_, g)| g.peak_memory_bytes).max(),
            energy_j: self
                .gpus()
                .filter_map(|(_, g)| g.energy_j)
                .reduce(|a, b| a + b),
            idle_gpus: count_u32(self.gpus().filter(|(_, g)| g.processes == Some(0)).count()),
        }
    }

    /// Every node of the job that reported, stored or left out. The
    /// counters come from a stored comment, so saturate rather than wrap.
    pub fn reported_nodes(&self) -> u32 {
        count_u32(self.nodes.len()).saturating_add(self.trimmed_nodes())
    }

    /// Nodes of the job that never reported.
    pub fn missing_nodes(&self) -> u32 {
        count_u32(self.missing.len()).saturating_add(self.missing_count)
    }

    /// Nodes left out of a stored summary (their racks still count them).
    pub fn trimmed_nodes(&self) -> u32 {
        self.trimmed_pass_nodes
            .saturating_add(self.trimmed_other_nodes)
    }

    /// What a user should read first, most important first.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        self.blame_notes(&mut notes);
        self.left_out_notes(&mut notes);
        self.missing_notes(&mut notes);
        self.xid_notes(&mut notes);
        self.recovery_notes(&mut notes);
        self.use_notes(&mut notes);
        notes
    }

    /// The nodes drained or failed by the job, the first [`NOTE_ITEMS`].
    fn blame_notes(&self, notes: &mut Vec<String>) {
        let blamed = self.nodes.iter().filter(|n| n.blame != Blame::None).count();
        for n in self
            .nodes
            .iter()
            .filter(|n| n.blame != Blame::None)
            .take(NOTE_ITEMS)
        {
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
        if blamed > NOTE_ITEMS {
            notes.push(format!(
                "and {} more nodes drained or failed (the node list shows each)",
                thousands((blamed - NOTE_ITEMS) as u64)
            ));
        }
    }

    /// What a stored summary left out to fit Slurm's field.
    fn left_out_notes(&self, notes: &mut Vec<String>) {
        if self.trimmed_pass_nodes > 0 && self.pass_nodes_aggregated {
            notes.push(format!(
                "{} PASS nodes are counted in their rack rollup and the totals, not listed (a job this large is read from Prometheus in aggregate)",
                thousands(self.trimmed_pass_nodes as u64),
            ));
        } else if self.trimmed_pass_nodes > 0 {
            notes.push(format!(
                "{} PASS nodes not stored (Slurm's field holds {} characters); their rack rollup is",
                thousands(self.trimmed_pass_nodes as u64),
                crate::field::MAX_LEN
            ));
        }
        if self.trimmed_other_nodes > 0 {
            notes.push(format!(
                "{} WARN nodes not stored either (every FAIL node is kept first); their rack rollup counts them, slurm-imex show {} on each node has them",
                thousands(self.trimmed_other_nodes as u64),
                self.job_id
            ));
        }
        if self.trimmed_imex_events > 0 {
            notes.push(format!(
                "the IMEX events of {} nodes were left out of the stored summary (Slurm's field holds {} characters); slurm-imex show {} on each node has them",
                self.trimmed_imex_events,
                crate::field::MAX_LEN,
                self.job_id
            ));
        }
        if self.trimmed_gpus > 0 && !self.pass_nodes_aggregated {
            notes.push(format!(
                "{} GPUs were left out of the stored summary (healthy ones, and those of the nodes not stored; Slurm's field holds {} characters); {}",
                thousands(self.trimmed_gpus as u64),
                crate::field::MAX_LEN,
                if self.stored_totals.is_some() {
                    "the summary line's totals count them"
                } else {
                    "their totals are not in the summary line"
                }
            ));
        }
    }

    /// The nodes that never reported.
    fn missing_notes(&self, notes: &mut Vec<String>) {
        if !self.missing_hostlist.is_empty() {
            notes.push(format!(
                "no report from {} nodes: {} (their epilog did not run, or their export was not scraped)",
                thousands(self.missing_count as u64),
                slurm_imex_core::text::cap(&self.missing_hostlist, 400)
            ));
        }
        if !self.missing.is_empty() {
            notes.push(format!(
                "no report from {} (its epilog did not run, or its export was not scraped)",
                listed(&self.missing)
            ));
        }
    }

    /// The job's XIDs, the application's apart from the hardware's.
    fn xid_notes(&self, notes: &mut Vec<String>) {
        let (app, hw) = self.xid_split();
        if !app.is_empty() {
            notes.push(format!(
                "XIDs your code caused (application errors, restart it): {}",
                listed(&app)
            ));
        }
        if !hw.is_empty() {
            notes.push(format!(
                "XIDs of the GPU, driver or fabric (not your code): {}",
                listed(&hw)
            ));
        }
    }

    /// The GPUs whose driver asked for a recovery action at the job's end,
    /// by name ("RECOVER_IMEX_DOMAIN (5) on gb-r1-01/gpu1").
    fn recovery_notes(&self, notes: &mut Vec<String>) {
        let asked: Vec<String> = self
            .gpus()
            .filter_map(|(n, g)| {
                let action = g.recovery_action.filter(|a| *a != 0)?;
                let what = match slurm_imex_core::recovery_action::name(action) {
                    Some(name) => format!("{name} ({action})"),
                    None => format!("action {action} (unknown to this slurm-imex)"),
                };
                Some(format!("{what} on {}/gpu{}", n.node, g.index))
            })
            .collect();
        if !asked.is_empty() {
            notes.push(format!(
                "the driver asked for a GPU recovery action at the job's end: {} (the GPU's verdict says what slurm-imex did)",
                listed(&asked)
            ));
        }
    }

    /// GPUs never used, and a low mean utilization.
    fn use_notes(&self, notes: &mut Vec<String>) {
        let idle: Vec<String> = self
            .gpus()
            .filter(|(_, g)| g.processes == Some(0))
            .map(|(n, g)| format!("{}/gpu{}", n.node, g.index))
            .collect();
        let totals = self.totals();
        if !idle.is_empty() || totals.idle_gpus > 0 {
            notes.push(format!(
                "{} of {} GPUs were never used: {} (request fewer GPUs)",
                thousands(totals.idle_gpus.max(count_u32(idle.len())) as u64),
                thousands(totals.gpus as u64),
                if idle.is_empty() {
                    "not stored".to_string()
                } else {
                    listed(&idle)
                }
            ));
        }
        if let Some(u) = self.totals().gpu_util_pct.filter(|u| *u < LOW_UTIL_PCT) {
            notes.push(format!(
                "mean GPU utilization was {u:.0}% (below {LOW_UTIL_PCT:.0}%)"
            ));
        }
    }

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
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Totals {
    pub gpus: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_util_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// GPUs the job held and never used.
    #[serde(default)]
    pub idle_gpus: u32,
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
            ..Default::default()
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
        assert!(!notes.contains("recovery action"), "{notes}");
    }

    #[test]
    fn recovery_actions_asked_at_the_jobs_end_are_named_in_the_notes() {
        let mut g0 = gpu(0, Some(1), Some(90.0));
        g0.recovery_action = Some(5);
        let mut g1 = gpu(1, Some(1), Some(90.0));
        g1.recovery_action = Some(8);
        let s = JobSummary {
            job_id: 7,
            nodes: vec![NodeReport {
                node: "gb-r1-01".into(),
                gpus: vec![g0, g1, gpu(2, Some(1), Some(90.0))],
                ..Default::default()
            }],
            ..Default::default()
        };
        let notes = s.notes();
        let asked: Vec<&String> = notes
            .iter()
            .filter(|n| n.contains("recovery action"))
            .collect();
        assert_eq!(
            asked,
            [
                "the driver asked for a GPU recovery action at the job's end: \
              RECOVER_IMEX_DOMAIN (5) on gb-r1-01/gpu0, action 8 (unknown to this \
              slurm-imex) on gb-r1-01/gpu1 (the GPU's verdict says what slurm-imex did)"
            ]
        );
    }

    #[test]
    fn nodes_roll_up_by_rack_and_status() {
        let node = |name: &str, domain: Option<&str>| NodeReport {
            node: name.into(),
            domain: domain.map(str::to_string),
            imex: domain.is_some(),
            prolog: Some("PASS".into()),
            epilog: Some("PASS".into()),
            gpus: vec![gpu(0, Some(1), Some(90.0))],
            ..Default::default()
        };
        let mut warn = node("gb-r12-02", None);
        warn.gpus[0].verdict = "WARN".into();
        let mut events = node("gb-r12-03", None);
        events.imex_events = Some("IMEX peer lost at 12:03:05".into());
        let mut blamed = node("gb-r2-01", None);
        blamed.blame = Blame::Job;
        let mut drained = node("x9", Some("block-b"));
        drained.epilog = Some("DRAIN".into());
        let mut odd = node("x10", Some("block-b"));
        odd.gpus[0].verdict = "MAYBE".into();
        let s = JobSummary {
            job_id: 3,
            nodes: vec![
                node("gb-r12-01", None),
                warn,
                events,
                blamed,
                node("gb-r2-02", None),
                drained,
                odd,
                node("4711", None),
            ],
            ..Default::default()
        };
        let st: Vec<&str> = s.nodes.iter().map(|n| n.status().as_str()).collect();
        assert_eq!(
            st,
            ["PASS", "WARN", "WARN", "FAIL", "PASS", "FAIL", "WARN", "PASS"]
        );
        let rc = |rack: &str, nodes, pass, warn, fail| RackCount {
            rack: rack.into(),
            nodes,
            pass,
            warn,
            fail,
        };
        assert_eq!(
            s.rollup(),
            vec![
                rc("4711", 1, 1, 0, 0),
                rc("block-b", 2, 0, 1, 1),
                rc("gb-r2", 2, 1, 0, 1),
                rc("gb-r12", 3, 1, 2, 0),
            ]
        );
        assert_eq!(s.reported_nodes(), 8);
    }

    #[test]
    fn rack_names_and_counts_read_as_people_count() {
        assert_eq!(rack_of_name("gb-r12-05"), "gb-r12");
        assert_eq!(rack_of_name("node_7"), "node");
        assert_eq!(rack_of_name("1234"), "1234");
        assert_eq!(rack_of_name(""), "");
        let mut names = vec!["rack12", "rack2", "rack1", "rack02x", "b", "rack"];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(names, ["b", "rack", "rack1", "rack2", "rack02x", "rack12"]);
        assert_eq!(thousands(18_380), "18,380");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }

    #[test]
    fn long_notes_list_twenty_and_count_the_rest() {
        let s = JobSummary {
            job_id: 9,
            nodes: (0..100)
                .map(|i| NodeReport {
                    node: format!("n{i}"),
                    blame: Blame::Node,
                    gpus: vec![gpu(0, Some(0), None)],
                    ..Default::default()
                })
                .collect(),
            missing: (0..30).map(|i| format!("m{i}")).collect(),
            ..Default::default()
        };
        let notes = s.notes();
        assert_eq!(
            notes.iter().filter(|n| n.contains("was drained")).count(),
            NOTE_ITEMS
        );
        let all = notes.join("\n");
        assert!(all.contains("and 80 more nodes drained or failed"), "{all}");
        assert!(all.contains("m19 and 10 more (its epilog"), "{all}");
        assert!(
            all.contains("100 of 100 GPUs were never used: n0/gpu0,")
                && all.contains("and 80 more (request fewer GPUs)"),
            "{all}"
        );
    }

    #[test]
    fn huge_counters_from_a_corrupt_comment_saturate() {
        let max = u32::MAX;
        let s = JobSummary {
            nodes: vec![NodeReport {
                node: "n1".into(),
                gpus: vec![gpu(0, Some(0), None)],
                ..Default::default()
            }],
            missing: vec!["n2".into()],
            missing_count: max,
            trimmed_gpus: max,
            trimmed_pass_nodes: max,
            trimmed_other_nodes: max,
            trimmed_imex_events: max,
            ..Default::default()
        };
        assert_eq!(s.reported_nodes(), max);
        assert_eq!(s.missing_nodes(), max);
        assert_eq!(s.trimmed_nodes(), max);
        assert_eq!(s.totals().gpus, max);
        assert!(!s.notes().is_empty());
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
