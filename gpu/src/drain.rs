//! Acting on a verdict: the one place that decides what a drain-class
//! finding does to the node, for the prolog, the epilog and `slurm-imex
//! check` alike, and the only caller of `slurm_node::drain` and `resume`.
//! It answers with a [`DrainAction`], which callers act on by its variant
//! (never by matching words), and which also says what the node's standing
//! (`NodeState::drained_since`) records.
//!
//! - prolog: a drain finding fails the prolog, so Slurm drains the node and
//!   requeues the job; with `[health] set_drain_reason` our reason is set
//!   first, so `sinfo -R` shows it instead of "Prolog error".
//! - epilog: with `[health] drain_from_epilog`, a drain finding drains the
//!   node the same way and fails the epilog; otherwise it is only recorded.
//! - check: `--drain` drains on a drain finding (always with our reason);
//!   `--undrain` resumes a node that passes, and only when the drain reason
//!   is ours (it starts with [`DRAIN_PREFIX`]): an admin's drain is left.

use crate::health::DRAIN_PREFIX;
use slurm_imex_core::config::HealthConfig;
use slurm_imex_core::error::Result;
use slurm_imex_core::hook::Hook;
use slurm_imex_core::slurm_node;
use slurm_imex_core::state::NodeState;

/// What `slurm-imex check` was asked to do beyond reporting (`--drain`,
/// `--undrain`). The prolog and epilog pass the default: their rule is the
/// config's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckFlags {
    pub drain: bool,
    pub undrain: bool,
}

/// What acting on a verdict did, or has the hook do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainAction {
    /// Nothing: no drain finding, or none that this hook acts on.
    Nothing,
    /// The node must not take jobs: the hook fails with `reason` (prolog,
    /// epilog), or the node was drained with it (check).
    Drain { reason: String },
    /// Our drain was lifted; `was` is the reason it had.
    Resumed { was: String },
    /// Asked to resume a node that is not drained.
    NotDrained,
    /// Drained by someone else (`reason`): left alone.
    LeftDrained { reason: String },
}

impl DrainAction {
    /// The line a hook fails with, when it must fail.
    pub fn hook_failure(&self) -> Option<&str> {
        match self {
            DrainAction::Drain { reason } => Some(reason),
            _ => None,
        }
    }

    /// Record the outcome in the node's standing: drained since `now`, back
    /// in service, or unchanged.
    pub fn record(&self, node: &mut NodeState, now: i64) {
        match self {
            DrainAction::Drain { .. } => node.set_drained(Some(now)),
            DrainAction::Resumed { .. } | DrainAction::NotDrained => node.set_drained(None),
            DrainAction::Nothing | DrainAction::LeftDrained { .. } => {}
        }
    }

    /// One line for an admin, or None when nothing was done.
    pub fn describe(&self, node: &str) -> Option<String> {
        match self {
            DrainAction::Nothing => None,
            DrainAction::Drain { reason } => Some(format!("drained {node}: {reason}")),
            DrainAction::Resumed { was } => Some(format!("resumed {node} (was: {was})")),
            DrainAction::NotDrained => Some(format!("{node} is not drained")),
            DrainAction::LeftDrained { reason } => Some(format!(
                "{node} left drained: its reason is not ours ({reason})"
            )),
        }
    }
}

/// Decide and do what a verdict means for `node` at `hook`. `drain_reason`
/// is the verdict's drain reason (`health::drain_reason`: None unless a
/// finding is drain-class). In the prolog and epilog a failing scontrol is
/// logged (the hook's exit status still takes the node out of service); in
/// `check` it is the command's error.
pub fn act(
    cfg: &HealthConfig,
    node: &str,
    drain_reason: Option<String>,
    hook: Hook,
    flags: CheckFlags,
) -> Result<DrainAction> {
    match (hook, drain_reason) {
        (Hook::Prolog, Some(reason)) => Ok(hook_drain(cfg, node, reason)),
        (Hook::Epilog, Some(reason)) if cfg.drain_from_epilog => Ok(hook_drain(cfg, node, reason)),
        (Hook::Check, Some(reason)) if flags.drain => {
            slurm_node::drain(cfg, node, &reason)?;
            Ok(DrainAction::Drain { reason })
        }
        (Hook::Check, None) if flags.undrain => undrain(cfg, node),
        _ => Ok(DrainAction::Nothing),
    }
}

/// A prolog's or epilog's drain finding: set our reason when the site wants
/// it shown, then have the hook fail.
fn hook_drain(cfg: &HealthConfig, node: &str, reason: String) -> DrainAction {
    if cfg.set_drain_reason {
        if let Err(e) = slurm_node::drain(cfg, node, &reason) {
            tracing::warn!("{e}");
        }
    }
    DrainAction::Drain { reason }
}

