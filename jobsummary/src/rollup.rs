//! The per-rack rollup of a job's nodes, and the one rule for leaving a
//! big job's PASS nodes out of its summary: counted in the rollup, in
//! `trimmed_pass_nodes` and `trimmed_gpus`, and no longer listed. Used both
//! when a stored summary is too large ([`crate::comment::encode`]) and when
//! a job too large to read series by series is read in aggregate
//! ([`JobSummary::aggregated`]).

use crate::report::{count_u32, natural_cmp, JobSummary, NodeReport, NodeStatus, Totals};
use serde::{Deserialize, Serialize};

/// One rack's nodes in the job, counted by status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RackCount {
    pub rack: String,
    pub nodes: u32,
    pub pass: u32,
    pub warn: u32,
    pub fail: u32,
}

impl JobSummary {
    /// Each rack's nodes counted by status, racks in natural order: the
    /// stored rollup when nodes were left out, else computed from `nodes`.
    pub fn rollup(&self) -> Vec<RackCount> {
        if !self.racks.is_empty() {
            return self.racks.clone();
        }
        let mut by: std::collections::HashMap<String, RackCount> = Default::default();
        for n in &self.nodes {
            let rack = n.rack();
            let c = by.entry(rack.clone()).or_insert_with(|| RackCount {
                rack,
                ..Default::default()
            });
            c.nodes += 1;
            match n.status() {
                NodeStatus::Pass => c.pass += 1,
                NodeStatus::Warn => c.warn += 1,
                NodeStatus::Fail => c.fail += 1,
            }
        }
        let mut racks: Vec<RackCount> = by.into_values().collect();
        racks.sort_by(|a, b| natural_cmp(&a.rack, &b.rack));
        racks
    }

    /// Leave the PASS nodes out: the rollup of every node is kept first
    /// (`racks`, unless already set), and the nodes and GPUs left out are
    /// counted (`trimmed_pass_nodes`, `trimmed_gpus`).
    pub fn leave_out_pass_nodes(&mut self) {
        if self.racks.is_empty() {
            self.racks = self.rollup();
        }
        let (mut nodes, mut gpus) = (0u32, 0u32);
        self.nodes.retain(|n| {
            let pass = n.status() == NodeStatus::Pass;
            if pass {
                nodes = nodes.saturating_add(1);
                gpus = gpus.saturating_add(count_u32(n.gpus.len()));
            }
            !pass
        });
        self.trimmed_pass_nodes = self.trimmed_pass_nodes.saturating_add(nodes);
        self.trimmed_gpus = self.trimmed_gpus.saturating_add(gpus);
    }

    /// The summary of a job read in aggregate: every node's verdicts
    /// (`nodes`; a PASS node's GPUs were never read one by one) and the
    /// totals Prometheus summed. Its PASS nodes are left out as above; the
    /// GPUs not listed are what the totals count beyond those that are.
    pub fn aggregated(
        job_id: u32,
        nodes: Vec<NodeReport>,
        missing: Vec<String>,
        totals: Totals,
    ) -> JobSummary {
        let mut s = JobSummary {
            job_id,
            nodes,
            missing,
            ..Default::default()
        };
        s.leave_out_pass_nodes();
        s.trimmed_gpus = totals.gpus.saturating_sub(count_u32(s.gpus().count()));
        s.stored_totals = Some(totals);
        s.pass_nodes_aggregated = true;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::GpuReport;

    fn node(name: &str, epilog: &str, gpus: u32) -> NodeReport {
        NodeReport {
            node: name.into(),
            epilog: Some(epilog.into()),
            gpus: (0..gpus)
                .map(|index| GpuReport {
                    index,
                    verdict: epilog.into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_job_read_in_aggregate_lists_only_the_nodes_that_did_not_pass() {
        let nodes = vec![
            node("r1-01", "PASS", 0),
            node("r1-02", "WARN", 1),
            node("r2-01", "PASS", 0),
            node("r2-02", "FAIL", 2),
        ];
        let totals = Totals {
            gpus: 16,
            ..Default::default()
        };
        let s = JobSummary::aggregated(7, nodes, vec!["r3-01".into()], totals);
        assert_eq!(s.nodes.len(), 2);
        assert_eq!((s.trimmed_pass_nodes, s.trimmed_gpus), (2, 13));
        assert!(s.pass_nodes_aggregated);
        assert_eq!(s.reported_nodes(), 4);
        assert_eq!(s.totals().gpus, 16);
        let racks = s.rollup();
        assert_eq!(racks.len(), 2);
        assert_eq!((racks[0].nodes, racks[0].pass, racks[0].warn), (2, 1, 1));
        assert_eq!((racks[1].nodes, racks[1].pass, racks[1].fail), (2, 1, 1));
    }

    #[test]
    fn pass_nodes_left_out_are_counted_with_their_gpus_whatever_the_counters_held() {
        let mut s = JobSummary {
            nodes: vec![node("a1", "PASS", 4), node("a2", "WARN", 4)],
            trimmed_pass_nodes: u32::MAX,
            trimmed_gpus: u32::MAX - 1,
            ..Default::default()
        };
        s.leave_out_pass_nodes();
        assert_eq!(s.nodes.len(), 1);
        assert_eq!((s.trimmed_pass_nodes, s.trimmed_gpus), (u32::MAX, u32::MAX));
        assert_eq!(s.racks.len(), 1, "the rollup is kept first");
        assert_eq!(s.racks[0].nodes, 2);
    }
}
