//! The health gate: load NVML, read the chosen GPUs in parallel, read new
//! XIDs and the driver's other signature lines, run the checks. Every stage
//! has its own time budget; a stage that overruns becomes a drain finding
//! naming the check and the GPU, and the whole gate is capped by `[health]
//! gate_timeout`.

use super::check_names::{GATE, GPU_COUNT, GPU_SET, NVML_INIT, XID};
use super::checks::{check_gpu, check_node, check_signatures, check_xids, Hook, LogLines};
use super::fabric_wait::FabricSeen;
use super::{Finding, GpuRef, Severity};
use crate::config::{Accounting, GpuSections};
use crate::nvml::{job_gpus, pci_gpu_count, GpuReader, GpuSnapshot, Stage};
use crate::xid::checkpoint::{self, Checkpoint};
use crate::xid::log::{self as kernel_log, BootId, LogPosition, LogRead};
use crate::xid::XidEvent;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::state::StateDir;
use slurm_imex_core::timespec::now_s;
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Budget for dlopen + nvmlInit.
const NVML_INIT_BUDGET: Duration = Duration::from_secs(2);

/// Which GPUs, and since when XIDs count.
pub struct GateRequest<'a> {
    pub hook: Hook,
    /// None: every GPU of the node.
    pub gpus: Option<&'a [u32]>,
    /// Per GPU (normalised PCI id) the last kernel-log record already judged.
    pub xid_after: &'a Checkpoint,
    /// Since when earlier checks saw each GPU's fabric probe not done yet
    /// (`slurm-imex check`); None: this gate does not count across runs.
    pub fabric_seen: Option<&'a FabricSeen>,
}

#[derive(Debug, Clone)]
pub struct GateResult {
    pub findings: Vec<Finding>,
    pub snapshots: Vec<GpuSnapshot>,
    /// New XIDs on the checked GPUs (or on no known GPU).
    pub xids: Vec<XidEvent>,
    /// Where the read of the kernel log ended (None: it could not be read).
    pub kmsg: Option<LogPosition>,
    pub driver: Option<String>,
    /// NVML could not be loaded and no NVIDIA GPU is on the PCI bus:
    /// not a GPU node, nothing was checked.
    pub no_gpus: bool,
    pub elapsed: Duration,
    /// What the next check is to know of fabric probes not done yet (when
    /// the request counted them).
    pub fabric_seen: Option<FabricSeen>,
}

enum Msg {
    Stage(u32, Stage),
    Done(u32, Box<GpuSnapshot>),
}

/// The job's GPU indexes this node does not have, as "4,5", if any.
fn missing_job_gpus(requested: Option<&[u32]>, count: u32) -> Option<String> {
    let missing: Vec<String> = requested?
        .iter()
        .filter(|i| **i >= count)
        .map(u32::to_string)
        .collect();
    (!missing.is_empty()).then(|| slurm_imex_core::text::summarize_list(&missing, 256))
}

impl GateResult {
    fn empty() -> GateResult {
        GateResult {
            findings: Vec::new(),
            snapshots: Vec::new(),
            xids: Vec::new(),
            kmsg: None,
            driver: None,
            no_gpus: false,
            elapsed: Duration::ZERO,
            fabric_seen: None,
        }
    }

    /// Mark the kernel-log lines this gate judged as judged: on the GPUs it
    /// read, and those that name no GPU (`checkpoint::NODE`).
    pub fn advance_checkpoint(&self, state: &StateDir) {
        let pcis = self.snapshots.iter().map(|s| s.pci.as_str());
        let node = std::iter::once(checkpoint::NODE);
        checkpoint::advance(state, self.kmsg, pcis.chain(node));
    }
}

/// The gate between jobs (`slurm-imex check`): every GPU, XIDs since the
/// node's checkpoint, which then advances (a reported XID is not reported
/// again).
pub fn check_now(cfg: &dyn GpuSections) -> Result<GateResult> {
    let state = StateDir::of(cfg.core());
    let checkpoint = checkpoint::load(&state);
    let fabric_seen = FabricSeen::load(&state);
    let gate = run(
        cfg,
        &GateRequest {
            hook: Hook::Check,
            gpus: None,
            xid_after: &checkpoint,
            fabric_seen: Some(&fabric_seen),
        },
    );
    if gate.no_gpus {
        return Err(Error::new(
            "no NVIDIA GPU on this node (NVML not loadable, none on the PCI bus)",
        ));
    }
    gate.advance_checkpoint(&state);
    if let Some(seen) = &gate.fabric_seen {
        seen.save(&state);
    }
    Ok(gate)
}

