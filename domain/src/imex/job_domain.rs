//! The per-job IMEX domain (`[imex] domain = "job"`, the default): the job
//! claims the node's daemon (a second `--imex` job on the node is refused,
//! never disturbed; a domain left by a job that has ended is reclaimed),
//! the daemon is restarted on the job's nodes of the rack and a per-job
//! SERVER_PORT, and the prolog waits for the whole domain to be UP. The
//! epilog stops the daemon, proves it gone, and leaves the node idle.

use super::plan::{domain_addresses, DomainPlan, Port, TeardownOutcome, WaitFor};
use crate::config::Config;
use crate::imex::daemon::Daemon;
use crate::imex::daemon_config::DaemonConfigFile;
use crate::rack::nvlink_domain::NvlinkDomain;
use slurm_imex_core::blame::{Blame, Blamed, Fault};
use slurm_imex_core::error::Result;
use slurm_imex_core::fsutil::{remove_if_exists, write_atomic};
use slurm_imex_core::slurm::env::JobEnv;
use slurm_imex_core::slurm::Scontrol;
use slurm_imex_core::state::job_record::JobRecord;
use slurm_imex_core::state::StateDir;
use std::time::{Duration, Instant};

/// Claim the node for the job, write the domain's files, (re)start the
/// daemon and wait until the domain (the job's nodes in this node's rack)
/// is UP. Nothing is claimed before the job is known to fit.
pub fn form(
    job: &JobEnv,
    cfg: &Config,
    state: &StateDir,
    record: &mut JobRecord,
    domain: NvlinkDomain,
) -> Blamed<Duration> {
    claim(job, cfg, state)?;
    record.nodes = domain.nodes.clone();
    record.domain = domain.name.clone();
    record.rack_source = domain.source.clone();
    let addrs = domain_addresses(cfg, &domain)?;
    // This node's daemon config and the files it writes: the node's.
    let plan = DomainPlan::render(cfg, &addrs, Port::PerJob(job.job_id)).node()?;
    plan.write(cfg).node()?;
    record.server_port = plan.port;
    let mut daemon = Daemon::new(&cfg.engine.daemon, state);
    let started = Instant::now();
    plan.start(&mut daemon, &job.node_name).node()?;
    let everyone: Vec<usize> = (0..domain.nodes.len()).collect();
    let wait = WaitFor {
        job,
        cfg,
        started,
        domain: &domain,
        addrs: &addrs,
        members: &everyone,
    };
    plan.wait_ready(&mut daemon, &wait)
}

/// Make this job the owner of the node's daemon, unless another job's
/// domain is here (the job's failure; that domain is never disturbed). A
/// domain left by a job Slurm says has ended is reclaimed first: the one
/// controller call a prolog may make, on this fault path only
/// (docs/controller-calls.md).
fn claim(job: &JobEnv, cfg: &Config, state: &StateDir) -> Blamed<()> {
    // This node's state directory and daemon: the node's.
    let lock = state.lock().node()?;
    let other = match state.owner(&lock).node()? {
        Some(other) if other != job.job_id => other,
        _ => return state.set_owner(&lock, job.job_id).node(),
    };
    let ended = Scontrol::of(&cfg.slurm).job_has_ended(other);
    if let Ok(Some(true)) = ended {
        tracing::warn!("reclaiming the IMEX domain left behind by job {other}, which has ended");
        stop_daemon(cfg, state).node()?;
        state.remove_record(other).node()?;
        return state.set_owner(&lock, job.job_id).node();
    }
    let unsure = match ended {
        Ok(Some(_)) => String::new(),
        Ok(None) => " (Slurm could not say whether it is still running)".into(),
        Err(e) => format!(" (cannot ask Slurm whether it is still running: {e})"),
    };
    Err(Fault::job(format!(
        "node {} already serves the IMEX domain of job {other}{unsure}; IMEX jobs need whole \
         nodes (use an exclusive partition or --exclusive)",
        job.node_name
    )))
}

/// Return this node to idle after `job_id`: stop the daemon, empty the
/// nodes config, remove the per-job config. Idempotent, and safe after a
/// prolog that failed, was killed anywhere, or never ran. A domain owned by
/// another job is left alone.
pub fn release(job_id: u32, cfg: &Config, state: &StateDir) -> Result<TeardownOutcome> {
    let lock = state.lock()?;
    Ok(match state.owner(&lock)? {
        Some(other) if other != job_id => TeardownOutcome::LeftToOwner(other),
        owner => {
            stop_daemon(cfg, state)?;
            restore_idle_nodes_config(cfg)?;
            remove_if_exists(&cfg.engine.daemon.job_config)?;
            state.clear_owner(&lock)?;
            if owner.is_some() {
                TeardownOutcome::TornDown
            } else {
                TeardownOutcome::AlreadyIdle
            }
        }
    })
}

/// Stop this node's daemon and prove it gone (no process of ours, nothing
/// on the command port).
fn stop_daemon(cfg: &Config, state: &StateDir) -> Result<()> {
    let mut daemon = Daemon::new(&cfg.engine.daemon, state);
    daemon.stop()?;
    daemon.verify_gone(command_address(cfg))
}

/// Where the daemon's command port listens (IMEX_CMD_BIND_INTERFACE_IP,
/// default loopback); None when the base config cannot say.
fn command_address(cfg: &Config) -> Option<std::net::SocketAddr> {
    let base = DaemonConfigFile::read(&cfg.engine.daemon.base_config).ok()?;
    let port = base.cmd_port(&cfg.engine.daemon.base_config).ok()?;
    let ip = base
        .get("IMEX_CMD_BIND_INTERFACE_IP")
        .and_then(|v| v.parse::<std::net::IpAddr>().ok())
        .filter(|ip| !ip.is_unspecified())
        .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
    Some(std::net::SocketAddr::new(ip, port))
}

/// The idle nodes config is empty, so a daemon started by accident joins no
/// domain (NVIDIA's own prolog does the same).
fn restore_idle_nodes_config(cfg: &Config) -> Result<()> {
    let path = &cfg.engine.daemon.nodes_config;
    match std::fs::metadata(path) {
        Ok(m) if m.len() == 0 => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match path.parent().map(|p| p.is_dir()) {
                Some(true) => write_atomic(path, b"", 0o644),
                _ => Ok(()),
            }
        }
        _ => write_atomic(path, b"", 0o644),
    }
}
