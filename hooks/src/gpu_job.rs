//! The GPU side of every job's prolog and epilog, judge and record only:
//! the health gate before the job and its start snapshot (kept in the state
//! directory), and after the job the end snapshot, per-GPU deltas, XIDs
//! logged during the job, the post-job verdict and the database record. What
//! a verdict does to the node is `crate::drain`'s, called by the
//! lifecycle. A database that is corrupt or full is logged and skipped: it
//! never fails a job or drains a node.

use serde::{Deserialize, Serialize};
use slurm_imex_core::error::Result;
use slurm_imex_core::fsutil::remove_if_exists;
use slurm_imex_core::hook::Hook;
use slurm_imex_core::slurm::env::JobEnv;
use slurm_imex_core::slurm::node::NodeRead;
use slurm_imex_core::state::job_record::{JobRecord, Outcome};
use slurm_imex_core::state::StateDir;
use slurm_imex_core::timespec::now_s;
use slurm_imex_gpu::clique::node_clique;
use slurm_imex_gpu::config::GpuJobs;
use slurm_imex_gpu::health::checks::RECOVERY_ACTION;
use slurm_imex_gpu::health::gate::{self, GateRequest, GateResult};
use slurm_imex_gpu::health::{drain_reason, verdict_of, Finding, GpuRef, Severity, Verdict};
use slurm_imex_gpu::nvml::{GpuSnapshot, Reading};
use slurm_imex_gpu::recovery::RecoveryAction;
use slurm_imex_gpu::stats::gpu_job_stats;
use slurm_imex_gpu::xid::checkpoint::{self, Checkpoint};
use slurm_imex_gpu::xid::log::LogPosition;
use slurm_imex_jobdb::write::{GpuRecord, HookVerdict, ImexOutcome, JobRow};
use slurm_imex_jobdb::JobDb;
use slurm_imex_jobsummary::imex_event::{summary_line, ImexEvent};
use slurm_imex_settings::Config;

