//! An `--imex` job's IMEX domain on this node, as the prolog and epilog see
//! it: `setup` finds the job's nodes in this node's NVLink domain (from the
//! rack files on the node, `crate::rack::sources`), then forms a per-job domain
//! (`job_domain`) or joins the rack's (`rack_domain`), and records what it
//! concluded for the SPANK plugin; `teardown` returns the node to idle. Who
//! is to blame is a [`Fault`] (docs/blame.md): only a fault of this node
//! fails the prolog.

use super::job_domain;
pub use super::plan::TeardownOutcome;
use super::rack_domain::{self, RackDaemon};
use crate::config::Config;
use crate::config::{DomainScope, Span};
use crate::context::HookContext;
use crate::rack::nvlink_domain::NvlinkDomain;
use crate::rack::sources::RackSources;
use slurm_imex_core::blame::{Blame, Blamed, Fault};
use slurm_imex_core::channel::{channel_for_job, channel_major};
use slurm_imex_core::config::ChannelMode;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::slurm::env::JobEnv;
use slurm_imex_core::slurm::hostlist;
use slurm_imex_core::state::job_record::{JobRecord, Outcome};
use slurm_imex_core::state::StateDir;
use std::time::Duration;

/// Build this job's IMEX domain on this node and wait until it is UP; Ok is
/// how long that took. Whatever the outcome, the job's record says it, for
/// the plugin (without a record the plugin cannot let the job run, so
/// failing to write it is this node's fault). `ctx` holds what the hook
/// has read of the cluster (each file once).
pub fn setup(job: &JobEnv, ctx: &HookContext) -> Blamed<Duration> {
    let (record, outcome) = form(job, ctx);
    StateDir::of(ctx.cfg)
        .write_record(&record)
        .map_err(record_fault)?;
    outcome
}

/// Failing to write a job's record is this node's fault (its own state
/// directory): the plugin cannot let the job run without one.
pub fn record_fault(e: slurm_imex_core::error::Error) -> Fault {
    Fault::Node(e.context("cannot record the IMEX job state"))
}

/// [`setup`] less the write: build the domain and say the outcome in the
/// record the caller writes (the hooks' lifecycle, which owns the record).
pub fn form(job: &JobEnv, ctx: &HookContext) -> (JobRecord, Blamed<Duration>) {
    let cfg = ctx.cfg;
    let state = StateDir::of(cfg);
    let (mode, warning) = ctx.channel_mode();
    if let Some(w) = warning {
        tracing::warn!("{w}");
    }
    // With Slurm's switch/nvidia_imex, Slurm picks the channel; the prolog never learns it.
    let channel = (mode == ChannelMode::Plugin)
        .then(|| channel_for_job(job.job_id, cfg.imex.channel_count.0));
    let mut record = new_record(job.job_id, channel);
    let outcome = form_or_join(job, ctx, &state, &mut record);
    record.outcome = outcome_of(&outcome);
    (record, outcome)
}

/// What a job's record says of its domain's outcome, for the plugin.
pub fn outcome_of(outcome: &Blamed<Duration>) -> Outcome {
    match outcome {
        Ok(waited) => Outcome::Ready {
            waited_ms: waited.as_millis() as u64,
        },
        Err(fault) => Outcome::Failed {
            cause: fault.to_string(),
            node_fault: fault.is_node_fault(),
        },
    }
}

/// The steps, in this order: the channel device, the job's NVLink domain,
/// then a per-job domain or the rack's.
fn form_or_join(
    job: &JobEnv,
    ctx: &HookContext,
    state: &StateDir,
    record: &mut JobRecord,
) -> Blamed<Duration> {
    let cfg = ctx.cfg;
    let node = &job.node_name;
    channel_major(&cfg.imex.proc_devices)
        .map_err(|e| e.context(format!("IMEX channel device missing on {node}")))
        .node()?;
    let (racks, domain) = nvlink_domain(job, ctx)?;
    match cfg.engine.domain {
        DomainScope::Rack => {
            let keep = RackDaemon::KeepIfCurrent;
            rack_domain::join(job, ctx, state, record, racks, domain, keep)
        }
        DomainScope::Job => job_domain::form(job, cfg, state, record, domain),
    }
}

/// Restore this node's IMEX domain for a GPU whose driver asks for it
/// (recovery action RECOVER_IMEX_DOMAIN, which the prolog saw persist once
/// the job's domain was UP). A per-job domain was started for this job
/// already, so there is nothing more to do: None. A rack-wide domain's
/// daemon on this node is restarted on the rack's files and the job's
/// nodes of the rack waited for again, as at a join; the rack's other jobs
/// on this node lose what they imported through it, which the action says
/// is lost already (docs/gpu-health.md, "Recovery actions").
pub fn restore(job: &JobEnv, ctx: &HookContext) -> Option<Blamed<Duration>> {
    if ctx.cfg.engine.domain != DomainScope::Rack {
        return None;
    }
    let state = StateDir::of(ctx.cfg);
    // The job's record was written by the join; this one is a scratch copy.
    let mut record = new_record(job.job_id, None);
    let restarted = nvlink_domain(job, ctx).and_then(|(racks, domain)| {
        let restart = RackDaemon::Restart;
        rack_domain::join(job, ctx, &state, &mut record, racks, domain, restart)
    });
    Some(restarted)
}

