//! Acting on a verdict: the one place that decides what a drain-class
//! finding does to the node, for the prolog, the epilog and `slurm-imex
//! check` alike, and the only caller of `Scontrol::drain` and `resume`.
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
//!   As slurmd's HealthCheckProgram it runs every few minutes on every node,
//!   so it asks slurmctld nothing when nothing changed: the node's standing
//!   (`NodeState`) says whether we drained it, and Slurm is read (once) only
//!   to confirm a drain we may lift, or when the standing is not known
//!   since boot (docs/controller-calls.md).

use crate::health::DRAIN_PREFIX;
use slurm_imex_core::config::Config;
use slurm_imex_core::error::Result;
use slurm_imex_core::hook::Hook;
use slurm_imex_core::slurm::node::{NodeRead, NodeStatus};
use slurm_imex_core::slurm::Scontrol;
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
    /// `check --drain`: the node is already drained by us for a finding;
    /// Slurm was not asked again.
    StillDrained { reason: String },
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
            DrainAction::Drain { .. } | DrainAction::StillDrained { .. } => {
                node.set_drained(Some(now))
            }
            // Someone else's drain (or none): not ours to lift, ever.
            DrainAction::Resumed { .. }
            | DrainAction::NotDrained
            | DrainAction::LeftDrained { .. } => node.set_drained(None),
            DrainAction::Nothing => {}
        }
    }

    /// One line for an admin, or None when nothing was done.
    pub fn describe(&self, node: &str) -> Option<String> {
        match self {
            DrainAction::Nothing => None,
            DrainAction::Drain { reason } => Some(format!("drained {node}: {reason}")),
            DrainAction::StillDrained { reason } => {
                Some(format!("{node} stays drained by slurm-imex: {reason}"))
            }
            DrainAction::Resumed { was } => Some(format!("resumed {node} (was: {was})")),
            DrainAction::NotDrained => Some(format!("{node} is not drained")),
            DrainAction::LeftDrained { reason } => Some(format!(
                "{node} left drained: its reason is not ours ({reason})"
            )),
        }
    }
}

/// Decide and do what a verdict means for `node` in a prolog or epilog.
/// `drain_reason` is the verdict's drain reason (`health::drain_reason`:
/// None unless a finding is drain-class). A failing scontrol is logged: the
/// hook's exit status still takes the node out of service.
pub fn act(cfg: &Config, node: &str, drain_reason: Option<String>, hook: Hook) -> DrainAction {
    match (hook, drain_reason) {
        (Hook::Prolog, Some(reason)) => hook_drain(cfg, node, reason),
        (Hook::Epilog, Some(reason)) if cfg.health.drain_from_epilog => {
            hook_drain(cfg, node, reason)
        }
        _ => DrainAction::Nothing,
    }
}

/// What `slurm-imex check` does to `slurm`'s node for a verdict, given the
/// node's `standing`: `--drain` drains on a drain finding unless we already
/// have; `--undrain` resumes a passing node drained with our reason. Slurm
/// is read only when the standing cannot answer; its errors are the
/// command's.
pub fn act_on_check(
    slurm: &NodeRead,
    standing: &NodeState,
    drain_reason: Option<String>,
    flags: CheckFlags,
) -> Result<DrainAction> {
    let (scontrol, node) = (slurm.scontrol(), slurm.node());
    match drain_reason {
        Some(reason) if flags.drain => {
            if standing.drained_since.is_some() {
                return Ok(DrainAction::StillDrained { reason });
            }
            scontrol.drain(node, &reason)?;
            Ok(DrainAction::Drain { reason })
        }
        None if flags.undrain => {
            let known_in_service =
                standing.drained_since.is_none() && standing.slurm_read_at.is_some();
            if known_in_service {
                return Ok(DrainAction::Nothing);
            }
            resume_if_ours(scontrol, node, slurm.get()?)
        }
        _ => Ok(DrainAction::Nothing),
    }
}

/// A prolog's or epilog's drain finding: set our reason when the site wants
/// it shown, then have the hook fail.
fn hook_drain(cfg: &Config, node: &str, reason: String) -> DrainAction {
    if cfg.health.set_drain_reason {
        if let Err(e) = Scontrol::of(&cfg.slurm).drain(node, &reason) {
            tracing::warn!("{e}");
        }
    }
    DrainAction::Drain { reason }
}

/// Resume `node` only if its drain reason is ours (`slurm-imex undrain`:
/// always asks).
pub fn undrain(scontrol: &Scontrol, node: &str) -> Result<DrainAction> {
    resume_if_ours(scontrol, node, &scontrol.node(node)?)
}