/// Run the gate: open NVML, read the GPUs (and the kernel log meanwhile),
/// then judge what was read.
pub fn run(cfg: &dyn GpuSections, req: &GateRequest) -> GateResult {
    let started = Instant::now();
    let deadline = started + cfg.health().gate_timeout.0;
    let mut result = GateResult::empty();
    let pci_count = pci_gpu_count(&cfg.health().pci_devices);
    if let Some((reader, count)) = open_nvml(cfg, deadline, pci_count, &mut result) {
        result.driver = reader.driver_version();
        result.findings.extend(gpu_set_finding(req.gpus, count));
        let gpus = job_gpus(req.gpus, count);
        let fabric_wait = waits_for_fabric(cfg, req.hook);
        let reader = reader
            .turning_accounting_on(turns_accounting_on(cfg, req.hook))
            .reading_accounting_stats(req.hook == Hook::Epilog)
            .waiting_for_fabric(fabric_wait);
        let readers = spawn_gpu_readers(&reader, &gpus);
        // The kernel log, while the GPUs are being read.
        let kmsg = read_kernel_log(cfg);
        let limits = ReadLimits {
            deadline,
            gate_timeout: cfg.health().gate_timeout.0,
            fabric_wait,
        };
        let (mut snapshots, overruns) = collect_snapshots(readers, &gpus, limits);
        if let Some(seen) = req.fabric_seen {
            result.fabric_seen = Some(seen.apply(&mut snapshots, now_s()));
        }
        log_fabric_waits(&snapshots);
        result.snapshots = snapshots;
        result
            .findings
            .extend(overruns.iter().map(Overrun::finding));
        for s in &result.snapshots {
            result.findings.extend(check_gpu(s, cfg.health(), req.hook));
        }
        let driver = result.driver.as_deref();
        let node = check_node(cfg.health(), count, pci_count, driver, &result.snapshots);
        result.findings.extend(node);
        judge_kernel_log(cfg, req, kmsg, &mut result);
    }
    result.elapsed = started.elapsed();
    result
}

/// The kernel log, its position tied to this boot (`[gpu] boot_id`).
fn read_kernel_log(cfg: &dyn GpuSections) -> std::io::Result<LogRead> {
    let boot = BootId::read(&cfg.gpu().boot_id);
    kernel_log::read(&cfg.gpu().kmsg).map(|mut read| {
        read.position.boot = boot;
        read
    })
}

/// Only the prolog waits for a fabric probe that is not done yet, within
/// `[health] fabric_wait`: a job about to start gains from a wait that
/// ends with the probe done, where `slurm-imex check` (slurmd's
/// HealthCheckProgram, bounded by HealthCheckTimeout) judges at once and
/// counts across its runs instead (`fabric_wait::FabricSeen`).
fn waits_for_fabric(cfg: &dyn GpuSections, hook: Hook) -> Duration {
    match hook {
        Hook::Prolog => cfg.health().fabric_wait.0,
        Hook::Epilog | Hook::Check => Duration::ZERO,
    }
}

/// Say in the log when a GPU's fabric probe was waited for.
fn log_fabric_waits(snapshots: &[GpuSnapshot]) {
    for s in snapshots {
        let Some(f) = s.fabric.value() else { continue };
        if let Some(ms) = f.transitional_ms {
            tracing::info!(
                "GPU {} fabric probe {} after {ms} ms of NOT_STARTED/IN_PROGRESS",
                s.index,
                if f.is_transitional() {
                    "still not done"
                } else {
                    "done"
                }
            );
        }
    }
}

/// Only the prolog turns NVML accounting mode on, for the job's GPUs, so
/// the epilog finds the job's processes in the accounting buffer.
fn turns_accounting_on(cfg: &dyn GpuSections, hook: Hook) -> bool {
    hook == Hook::Prolog && cfg.gpu().accounting == Accounting::On
}

