//! Acting on a verdict: the one place that decides what a drain-class
//! finding does to the node, for the prolog, the epilog and `slurm-imex
//! check` alike, and the only caller of `Scontrol::drain` and `resume`.
//! It answers with a [`DrainAction`], which callers act on by its variant
//! (never by matching words), and which also says what the node's standing
//! (`NodeState::drained_since`) records.
//!
//! - prolog: a drain finding, or a fault of this node's IMEX daemon or
//!   channel (`imex_node_fault`), fails the prolog, so Slurm drains the node
//!   ("Prolog error") and requeues the job; our reason (`imex-health: …
//!   (job N)`) is kept in the node's standing. With `[health]
//!   set_drain_reason` it is set at once (one scontrol call per failing
//!   node, all in the same second when a fault hits every node of a job);
//!   otherwise `slurm-imex check`, slurmd's HealthCheckProgram, sets it at
//!   its next run (`explain_our_drain`), so the calls spread over
//!   HealthCheckInterval.
//! - epilog: with `[health] drain_from_epilog`, a drain finding drains the
//!   node the same way and fails the epilog; otherwise it is only recorded.
//! - check: `--drain` drains on a drain finding (always with our reason);
//!   `--undrain` resumes a node that passes, and only when the drain reason
//!   is ours: it starts with [`DRAIN_PREFIX`], or it is Slurm's own "Prolog
//!   error"/"Epilog error" and the standing says which fault of ours caused
//!   it. An admin's drain is left, and so is ours for an IMEX daemon or
//!   channel fault, which an idle node cannot re-test ([`awaits_admin`]):
//!   `slurm-imex undrain` lifts it. Ours for an imex.toml that did not
//!   load (`crate::config_fault`) is lifted once it loads and the node
//!   passes: the check re-tests it by loading the file. Every run sets our reason in Slurm where
//!   the standing says Slurm still shows its own.
//!   As slurmd's HealthCheckProgram it runs every few minutes on every node,
//!   so it asks slurmctld nothing when nothing changed: the node's standing
//!   (`NodeState`) says whether we drained it, and Slurm is read (once) only
//!   to confirm a drain we may lift, or when the standing is not known
//!   since boot (docs/controller-calls.md).

use slurm_imex_core::error::Result;
use slurm_imex_core::hook::Hook;
use slurm_imex_core::slurm::node::{NodeRead, NodeStatus};
use slurm_imex_core::slurm::Scontrol;
use slurm_imex_core::state::NodeState;
use slurm_imex_core::timespec::now_s;
use slurm_imex_gpu::health::checks::RECOVERY_ACTION;
use slurm_imex_gpu::health::reasons::{imex_reason, reason_check, IMEX};
use slurm_imex_gpu::health::DRAIN_PREFIX;
use slurm_imex_settings::Config;

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
    /// epilog), or the node was drained with it (check). `shown`: Slurm
    /// was given `reason` (else it shows its own "Prolog error" until
    /// `check` sets ours).
    Drain { reason: String, shown: bool },
    /// `check`: the node is drained by us and Slurm now shows our reason.
    ReasonShown { reason: String },
    /// `check --drain`: the node is already drained by us for a finding;
    /// Slurm was not asked again.
    StillDrained { reason: String },
    /// `check --undrain`: the node is drained by us for a fault the check
    /// cannot re-test ([`awaits_admin`]); it stays drained, Slurm not asked.
    AwaitsAdmin { reason: String },
    /// `check --undrain`: the node is drained by us for a GPU's recovery
    /// action and a GPU still reads one (`pending`, [`awaits_recovery`]);
    /// it stays drained, Slurm not asked.
    AwaitsRecovery { reason: String, pending: String },
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
            DrainAction::Drain { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// Record the outcome in the node's standing: drained since `now`, back
    /// in service, or unchanged.
    pub fn record(&self, node: &mut NodeState, now: i64) {
        match self {
            DrainAction::Drain { reason, shown } => {
                if *shown {
                    // Slurm shows this reason now: whatever the standing
                    // held before (a drain lifted by hand since) is over.
                    node.set_drained(None);
                }
                node.set_drained(Some(now));
                node.note_drain_reason(reason, *shown);
            }
            DrainAction::StillDrained { .. }
            | DrainAction::AwaitsAdmin { .. }
            | DrainAction::AwaitsRecovery { .. } => node.set_drained(Some(now)),
            DrainAction::ReasonShown { .. } => node.reason_shown = true,
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
            DrainAction::Drain { reason, .. } => Some(format!("drained {node}: {reason}")),
            DrainAction::ReasonShown { reason } => {
                Some(format!("{node} drained by slurm-imex; Slurm's reason is now: {reason}"))
            }
            DrainAction::StillDrained { reason } => {
                Some(format!("{node} stays drained by slurm-imex: {reason}"))
            }
            DrainAction::AwaitsAdmin { reason } => Some(format!(
                "{node} stays drained until an admin runs slurm-imex undrain on it (a health \
                 check cannot re-test an IMEX daemon or channel fault): {reason}"
            )),
            DrainAction::AwaitsRecovery { reason, pending } => Some(format!(
                "{node} stays drained until every GPU reads recovery action NONE ({pending}): \
                 {reason}"
            )),
            DrainAction::Resumed { was } => Some(format!("resumed {node} (was: {was})")),
            DrainAction::NotDrained => Some(format!("{node} is not drained")),
            DrainAction::LeftDrained { reason } if SLURMS_HOOK_REASONS.contains(&reason.trim()) => {
                Some(format!(
                    "{node} left drained: \"{reason}\" is ours only where {node}'s own standing says \
                     so: run slurm-imex undrain on {node}, or let its next slurm-imex check name the cause"
                ))
            }
            DrainAction::LeftDrained { reason } => Some(format!(
                "{node} left drained: its reason is not ours ({reason})"
            )),
        }
    }
}