/// A job's record before its domain is formed: its channel (None when
/// Slurm picks it), nothing else known yet.
fn new_record(job_id: u32, channel: Option<u32>) -> JobRecord {
    JobRecord {
        job_id,
        channel,
        server_port: 0,
        nodes: Vec::new(),
        domain: None,
        rack_source: None,
        outcome: Outcome::Ready { waited_ms: 0 },
        prolog_ms: None,
    }
}

/// The job's hosts that form this node's IMEX domain, in Slurm's order: a
/// valid hostlist that holds this node, cut to this node's NVLink domain by
/// the rack files on this node (`crate::rack::sources`; no controller call), or
/// refused when it spans racks and `[imex] span = "refuse"`.
fn nvlink_domain<'c>(
    job: &JobEnv,
    ctx: &'c HookContext,
) -> Blamed<(&'c RackSources, NvlinkDomain)> {
    let cfg = ctx.cfg;
    let node = &job.node_name;
    let nodes = hostlist::expand(&job.node_list, cfg.engine.max_nodes)
        .map_err(|e| Fault::job(format!("SLURM_JOB_NODELIST: {e}")))?;
    if !nodes.iter().any(|n| n == node) {
        return Err(Fault::job(format!(
            "this node ({node}) is not in the job's node list {}",
            slurm_imex_core::text::cap(&job.node_list, slurm_imex_core::text::PIECE_MAX)
        )));
    }
    // The cluster's rack files, the same on every node: the job's fault, so
    // a bad copy never drains every node (docs/blame.md, "Files the whole
    // cluster shares").
    let racks = ctx.racks(&nodes).job()?;
    if let Some(cause) = racks
        .disagreement(&nodes)
        .or_else(|| racks.stale_map(&nodes))
    {
        return Err(Fault::Job(cause));
    }
    let domain = racks.domain_of(node, &nodes);
    let chosen = match (cfg.engine.span, &racks.blocks) {
        (Span::Split, _) => Ok(domain),
        (Span::Refuse, Some(blocks)) if blocks.block_of(&nodes).is_some() => blocks
            .check_one_block(&nodes)
            .map(|()| NvlinkDomain::whole_job(nodes)),
        (Span::Refuse, _) if domain.nodes.len() < nodes.len() => Err(Error::invalid(format!(
            "the job's nodes span more than one NVLink rack (the rack map {}; this node {node} \
             is in {}); one IMEX domain must stay in one rack: submit with --segment=<nodes per \
             job>, or to a partition per rack",
            domain.source.as_deref().unwrap_or("-"),
            domain.name.as_deref().unwrap_or("none")
        ))),
        (Span::Refuse, _) => Ok(NvlinkDomain::whole_job(nodes)),
    };
    Ok((racks, chosen.job()?))
}

/// After a domain formed: when the rack map puts this node in a clique its
/// own GPUs (`live`, read by the prolog's gate) do not report, the job
/// must not use it: the job's fault, recorded for the plugin, which fails
/// the job's tasks on this node naming it (the node stays up). Ok when the
/// map agrees or says nothing about this node; without the record the
/// plugin cannot be told, which is this node's fault. The domain is left to
/// the job's epilog: stopped now, it would make every peer blame this node
/// as one that never became ready.
pub fn refuse_for_own_clique(job: &JobEnv, ctx: &HookContext, live: &str) -> Blamed<()> {
    let Some(cause) = own_clique_disagreement(job, ctx, live) else {
        return Ok(());
    };
    record_job_failure(job.job_id, &StateDir::of(ctx.cfg), &cause).map_err(record_fault)?;
    Err(Fault::Job(cause))
}

/// Why the rack map contradicts the clique this node's GPUs report
/// (`live`), if it does: [`refuse_for_own_clique`] less the record.
pub fn own_clique_disagreement(job: &JobEnv, ctx: &HookContext, live: &str) -> Option<String> {
    // A map that cannot be read failed the setup already.
    ctx.racks(std::slice::from_ref(&job.node_name))
        .ok()?
        .live_clique_disagreement(&job.node_name, live)
}

fn record_job_failure(job_id: u32, state: &StateDir, cause: &str) -> Result<()> {
    if let Some(mut record) = state.read_record(job_id)? {
        record.outcome = Outcome::Failed {
            cause: cause.to_string(),
            node_fault: false,
        };
        state.write_record(&record)?;
    }
    Ok(())
}

/// Return this node to idle after `job_id`, and forget the job's record. A
/// per-job domain is stopped (`job_domain::release`: idempotent, safe after
/// a prolog that failed, was killed anywhere, or never ran, and never
/// touching another job's domain); a rack's daemon serves the rack's other
/// jobs and stays up.
pub fn teardown(job_id: u32, cfg: &Config) -> Result<TeardownOutcome> {
    let state = StateDir::of(cfg);
    let outcome = match cfg.engine.domain {
        DomainScope::Rack => TeardownOutcome::RackDomainKept,
        DomainScope::Job => job_domain::release(job_id, cfg, &state)?,
    };
    state.remove_record(job_id)?;
    Ok(outcome)
}