/// dlopen + nvmlInit + the device count, bounded: a wedged driver can hang
/// nvmlInit. None when there is nothing to read: a finding says why, or
/// `no_gpus` when this is no GPU node at all.
fn open_nvml(
    cfg: &dyn GpuSections,
    deadline: Instant,
    pci_count: Option<u32>,
    result: &mut GateResult,
) -> Option<(GpuReader, u32)> {
    let (tx, rx) = mpsc::channel();
    let library = cfg.gpu().nvml_library.clone();
    std::thread::spawn(move || {
        let _ = tx.send(GpuReader::open(&library));
    });
    let budget = NVML_INIT_BUDGET.min(deadline.saturating_duration_since(Instant::now()));
    let reader = match rx.recv_timeout(budget) {
        Ok(Ok(reader)) => reader,
        Ok(Err(_)) if pci_count == Some(0) => {
            result.no_gpus = true;
            return None;
        }
        Ok(Err(e)) => {
            result
                .findings
                .push(Finding::node_drain(NVML_INIT, e.to_string()));
            return None;
        }
        Err(_) => {
            let detail = format!("NVML init did not finish within {NVML_INIT_BUDGET:?}");
            result.findings.push(Finding::node_drain(NVML_INIT, detail));
            return None;
        }
    };
    match reader.device_count() {
        Ok(count) => Some((reader, count)),
        Err(e) => {
            result
                .findings
                .push(Finding::node_drain(GPU_COUNT, e.to_string()));
            None
        }
    }
}

/// Slurm would hand the job a GPU this node does not have, so the job would
/// run without it. Slurm's GPU inventory (gres.conf) and the node disagree,
/// so the node drains until an admin reconciles them.
fn gpu_set_finding(requested: Option<&[u32]>, count: u32) -> Option<Finding> {
    let missing = missing_job_gpus(requested, count)?;
    Some(Finding::node_drain(
        GPU_SET,
        format!(
            "SLURM_JOB_GPUS lists GPU index(es) {missing} but NVML sees {count} GPU(s) \
             (indexes 0-{}): a GPU is missing or gres.conf is wrong",
            count.saturating_sub(1)
        ),
    ))
}

/// What a gate that panicked (a bug) stands for: a drain, as the gate
/// could not say the GPUs are fit.
pub fn crashed() -> Finding {
    Finding::node_drain(GATE, "the GPU health gate crashed (a bug)".into())
}

/// GPUs `gpus` read as the gate reads them, for whoever reports what it
/// read rather than judging it (`slurm-imex doctor`): in parallel, each
/// stage within its budget and all by `deadline`. The snapshots that came
/// in time, in GPU order, and the reads that overran (`gate_timeout` is the
/// limit named when `deadline` cut one off). A read stuck in a hung NVML
/// call is left behind.
pub fn read_gpus(
    reader: &GpuReader,
    gpus: &[u32],
    deadline: Instant,
    gate_timeout: Duration,
) -> (Vec<GpuSnapshot>, Vec<Overrun>) {
    let readers = spawn_gpu_readers(reader, gpus);
    let limits = ReadLimits {
        deadline,
        gate_timeout,
        fabric_wait: Duration::ZERO,
    };
    collect_snapshots(readers, gpus, limits)
}

/// One GPU's read that ran past its limit: the stage it was in (the NVML
/// calls still running) and the limit, the stage's budget or the gate's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overrun {
    pub gpu: u32,
    pub stage: Stage,
    pub limit: Duration,
}

impl Overrun {
    /// The drain finding naming the stage's check and the GPU.
    pub fn finding(&self) -> Finding {
        Finding {
            check: self.stage.check_name().into(),
            severity: Severity::Drain,
            gpu: Some(GpuRef {
                index: self.gpu,
                serial: String::new(),
                uuid: String::new(),
            }),
            detail: format!("check timed out after {:?} (NVML call hung)", self.limit),
        }
    }
}

/// One reader thread per GPU; each reports every stage as it starts, then
/// its snapshot. A thread stuck in a hung NVML call is left behind.
fn spawn_gpu_readers(reader: &GpuReader, gpus: &[u32]) -> mpsc::Receiver<Msg> {
    let (tx, rx) = mpsc::channel();
    for &index in gpus {
        let tx = tx.clone();
        let reader = reader.clone();
        std::thread::spawn(move || {
            let progress_tx = tx.clone();
            let snap = reader.snapshot(index, |stage| {
                let _ = progress_tx.send(Msg::Stage(index, stage));
            });
            let _ = tx.send(Msg::Done(index, Box::new(snap)));
        });
    }
    rx
}

/// How long the GPUs' reads may take: each stage its budget, all of them
/// `deadline` (the gate's `gate_timeout`), which a GPU waiting for its
/// fabric probe moves out by the wait (`fabric_wait`), so that waiting is
/// never cut short by the cap on the rest.
#[derive(Debug, Clone, Copy)]
pub struct ReadLimits {
    pub deadline: Instant,
    pub gate_timeout: Duration,
    pub fabric_wait: Duration,
}

