//! The NVLink fabric of one GPU: its registration state, status and health
//! as the fabric manager reports them. Its links are `link`.

use super::{GpuFindings, Hook};
use crate::config::HealthConfig;
use crate::nvml::snapshot::Reading;

pub(super) fn fabric(f: &mut GpuFindings, _: &HealthConfig, _: Hook) {
    let Reading::Value(fabric) = &f.gpu.fabric else {
        return;
    };
    let mask = fabric.health_mask;
    if fabric.state != "COMPLETED" {
        f.drain(format!(
            "fabric state {} (fabric manager / NVLink training not done)",
            fabric.state
        ));
    } else if fabric.status != 0 {
        f.drain(format!(
            "fabric registration failed with NVML status {}",
            fabric.status
        ));
    } else if fabric.health_summary == "UNHEALTHY" {
        let why = describe_health_mask(mask);
        f.drain(format!("fabric health UNHEALTHY (mask {mask:#x}{why})"));
    } else if fabric.health_summary == "LIMITED_CAPACITY" {
        let why = describe_health_mask(mask);
        f.warn(format!(
            "fabric health LIMITED_CAPACITY (mask {mask:#x}{why})"
        ));
    }
}

/// The fabric health mask's fields (nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*),
/// as words after a colon, or nothing when no field is set.
fn describe_health_mask(mask: u32) -> String {
    let field = |shift: u32, width: u32| (mask >> shift) & ((1 << width.min(4)) - 1);
    let mut parts = Vec::new();
    if field(0, 2) == 1 {
        parts.push("degraded bandwidth");
    }
    if field(2, 2) == 1 {
        parts.push("route recovery in progress");
    }
    if field(4, 2) == 1 {
        parts.push("route unhealthy");
    }
    if field(6, 2) == 1 {
        parts.push("access timeout recovery");
    }
    match field(8, 4) {
        2 => parts.push("incorrect configuration: system GUID"),
        3 => parts.push("incorrect configuration: chassis serial"),
        4 => parts.push("incorrect configuration: no partition"),
        5 => parts.push("incorrect configuration: insufficient NVLinks"),
        _ => {}
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(": {}", parts.join(", "))
    }
}
