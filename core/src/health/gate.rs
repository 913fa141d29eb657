//! The health gate: load NVML, read the chosen GPUs in parallel, read new
//! XIDs, run the checks. Every stage has its own time budget; a stage that
//! overruns becomes a drain finding naming the check and the GPU, and the
//! whole gate is capped by `[health] gate_timeout`.

use super::checks::{check_gpu, check_node, check_xids, Phase};
use super::{Finding, GpuRef, Severity};
use crate::config::Config;
use crate::gpu::{job_gpus, pci_gpu_count, GpuReader, GpuSnapshot, Stage};
use crate::xid::{self, XidEvent};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Budget for dlopen + nvmlInit.
const NVML_INIT_BUDGET: Duration = Duration::from_secs(2);

/// Which GPUs, and since when XIDs count.
pub struct GateRequest<'a> {
    pub phase: Phase,
    /// None: every GPU of the node.
    pub gpus: Option<&'a [u32]>,
    /// Per GPU (normalised PCI id) the last kmsg sequence already judged.
    pub xid_after: &'a BTreeMap<String, u64>,
}

#[derive(Debug, Clone)]
pub struct GateResult {
    pub findings: Vec<Finding>,
    pub snapshots: Vec<GpuSnapshot>,
    /// New XIDs on the checked GPUs (or on no known GPU).
    pub xids: Vec<XidEvent>,
    /// Highest kmsg sequence seen.
    pub kmsg_last_seq: Option<u64>,
    pub driver: Option<String>,
    /// NVML could not be loaded and no NVIDIA GPU is on the PCI bus:
    /// not a GPU node, nothing was checked.
    pub no_gpus: bool,
    pub elapsed: Duration,
}

enum Msg {
    Stage(u32, Stage),
    Done(u32, Box<GpuSnapshot>),
}

fn node_finding(check: &str, detail: String) -> Finding {
    Finding {
        check: check.into(),
        severity: Severity::Drain,
        gpu: None,
        detail,
    }
}

/// The job's GPU indexes this node does not have, as "4,5", if any.
fn missing_job_gpus(requested: Option<&[u32]>, count: u32) -> Option<String> {
    let missing: Vec<String> = requested?
        .iter()
        .filter(|i| **i >= count)
        .map(u32::to_string)
        .collect();
    (!missing.is_empty()).then(|| crate::text::summarize_list(&missing, 256))
}