/// What the prolog leaves for the epilog (state_dir/gpu-jobs/<job>.json).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StartState {
    pub job_id: u32,
    pub start_ts: i64,
    /// Where the prolog's read of the kernel log ended: the job's XIDs
    /// are the records after it.
    #[serde(default)]
    pub kmsg: Option<LogPosition>,
    pub snapshots: Vec<GpuSnapshot>,
    pub prolog: HookVerdict,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuOutcome {
    /// Not a GPU job, or no GPU on this node.
    Skipped(&'static str),
    Done {
        verdict: Verdict,
        /// Set when the verdict is DRAIN.
        drain_reason: Option<String>,
        warnings: Vec<String>,
        /// The node's NVLink clique as its GPUs report it (the prolog's
        /// gate), when they report a trusted one.
        clique: Option<String>,
        /// The job's GPUs whose driver asks for their IMEX domain to be
        /// restored (recovery action RECOVER_IMEX_DOMAIN) at the prolog's
        /// gate: read again once the job's domain is UP
        /// ([`reread_recovery`]).
        restore_imex: Vec<GpuRef>,
    },
}

const NO_GPU: &str = "no NVIDIA GPU on this node";

fn is_gpu_job(job: &JobEnv, cfg: &Config) -> bool {
    cfg.health.enabled && (cfg.health.gpu_jobs == GpuJobs::All || job.gpus.is_some())
}

fn reasons(findings: &[Finding], severity: Severity) -> Vec<String> {
    findings
        .iter()
        .filter(|f| f.severity == severity)
        .map(Finding::reason)
        .collect()
}

fn all_reasons(findings: &[Finding]) -> Vec<String> {
    let mut r = reasons(findings, Severity::Drain);
    r.extend(reasons(findings, Severity::Warn));
    r
}

/// The quick health gate before a job; keeps the start snapshot.
pub fn prolog(job: &JobEnv, cfg: &Config) -> GpuOutcome {
    if !is_gpu_job(job, cfg) {
        return GpuOutcome::Skipped("not a GPU job");
    }
    let state = StateDir::of(cfg);
    if state.knows_no_gpu() {
        return GpuOutcome::Skipped(NO_GPU);
    }
    let checkpoint = checkpoint::load(&state);
    let gate = gate::run(
        cfg,
        &GateRequest {
            hook: Hook::Prolog,
            gpus: job.gpus.as_deref(),
            xid_after: &checkpoint,
            fabric_seen: None,
        },
    );
    if gate.no_gpus {
        state.note_no_gpu();
        return GpuOutcome::Skipped(NO_GPU);
    }
    let verdict = verdict_of(&gate.findings);
    let start = StartState {
        job_id: job.job_id,
        start_ts: now_s(),
        kmsg: gate.kmsg,
        snapshots: gate.snapshots.clone(),
        prolog: HookVerdict {
            verdict,
            reasons: all_reasons(&gate.findings),
            ms: gate.elapsed.as_millis() as u64,
        },
    };
    if let Err(e) = state.write_json(&state.gpu_start_path(job.job_id), &start) {
        tracing::warn!(
            "cannot keep the start snapshot, the epilog will record end state only: {e}"
        );
    }
    gate.advance_checkpoint(&state);
    note_accounting(&state, &gate.snapshots);
    let clique = node_clique(&gate.snapshots);
    if let Some(clique) = &clique {
        publish_clique_best_effort(cfg, &state, &job.node_name, clique);
    }
    GpuOutcome::Done {
        verdict,
        drain_reason: drain_reason(&gate.findings),
        warnings: reasons(&gate.findings, Severity::Warn),
        clique,
        restore_imex: asking_to_restore_imex(&gate.snapshots),
    }
}

/// The GPUs whose driver asks for their IMEX domain to be restored.
fn asking_to_restore_imex(snapshots: &[GpuSnapshot]) -> Vec<GpuRef> {
    snapshots
        .iter()
        .filter(|s| s.recovery_action.value() == Some(&RecoveryAction::RECOVER_IMEX_DOMAIN.0))
        .map(|s| GpuRef {
            index: s.index,
            serial: s.serial.clone(),
            uuid: s.uuid.clone(),
        })
        .collect()
}

/// Once the job's IMEX domain is UP (`crate::lifecycle`), the recovery
/// action of `gpus`, which asked for the domain to be restored at the gate,
/// read again: Ok when every one reads NONE; else the drain reason of the
/// first that does not (it still asks, asks for something else now, or
/// cannot be read: the node cannot say the GPU is fit).
pub fn reread_recovery(cfg: &Config, gpus: &[GpuRef]) -> std::result::Result<(), String> {
    let indexes: Vec<u32> = gpus.iter().map(|g| g.index).collect();
    let read = slurm_imex_gpu::recovery::reread(&cfg.gpu.nvml_library, &indexes);
    let not_cleared = |gpu: &GpuRef| -> Option<String> {
        let actions = match &read {
            Ok(actions) => actions,
            Err(e) => return Some(RecoveryAction::unread_detail(Some(e.as_str()))),
        };
        match actions
            .iter()
            .find(|(i, _)| *i == gpu.index)
            .map(|(_, r)| r)
        {
            Some(Reading::Value(0)) | Some(Reading::NotSupported) => None,
            Some(Reading::Value(v)) => Some(RecoveryAction(*v).still_asks_detail()),
            Some(Reading::Failed(e)) => Some(RecoveryAction::unread_detail(Some(e.as_str()))),
            None => Some(RecoveryAction::unread_detail(None)),
        }
    };
    let first = gpus.iter().find_map(|gpu| {
        not_cleared(gpu).map(|detail| Finding {
            check: RECOVERY_ACTION.into(),
            severity: Severity::Drain,
            gpu: Some(gpu.clone()),
            detail,
        })
    });
    match first {
        None => Ok(()),
        Some(finding) => Err(finding.reason()),
    }
}

/// Add `reason` to what the prolog's gate concluded (its start state, which
/// the epilog records in the job's row), best effort.
pub fn note_prolog_reason(job: &JobEnv, cfg: &Config, reason: String) {
    let state = StateDir::of(cfg);
    let path = state.gpu_start_path(job.job_id);
    let Some(mut start) = state.read_json::<StartState>(&path, "start snapshot") else {
        return;
    };
    start.prolog.reasons.push(reason);
    if let Err(e) = state.write_json(&path, &start) {
        tracing::warn!("cannot note in the start snapshot: {e}");
    }
}

/// Say once per boot that this prolog turned NVML accounting mode on, and
/// when persistence mode is off, that the driver will forget it.
fn note_accounting(state: &StateDir, snapshots: &[GpuSnapshot]) {
    let turned_on: Vec<&GpuSnapshot> = snapshots
        .iter()
        .filter(|s| matches!(s.accounting_set, Some(Ok(()))))
        .collect();
    if turned_on.is_empty() || !state.note_accounting_turned_on() {
        return;
    }
    let gpus: Vec<String> = turned_on
        .iter()
        .map(|s| format!("gpu{}", s.index))
        .collect();
    let forgets = turned_on
        .iter()
        .any(|s| s.persistence == slurm_imex_gpu::nvml::Reading::Value(false));
    tracing::info!(
        "NVML accounting mode was off and is now on for {} ([gpu] accounting = \"on\"): jobs' \
         utilization and peak memory are recorded{}",
        gpus.join(","),
        if forgets {
            "; persistence mode is off, so the driver forgets it whenever no process holds the GPU \
             (enable nvidia-persistenced)"
        } else {
            ""
        }
    );
}

/// Publish this node's NVLink clique in Slurm when it differs from what we
/// published since boot (a job pays no RPC otherwise; with slurm-imex check
/// as HealthCheckProgram, which slurmd runs at its start, not even the
/// first). Best effort.
fn publish_clique_best_effort(cfg: &Config, state: &StateDir, node: &str, clique: &str) {
    let scontrol = slurm_imex_core::slurm::Scontrol::of(&cfg.slurm);
    let slurm = NodeRead::new(&scontrol, node);
    if let Err(line) = crate::check::publish_clique(state, &slurm, clique) {
        // Not on stderr, which carries a hook's one failure line.
        tracing::info!("NVLink clique of {node} {line} (slurm-imex check will retry)");
    }
}

/// What the epilog's GPU side ends with.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuEpilog {
    pub outcome: GpuOutcome,
    /// The row recorded (for the journal event), when there was a GPU job.
    pub row: Option<JobRow>,
    /// Why the job database did not take the row: logged, never a failure.
    pub unrecorded: Option<slurm_imex_core::error::Error>,
}

