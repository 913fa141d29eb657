//! The rack-wide IMEX domain (`[imex] domain = "rack"`, docs/imex.md §5):
//! one long-lived daemon per NVLink domain, whose nodes_config holds every
//! node of the rack, as Slurm's switch/nvidia_imex and the cloud IMEX guides
//! assume. The prolog makes sure this node's daemon runs on the rack's files
//! (it starts the daemon only when it is down or the rack changed) and then
//! waits for the job's nodes of the rack to be READY and connected; the
//! epilog leaves the daemon up. Jobs are kept apart by their channels alone,
//! which must therefore be unique among the rack's running jobs
//! (`super::rack_channels`), or no job joins. The rack comes from the rack
//! files on this node, like a per-job domain's: no prolog reads the
//! controller's node table. Blame is the engine's (`super::plan`).

use super::daemon::{Daemon, Liveness};
use super::plan::{domain_addresses, DomainPlan, Port, WaitFor};
use super::rack_channels;
use crate::context::HookContext;
use crate::rack::nvlink_domain::NvlinkDomain;
use crate::rack::sources::RackSources;
use slurm_imex_core::blame::{Blame, Blamed, Fault};
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::slurm::env::JobEnv;
use slurm_imex_core::state::job_record::JobRecord;
use slurm_imex_core::state::StateDir;
use slurm_imex_core::text::{summarize_list, PIECE_MAX};
use std::time::{Duration, Instant};

/// What a join does with this node's rack daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RackDaemon {
    /// Start it only when it is down or the rack's files changed.
    KeepIfCurrent,
    /// Restart it even when it runs on the rack's files
    /// (`crate::imex::domain::restore`: a GPU asks for its IMEX domain to
    /// be restored).
    Restart,
}

/// Make sure this node's rack daemon runs (`daemon`), then gate on the
/// job's nodes of the rack (`domain`: the job's nodes in this node's NVLink
/// domain).
pub fn join(
    job: &JobEnv,
    ctx: &HookContext,
    state: &StateDir,
    record: &mut JobRecord,
    racks: &RackSources,
    domain: NvlinkDomain,
    daemon_start: RackDaemon,
) -> Blamed<Duration> {
    let restart = daemon_start == RackDaemon::Restart;
    let cfg = ctx.cfg;
    // The cluster's configuration, the same on every node: the job's fault.
    if let Some(cause) = rack_channels::guarantee(ctx).job()?.refuses(job.job_id) {
        return Err(Fault::Job(cause));
    }
    let rack = rack_of(&job.node_name, cfg.engine.max_nodes, racks, &domain).job()?;
    record.nodes = domain.nodes.clone();
    record.domain = rack.name.clone();
    record.rack_source = rack.source.clone();
    let addrs = domain_addresses(cfg, &rack)?;
    let plan = DomainPlan::render(cfg, &addrs, Port::Base).node()?;
    record.server_port = plan.port;
    let mut daemon = Daemon::new(&cfg.engine.daemon, state);
    let started = Instant::now();
    {
        // Two prologs on one node (jobs share nodes in this mode) must not
        // both restart the daemon.
        let _lock = state.lock().node()?;
        let running = daemon.liveness() == Liveness::Running;
        if restart || !(running && plan.is_written(cfg)) {
            if restart {
                tracing::warn!(
                    "a GPU asks for its IMEX domain to be restored: restarting the rack daemon \
                     on {}",
                    job.node_name
                );
            } else if running {
                tracing::warn!(
                    "the rack's IMEX files changed (its nodes or the base config): restarting \
                     the rack daemon on {}",
                    job.node_name
                );
            }
            plan.write(cfg).node()?;
            plan.start(&mut daemon, &job.node_name).node()?;
        }
    }
    let members: Vec<usize> = domain
        .nodes
        .iter()
        .filter_map(|n| rack.nodes.iter().position(|r| r == n))
        .collect();
    let wait = WaitFor {
        job,
        cfg,
        started,
        domain: &rack,
        addrs: &addrs,
        members: &members,
    };
    plan.wait_ready(&mut daemon, &wait)
}

/// This node's whole rack, which must hold the job's nodes of its NVLink
/// domain; `Err` is the job's failure line.
fn rack_of(
    node: &str,
    max_nodes: usize,
    racks: &RackSources,
    domain: &NvlinkDomain,
) -> Result<NvlinkDomain> {
    let Some(rack) = racks.whole_rack(node) else {
        return Err(Error::invalid(format!(
            "[imex] domain = \"rack\", but nothing places {node} in a rack: no Slurm topology \
             file lists it and no rack map does (write one with `slurm-imex topology --map` and \
             install it on every node, or describe the racks in topology.conf or topology.yaml)"
        )));
    };
    if rack.nodes.len() > max_nodes {
        return Err(Error::invalid(format!(
            "the rack of {node} has {} nodes, more than [imex] max_nodes = {}",
            rack.nodes.len(),
            max_nodes
        )));
    }
    let outside: Vec<String> = domain
        .nodes
        .iter()
        .filter(|n| !rack.nodes.contains(n))
        .cloned()
        .collect();
    if !outside.is_empty() {
        return Err(Error::invalid(format!(
            "the job's nodes {} share {node}'s NVLink domain but are not in its rack {}: \
             the rack sources disagree (`slurm-imex topology --check`)",
            summarize_list(&outside, PIECE_MAX),
            rack.name.as_deref().unwrap_or("?")
        )));
    }
    Ok(rack)
}
