//! This node's standing as slurm-imex last saw it, kept between runs in the
//! state directory (`node-metrics.json`) so each writer updates only its
//! part: since when slurm-imex has had the node drained (the drain decision
//! sets it), the last prolog, gate and epilog times (the epilog), and the
//! IMEX domain (derived from the state at each export, never kept), the
//! count of IMEX domain events by kind (the watcher). The
//! Prometheus export renders it.

use super::StateDir;
use crate::error::Result;
use crate::state::job_record::Outcome;
use serde::{Deserialize, Serialize};

/// This node's state for the export; kept between runs in
/// `<state_dir>/node-metrics.json` so each writer updates only its part.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeState {
    pub node: String,
    /// Derived at each export, never kept: see [`NodeState::read_domain`].
    #[serde(skip)]
    pub domain_owned: bool,
    #[serde(skip)]
    pub domain_up: bool,
    /// IMEX is expected on this node now: a job owns its per-job domain,
    /// or it serves the rack-wide one. Decided at each export by
    /// `slurm_imex_domain::imex::status::expectation` (this crate cannot
    /// ask the daemon), never kept.
    #[serde(skip)]
    pub imex_expected: bool,
    /// Drained by slurm-imex (a drain finding of a prolog, epilog or check),
    /// and since when (Unix seconds).
    pub drained_since: Option<i64>,
    /// When `slurm-imex check` last read this node from slurmctld (None:
    /// not since boot). Until it has, it asks once whether the node is
    /// drained by us; after, `drained_since` answers without a call.
    pub slurm_read_at: Option<i64>,
    /// While drained by slurm-imex: our reason (`imex-health: …`, naming
    /// the check, GPU or IMEX cause, and the job). A hook that fails makes
    /// Slurm drain with its own "Prolog error"; `slurm-imex check` later
    /// sets this instead (slurm_imex_hooks::drain), one node at a time.
    #[serde(default)]
    pub drained_for: Option<String>,
    /// Slurm shows `drained_for` as the node's reason.
    #[serde(default)]
    pub reason_shown: bool,
    pub last_gate_ms: Option<u64>,
    pub last_prolog_ms: Option<u64>,
    pub last_epilog_ms: Option<u64>,
    /// IMEX domain events the watcher saw on this node since the state
    /// directory began (a reboot, on its tmpfs), by kind
    /// (`slurm_imex_jobsummary::imex_event::ImexEventKind::as_str`): the node's Prometheus
    /// counters, with no job label. Read from the watchers' own file at
    /// each load (`super::event_counts`), never kept here.
    #[serde(skip)]
    pub imex_events: std::collections::BTreeMap<String, u64>,
}

impl NodeState {
    /// The saved state (a missing or corrupt file is a fresh state).
    pub fn load(state: &StateDir) -> NodeState {
        let mut node: NodeState = state
            .read_text(&state.node_state_path(), "node state", 64 * 1024)
            .ok()
            .flatten()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        node.imex_events = super::event_counts(state);
        node
    }

    pub fn save(&self, state: &StateDir) -> Result<()> {
        state.write_json(&state.node_state_path(), self)
    }

    /// The IMEX domain as the state directory records it: owned when a job
    /// owns the daemon, UP when that job's prolog saw it UP. (`slurm-imex
    /// check` asks the daemon itself instead.)
    pub fn read_domain(&mut self, state: &StateDir) {
        let owner = state.read_owner().ok().flatten();
        self.domain_owned = owner.is_some();
        self.domain_up = owner
            .and_then(|o| state.read_record(o).ok().flatten())
            .is_some_and(|r| matches!(r.outcome, Outcome::Ready { .. }));
    }

    /// Note a drain finding (`Some(now)`) or a node back in service (`None`);
    /// an existing drain keeps its start time.
    pub fn set_drained(&mut self, drained_at: Option<i64>) {
        self.drained_since = match (self.drained_since, drained_at) {
            (Some(since), Some(_)) => Some(since),
            (_, at) => at,
        };
        if drained_at.is_none() {
            self.drained_for = None;
            self.reason_shown = false;
        }
    }

    /// Note why we drained the node (the first reason of a drain stays), and
    /// whether Slurm already shows it.
    pub fn note_drain_reason(&mut self, reason: &str, shown: bool) {
        if self.drained_for.is_none() {
            self.drained_for = Some(reason.to_string());
            self.reason_shown = shown;
        }
    }
}
