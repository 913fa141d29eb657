//! The third hook: `slurm-imex check`, slurmd's HealthCheckProgram (and an
//! admin's command). It runs the gate now, acts on the verdict in Slurm
//! (`crate::drain`), publishes the node's NVLink clique, and keeps the
//! node's standing and Prometheus export fresh. What it found comes back as
//! a [`CheckReport`]; printing it is the CLI's. Also the one place a node's
//! clique is published, for the prolog's GPU side and the check alike
//! ([`publish_clique`]).

use crate::drain::{self, CheckFlags, DrainAction};
use crate::imex_check::check_imex;
use serde::Serialize;
use slurm_imex_core::error::Result;
use slurm_imex_core::slurm::node::NodeRead;
use slurm_imex_core::slurm::Scontrol;
use slurm_imex_core::state::{NodeState, StateDir};
use slurm_imex_core::timespec::now_s;
use slurm_imex_domain::imex::status::node_status;
use slurm_imex_domain::rack::clique::{self, Published};
use slurm_imex_gpu::clique::node_clique;
use slurm_imex_gpu::health::gate::check_now;
use slurm_imex_gpu::health::{drain_reason, verdict_of, Finding, Verdict};
use slurm_imex_jobdb::metrics;
use slurm_imex_settings::Config;

/// What one check found and did, as `--json` prints it.
#[derive(Serialize)]
pub struct CheckReport {
    pub node: String,
    pub verdict: Verdict,
    pub elapsed_ms: u64,
    pub gpus: usize,
    pub findings: Vec<Finding>,
    pub action: Option<String>,
    /// The node's NVLink clique from its GPUs, when they report a trusted one.
    pub clique: Option<String>,
    /// What publishing it in the node's Slurm Extra did.
    pub published: Option<String>,
    /// What went wrong beside the verdict (a stale export), one line each.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// The gate now, and what it means for `node` in Slurm. As slurmd's
/// HealthCheckProgram this runs on every node every few minutes, so Slurm
/// is read at most once (`NodeRead`), and only when the node's standing or
/// its clique changed (docs/controller-calls.md).
pub fn check(config: &Config, node: String, flags: CheckFlags) -> Result<CheckReport> {
    let gate = check_now(config)?;
    let mut findings = gate.findings;
    findings.extend(check_imex(config));
    let verdict = verdict_of(&findings);
    let state = StateDir::of(config);
    let scontrol = Scontrol::of(&config.slurm);
    let told = std::env::var("SLURM_NODE_IS_HEALTHY").ok();
    let slurm = NodeRead::new(&scontrol, &node).telling(told.as_deref());
    let standing = NodeState::load(&state);
    let pending = recovery_pending(&gate.snapshots);
    let reason = drain_reason(&findings);
    let action = drain::act_on_check(&slurm, &standing, reason, pending.as_deref(), flags)?;
    let clique = node_clique(&gate.snapshots);
    let published = clique
        .as_deref()
        .map(|c| publish_clique(&state, &slurm, c).unwrap_or_else(|not| not));
    let mut warnings = Vec::new();
    if let Err(e) = refresh_metrics(config, &node, &action, slurm.answered()) {
        warnings.push(format!("Prometheus textfile not refreshed: {e}"));
    }
    Ok(CheckReport {
        action: action.describe(&node),
        node,
        verdict,
        elapsed_ms: gate.elapsed.as_millis() as u64,
        gpus: gate.snapshots.len(),
        findings,
        clique,
        published,
        warnings,
    })
}

/// The first GPU whose recovery action is not NONE, or could not be read,
/// as `gpu3 reads RECOVER_IMEX_DOMAIN (5)`: what keeps a recovery-action
/// drain in place (`drain::awaits_recovery`).
fn recovery_pending(snapshots: &[slurm_imex_gpu::nvml::GpuSnapshot]) -> Option<String> {
    use slurm_imex_gpu::nvml::Reading;
    use slurm_imex_gpu::recovery::RecoveryAction;
    snapshots.iter().find_map(|s| match &s.recovery_action {
        Reading::Value(0) | Reading::NotSupported => None,
        Reading::Value(v) => Some(format!(
            "gpu{} reads {}",
            s.index,
            RecoveryAction(*v).describe()
        )),
        Reading::Failed(e) => Some(format!(
            "gpu{}'s recovery action cannot be read: {e}",
            s.index
        )),
    })
}

/// Publish the node's clique in its Slurm Extra, asking Slurm only when it
/// changed (`rack::clique::publish`). What happened, as the line an admin
/// reads; `Err` when Slurm could not be asked (the next check retries).
/// Both are lines for the check's report, not failures to handle: Strings.
pub fn publish_clique(
    state: &StateDir,
    slurm: &NodeRead,
    clique: &str,
) -> std::result::Result<String, String> {
    match clique::publish(state, slurm, clique) {
        Ok(Published::Updated) => Ok("published in Slurm's node Extra".into()),
        Ok(Published::Unchanged) => Ok("published in Slurm's node Extra (unchanged)".into()),
        Ok(Published::LeftAlone(why)) => Ok(format!("not published: {why}")),
        Err(e) => Err(format!("not published: {e}")),
    }
}

/// The HealthCheckProgram path keeps the node's standing and export fresh:
/// IMEX domain state as the daemon reports it (and whether IMEX is
/// expected here), what the drain decision did
/// (and when Slurm was last read, `slurm_read`), then the .prom file.
fn refresh_metrics(
    config: &Config,
    node_name: &str,
    action: &DrainAction,
    slurm_read: bool,
) -> Result<()> {
    let state = StateDir::of(config);
    let mut node = NodeState::load(&state);
    node.node = node_name.to_string();
    let status = node_status(config);
    node.domain_owned = status.owner.is_some();
    node.domain_up = status.domain.as_deref() == Some("UP");
    node.imex_expected = status.imex_expected;
    let now = now_s();
    action.record(&mut node, now);
    if slurm_read {
        node.slurm_read_at = Some(now);
    }
    node.save(&state)?;
    metrics::refresh(&config.database, &config.metrics, &node)?;
    Ok(())
}

/// `slurm-imex undrain`: resume each of `names` (the admin's `hostlist`,
/// checked and expanded: `node::node_names`) whose drain is ours
/// (`drain::undrain`, `drain::undrain_each`). This node's standing speaks
/// for `this_node` only: for another node, only a reason with our prefix
/// is ours. When this node is among them, what was done is kept in its
/// standing; a failure to save that is the warning returned. One node's
/// failure to be read is the `Err`, as any one-node command's; among
/// several, each node's outcome is its own.
pub fn undrain(
    config: &Config,
    hostlist: &str,
    names: &[String],
    this_node: &str,
) -> Result<(drain::Outcomes, Option<String>)> {
    let state = StateDir::of(config);
    let own = names
        .iter()
        .any(|n| n == this_node)
        .then(|| NodeState::load(&state));
    let standing_of = |node: &str| match &own {
        Some(own) if node == this_node => own.clone(),
        _ => NodeState::default(),
    };
    let scontrol = Scontrol::of(&config.slurm);
    let outcomes = match names {
        [one] => vec![(
            one.clone(),
            Ok(drain::undrain(&scontrol, one, &standing_of(one))?),
        )],
        _ => drain::undrain_each(&scontrol, hostlist, names, &standing_of)?,
    };
    let mut warning = None;
    let ours = outcomes.iter().find(|(n, _)| n == this_node);
    if let (Some(mut standing), Some((_, Ok(outcome)))) = (own, ours) {
        outcome.record(&mut standing, now_s());
        if let Err(e) = standing.save(&state) {
            warning = Some(format!("the node's standing not saved: {e}"));
        }
    }
    Ok((outcomes, warning))
}