/// Resume `node` only if its drain reason is ours.
pub fn undrain(cfg: &HealthConfig, node: &str) -> Result<DrainAction> {
    let status = slurm_node::node_status(cfg, node)?;
    if !status.is_drained() {
        return Ok(DrainAction::NotDrained);
    }
    match status.reason {
        Some(was) if was.starts_with(DRAIN_PREFIX) => {
            slurm_node::resume(cfg, node)?;
            Ok(DrainAction::Resumed { was })
        }
        other => Ok(DrainAction::LeftDrained {
            reason: other.unwrap_or_default(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{drain_reason, Finding, Severity};
    use std::os::unix::fs::PermissionsExt;

    fn finding(severity: Severity) -> Finding {
        Finding {
            check: "xid".into(),
            severity,
            gpu: None,
            detail: "XID 79".into(),
        }
    }

    /// A stand-in scontrol that logs its arguments and answers `show node`
    /// with `state` and `reason`.
    fn scontrol(dir: &std::path::Path, state: &str, reason: &str) -> HealthConfig {
        let log = dir.join("calls");
        let script = dir.join("scontrol");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$*\" >> {}\n[ \"$1\" = show ] && echo 'NodeName=n1 State={state} Reason={reason} [root@now]'\nexit 0\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        HealthConfig {
            scontrol: script,
            ..HealthConfig::default()
        }
    }

    fn calls(dir: &std::path::Path) -> String {
        std::fs::read_to_string(dir.join("calls")).unwrap_or_default()
    }

    #[test]
    fn each_hook_follows_its_rule() {
        let d = tempfile::tempdir().unwrap();
        let mut cfg = scontrol(d.path(), "IDLE", "");
        let findings = [finding(Severity::Warn), finding(Severity::Drain)];
        let reason = findings[1].reason();
        let drain = || drain_reason(&findings);
        let warn_only = drain_reason(&findings[..1]);
        assert_eq!(warn_only, None);
        let none = CheckFlags::default();
        // Prolog: fails, and sets the reason only when asked to.
        cfg.set_drain_reason = false;
        let a = act(&cfg, "n1", drain(), Hook::Prolog, none).unwrap();
        assert_eq!(a.hook_failure(), Some(reason.as_str()));
        assert_eq!(calls(d.path()), "");
        cfg.set_drain_reason = true;
        act(&cfg, "n1", drain(), Hook::Prolog, none).unwrap();
        assert!(calls(d.path()).contains("State=DRAIN Reason=imex-health: xid"));
        // Epilog: only with drain_from_epilog.
        cfg.drain_from_epilog = false;
        let a = act(&cfg, "n1", drain(), Hook::Epilog, none).unwrap();
        assert_eq!(a, DrainAction::Nothing);
        cfg.drain_from_epilog = true;
        let a = act(&cfg, "n1", drain(), Hook::Epilog, none).unwrap();
        assert_eq!(a.hook_failure(), Some(reason.as_str()));
        // Check: only when asked; warnings never drain.
        let a = act(&cfg, "n1", drain(), Hook::Check, none).unwrap();
        assert_eq!(a, DrainAction::Nothing);
        let flags = CheckFlags {
            drain: true,
            undrain: false,
        };
        let a = act(&cfg, "n1", warn_only, Hook::Check, flags).unwrap();
        assert_eq!(a, DrainAction::Nothing);
        let a = act(&cfg, "n1", drain(), Hook::Check, flags).unwrap();
        assert_eq!(a.describe("n1").unwrap(), format!("drained n1: {reason}"));
    }

    #[test]
    fn only_our_drains_are_resumed_and_the_standing_follows() {
        let d = tempfile::tempdir().unwrap();
        let flags = CheckFlags {
            drain: false,
            undrain: true,
        };
        let ours = scontrol(d.path(), "IDLE+DRAIN", "imex-health: xid: XID 79");
        let a = act(&ours, "n1", None, Hook::Check, flags).unwrap();
        assert_eq!(
            a,
            DrainAction::Resumed {
                was: "imex-health: xid: XID 79".into()
            }
        );
        assert!(calls(d.path()).contains("NodeName=n1 State=RESUME"));
        let mut node = NodeState::default();
        DrainAction::Drain { reason: "r".into() }.record(&mut node, 100);
        DrainAction::Drain { reason: "r".into() }.record(&mut node, 200);
        assert_eq!(node.drained_since, Some(100));
        a.record(&mut node, 300);
        assert_eq!(node.drained_since, None);

        let d = tempfile::tempdir().unwrap();
        let admins = scontrol(d.path(), "IDLE+DRAIN", "bad fan");
        let a = act(&admins, "n1", None, Hook::Check, flags).unwrap();
        assert_eq!(
            a.describe("n1").unwrap(),
            "n1 left drained: its reason is not ours (bad fan)"
        );
        assert!(!calls(d.path()).contains("RESUME"));
        let mut node = NodeState {
            drained_since: Some(5),
            ..NodeState::default()
        };
        a.record(&mut node, 9);
        assert_eq!(node.drained_since, Some(5));
        let idle = scontrol(d.path(), "IDLE", "");
        assert_eq!(undrain(&idle, "n1").unwrap(), DrainAction::NotDrained);
    }
}