/// The snapshots that arrived in time, in GPU order, and each GPU whose
/// current stage overran its budget (or the gate's).
fn collect_snapshots(
    rx: mpsc::Receiver<Msg>,
    gpus: &[u32],
    limits: ReadLimits,
) -> (Vec<GpuSnapshot>, Vec<Overrun>) {
    let mut deadline = limits.deadline;
    let mut cap = limits.gate_timeout;
    let budget = |stage: Stage| stage.budget(limits.fabric_wait, limits.gate_timeout);
    let mut current: BTreeMap<u32, (Stage, Instant)> = gpus
        .iter()
        .map(|i| (*i, (Stage::Identity, Instant::now())))
        .collect();
    let mut done: BTreeMap<u32, GpuSnapshot> = BTreeMap::new();
    let mut timeouts = Vec::new();
    // The GPU whose current stage runs out of budget first.
    let first_due = |current: &BTreeMap<u32, (Stage, Instant)>| {
        current
            .iter()
            .map(|(gpu, (stage, since))| (*gpu, *stage, *since + budget(*stage)))
            .min_by_key(|(_, _, due)| *due)
    };
    while let Some((gpu, stage, due)) = first_due(&current) {
        let now = Instant::now();
        let stage_deadline = due.min(deadline);
        if now >= stage_deadline {
            let limit = if stage_deadline == deadline {
                cap
            } else {
                budget(stage)
            };
            timeouts.push(Overrun { gpu, stage, limit });
            current.remove(&gpu);
            continue;
        }
        match rx.recv_timeout(stage_deadline - now) {
            Ok(Msg::Stage(g, s)) => {
                let now = Instant::now();
                if s == Stage::FabricWait && now + budget(s) > deadline {
                    deadline = now + budget(s);
                    cap = limits.gate_timeout.saturating_add(limits.fabric_wait);
                }
                if let Some(c) = current.get_mut(&g) {
                    *c = (s, now);
                }
            }
            Ok(Msg::Done(g, snap)) => {
                current.remove(&g);
                done.insert(g, *snap);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    (done.into_values().collect(), timeouts)
}

/// Keep the XIDs and signature lines that are new for the GPUs checked and
/// judge them. A job's GPUs only, and lines that name no GPU; a whole-node
/// check keeps every line, also those of GPUs NVML no longer lists (fallen
/// off the bus).
fn judge_kernel_log(
    cfg: &dyn GpuSections,
    req: &GateRequest,
    kmsg: std::io::Result<LogRead>,
    result: &mut GateResult,
) {
    let source = cfg.gpu().kmsg.display().to_string();
    let read = match kmsg {
        Ok(read) => read,
        Err(e) => {
            result.findings.push(Finding {
                check: XID.into(),
                severity: Severity::Warn,
                gpu: None,
                detail: format!("cannot read the kernel log {source} ([gpu] kmsg): {e}"),
            });
            return;
        }
    };
    result.kmsg = Some(read.position);
    if let Some(skipped) = read.skipped {
        note_skipped(&source, skipped);
    }
    let judged = req.xid_after.reconciled(read.position, &source);
    let checked: Vec<&str> = result.snapshots.iter().map(|s| s.pci.as_str()).collect();
    let keep = |pci: &str| req.gpus.is_none() || checked.contains(&pci);
    let lines = LogLines {
        judged: &judged,
        xids: &read.events,
        keep: &keep,
    };
    let signatures = check_signatures(&read.signatures, &lines, &result.snapshots);
    result.xids = read
        .events
        .into_iter()
        .filter(|e| e.seq > judged.judged_for(&e.pci))
        .filter(|e| keep(&e.pci))
        .collect();
    let findings = check_xids(&result.xids, &result.snapshots);
    result.findings.extend(findings);
    result.findings.extend(signatures);
}

/// One journal line per read of a log larger than a read keeps.
fn note_skipped(source: &str, skipped: kernel_log::Skipped) {
    slurm_imex_core::logging::warn_to_journal(&format!(
        "kernel log {source} holds more than the {} MiB a read keeps: its oldest {} bytes \
         ({} lines) were left out and its newest records judged",
        kernel_log::MAX_LOG_BYTES >> 20,
        skipped.bytes,
        skipped.lines
    ));
}
