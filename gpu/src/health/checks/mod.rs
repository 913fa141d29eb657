//! The health checks themselves: pure functions from GPU snapshots, new XID
//! events and the config to findings (docs/gpu-health.md).
//! NOT_SUPPORTED readings never produce a finding.
//!
//! One GPU is checked by a fixed list of steps, one per file by subject:
//! `memory` (recovery action, row remapping, retired pages, ECC), `fabric`
//! (NVLink fabric state, status and health), `link` (NVLinks down), `modes`
//! (ECC, MIG, persistence, infoROM, accounting mode), `board` (leftover processes, slowdown,
//! PCIe width, unreadable counters). `node` holds the node-wide checks (GPU
//! count, cliques), `xids` the kernel's XID events and `signatures` the
//! driver's other kernel-log lines (`xid::signature`). The node's IMEX
//! daemon is checked beside the check hook (`slurm_imex_hooks::imex_check`).

mod board;
mod fabric;
mod link;
mod memory;
mod modes;
mod node;
mod signatures;
mod xids;

pub use node::check_node;
pub(crate) use signatures::detail as signature_detail;
pub use signatures::{check_signatures, LogLines};
pub use xids::check_xids;

use super::check_names::GPU_LOST;
use super::{Finding, GpuRef, Severity};
use crate::config::HealthConfig;
use crate::nvml::snapshot::GpuSnapshot;

/// DCGM r1 limits (DcgmGPUHardwareLimits.h).
pub const MAX_RETIRED_PAGES: u64 = 63;
pub const MAX_UNCORRECTABLE_REMAPS: u64 = 512;

/// When the checks run: leftover processes only matter before a job.
pub use slurm_imex_core::hook::Hook;

/// The findings about one GPU, as its checks add them; each is tagged with
/// the name of the check that found it (`check`, set from [`GPU_CHECKS`]),
/// which is the tag of the drain reason (`imex-health: <check> …`).
struct GpuFindings<'a> {
    gpu: &'a GpuSnapshot,
    check: &'static str,
    found: Vec<Finding>,
}

impl GpuFindings<'_> {
    fn add(&mut self, severity: Severity, detail: String) {
        self.found.push(Finding {
            check: self.check.into(),
            severity,
            gpu: Some(gpu_ref(self.gpu)),
            detail,
        });
    }

    fn drain(&mut self, detail: String) {
        self.add(Severity::Drain, detail);
    }

    fn warn(&mut self, detail: String) {
        self.add(Severity::Warn, detail);
    }
}

/// One step of a GPU's checks.
type GpuCheck = fn(&mut GpuFindings, &HealthConfig, Hook);

/// The steps, each under the one name that is its function's and its
/// findings' tag (what drain reasons, the job database, `slurm-imex
/// history` and alert rules say), in the order their findings are reported
/// (the first drain finding names the drain reason).
const GPU_CHECKS: [(&str, GpuCheck); 15] = [
    (RECOVERY_ACTION, memory::recovery_action),
    ("row_remap", memory::row_remap),
    ("retired_pages", memory::retired_pages),
    ("ecc_dbe", memory::ecc_dbe),
    ("fabric", fabric::fabric),
    ("nvlink", link::nvlink),
    ("leftover_processes", board::leftover_processes),
    ("ecc_mode", modes::ecc_mode),
    ("mig_mode", modes::mig_mode),
    ("persistence", modes::persistence),
    ("inforom", modes::inforom),
    ("accounting", modes::accounting),
    ("hw_slowdown", board::hw_slowdown),
    ("pcie_width", board::pcie_width),
    ("nvml_read", board::nvml_read),
];

/// The step that reads the driver's recovery action (`crate::recovery`),
/// whose drain reasons `slurm_imex_hooks` reads back.
pub const RECOVERY_ACTION: &str = "recovery_action";

/// The names of a GPU's steps (`GPU_CHECKS`), in order.
pub fn gpu_check_names() -> impl Iterator<Item = &'static str> {
    GPU_CHECKS.into_iter().map(|(name, _)| name)
}

/// Checks of one GPU.
pub fn check_gpu(gpu: &GpuSnapshot, cfg: &HealthConfig, hook: Hook) -> Vec<Finding> {
    let mut findings = GpuFindings {
        gpu,
        check: GPU_LOST,
        found: Vec::new(),
    };
    if gpu.lost {
        findings.drain("GPU fell off the bus (NVML_ERROR_GPU_IS_LOST)".into());
        return findings.found;
    }
    for (name, check) in GPU_CHECKS {
        findings.check = name;
        check(&mut findings, cfg, hook);
    }
    findings.found
}

fn gpu_ref(s: &GpuSnapshot) -> GpuRef {
    GpuRef {
        index: s.index,
        serial: s.serial.clone(),
        uuid: s.uuid.clone(),
    }
}

#[cfg(test)]
mod tests;