/// After the job: deltas, XIDs during the job, post-job verdict, record.
/// `imex` is what the prolog recorded of the job's IMEX domain here, if
/// any (its NVLink block and where its members came from). Also returns the
/// row it recorded (for the journal event). A database that does not take
/// the row is reported in one line and skipped.
pub fn epilog(
    job: &JobEnv,
    cfg: &Config,
    imex: Option<&JobRecord>,
) -> (GpuOutcome, Option<JobRow>) {
    let done = judge_and_record(job, cfg, imex);
    if let Some(e) = &done.unrecorded {
        slurm_imex_core::logging::report_error(&unrecorded_line(job.job_id, e));
    }
    (done.outcome, done.row)
}

/// The line a job database that did not take a job's row is reported with.
pub fn unrecorded_line(job_id: u32, e: &dyn std::fmt::Display) -> String {
    format!("slurm-imex-epilog: job {job_id} not recorded (the job is not affected): {e}")
}

/// [`epilog`] less the report: what to do with a database that did not
/// take the row is the caller's (the lifecycle).
pub fn judge_and_record(job: &JobEnv, cfg: &Config, imex: Option<&JobRecord>) -> GpuEpilog {
    let skipped = |why| GpuEpilog {
        outcome: GpuOutcome::Skipped(why),
        row: None,
        unrecorded: None,
    };
    let state = StateDir::of(cfg);
    let path = state.gpu_start_path(job.job_id);
    let start: Option<StartState> = state.read_json(&path, "start snapshot");
    if start.is_none() && !is_gpu_job(job, cfg) {
        return skipped("not a GPU job");
    }
    if start.is_none() && state.knows_no_gpu() {
        return skipped(NO_GPU);
    }
    let checkpoint = xids_judged_before(&state, start.as_ref());
    let request = GateRequest {
        hook: Hook::Epilog,
        gpus: job.gpus.as_deref(),
        xid_after: &checkpoint,
        fabric_seen: None,
    };
    let gate = gate::run(cfg, &request);
    if gate.no_gpus && start.is_none() {
        state.note_no_gpu();
        return skipped(NO_GPU);
    }
    let mut row = job_row(job, start.as_ref(), &gate);
    row.imex_domain = imex.and_then(|r| r.domain.clone());
    row.imex_rack_source = imex.and_then(|r| r.rack_source.clone());
    row.imex_outcome = imex.map(imex_outcome);
    let unrecorded = record(cfg, &mut row).err();
    gate.advance_checkpoint(&state);
    if let Err(e) = remove_if_exists(&path) {
        tracing::warn!("{e}");
    }
    GpuEpilog {
        outcome: GpuOutcome::Done {
            verdict: verdict_of(&gate.findings),
            drain_reason: drain_reason(&gate.findings),
            warnings: reasons(&gate.findings, Severity::Warn),
            clique: None,
            restore_imex: Vec::new(),
        },
        row: Some(row),
        unrecorded,
    }
}