/// Resume `node`, as Slurm holds it (`status`), only if it is drained with
/// our reason.
fn resume_if_ours(scontrol: &Scontrol, node: &str, status: &NodeStatus) -> Result<DrainAction> {
    if !status.is_drained() {
        return Ok(DrainAction::NotDrained);
    }
    match &status.reason {
        Some(was) if was.starts_with(DRAIN_PREFIX) => {
            scontrol.resume(node)?;
            Ok(DrainAction::Resumed { was: was.clone() })
        }
        other => Ok(DrainAction::LeftDrained {
            reason: other.clone().unwrap_or_default(),
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
    fn scontrol(dir: &std::path::Path, state: &str, reason: &str) -> Config {
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
        let mut cfg = Config::default();
        cfg.slurm.scontrol = script;
        cfg
    }

    fn handle(cfg: &Config) -> Scontrol {
        Scontrol::of(&cfg.slurm)
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
        assert_eq!(drain_reason(&findings[..1]), None);
        // Prolog: fails, and sets the reason only when asked to.
        cfg.health.set_drain_reason = false;
        let a = act(&cfg, "n1", drain(), Hook::Prolog);
        assert_eq!(a.hook_failure(), Some(reason.as_str()));
        assert_eq!(calls(d.path()), "");
        cfg.health.set_drain_reason = true;
        act(&cfg, "n1", drain(), Hook::Prolog);
        assert!(calls(d.path()).contains("State=DRAIN Reason=imex-health: xid"));
        // Epilog: only with drain_from_epilog.
        cfg.health.drain_from_epilog = false;
        assert_eq!(act(&cfg, "n1", drain(), Hook::Epilog), DrainAction::Nothing);
        cfg.health.drain_from_epilog = true;
        let a = act(&cfg, "n1", drain(), Hook::Epilog);
        assert_eq!(a.hook_failure(), Some(reason.as_str()));
    }

    #[test]
    fn check_drains_once_when_asked_and_never_for_a_warning() {
        let d = tempfile::tempdir().unwrap();
        let cfg = handle(&scontrol(d.path(), "IDLE", ""));
        let slurm = NodeRead::new(&cfg, "n1");
        let mut standing = NodeState::default();
        let findings = [finding(Severity::Warn), finding(Severity::Drain)];
        let drain = CheckFlags {
            drain: true,
            undrain: false,
        };
        let none = CheckFlags::default();
        let a = act_on_check(&slurm, &standing, drain_reason(&findings), none).unwrap();
        assert_eq!(a, DrainAction::Nothing);
        let a = act_on_check(&slurm, &standing, drain_reason(&findings[..1]), drain).unwrap();
        assert_eq!(a, DrainAction::Nothing);
        assert_eq!(calls(d.path()), "");
        let a = act_on_check(&slurm, &standing, drain_reason(&findings), drain).unwrap();
        let reason = findings[1].reason();
        assert_eq!(a.describe("n1").unwrap(), format!("drained n1: {reason}"));
        assert_eq!(calls(d.path()).lines().count(), 1, "one update, no read");
        a.record(&mut standing, 100);
        // The next run with the same finding: already ours, Slurm not asked.
        let a = act_on_check(&slurm, &standing, drain_reason(&findings), drain).unwrap();
        assert!(matches!(a, DrainAction::StillDrained { .. }));
        assert_eq!(calls(d.path()).lines().count(), 1);
        assert!(!slurm.asked());
    }

    #[test]
    fn only_our_drains_are_resumed_and_a_known_standing_asks_nothing() {
        let d = tempfile::tempdir().unwrap();
        let undrain = CheckFlags {
            drain: false,
            undrain: true,
        };
        let ours = handle(&scontrol(
            d.path(),
            "IDLE+DRAIN",
            "imex-health: xid: XID 79",
        ));
        // Not read since boot: one read, then the resume.
        let mut standing = NodeState::default();
        let a = act_on_check(&NodeRead::new(&ours, "n1"), &standing, None, undrain).unwrap();
        assert_eq!(
            a,
            DrainAction::Resumed {
                was: "imex-health: xid: XID 79".into()
            }
        );
        assert_eq!(
            calls(d.path()),
            "show node n1 -o\nupdate NodeName=n1 State=RESUME\n"
        );
        a.record(&mut standing, 300);
        standing.slurm_read_at = Some(300);
        assert_eq!(standing.drained_since, None);
        // In service and known to be: nothing asked, nothing done.
        let slurm = NodeRead::new(&ours, "n1");
        let a = act_on_check(&slurm, &standing, None, undrain).unwrap();
        assert_eq!(a, DrainAction::Nothing);
        assert!(!slurm.asked());
        assert_eq!(calls(d.path()).lines().count(), 2);
        // Drained by us since: read, confirmed, resumed.
        DrainAction::Drain { reason: "r".into() }.record(&mut standing, 400);
        DrainAction::Drain { reason: "r".into() }.record(&mut standing, 500);
        assert_eq!(standing.drained_since, Some(400));
        let a = act_on_check(&NodeRead::new(&ours, "n1"), &standing, None, undrain).unwrap();
        assert!(matches!(a, DrainAction::Resumed { .. }));

        let d = tempfile::tempdir().unwrap();
        let admins = handle(&scontrol(d.path(), "IDLE+DRAIN", "bad fan"));
        let a = act_on_check(&NodeRead::new(&admins, "n1"), &standing, None, undrain).unwrap();
        assert_eq!(
            a.describe("n1").unwrap(),
            "n1 left drained: its reason is not ours (bad fan)"
        );
        assert!(!calls(d.path()).contains("RESUME"));
        // Not ours: the standing stops asking.
        a.record(&mut standing, 600);
        assert_eq!(standing.drained_since, None);
        let idle = handle(&scontrol(d.path(), "IDLE", ""));
        assert_eq!(
            super::undrain(&idle, "n1").unwrap(),
            DrainAction::NotDrained
        );
    }
}