/// Longest reason we give Slurm (a node's reason shows in `sinfo -R`).
const REASON_MAX: usize = 256;

/// Our reason for a drain during job `job_id`: `reason` naming the job,
/// printable (a NUL in an argument makes `scontrol` fail to start, so the
/// node would not be drained) and capped.
pub fn for_job(reason: &str, job_id: u32) -> String {
    use slurm_imex_core::text::{cap, printable};
    let suffix = format!(" (job {job_id})");
    // cap() adds "… (N more bytes)" past its limit: room for that too.
    let room = REASON_MAX.saturating_sub(suffix.len() + 32);
    format!("{}{suffix}", cap(&printable(reason), room))
}

/// Our reason for a drain that is no job's (`crate::config_fault`),
/// printable and capped as [`for_job`]'s.
pub fn for_node(reason: &str) -> String {
    use slurm_imex_core::text::{cap, printable};
    cap(&printable(reason), REASON_MAX.saturating_sub(32))
}

/// Decide and do what a verdict means for `node` in job `job_id`'s prolog
/// or epilog. `drain_reason` is the verdict's drain reason
/// (`health::drain_reason`: None unless a finding is drain-class). A failing
/// scontrol is logged: the hook's exit status still takes the node out of
/// service.
pub fn act(
    cfg: &Config,
    node: &str,
    job_id: u32,
    drain_reason: Option<String>,
    hook: Hook,
) -> DrainAction {
    let reason = drain_reason.map(|r| for_job(&r, job_id));
    match (hook, reason) {
        (Hook::Prolog, Some(reason)) => hook_drain(cfg, node, reason),
        (Hook::Epilog, Some(reason)) if cfg.health.drain_from_epilog => {
            hook_drain(cfg, node, reason)
        }
        _ => DrainAction::Nothing,
    }
}

/// A fault of this node's own IMEX daemon or channel (blamed on the node
/// by the caller) fails the prolog: the same drain as a GPU finding, under
/// the check name `imex`.
pub fn imex_node_fault(cfg: &Config, node: &str, job_id: u32, line: &str) -> DrainAction {
    hook_drain(cfg, node, for_job(&imex_reason(node, line), job_id))
}

/// What `slurm-imex check` does to `slurm`'s node for a verdict, given the
/// node's `standing`: `--drain` drains on a drain finding unless we already
/// have; `--undrain` resumes a passing node drained with our reason, except
/// a drain for a fault the check cannot re-test ([`awaits_admin`]). Either
/// way a drain of ours gets our reason in Slurm (`explain_our_drain`).
/// Slurm is read only when the standing cannot answer (nor slurmctld's own
/// verdict, `SLURM_NODE_IS_HEALTHY`, which `slurm` carries when slurmd
/// gave it); its errors are the command's. `recovery_pending` names a GPU
/// whose recovery action is not NONE (or cannot be read), which keeps a
/// recovery-action drain in place ([`awaits_recovery`]).
pub fn act_on_check(
    slurm: &NodeRead,
    standing: &NodeState,
    drain_reason: Option<String>,
    recovery_pending: Option<&str>,
    flags: CheckFlags,
) -> Result<DrainAction> {
    match drain_reason {
        Some(reason) if flags.drain => drain_for_check(slurm, standing, reason),
        None if flags.undrain => undrain_for_check(slurm, standing, recovery_pending),
        _ => explain_our_drain(slurm, standing),
    }
}

/// `check --drain` with a drain finding: drain the node with our reason.
/// Nothing is asked when the standing says the drain is ours and Slurm
/// shows it; otherwise Slurm is read first, so that a node someone else
/// drained keeps their reason, a drain of ours gets our reason, and a node
/// resumed meanwhile is drained again.
fn drain_for_check(slurm: &NodeRead, standing: &NodeState, reason: String) -> Result<DrainAction> {
    if standing.drained_since.is_some() && standing.reason_shown {
        return Ok(DrainAction::StillDrained { reason });
    }
    // slurmctld says the node is healthy, so not drained: no read needed.
    if slurm.told_healthy() != Some(true) {
        let status = slurm.get()?;
        if status.is_drained() {
            return show_our_reason(slurm, status, standing);
        }
    }
    slurm.scontrol().drain(slurm.node(), &reason)?;
    Ok(DrainAction::Drain {
        reason,
        shown: true,
    })
}

