//! The NVLink fabric of one GPU: its registration state, status and health
//! as the fabric manager reports them, and a probe not done yet
//! (`super::super::fabric_wait`). Its links are `link`.

use super::{GpuFindings, Hook};
use crate::config::HealthConfig;
use crate::nvml::snapshot::Reading;

pub(super) fn fabric(f: &mut GpuFindings, cfg: &HealthConfig, _: Hook) {
    let Reading::Value(fabric) = &f.gpu.fabric else {
        return;
    };
    let mask = fabric.health_mask;
    if fabric.is_transitional() {
        not_done(f, fabric.state.as_str(), fabric.transitional_ms, cfg);
    } else if fabric.state != "COMPLETED" {
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

/// A probe NOT_STARTED or IN_PROGRESS: a warning while it has been seen so
/// for less than `[health] fabric_wait` (the prolog waited that long
/// already; `slurm-imex check` counts across its runs), a drain once it
/// lasts past it, and a drain when nobody waited (the epilog: after a job
/// the probe was done before it).
fn not_done(f: &mut GpuFindings, state: &str, seen_ms: Option<u64>, cfg: &HealthConfig) {
    let bound = cfg.fabric_wait;
    let bound_ms = u64::try_from(bound.0.as_millis()).unwrap_or(u64::MAX);
    let what = format!("fabric state {state} (fabric manager / NVLink training not done)");
    match seen_ms {
        None => f.drain(what),
        Some(ms) if ms >= bound_ms => f.drain(format!(
            "{what} for {}, past [health] fabric_wait = {bound}",
            seconds(ms),
        )),
        Some(ms) => f.warn(format!(
            "{what}, seen so for {}: the node drains if it stays so past [health] fabric_wait = \
             {bound}",
            seconds(ms),
        )),
    }
}

fn seconds(ms: u64) -> String {
    format!("{}.{} s", ms / 1000, ms % 1000 / 100)
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
        6 => parts.push("incorrect configuration: incompatible GPU firmware"),
        7 => parts.push("incorrect configuration: invalid location"),
        8 => parts.push("incorrect configuration: GPU state invalid"),
        _ => {}
    }
    // PARTITION_ASSIGNED (R595; 0 where the driver does not report it).
    if field(12, 2) == 2 {
        parts.push("no fabric partition assigned");
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(": {}", parts.join(", "))
    }
}
