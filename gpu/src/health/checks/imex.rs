//! The node's IMEX daemon, as a health check between jobs (`slurm-imex
//! check`): an idle node is healthy; a node serving a job's domain, or a
//! running rack-wide daemon (`[imex] domain = "rack"`), needs its daemon
//! READY (DCGM-style, context-aware). A rack daemon that is not running is
//! not a finding: the next prolog on the node starts it.

use crate::health::{Finding, Severity};
use slurm_imex_core::config::Config;
use slurm_imex_domain::imex::status::node_status;

/// DCGM-style IMEX check, context-aware: only a daemon that serves a job's
/// domain or the rack must be READY.
pub fn check_imex(cfg: &Config) -> Option<Finding> {
    let status = node_status(cfg);
    let serves = status.serves?;
    (status.local_state != "READY").then(|| Finding {
        check: "imex".into(),
        severity: Severity::Drain,
        gpu: None,
        detail: format!(
            "nvidia-imex serving {serves} is not READY ({}; daemon {})",
            status.local_state, status.daemon
        ),
    })
}