/// `check --undrain` on a node with no drain finding: resume our drain,
/// unless its cause is one the check cannot re-test, which stays drained
/// (with our reason shown) until an admin runs `slurm-imex undrain`, or a
/// recovery action a GPU still reads, which stays until every GPU reads
/// NONE. Such a drain is read again at most once an hour ([`RECHECK_S`]),
/// so that one lifted by hand is noticed (at once where slurmctld's verdict
/// says so).
fn undrain_for_check(
    slurm: &NodeRead,
    standing: &NodeState,
    recovery_pending: Option<&str>,
) -> Result<DrainAction> {
    let told = slurm.told_healthy();
    let known_in_service = standing.drained_since.is_none()
        && (standing.slurm_read_at.is_some() || told == Some(true));
    if known_in_service {
        return Ok(DrainAction::Nothing);
    }
    if told == Some(true) {
        // slurmctld says it is in service: a drain of ours was lifted by hand.
        return Ok(DrainAction::NotDrained);
    }
    let awaiting = match (
        awaits_recovery(standing, recovery_pending),
        awaits_admin(standing),
    ) {
        (Some(reason), _) => DrainAction::AwaitsRecovery {
            reason: reason.to_string(),
            pending: recovery_pending.unwrap_or_default().to_string(),
        },
        (None, Some(reason)) => DrainAction::AwaitsAdmin {
            reason: reason.to_string(),
        },
        (None, None) => {
            return resume_if_ours(slurm.scontrol(), slurm.node(), slurm.get()?, standing)
        }
    };
    let read_lately = standing
        .slurm_read_at
        .is_some_and(|at| now_s().saturating_sub(at) < RECHECK_S);
    if standing.reason_shown && read_lately {
        return Ok(awaiting);
    }
    let status = slurm.get()?;
    if !status.is_drained() {
        return Ok(DrainAction::NotDrained); // lifted by hand: ours no more
    }
    // Our reason shown before and still: waiting, as without the read.
    Ok(match show_our_reason(slurm, status, standing)? {
        DrainAction::StillDrained { .. } => awaiting,
        DrainAction::ReasonShown { .. } if standing.reason_shown => awaiting,
        newly_shown_or_not_ours => newly_shown_or_not_ours,
    })
}

/// How long `check --undrain` trusts the standing of a drain that awaits
/// an admin before reading Slurm again: one read an hour per such node.
const RECHECK_S: i64 = 3600;

/// Our drain reason, when the standing says we drained the node for a
/// fault of its IMEX daemon or channel ([`imex_node_fault`], or the
/// check's own `imex` finding). The health check cannot re-test those: the
/// daemon runs only for a job, so an idle node passes whether or not it is
/// fixed, and resuming it would fail (and hold) the next `--imex` job.
/// Such a drain is lifted by `slurm-imex undrain` alone. A config drain
/// (`imex-health: config: …`, `crate::config_fault`) is not one: the check
/// that runs has loaded the file, which is its re-test.
pub fn awaits_admin(standing: &NodeState) -> Option<&str> {
    let reason = standing.drained_for.as_deref()?;
    // `imex-health: imex <node>: …` from a hook, `imex-health: imex: …`
    // from the check.
    let imex_fault = reason_check(reason) == Some(IMEX);
    (standing.drained_since.is_some() && imex_fault).then_some(reason)
}

/// Our drain reason, when the standing says we drained the node for a
/// GPU's recovery action and a GPU still reads one (`recovery_pending`:
/// not NONE, or unreadable). Such a drain is lifted by `check --undrain`
/// only once every GPU reads NONE (NVIDIA's DRA driver, issue #1455), even
/// where the action left is one that does not drain by itself
/// (RECOVER_IMEX_DOMAIN: a node drained because it persisted after a fresh
/// IMEX domain must not be resumed while it persists). It is never the
/// IMEX class that waits for an admin ([`awaits_admin`]).
pub fn awaits_recovery<'a>(
    standing: &'a NodeState,
    recovery_pending: Option<&str>,
) -> Option<&'a str> {
    recovery_pending?;
    let reason = standing.drained_for.as_deref()?;
    let recovery = reason_check(reason) == Some(RECOVERY_ACTION);
    (standing.drained_since.is_some() && recovery).then_some(reason)
}

/// The standing says we drained the node, and Slurm does not show our
/// reason yet (a failed hook: Slurm wrote its own "Prolog error"): set
/// ours. One read and one update, once per drain, at this node's next
/// health check; nothing asked otherwise.
fn explain_our_drain(slurm: &NodeRead, standing: &NodeState) -> Result<DrainAction> {
    if standing.drained_for.is_none() || standing.reason_shown {
        return Ok(DrainAction::Nothing);
    }
    if slurm.told_healthy() == Some(true) {
        return Ok(DrainAction::NotDrained); // resumed meanwhile, says slurmctld
    }
    let status = slurm.get()?;
    if !status.is_drained() {
        return Ok(DrainAction::NotDrained); // resumed meanwhile: not ours any more
    }
    show_our_reason(slurm, status, standing)
}

/// A drained node, as Slurm holds it (`status`): someone else's drain is
/// left as it is; ours gets the reason the standing keeps, when Slurm does
/// not show it yet (one update).
fn show_our_reason(
    slurm: &NodeRead,
    status: &NodeStatus,
    standing: &NodeState,
) -> Result<DrainAction> {
    let shown = status.reason.clone().unwrap_or_default();
    match (
        whose(status.reason.as_deref(), standing),
        &standing.drained_for,
    ) {
        (Whose::Admins, _) => Ok(DrainAction::LeftDrained { reason: shown }),
        (Whose::Ours, Some(ours)) => {
            if shown != *ours {
                slurm.scontrol().drain(slurm.node(), ours)?;
            }
            Ok(DrainAction::ReasonShown {
                reason: ours.clone(),
            })
        }
        (Whose::Ours, None) => Ok(DrainAction::StillDrained { reason: shown }),
    }
}

/// Slurm's own reasons for a node whose hook failed (src/slurmctld:
/// node_mgr.c "Prolog error", job_mgr.c "Epilog error").
const SLURMS_HOOK_REASONS: [&str; 2] = ["Prolog error", "Epilog error"];

enum Whose {
    Ours,
    Admins,
}

