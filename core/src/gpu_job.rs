//! The GPU side of every job's prolog and epilog: the health gate before the
//! job, the start snapshot kept in the state directory, and after the job
//! the end snapshot, per-GPU deltas, XIDs logged during the job, the
//! post-job verdict and the database record. A database that is corrupt or
//! full is logged and skipped: it never fails a job or drains a node.

use crate::config::{Config, GpuJobs};
use crate::error::{Error, Result};
use crate::fsutil::{ensure_dir, remove_if_exists, write_atomic};
use crate::gpu::GpuSnapshot;
use crate::health::checks::Phase;
use crate::health::gate::{self, GateRequest, GateResult};
use crate::health::{drain_reason, verdict_of, Finding, Severity, Verdict};
use crate::jobdb::write::{GpuRecord, JobRow, PhaseOutcome};
use crate::jobdb::JobDb;
use crate::slurm_env::JobEnv;
use crate::stats::gpu_job_stats;
use crate::timespec::now_s;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the prolog leaves for the epilog (state_dir/gpu-jobs/<job>.json).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StartState {
    pub job_id: u32,
    pub start_ts: i64,
    pub kmsg_seq: Option<u64>,
    pub snapshots: Vec<GpuSnapshot>,
    pub prolog: PhaseOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuPhaseOutcome {
    /// Not a GPU job, or no GPU on this node.
    Skipped(&'static str),
    Done {
        verdict: Verdict,
        /// Set when the verdict is DRAIN.
        drain_reason: Option<String>,
        warnings: Vec<String>,
    },
}

fn start_path(cfg: &Config, job_id: u32) -> PathBuf {
    start_dir(cfg).join(format!("{job_id}.json"))
}

/// Where the prolog leaves each GPU job's start snapshot for the epilog.
pub fn start_dir(cfg: &Config) -> PathBuf {
    cfg.imex.state_dir.join("gpu-jobs")
}

fn checkpoint_path(cfg: &Config) -> PathBuf {
    cfg.imex.state_dir.join("xid-checkpoint.json")
}

/// Per GPU (PCI id) the last kmsg sequence already judged. Kept on the
/// state tmpfs, so a reboot (which restarts kmsg numbering) clears it.
/// A corrupt checkpoint is logged with its path and set aside
/// (`.corrupt`); the gate then judges every XID still in the kernel log,
/// which may report one again but never misses one.
fn load_checkpoint(cfg: &Config) -> BTreeMap<String, u64> {
    read_state_json(&checkpoint_path(cfg), "XID checkpoint").unwrap_or_default()
}

/// Read a JSON state file we wrote. Missing: None. Unreadable or corrupt:
/// logged with its path, renamed to `<name>.corrupt` (replacing an older
/// one) so the next write starts clean and an admin can look, then None.
fn read_state_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Option<T> {
    let bytes = match crate::fsutil::read_config_text(path, 16 << 20) {
        Ok(t) => t,
        Err(_) if !path.exists() => return None,
        Err(e) => {
            tracing::warn!("{what} unreadable, ignored: {e}");
            return None;
        }
    };
    match serde_json::from_str(&bytes) {
        Ok(v) => Some(v),
        Err(e) => {
            let aside = path.with_extension("json.corrupt");
            let moved = std::fs::rename(path, &aside).is_ok();
            let line = format!(
                "corrupt {what} {} ({e}){}",
                path.display(),
                if moved {
                    format!("; moved aside to {}", aside.display())
                } else {
                    String::new()
                }
            );
            crate::logging::report_error(&format!("slurm-imex: {line}"));
            None
        }
    }
}

fn advance_checkpoint(cfg: &Config, gate: &GateResult) {
    let Some(last) = gate.kmsg_last_seq else {
        return;
    };
    let mut cp = load_checkpoint(cfg);
    for s in &gate.snapshots {
        let e = cp.entry(s.pci.clone()).or_insert(0);
        *e = (*e).max(last);
    }
    let write = ensure_dir(&cfg.imex.state_dir, 0o755).and_then(|_| {
        write_atomic(
            &checkpoint_path(cfg),
            &serde_json::to_vec(&cp).unwrap_or_default(),
            0o644,
        )
    });
    if let Err(e) = write {
        tracing::warn!("cannot save the XID checkpoint: {e}");
    }
}

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
pub fn prolog(job: &JobEnv, cfg: &Config) -> GpuPhaseOutcome {
    if !is_gpu_job(job, cfg) {
        return GpuPhaseOutcome::Skipped("not a GPU job");
    }
    let checkpoint = load_checkpoint(cfg);
    let gate = gate::run(
        cfg,
        &GateRequest {
            phase: Phase::Prolog,
            gpus: job.gpus.as_deref(),
            xid_after: &checkpoint,
        },
    );
    if gate.no_gpus {
        return GpuPhaseOutcome::Skipped("no NVIDIA GPU on this node");
    }
    let verdict = verdict_of(&gate.findings);
    let state = StartState {
        job_id: job.job_id,
        start_ts: now_s(),
        kmsg_seq: gate.kmsg_last_seq,
        snapshots: gate.snapshots.clone(),
        prolog: PhaseOutcome {
            verdict,
            reasons: all_reasons(&gate.findings),
            ms: gate.elapsed.as_millis() as u64,
        },
    };
    let path = start_path(cfg, job.job_id);
    let saved = path
        .parent()
        .map_or(Ok(()), |d| ensure_dir(d, 0o755))
        .and_then(|_| {
            write_atomic(
                &path,
                &serde_json::to_vec(&state).unwrap_or_default(),
                0o644,
            )
        });
    if let Err(e) = saved {
        tracing::warn!(
            "cannot keep the start snapshot, the epilog will record end state only: {e}"
        );
    }
    advance_checkpoint(cfg, &gate);
    let drain = drain_reason(&gate.findings);
    if let Some(reason) = &drain {
        if cfg.health.set_drain_reason {
            if let Err(e) = crate::drain::set_drain(&cfg.health, &job.node_name, reason) {
                tracing::warn!("{e}");
            }
        }
    }
    GpuPhaseOutcome::Done {
        verdict,
        drain_reason: drain,
        warnings: reasons(&gate.findings, Severity::Warn),
    }
}

/// After the job: deltas, XIDs during the job, post-job verdict, record.
pub fn epilog(job: &JobEnv, cfg: &Config) -> GpuPhaseOutcome {
    epilog_with_record(job, cfg).0
}

/// `epilog`, also returning the row it recorded (for the journal summary).
pub fn epilog_with_record(job: &JobEnv, cfg: &Config) -> (GpuPhaseOutcome, Option<JobRow>) {
    let path = start_path(cfg, job.job_id);
    let start: Option<StartState> = read_state_json(&path, "start snapshot");
    if start.is_none() && !is_gpu_job(job, cfg) {
        return (GpuPhaseOutcome::Skipped("not a GPU job"), None);
    }
    let checkpoint = xids_judged_before(cfg, start.as_ref());
    let request = GateRequest {
        phase: Phase::Epilog,
        gpus: job.gpus.as_deref(),
        xid_after: &checkpoint,
    };
    let gate = gate::run(cfg, &request);
    if gate.no_gpus && start.is_none() {
        return (GpuPhaseOutcome::Skipped("no NVIDIA GPU on this node"), None);
    }
    let row = job_row(job, start.as_ref(), &gate);
    if let Err(e) = record(cfg, &row) {
        crate::logging::report_error(&format!(
            "slurm-imex-epilog: job {} not recorded (the job is not affected): {e}",
            job.job_id
        ));
    }
    advance_checkpoint(cfg, &gate);
    if let Err(e) = remove_if_exists(&path) {
        tracing::warn!("{e}");
    }
    let outcome = GpuPhaseOutcome::Done {
        verdict: verdict_of(&gate.findings),
        drain_reason: drain_reason(&gate.findings),
        warnings: reasons(&gate.findings, Severity::Warn),
    };
    (outcome, Some(row))
}

/// XIDs during the job: everything after the prolog's kmsg position, or
/// after the node's checkpoint when the prolog left none.
fn xids_judged_before(cfg: &Config, start: Option<&StartState>) -> BTreeMap<String, u64> {
    match start.and_then(|s| s.kmsg_seq.map(|seq| (s, seq))) {
        Some((start, seq)) => start
            .snapshots
            .iter()
            .map(|g| (g.pci.clone(), seq))
            .collect(),
        None => load_checkpoint(cfg),
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
        prolog: start.map(|s| s.prolog.clone()),
        epilog: Some(PhaseOutcome {
            verdict: verdict_of(&gate.findings),
            reasons,
            ms: gate.elapsed.as_millis() as u64,
        }),
        gpus,
    }
}

fn record(cfg: &Config, row: &JobRow) -> Result<()> {
    let mut db = JobDb::open(&cfg.database.path, cfg.database.busy_timeout.0)?;
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

/// The gate for `slurm-imex check`: every GPU, XIDs since the checkpoint,
/// which then advances (a reported XID is not reported again).
pub fn check_now(cfg: &Config) -> Result<GateResult> {
    let checkpoint = load_checkpoint(cfg);
    let gate = gate::run(
        cfg,
        &GateRequest {
            phase: Phase::Check,
            gpus: None,
            xid_after: &checkpoint,
        },
    );
    if gate.no_gpus {
        return Err(Error::new(
            "no NVIDIA GPU on this node (NVML not loadable, none on the PCI bus)",
        ));
    }
    advance_checkpoint(cfg, &gate);
    Ok(gate)
}
