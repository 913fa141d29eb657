//! The node's IMEX daemon, as a health check between jobs (`slurm-imex
//! check`): an idle node is healthy; a node serving a job's domain needs its
//! daemon READY (DCGM-style, context-aware).

use crate::health::{Finding, Severity};
use slurm_imex_core::config::Config;
use slurm_imex_core::imex::status::node_status;

/// DCGM-style IMEX check, context-aware: only a node that serves a job's
/// domain must have a READY daemon.
pub fn check_imex(cfg: &Config) -> Option<Finding> {
    let status = node_status(cfg);
    let owner = status.owner?;
    (status.local_state != "READY").then(|| Finding {
        check: "imex".into(),
        severity: Severity::Drain,
        gpu: None,
        detail: format!(
            "nvidia-imex serving job {owner} is not READY ({}; daemon {})",
            status.local_state, status.daemon
        ),
    })
}
