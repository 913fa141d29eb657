//! The health checks themselves: pure functions from GPU snapshots, new XID
//! events and the config to findings (docs/gpu-health.md).
//! NOT_SUPPORTED readings never produce a finding.
//!
//! One GPU is checked by a fixed list of steps, one per file by subject:
//! `memory` (recovery action, row remapping, retired pages, ECC), `fabric`
//! (NVLink fabric state, status and health), `link` (NVLinks down), `modes`
//! (ECC, MIG, persistence, infoROM), `board` (leftover processes, slowdown,
//! PCIe width, unreadable counters). `node` holds the node-wide checks (GPU
//! count, cliques), `xids` the kernel's XID events and `imex` the node's
//! IMEX daemon.

mod board;
mod fabric;
mod imex;
mod link;
mod memory;
mod modes;
mod node;
mod xids;

pub use imex::check_imex;
pub use node::check_node;
pub use xids::check_xids;

use super::{Finding, GpuRef, Severity};
use crate::nvml::snapshot::GpuSnapshot;
use slurm_imex_core::config::HealthConfig;

/// DCGM r1 limits (DcgmGPUHardwareLimits.h).
pub const MAX_RETIRED_PAGES: u64 = 63;
pub const MAX_UNCORRECTABLE_REMAPS: u64 = 512;

/// When the checks run: leftover processes only matter before a job.
pub use slurm_imex_core::hook::Hook;

/// The findings about one GPU, as its checks add them.
struct GpuFindings<'a> {
    gpu: &'a GpuSnapshot,
    found: Vec<Finding>,
}

impl GpuFindings<'_> {
    fn add(&mut self, check: &str, severity: Severity, detail: String) {
        self.found.push(Finding {
            check: check.into(),
            severity,
            gpu: Some(gpu_ref(self.gpu)),
            detail,
        });
    }

    fn drain(&mut self, check: &str, detail: String) {
        self.add(check, Severity::Drain, detail);
    }

    fn warn(&mut self, check: &str, detail: String) {
        self.add(check, Severity::Warn, detail);
    }
}

/// One step of a GPU's checks.
type GpuCheck = fn(&mut GpuFindings, &HealthConfig, Hook);

/// The steps, in the order their findings are reported (the first drain
/// finding names the drain reason).
const GPU_CHECKS: [GpuCheck; 13] = [
    memory::recovery_action,
    memory::row_remapping,
    memory::retired_pages,
    memory::double_bit_ecc,
    fabric::fabric_state,
    link::nvlinks_down,
    board::leftover_processes,
    modes::ecc_mode,
    modes::mig_mode,
    modes::persistence,
    modes::inforom,
    board::hardware_slowdown,
    board::pcie_width,
];

/// Checks of one GPU.
pub fn check_gpu(gpu: &GpuSnapshot, cfg: &HealthConfig, hook: Hook) -> Vec<Finding> {
    let mut findings = GpuFindings {
        gpu,
        found: Vec::new(),
    };
    if gpu.lost {
        findings.drain(
            "gpu_lost",
            "GPU fell off the bus (NVML_ERROR_GPU_IS_LOST)".into(),
        );
        return findings.found;
    }
    for check in GPU_CHECKS {
        check(&mut findings, cfg, hook);
    }
    board::unreadable_counters(&mut findings);
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