/// A drain is ours when its reason carries our prefix, or when it is the
/// reason Slurm gives a failed hook and our standing says we failed it.
fn whose(reason: Option<&str>, standing: &NodeState) -> Whose {
    match reason {
        Some(r) if r.starts_with(DRAIN_PREFIX) => Whose::Ours,
        Some(r) if standing.drained_for.is_some() && SLURMS_HOOK_REASONS.contains(&r.trim()) => {
            Whose::Ours
        }
        _ => Whose::Admins,
    }
}

/// A prolog's or epilog's drain: set our reason now when the site wants
/// it at once, then have the hook fail (Slurm drains the node).
fn hook_drain(cfg: &Config, node: &str, reason: String) -> DrainAction {
    let mut shown = false;
    if cfg.health.set_drain_reason {
        match Scontrol::of(&cfg.slurm).drain(node, &reason) {
            Ok(()) => shown = true,
            Err(e) => tracing::warn!("{e}"),
        }
    }
    DrainAction::Drain { reason, shown }
}

/// Resume `node` only if its drain is ours (`slurm-imex undrain`: always
/// asks); `standing` is this node's, which attributes a "Prolog error" to us.
pub fn undrain(scontrol: &Scontrol, node: &str, standing: &NodeState) -> Result<DrainAction> {
    resume_if_ours(scontrol, node, &scontrol.node(node)?, standing)
}

/// What `slurm-imex undrain` did to each node of a hostlist, in its order.
pub type Outcomes = Vec<(String, Result<DrainAction>)>;

/// `slurm-imex undrain` on the nodes `names` of the admin's `hostlist`:
/// Slurm is asked once for all, and each node is judged alone, by its own
/// line and reason (`standing_of` gives the standing that speaks for it:
/// this node's own, none for another), so only our drains are resumed, each
/// by its own name. A node Slurm printed no line for is left, and says so.
pub fn undrain_each(
    scontrol: &Scontrol,
    hostlist: &str,
    names: &[String],
    standing_of: &dyn Fn(&str) -> NodeState,
) -> Result<Outcomes> {
    let shown = scontrol.nodes_shown(hostlist)?;
    let mut seen = std::collections::HashSet::new();
    let judge = |name: &String| {
        let outcome = match shown.iter().find(|s| &s.name == name) {
            Some(status) => resume_if_ours(scontrol, name, status, &standing_of(name)),
            None => Err(slurm_imex_core::Error::command(format!(
                "{name} left as it is: Slurm's answer to scontrol show node {hostlist} has no \
                 line for it (a node Slurm does not know?)"
            ))),
        };
        (name.clone(), outcome)
    };
    Ok(names
        .iter()
        .filter(|n| seen.insert(n.as_str()))
        .map(judge)
        .collect())
}