/// What the job's IMEX record says, as the database keeps it.
fn imex_outcome(record: &JobRecord) -> ImexOutcome {
    let (ready_ms, failure, node_fault) = match &record.outcome {
        Outcome::Ready { waited_ms } => (Some(*waited_ms), None, false),
        Outcome::Failed { cause, node_fault } => (None, Some(cause.clone()), *node_fault),
    };
    ImexOutcome {
        channel: record.channel,
        ready_ms,
        failure,
        node_fault,
    }
}

/// XIDs during the job: everything after the prolog's kmsg position, or
/// after the node's checkpoint when the prolog left none.
fn xids_judged_before(state: &StateDir, start: Option<&StartState>) -> Checkpoint {
    match start.and_then(|s| s.kmsg.map(|position| (s, position))) {
        Some((start, position)) => {
            Checkpoint::at(position, start.snapshots.iter().map(|g| g.pci.as_str()))
        }
        None => checkpoint::load(state),
    }
}

/// The job's database row from the prolog's start state and the epilog's
/// gate: per GPU, the job's deltas and its own findings.
fn job_row(job: &JobEnv, start: Option<&StartState>, gate: &GateResult) -> JobRow {
    let gpus = gate
        .snapshots
        .iter()
        .map(|end| {
            let begin = start.and_then(|s| s.snapshots.iter().find(|g| g.uuid == end.uuid));
            let mine: Vec<Finding> = gate
                .findings
                .iter()
                .filter(|f| f.gpu.as_ref().is_some_and(|g| g.index == end.index))
                .cloned()
                .collect();
            GpuRecord {
                stats: gpu_job_stats(begin, end, &gate.xids),
                verdict: verdict_of(&mine),
                reasons: all_reasons(&mine),
            }
        })
        .collect();
    let mut reasons = all_reasons(&gate.findings);
    if start.is_none() {
        reasons.push(
            "unknown: no usable start snapshot from the prolog, so per-job deltas (energy, ECC, \
             replays) are not known"
                .into(),
        );
    }
    JobRow {
        job_id: job.job_id,
        node: job.node_name.clone(),
        user: job.user.clone(),
        uid: job.uid,
        start_ts: start.map_or_else(now_s, |s| s.start_ts),
        end_ts: Some(now_s()),
        imex: job.imex_requested,
        imex_domain: None,
        imex_rack_source: None,
        imex_outcome: None,
        prolog: start.map(|s| s.prolog.clone()),
        epilog: Some(HookVerdict {
            verdict: verdict_of(&gate.findings),
            reasons,
            ms: gate.elapsed.as_millis() as u64,
        }),
        gpus,
        imex_events: Vec::new(),
    }
}