pub fn run(cfg: &Config, req: &GateRequest) -> GateResult {
    let started = Instant::now();
    let deadline = started + cfg.health.gate_timeout.0;
    let mut result = GateResult {
        findings: Vec::new(),
        snapshots: Vec::new(),
        xids: Vec::new(),
        kmsg_last_seq: None,
        driver: None,
        no_gpus: false,
        elapsed: Duration::ZERO,
    };
    let pci_count = pci_gpu_count(&cfg.health.pci_devices);

    // dlopen + init, bounded: a wedged driver can hang nvmlInit.
    let (tx, rx) = mpsc::channel();
    let library = cfg.gpu.nvml_library.clone();
    std::thread::spawn(move || {
        let _ = tx.send(GpuReader::open(&library));
    });
    let reader = match rx
        .recv_timeout(NVML_INIT_BUDGET.min(deadline.saturating_duration_since(Instant::now())))
    {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            if pci_count == Some(0) {
                result.no_gpus = true;
            } else {
                result
                    .findings
                    .push(node_finding("nvml_init", e.to_string()));
            }
            result.elapsed = started.elapsed();
            return result;
        }
        Err(_) => {
            result.findings.push(node_finding(
                "nvml_init",
                format!("NVML init did not finish within {NVML_INIT_BUDGET:?}"),
            ));
            result.elapsed = started.elapsed();
            return result;
        }
    };
    let count = match reader.device_count() {
        Ok(c) => c,
        Err(e) => {
            result
                .findings
                .push(node_finding("gpu_count", e.to_string()));
            result.elapsed = started.elapsed();
            return result;
        }
    };
    result.driver = reader.driver_version();
    let gpus = job_gpus(req.gpus, count);
    if let Some(missing) = missing_job_gpus(req.gpus, count) {
        // Slurm will hand the job a GPU this node does not have: the job
        // would run without it. Slurm's GPU inventory (gres.conf) and the
        // node disagree, so the node drains until an admin reconciles them.
        result.findings.push(node_finding(
            "gpu_set",
            format!(
                "SLURM_JOB_GPUS lists GPU index(es) {missing} but NVML sees {count} GPU(s) \
                 (indexes 0-{}): a GPU is missing or gres.conf is wrong",
                count.saturating_sub(1)
            ),
        ));
    }

    // One reader thread per GPU; they report each stage as it starts.
    let (tx, rx) = mpsc::channel();
    for &index in &gpus {
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
    drop(tx);

    // Kernel log, while the GPUs are being read.
    let since = req.xid_after.values().copied().min().unwrap_or(0);
    let kmsg = xid::read_since(&cfg.gpu.kmsg, since);

    let mut current: BTreeMap<u32, (Stage, Instant)> = gpus
        .iter()
        .map(|i| (*i, (Stage::Identity, Instant::now())))
        .collect();
    let mut done: BTreeMap<u32, GpuSnapshot> = BTreeMap::new();
    while !current.is_empty() {
        let now = Instant::now();
        // The earliest moment some GPU's current stage runs out of budget.
        let (next_gpu, (stage, since)) = current
            .iter()
            .min_by_key(|(_, (stage, since))| *since + stage.budget())
            .map(|(g, s)| (*g, *s))
            .expect("non-empty");
        let stage_deadline = (since + stage.budget()).min(deadline);
        if now >= stage_deadline {
            let limit = if stage_deadline == deadline {
                cfg.health.gate_timeout.0
            } else {
                stage.budget()
            };
            result.findings.push(Finding {
                check: stage.check_name().into(),
                severity: Severity::Drain,
                gpu: Some(GpuRef {
                    index: next_gpu,
                    serial: String::new(),
                    uuid: String::new(),
                }),
                detail: format!("check timed out after {limit:?} (NVML call hung)"),
            });
            current.remove(&next_gpu);
            continue;
        }
        match rx.recv_timeout(stage_deadline - now) {
            Ok(Msg::Stage(g, s)) => {
                if let Some(c) = current.get_mut(&g) {
                    *c = (s, Instant::now());
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
    result.snapshots = done.into_values().collect();

    for s in &result.snapshots {
        result.findings.extend(check_gpu(s, &cfg.health, req.phase));
    }
    result.findings.extend(check_node(
        &cfg.health,
        count,
        pci_count,
        result.driver.as_deref(),
        &result.snapshots,
    ));
    match kmsg {
        Ok((events, last)) => {
            result.kmsg_last_seq = Some(last);
            // A job's GPUs only; a whole-node check keeps every XID, also
            // those of GPUs NVML no longer lists (fallen off the bus).
            let checked: Vec<&str> = result.snapshots.iter().map(|s| s.pci.as_str()).collect();
            result.xids = events
                .into_iter()
                .filter(|e| e.seq > req.xid_after.get(&e.pci).copied().unwrap_or(since))
                .filter(|e| req.gpus.is_none() || checked.contains(&e.pci.as_str()))
                .collect();
            result
                .findings
                .extend(check_xids(&result.xids, &result.snapshots));
        }
        Err(e) => result.findings.push(Finding {
            check: "xid".into(),
            severity: Severity::Warn,
            gpu: None,
            detail: format!(
                "cannot read the kernel log {} ([gpu] kmsg): {e}",
                cfg.gpu.kmsg.display()
            ),
        }),
    }
    result.elapsed = started.elapsed();
    result
}