/// Resume `node`, as Slurm holds it (`status`), only if its drain is ours.
fn resume_if_ours(
    scontrol: &Scontrol,
    node: &str,
    status: &NodeStatus,
    standing: &NodeState,
) -> Result<DrainAction> {
    if !status.is_drained() {
        return Ok(DrainAction::NotDrained);
    }
    match whose(status.reason.as_deref(), standing) {
        Whose::Ours => {
            scontrol.resume(node)?;
            Ok(DrainAction::Resumed {
                was: status.reason.clone().unwrap_or_default(),
            })
        }
        Whose::Admins => Ok(DrainAction::LeftDrained {
            reason: status.reason.clone().unwrap_or_default(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_imex_gpu::health::{drain_reason, Finding, Severity};
    use std::os::unix::fs::PermissionsExt;

    /// The tests here write stand-in scripts and run them. A script one
    /// test is writing while another forks can be "Text file busy"
    /// (ETXTBSY) for the second: they take turns.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

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

    /// One health check on n1 through scontrol SC.
    fn check_n1(
        sc: &Scontrol,
        standing: &NodeState,
        drain_reason: Option<String>,
        flags: CheckFlags,
    ) -> DrainAction {
        act_on_check(
            &NodeRead::new(sc, "n1"),
            standing,
            drain_reason,
            None,
            flags,
        )
        .unwrap()
    }

    fn calls(dir: &std::path::Path) -> String {
        std::fs::read_to_string(dir.join("calls")).unwrap_or_default()
    }

    #[test]
    fn each_hook_follows_its_rule() {
        let _serial = serial();
        let d = tempfile::tempdir().unwrap();
        let mut cfg = scontrol(d.path(), "IDLE", "");
        let findings = [finding(Severity::Warn), finding(Severity::Drain)];
        let reason = findings[1].reason();
        let drain = || drain_reason(&findings);
        assert_eq!(drain_reason(&findings[..1]), None);
        // Prolog: fails, and sets the reason only when asked to.
        cfg.health.set_drain_reason = false;
        let a = act(&cfg, "n1", 7, drain(), Hook::Prolog);
        let reason = format!("{reason} (job 7)");
        assert_eq!(a.hook_failure(), Some(reason.as_str()));
        assert_eq!(calls(d.path()), "");
        cfg.health.set_drain_reason = true;
        act(&cfg, "n1", 7, drain(), Hook::Prolog);
        assert!(calls(d.path()).contains("State=DRAIN Reason=imex-health: xid"));
        // Epilog: only with drain_from_epilog.
        cfg.health.drain_from_epilog = false;
        assert_eq!(
            act(&cfg, "n1", 7, drain(), Hook::Epilog),
            DrainAction::Nothing
        );
        cfg.health.drain_from_epilog = true;
        let a = act(&cfg, "n1", 7, drain(), Hook::Epilog);
        assert_eq!(a.hook_failure(), Some(reason.as_str()));
    }

    #[test]
    fn check_drains_once_when_asked_and_never_for_a_warning() {
        let _serial = serial();
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
        let a = act_on_check(&slurm, &standing, drain_reason(&findings), None, none).unwrap();
        assert_eq!(a, DrainAction::Nothing);
        let a = act_on_check(&slurm, &standing, drain_reason(&findings[..1]), None, drain).unwrap();
        assert_eq!(a, DrainAction::Nothing);
        assert_eq!(calls(d.path()), "");
        let a = act_on_check(&slurm, &standing, drain_reason(&findings), None, drain).unwrap();
        let reason = findings[1].reason();
        assert_eq!(a.describe("n1").unwrap(), format!("drained n1: {reason}"));
        assert_eq!(
            calls(d.path()).lines().collect::<Vec<_>>(),
            [
                "show node n1 -o".to_string(),
                format!("update NodeName=n1 State=DRAIN Reason={reason}")
            ],
            "read first (never over someone else's drain), then one update"
        );
        a.record(&mut standing, 100);
        // The next run with the same finding: ours and shown, Slurm not asked.
        let slurm = NodeRead::new(&cfg, "n1");
        let a = act_on_check(&slurm, &standing, drain_reason(&findings), None, drain).unwrap();
        assert!(matches!(a, DrainAction::StillDrained { .. }));
        assert_eq!(calls(d.path()).lines().count(), 2);
        assert!(!slurm.asked());
    }

    #[test]
    fn check_drain_never_takes_over_an_admins_drain() {
        let _serial = serial();
        let d = tempfile::tempdir().unwrap();
        let cfg = scontrol(d.path(), "IDLE+DRAIN", "manual: cable swap");
        let findings = [finding(Severity::Drain)];
        // Drained by our prolog, then re-drained by an admin: the finding
        // stands, the admin's reason stays, run after run.
        let mut standing = standing_of(&act(&cfg, "n1", 7, drain_reason(&findings), Hook::Prolog));
        for _ in 0..2 {
            let sc = handle(&cfg);
            let a = check_n1(&sc, &standing, drain_reason(&findings), WRAPPER);
            assert!(matches!(a, DrainAction::LeftDrained { .. }), "{a:?}");
            a.record(&mut standing, 200);
        }
        assert!(!calls(d.path()).contains("update"), "{}", calls(d.path()));
        // The finding clears: nothing of the admin's is resumed.
        let sc = handle(&cfg);
        let a = check_n1(&sc, &standing, None, WRAPPER);
        assert!(!matches!(a, DrainAction::Resumed { .. }), "{a:?}");
        assert!(!calls(d.path()).contains("RESUME"));
    }

    #[test]
    fn only_our_drains_are_resumed_and_a_known_standing_asks_nothing() {
        let _serial = serial();
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
        let a = check_n1(&ours, &standing, None, undrain);
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
        let a = act_on_check(&slurm, &standing, None, None, undrain).unwrap();
        assert_eq!(a, DrainAction::Nothing);
        assert!(!slurm.asked());
        assert_eq!(calls(d.path()).lines().count(), 2);
        // Drained by us since: read, confirmed, resumed.
        DrainAction::Drain {
            reason: "r".into(),
            shown: false,
        }
        .record(&mut standing, 400);
        DrainAction::Drain {
            reason: "r".into(),
            shown: false,
        }
        .record(&mut standing, 500);
        assert_eq!(standing.drained_since, Some(400));
        let a = check_n1(&ours, &standing, None, undrain);
        assert!(matches!(a, DrainAction::Resumed { .. }));

        let d = tempfile::tempdir().unwrap();
        let admins = handle(&scontrol(d.path(), "IDLE+DRAIN", "bad fan"));
        let a = check_n1(&admins, &standing, None, undrain);
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
            super::undrain(&idle, "n1", &NodeState::default()).unwrap(),
            DrainAction::NotDrained
        );
    }

    #[test]
    fn a_failed_hooks_prolog_error_gets_our_reason_once_and_is_ours_to_resume() {
        let _serial = serial();
        let d = tempfile::tempdir().unwrap();
        let cfg = scontrol(d.path(), "IDLE+DRAIN", "Prolog error");
        // The prolog failed on an IMEX fault: Slurm drained with its reason.
        let fault = imex_node_fault(&cfg, "n1", 7, "nvidia-imex on n1 exited with status 1");
        assert_eq!(
            fault.hook_failure(),
            Some("imex-health: imex n1: nvidia-imex on n1 exited with status 1 (job 7)")
        );
        assert_eq!(calls(d.path()), "", "no controller call from the prolog");
        let mut standing = NodeState::default();
        fault.record(&mut standing, 100);
        assert!(standing.drained_for.is_some() && !standing.reason_shown);
        // The next health check: one read, one update with our reason.
        let sc = handle(&cfg);
        let a = check_n1(&sc, &standing, None, CheckFlags::default());
        assert!(matches!(a, DrainAction::ReasonShown { .. }), "{a:?}");
        assert_eq!(
            calls(d.path()),
            "show node n1 -o\nupdate NodeName=n1 State=DRAIN Reason=imex-health: imex n1: nvidia-imex on n1 exited with status 1 (job 7)\n"
        );
        a.record(&mut standing, 200);
        assert!(standing.reason_shown);
        // After that: nothing asked.
        let slurm = NodeRead::new(&sc, "n1");
        let a = act_on_check(&slurm, &standing, None, None, CheckFlags::default()).unwrap();
        assert_eq!(a, DrainAction::Nothing);
        assert!(!slurm.asked());
        // "Prolog error" is ours to resume where the standing says so ...
        let a = super::undrain(&sc, "n1", &standing).unwrap();
        assert!(matches!(a, DrainAction::Resumed { .. }), "{a:?}");
        // ... never elsewhere, and never an admin's reason.
        let a = super::undrain(&sc, "n1", &NodeState::default()).unwrap();
        assert!(a
            .describe("n1")
            .unwrap()
            .contains("run slurm-imex undrain on n1"));
        let d2 = tempfile::tempdir().unwrap();
        let admin = handle(&scontrol(d2.path(), "IDLE+DRAIN", "bad fan"));
        let a = check_n1(&admin, &standing_of(&fault), None, CheckFlags::default());
        assert!(matches!(a, DrainAction::LeftDrained { .. }), "{a:?}");
        assert!(!calls(d2.path()).contains("update"));
    }

    #[test]
    fn a_hostlist_is_judged_node_by_node_each_by_its_own_reason_and_standing() {
        let _serial = serial();
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("scontrol");
        let answer = "NodeName=n1 State=IDLE+DRAIN Reason=Prolog error [root@t]\n\
                      NodeName=n2 State=IDLE+DRAIN Reason=Prolog error [root@t]\n\
                      NodeName=n3 State=DOWN+DRAIN Reason=admin: bad DIMM [root@t]\n\
                      NodeName=n4 State=IDLE+DRAIN Reason=imex-health: xid gpu0 [root@t]";
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$*\" >> {}\n[ \"$1\" = show ] && cat <<'EOF'\n{answer}\nEOF\nexit 0\n",
                d.path().join("calls").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let sc = Scontrol::new(&script, std::time::Duration::from_secs(10));
        // This node is n1: its standing says a prolog of ours failed it.
        let mut mine = NodeState::default();
        imex_node_fault(&Config::default(), "n1", 7, "daemon").record(&mut mine, 100);
        let standing_of = |n: &str| match n {
            "n1" => mine.clone(),
            _ => NodeState::default(),
        };
        let names: Vec<String> = ["n1", "n2", "n3", "n4", "n5", "n1"]
            .map(String::from)
            .into();
        let out = undrain_each(&sc, "n[1-5],n1", &names, &standing_of).unwrap();
        let lines: Vec<String> = out
            .iter()
            .map(|(n, a)| match a {
                Ok(a) => a.describe(n).unwrap(),
                Err(e) => e.to_string(),
            })
            .collect();
        assert_eq!(lines.len(), 5, "each node once: {lines:?}");
        assert!(
            lines[0].starts_with("resumed n1 (was: Prolog error)"),
            "{lines:?}"
        );
        assert!(lines[1].starts_with("n2 left drained: \"Prolog error\" is ours only where"));
        assert_eq!(
            lines[2],
            "n3 left drained: its reason is not ours (admin: bad DIMM)"
        );
        assert!(lines[3].starts_with("resumed n4"), "{lines:?}");
        assert!(lines[4].starts_with("n5 left as it is"), "{lines:?}");
        assert_eq!(
            calls(d.path()),
            "show node n[1-5],n1 -o\nupdate NodeName=n1 State=RESUME\nupdate NodeName=n4 State=RESUME\n"
        );
    }

    /// slurmd's HealthCheckProgram as shipped (`check --drain --undrain`).
    const WRAPPER: CheckFlags = CheckFlags {
        drain: true,
        undrain: true,
    };

    #[test]
    fn the_shipped_health_check_shows_our_reason_for_a_gpu_fault_that_persists() {
        let _serial = serial();
        let d = tempfile::tempdir().unwrap();
        let cfg = scontrol(d.path(), "IDLE+DRAIN", "Prolog error");
        let findings = [finding(Severity::Drain)];
        let mut standing = standing_of(&act(&cfg, "n1", 7, drain_reason(&findings), Hook::Prolog));
        let sc = handle(&cfg);
        // The finding stands: our reason replaces Slurm's, once.
        let a = check_n1(&sc, &standing, drain_reason(&findings), WRAPPER);
        assert!(matches!(a, DrainAction::ReasonShown { .. }), "{a:?}");
        assert!(calls(d.path()).contains("State=DRAIN Reason=imex-health: xid: XID 79 (job 7)"));
        a.record(&mut standing, 200);
        let slurm = NodeRead::new(&sc, "n1");
        let a = act_on_check(&slurm, &standing, drain_reason(&findings), None, WRAPPER).unwrap();
        assert!(matches!(a, DrainAction::StillDrained { .. }), "{a:?}");
        assert!(!slurm.asked());
        // Resumed by hand meanwhile while the finding stands: drained again.
        let d = tempfile::tempdir().unwrap();
        let idle = handle(&scontrol(d.path(), "IDLE", ""));
        let mut fresh = standing_of(&act(&cfg, "n1", 7, drain_reason(&findings), Hook::Prolog));
        let a = check_n1(&idle, &fresh, drain_reason(&findings), WRAPPER);
        assert!(matches!(a, DrainAction::Drain { shown: true, .. }), "{a:?}");
        // The standing now keeps the check's drain, as Slurm shows it.
        a.record(&mut fresh, 300);
        assert_eq!(fresh.drained_since, Some(300));
        let check_reason = findings[0].reason();
        assert_eq!(fresh.drained_for.as_deref(), Some(check_reason.as_str()));
        assert!(fresh.reason_shown);
    }

    #[test]
    fn the_shipped_health_check_never_resumes_an_imex_fault_it_cannot_retest() {
        let _serial = serial();
        let d = tempfile::tempdir().unwrap();
        let cfg = scontrol(d.path(), "IDLE+DRAIN", "Prolog error");
        let fault = imex_node_fault(&cfg, "n1", 7, "nvidia-imex on n1 exited with status 1");
        let mut standing = standing_of(&fault);
        assert!(awaits_admin(&standing).is_some());
        let sc = handle(&cfg);
        // The idle node passes: our reason is shown, the node stays drained.
        let a = check_n1(&sc, &standing, None, WRAPPER);
        assert!(matches!(a, DrainAction::ReasonShown { .. }), "{a:?}");
        assert!(!calls(d.path()).contains("RESUME"));
        a.record(&mut standing, 200);
        // As the check's refresh keeps it. Every later check within the
        // hour: nothing asked, nothing resumed.
        standing.slurm_read_at = Some(now_s());
        let slurm = NodeRead::new(&sc, "n1");
        let a = act_on_check(&slurm, &standing, None, None, WRAPPER).unwrap();
        assert!(a
            .describe("n1")
            .unwrap()
            .contains("until an admin runs slurm-imex undrain"));
        assert!(!slurm.asked());
        a.record(&mut standing, 300);
        assert_eq!(standing.drained_since, Some(1), "drained since the fault");
        // An hour on: read again; still drained with our reason, still waiting.
        let mut hour_on = standing.clone();
        hour_on.slurm_read_at = Some(now_s() - RECHECK_S);
        let d2 = tempfile::tempdir().unwrap();
        let ours_shown = handle(&scontrol(
            d2.path(),
            "IDLE+DRAIN",
            "imex-health: imex n1: nvidia-imex on n1 exited with status 1 (job 7)",
        ));
        let slurm = NodeRead::new(&ours_shown, "n1");
        let a = act_on_check(&slurm, &hour_on, None, None, WRAPPER).unwrap();
        assert!(matches!(a, DrainAction::AwaitsAdmin { .. }), "{a:?}");
        assert!(slurm.asked() && !calls(d2.path()).contains("update"));
        // ... or lifted by hand: the standing forgets it.
        let d3 = tempfile::tempdir().unwrap();
        let idle = handle(&scontrol(d3.path(), "IDLE", ""));
        let a = check_n1(&idle, &hour_on, None, WRAPPER);
        assert_eq!(a, DrainAction::NotDrained);
        // The admin's undrain lifts it.
        let a = super::undrain(&sc, "n1", &standing).unwrap();
        assert!(matches!(a, DrainAction::Resumed { .. }), "{a:?}");
        // A GPU drain is not awaiting an admin: the check re-tests it.
        let gpu = standing_of(&act(
            &cfg,
            "n1",
            7,
            drain_reason(&[finding(Severity::Drain)]),
            Hook::Prolog,
        ));
        assert_eq!(awaits_admin(&gpu), None);
        // The check's own IMEX finding (a daemon serving a job, broken) too.
        let check_imex = standing_of(&DrainAction::Drain {
            reason: "imex-health: imex: nvidia-imex serving job 7 is not READY".into(),
            shown: true,
        });
        assert!(awaits_admin(&check_imex).is_some());
    }

    #[test]
    fn a_recovery_action_drain_is_lifted_only_once_every_gpu_reads_none() {
        let _serial = serial();
        let d = tempfile::tempdir().unwrap();
        let found = "imex-health: recovery_action gpu1 S: driver still asks for recovery action \
                     RECOVER_IMEX_DOMAIN (5) after a fresh IMEX domain came UP";
        let reason = for_job(found, 7);
        let cfg = scontrol(d.path(), "IDLE+DRAIN", &reason);
        let sc = handle(&cfg);
        let standing = standing_of(&act(&cfg, "n1", 7, Some(found.into()), Hook::Prolog));
        // A drain of the GPU class, never the IMEX class an admin lifts.
        assert_eq!(awaits_admin(&standing), None);
        let undrain = CheckFlags {
            drain: false,
            undrain: true,
        };
        // At idle, action 5 is only a warning: the verdict has no drain
        // finding, but GPU 1 still reads it, so the drain stays.
        let pending = "gpu1 reads RECOVER_IMEX_DOMAIN (5)";
        let mut standing = standing;
        let slurm = NodeRead::new(&sc, "n1");
        let a = act_on_check(&slurm, &standing, None, Some(pending), undrain).unwrap();
        // First, Slurm's "Prolog error" gets our reason (the stand-in shows
        // ours already: nothing to update), then the drain waits, unread.
        assert!(matches!(a, DrainAction::ReasonShown { .. }), "{a:?}");
        a.record(&mut standing, 2);
        standing.slurm_read_at = Some(now_s());
        let slurm = NodeRead::new(&sc, "n1");
        let a = act_on_check(&slurm, &standing, None, Some(pending), undrain).unwrap();
        assert!(!slurm.asked());
        assert_eq!(
            a.describe("n1").unwrap(),
            format!(
                "n1 stays drained until every GPU reads recovery action NONE ({pending}): \
                 {reason}"
            )
        );
        assert!(!calls(d.path()).contains("RESUME"));
        // Every GPU reads NONE: ours, resumed.
        let a = check_n1(&sc, &standing, None, undrain);
        assert!(matches!(a, DrainAction::Resumed { .. }), "{a:?}");
        // Another GPU drain of ours is not held by a pending action.
        let xid = standing_of(&act(
            &cfg,
            "n1",
            7,
            Some("imex-health: xid: XID 79".into()),
            Hook::Prolog,
        ));
        assert_eq!(awaits_recovery(&xid, Some(pending)), None);
        assert_eq!(awaits_recovery(&standing, None), None);
    }

    #[test]
    fn slurmctlds_verdict_spares_the_read_on_a_healthy_node() {
        let _serial = serial();
        let d = tempfile::tempdir().unwrap();
        let sc = handle(&scontrol(d.path(), "IDLE", ""));
        let undrain = CheckFlags {
            drain: true,
            undrain: true,
        };
        // A node never read since boot, which slurmctld says is healthy:
        // no read at all (the first check after a boot used to read).
        let fresh = NodeState::default();
        let slurm = NodeRead::new(&sc, "n1").telling(Some("yes"));
        assert_eq!(
            act_on_check(&slurm, &fresh, None, None, undrain).unwrap(),
            DrainAction::Nothing
        );
        assert!(!slurm.asked());
        // Drained by us, but slurmctld says healthy: lifted by hand, no read.
        let ours = standing_of(&DrainAction::Drain {
            reason: "imex-health: xid: XID 79".into(),
            shown: false,
        });
        let slurm = NodeRead::new(&sc, "n1").telling(Some("yes"));
        let a = act_on_check(&slurm, &ours, None, None, CheckFlags::default()).unwrap();
        assert_eq!(a, DrainAction::NotDrained);
        assert!(!slurm.asked());
        // A drain finding on a node slurmctld says is healthy: drained with
        // one update and no read.
        let slurm = NodeRead::new(&sc, "n1").telling(Some("yes"));
        let a = act_on_check(
            &slurm,
            &fresh,
            Some("imex-health: xid: XID 79".into()),
            None,
            undrain,
        );
        assert!(matches!(a.unwrap(), DrainAction::Drain { shown: true, .. }));
        assert_eq!(
            calls(d.path()),
            "update NodeName=n1 State=DRAIN Reason=imex-health: xid: XID 79\n"
        );
        // "no", or anything else, says nothing: read as before.
        for told in [Some("no"), Some("maybe"), None] {
            let slurm = NodeRead::new(&sc, "n1").telling(told);
            act_on_check(&slurm, &ours, None, None, undrain).unwrap();
            assert!(slurm.asked(), "{told:?}");
        }
    }

    /// A config drain (`crate::config_fault`): kept by the prolog, shown by
    /// the health check once (`--drain`, the file still refused), never
    /// awaiting an admin: `--undrain` lifts it once the file loads and the
    /// node passes (the check then has no finding).
    #[test]
    fn a_config_drain_is_shown_once_and_lifted_by_check_undrain_once_the_file_loads() {
        let _serial = serial();
        let line = "bad config /etc/slurm/imex.toml:9: [gpu] nvml_libary: unknown field";
        let reason = for_node(&slurm_imex_gpu::health::reasons::config_reason(line));
        let prolog = DrainAction::Drain {
            reason: reason.clone(),
            shown: false,
        };
        let mut standing = standing_of(&prolog);
        assert_eq!(awaits_admin(&standing), None, "not the IMEX class");
        // The file still refused: the check shows our reason, once.
        let d = tempfile::tempdir().unwrap();
        let sc = handle(&scontrol(d.path(), "IDLE+DRAIN", "Prolog error"));
        let a = check_n1(&sc, &standing, Some(reason.clone()), WRAPPER);
        assert!(matches!(a, DrainAction::ReasonShown { .. }), "{a:?}");
        assert_eq!(
            calls(d.path()),
            format!("show node n1 -o\nupdate NodeName=n1 State=DRAIN Reason={reason}\n")
        );
        a.record(&mut standing, 200);
        let slurm = NodeRead::new(&sc, "n1");
        let a = act_on_check(&slurm, &standing, Some(reason.clone()), None, WRAPPER).unwrap();
        assert!(matches!(a, DrainAction::StillDrained { .. }), "{a:?}");
        assert!(!slurm.asked());
        // The fixed file loads and the node passes: resumed by the check.
        let d = tempfile::tempdir().unwrap();
        let sc = handle(&scontrol(d.path(), "IDLE+DRAIN", &reason));
        let a = check_n1(&sc, &standing, None, WRAPPER);
        assert_eq!(a, DrainAction::Resumed { was: reason });
        assert!(calls(d.path()).ends_with("update NodeName=n1 State=RESUME\n"));
    }

    fn standing_of(action: &DrainAction) -> NodeState {
        let mut n = NodeState::default();
        action.record(&mut n, 1);
        n
    }

    #[test]
    fn our_reasons_name_the_job_and_stay_bounded() {
        let _serial = serial();
        assert_eq!(
            for_job("imex-health: xid gpu0 S: XID 79", 42),
            "imex-health: xid gpu0 S: XID 79 (job 42)"
        );
        let long = for_job(&"x".repeat(10_000), 4_294_967_295);
        assert!(
            long.len() <= REASON_MAX && long.ends_with("(job 4294967295)"),
            "{}",
            long.len()
        );
        // A NUL or a newline would stop scontrol from starting or forge a line.
        assert_eq!(
            for_job("imex-health: imex n1: fallen\0 off\nthe bus", 7),
            "imex-health: imex n1: fallen\\x00 off\\x0athe bus (job 7)"
        );
    }
}