/// What the domain's watcher saw while the job ran (`crate::watch`): a
/// domain that was interrupted makes the job's epilog verdict at least
/// WARN, with the events as its reason. It is no finding of the GPUs and
/// drains nothing: a daemon left down drains through the epilog's IMEX side.
fn judge_interruptions(row: &mut JobRow, events: Vec<ImexEvent>) {
    row.imex_events = events;
    if !row.imex_interrupted() {
        return;
    }
    let Some(epilog) = row.epilog.as_mut() else {
        return;
    };
    let events = summary_line(&row.imex_events, INTERRUPTION_REASON_MAX).unwrap_or_default();
    epilog.verdict = epilog.verdict.max(Verdict::Warn);
    epilog.reasons.push(format!(
        "imex: the job's IMEX domain was interrupted: {events}"
    ));
}

/// Longest list of events in an interruption's reason.
const INTERRUPTION_REASON_MAX: usize = 300;

fn record(cfg: &Config, row: &mut JobRow) -> Result<()> {
    let mut db = JobDb::open(&cfg.database.path, cfg.database.busy_timeout.0)?;
    match db.imex_events(row.job_id, &row.node) {
        Ok(events) => judge_interruptions(row, events),
        Err(e) => tracing::warn!("the IMEX watcher's events of this job are not read: {e}"),
    }
    db.record_job(row)?;
    let retention = cfg.database.retention.0;
    if retention.is_zero() {
        return Ok(()); // 0: keep every record forever
    }
    let now = now_s();
    let age = i64::try_from(retention.as_secs()).unwrap_or(i64::MAX);
    // Never the job just recorded, whatever the clock or the retention says.
    let cutoff = now.saturating_sub(age).min(row.start_ts);
    if let Err(e) = db.prune(cutoff, now, 86_400) {
        tracing::warn!("retention pruning failed: {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_imex_jobsummary::imex_event::ImexEventKind;

    fn row() -> JobRow {
        JobRow {
            job_id: 7,
            node: "n3".into(),
            user: None,
            uid: None,
            start_ts: 0,
            end_ts: Some(1),
            imex: true,
            imex_domain: None,
            imex_rack_source: None,
            imex_outcome: None,
            prolog: None,
            epilog: Some(HookVerdict {
                verdict: Verdict::Pass,
                reasons: Vec::new(),
                ms: 3,
            }),
            gpus: Vec::new(),
            imex_events: Vec::new(),
        }
    }

    fn event(kind: ImexEventKind, detail: &str) -> ImexEvent {
        ImexEvent::new(7, "n3", 0, kind, detail)
    }

    #[test]
    fn an_interrupted_domain_makes_the_epilog_verdict_a_warning_naming_the_events() {
        let mut r = row();
        judge_interruptions(
            &mut r,
            vec![
                event(ImexEventKind::DaemonDied, "killed by signal 9"),
                event(ImexEventKind::DaemonRestarted, "restart 1 of 3"),
            ],
        );
        let epilog = r.epilog.as_ref().unwrap();
        assert_eq!(epilog.verdict, Verdict::Warn);
        assert!(
            epilog.reasons[0].starts_with(
                "imex: the job's IMEX domain was interrupted: IMEX daemon died at 00:00:00 \
                 (killed by signal 9); IMEX daemon restarted at"
            ),
            "{:?}",
            epilog.reasons
        );
        assert_eq!(r.verdict(), Verdict::Warn);
    }

    #[test]
    fn recoveries_alone_and_a_drain_verdict_are_left_as_they_are() {
        let mut r = row();
        judge_interruptions(&mut r, vec![event(ImexEventKind::DomainUp, "")]);
        assert_eq!(r.verdict(), Verdict::Pass);
        assert_eq!(r.imex_events.len(), 1);
        let mut drained = row();
        drained.epilog.as_mut().unwrap().verdict = Verdict::Drain;
        judge_interruptions(&mut drained, vec![event(ImexEventKind::MemberLost, "n4")]);
        assert_eq!(drained.verdict(), Verdict::Drain);
    }
}
