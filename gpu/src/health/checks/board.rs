//! The board as the host sees it: compute processes left on it before a
//! job, hardware slowdown on an idle GPU, a PCIe link below its width, and
//! counters the driver would not give.

use super::{GpuFindings, Hook};
use crate::config::HealthConfig;
use crate::nvml::snapshot::Reading;

/// Throttle-reason bits that mean hardware trouble on an idle GPU
/// (HW slowdown, HW thermal slowdown, HW power brake).
const HW_SLOWDOWN_BITS: u64 = 0x8 | 0x40 | 0x80;

/// Only before a job: after one, its own processes may still be exiting.
pub(super) fn leftover_processes(f: &mut GpuFindings, _: &HealthConfig, hook: Hook) {
    if hook != Hook::Prolog {
        return;
    }
    if let Reading::Value(pids) = &f.gpu.compute_pids {
        if !pids.is_empty() {
            let list: Vec<String> = pids.iter().map(u32::to_string).collect();
            f.drain(format!(
                "compute processes still on the GPU before the job: pid {}",
                list.join(",")
            ));
        }
    }
}

/// Not after a job: a GPU that just worked hard may still be slowed down.
pub(super) fn hw_slowdown(f: &mut GpuFindings, _: &HealthConfig, hook: Hook) {
    if hook == Hook::Epilog {
        return;
    }
    if let Reading::Value(bits) = f.gpu.throttle_reasons {
        if bits & HW_SLOWDOWN_BITS != 0 {
            f.warn(format!(
                "hardware slowdown active on an idle GPU (reasons {bits:#x})"
            ));
        }
    }
}

pub(super) fn pcie_width(f: &mut GpuFindings, _: &HealthConfig, _: Hook) {
    if let Reading::Value(w) = f.gpu.pcie_width {
        if w.max > 0 && w.current < w.max {
            f.warn(format!("PCIe link x{} of x{}", w.current, w.max));
        }
    }
}

/// A counter the checks need but NVML failed to read (not NOT_SUPPORTED).
pub(super) fn nvml_read(f: &mut GpuFindings, _: &HealthConfig, _: Hook) {
    let gpu = f.gpu;
    for (what, failure) in [
        ("ECC counters", gpu.ecc.failure()),
        ("remapped rows", gpu.remapped_rows.failure()),
        ("fabric", gpu.fabric.failure()),
        ("recovery action", gpu.recovery_action.failure()),
    ] {
        if let Some(e) = failure {
            f.warn(format!("cannot read {what}: {e}"));
        }
    }
}
