//! This node's IMEX state as an admin asks for it (`slurm-imex status`):
//! which job owns the daemon (or that it serves the rack, with `[imex]
//! domain = "rack"`), what the prolog recorded, whether the daemon lives and
//! answers, and the domain it reports. The health check built on
//! it is `slurm_imex_hooks::imex_check`.

use crate::imex::ctl::Ctl;
use crate::imex::daemon::{Daemon, Liveness};
use serde::Serialize;
use slurm_imex_core::config::{Config, DomainScope};
use slurm_imex_core::state::job_record::JobRecord;
use slurm_imex_core::state::StateDir;

#[derive(Debug, Clone, Serialize)]
pub struct NodeImexStatus {
    /// The job whose domain the daemon serves; None when idle.
    pub owner: Option<u32>,
    /// Whom the daemon serves: "job N", "the rack" (a running rack-wide
    /// daemon), or None when the node is idle.
    pub serves: Option<String>,
    pub record: Option<JobRecord>,
    /// "running", or why not.
    pub daemon: String,
    /// `nvidia-imex-ctl -q`, or the error.
    pub local_state: String,
    /// UP / DEGRADED / DOWN, when the daemon answered -N -j.
    pub domain: Option<String>,
    pub nodes_ready: Option<(usize, usize)>,
    pub problems: Vec<String>,
}

pub fn node_status(cfg: &Config) -> NodeImexStatus {
    let state = StateDir::of(cfg);
    let mut problems = Vec::new();
    let owner = state.read_owner().unwrap_or_else(|e| {
        problems.push(e.to_string());
        None
    });
    let record = owner.and_then(|o| {
        state.read_record(o).unwrap_or_else(|e| {
            problems.push(e.to_string());
            None
        })
    });
    let liveness = Daemon::new(&cfg.imex.daemon, &state).liveness();
    let rack_daemon = cfg.imex.domain == DomainScope::Rack && liveness == Liveness::Running;
    let serves = match owner {
        Some(job) => Some(format!("job {job}")),
        None => rack_daemon.then(|| "the rack".to_string()),
    };
    let daemon = match liveness {
        Liveness::Running => "running".to_string(),
        Liveness::Exited(how) => how,
    };
    let (local_state, domain, nodes_ready) = if serves.is_some() {
        let ctl = Ctl {
            program: &cfg.imex.daemon.ctl,
            config: &cfg.imex.daemon.job_config,
            timeout: cfg.imex.daemon.ctl_timeout.0,
        };
        let local = ctl.local_state().unwrap_or_else(|e| e.to_string());
        match ctl.domain_status() {
            Ok(s) => {
                let ready = s
                    .nodes
                    .values()
                    .filter(|n| n.status.as_deref() == Some("READY"))
                    .count();
                (local, Some(s.domain), Some((ready, s.nodes.len())))
            }
            Err(e) => {
                problems.push(e.to_string());
                (local, None, None)
            }
        }
    } else {
        ("idle (no IMEX job on this node)".to_string(), None, None)
    };
    NodeImexStatus {
        owner,
        serves,
        record,
        daemon,
        local_state,
        domain,
        nodes_ready,
        problems,
    }
}
