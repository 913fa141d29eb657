//! What the prolog concluded for one `--imex` job on this node (its
//! channel, port, nodes and outcome), which the SPANK plugin reads before a
//! task starts and the epilog reads to tear down. It lives with the state
//! directory that keeps it (`super::domain` reads and writes the records).

use serde::{Deserialize, Serialize};

/// What the prolog concluded for one job on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: u32,
    /// The channel slurm-imex hands out; None when Slurm's switch/nvidia_imex does.
    pub channel: Option<u32>,
    pub server_port: u16,
    /// The job's nodes in this node's IMEX domain, in nodes_config order.
    pub nodes: Vec<String>,
    /// That domain's NVLink block; None when nothing says where the racks
    /// are (every node of the job is in the domain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// The file that membership was cut by (the topology file, or the rack
    /// map with its sha256), so an admin can compare it between nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack_source: Option<String>,
    pub outcome: Outcome,
    /// The whole prolog's wall time on this node (GPU gate and domain, run
    /// side by side), written once both are done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prolog_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Outcome {
    /// Domain UP with every node READY and connected.
    Ready { waited_ms: u64 },
    /// The job cannot use IMEX here; `cause` is shown to the user.
    Failed { cause: String, node_fault: bool },
}

impl JobRecord {
    /// What tasks see as `SLURM_IMEX_DOMAIN`: the block, or `job` when the
    /// domain is the whole job.
    pub fn domain_name(&self) -> &str {
        self.domain.as_deref().unwrap_or("job")
    }
}
