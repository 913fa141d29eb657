//! The health checks themselves: pure functions from GPU snapshots, new XID
//! events and the config to findings (reference/gpu-health.md (a)).
//! NOT_SUPPORTED readings never produce a finding.

use super::{Finding, GpuRef, Severity};
use crate::config::{HealthConfig, MigPolicy};
use crate::gpu::snapshot::{recovery_action_name, GpuSnapshot, Reading};
use crate::xid::{is_drain_class, Bucket, XidEvent};

/// DCGM r1 limits (DcgmGPUHardwareLimits.h).
pub const MAX_RETIRED_PAGES: u64 = 63;
pub const MAX_UNCORRECTABLE_REMAPS: u64 = 512;

/// Throttle-reason bits that mean hardware trouble on an idle GPU
/// (HW slowdown, HW thermal slowdown, HW power brake).
const HW_SLOWDOWN_BITS: u64 = 0x8 | 0x40 | 0x80;

/// Where the checks run: leftover processes only matter before a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Prolog,
    Epilog,
    Check,
}

fn gpu_ref(s: &GpuSnapshot) -> Option<GpuRef> {
    Some(GpuRef {
        index: s.index,
        serial: s.serial.clone(),
        uuid: s.uuid.clone(),
    })
}

fn push(out: &mut Vec<Finding>, check: &str, severity: Severity, s: &GpuSnapshot, detail: String) {
    out.push(Finding {
        check: check.into(),
        severity,
        gpu: gpu_ref(s),
        detail,
    });
}

/// Checks of one GPU.
pub fn check_gpu(s: &GpuSnapshot, cfg: &HealthConfig, phase: Phase) -> Vec<Finding> {
    use Severity::*;
    let mut out = Vec::new();
    if s.lost {
        push(
            &mut out,
            "gpu_lost",
            Drain,
            s,
            "GPU fell off the bus (NVML_ERROR_GPU_IS_LOST)".into(),
        );
        return out;
    }
    if let Reading::Value(a) = s.recovery_action {
        if a != 0 {
            push(
                &mut out,
                "recovery_action",
                Drain,
                s,
                format!(
                    "driver asks for recovery action {}",
                    recovery_action_name(a)
                ),
            );
        }
    }
    if let Reading::Value(r) = &s.remapped_rows {
        if r.failure {
            push(
                &mut out,
                "row_remap",
                Drain,
                s,
                "row remapping failed: RMA candidate".into(),
            );
        } else if r.uncorrectable >= MAX_UNCORRECTABLE_REMAPS {
            push(
                &mut out,
                "row_remap",
                Drain,
                s,
                format!(
                    "{} uncorrectable remapped rows: RMA candidate",
                    r.uncorrectable
                ),
            );
        } else if r.pending {
            push(
                &mut out,
                "row_remap",
                Drain,
                s,
                "row remap pending: GPU reset needed".into(),
            );
        }
    }
    if let Reading::Value(p) = &s.retired_pages {
        if p.pending {
            push(
                &mut out,
                "retired_pages",
                Drain,
                s,
                "page retirement pending: GPU reset needed".into(),
            );
        } else if p.sbe + p.dbe >= MAX_RETIRED_PAGES {
            push(
                &mut out,
                "retired_pages",
                Drain,
                s,
                format!(
                    "{} retired pages (limit {MAX_RETIRED_PAGES})",
                    p.sbe + p.dbe
                ),
            );
        }
    }
    if let Reading::Value(e) = &s.ecc {
        if e.volatile_dbe > 0 {
            push(
                &mut out,
                "ecc_dbe",
                Drain,
                s,
                format!("{} volatile double-bit ECC errors", e.volatile_dbe),
            );
        }
    }
    if let Reading::Value(f) = &s.fabric {
        if f.state != "COMPLETED" {
            push(
                &mut out,
                "fabric",
                Drain,
                s,
                format!(
                    "fabric state {} (fabric manager / NVLink training not done)",
                    f.state
                ),
            );
        } else if f.status != 0 {
            push(
                &mut out,
                "fabric",
                Drain,
                s,
                format!("fabric registration failed with NVML status {}", f.status),
            );
        } else if f.health_summary == "UNHEALTHY" {
            push(
                &mut out,
                "fabric",
                Drain,
                s,
                format!(
                    "fabric health UNHEALTHY (mask {:#x}{})",
                    f.health_mask,
                    describe_health_mask(f.health_mask)
                ),
            );
        } else if f.health_summary == "LIMITED_CAPACITY" {
            push(
                &mut out,
                "fabric",
                Warn,
                s,
                format!(
                    "fabric health LIMITED_CAPACITY (mask {:#x}{})",
                    f.health_mask,
                    describe_health_mask(f.health_mask)
                ),
            );
        }
    }
    if let Reading::Value(links) = &s.nvlink {
        let down: Vec<String> = links
            .iter()
            .filter(|l| !l.active)
            .map(|l| l.link.to_string())
            .collect();
        if !down.is_empty() {
            push(
                &mut out,
                "nvlink",
                Drain,
                s,
                format!("NVLink(s) {} down of {}", down.join(","), links.len()),
            );
        }
    }
    if phase == Phase::Prolog {
        if let Reading::Value(pids) = &s.compute_pids {
            if !pids.is_empty() {
                let list: Vec<String> = pids.iter().map(u32::to_string).collect();
                push(
                    &mut out,
                    "leftover_processes",
                    Drain,
                    s,
                    format!(
                        "compute processes still on the GPU before the job: pid {}",
                        list.join(",")
                    ),
                );
            }
        }
    }
    if let (true, Reading::Value(false)) = (cfg.require_ecc, &s.ecc_enabled) {
        push(
            &mut out,
            "ecc_mode",
            Drain,
            s,
            "ECC is disabled (require_ecc = true)".into(),
        );
    }
    if let Reading::Value(mig) = s.mig_enabled {
        let wrong = match cfg.mig {
            MigPolicy::Any => false,
            MigPolicy::On => !mig,
            MigPolicy::Off => mig,
        };
        if wrong {
            push(
                &mut out,
                "mig_mode",
                Drain,
                s,
                format!(
                    "MIG is {} but [health] mig = {:?}",
                    if mig { "on" } else { "off" },
                    cfg.mig
                )
                .to_lowercase(),
            );
        }
    }
    if let Reading::Value(false) = s.persistence {
        let sev = if cfg.require_persistence { Drain } else { Warn };
        push(
            &mut out,
            "persistence",
            sev,
            s,
            "persistence mode is off".into(),
        );
    }
    if let Reading::Value(false) = s.inforom_valid {
        push(&mut out, "inforom", Warn, s, "infoROM is corrupted".into());
    }
    if phase != Phase::Epilog {
        if let Reading::Value(bits) = s.throttle_reasons {
            if bits & HW_SLOWDOWN_BITS != 0 {
                push(
                    &mut out,
                    "hw_slowdown",
                    Warn,
                    s,
                    format!("hardware slowdown active on an idle GPU (reasons {bits:#x})"),
                );
            }
        }
    }
    if let Reading::Value(w) = s.pcie_width {
        if w.max > 0 && w.current < w.max {
            push(
                &mut out,
                "pcie_width",
                Warn,
                s,
                format!("PCIe link x{} of x{}", w.current, w.max),
            );
        }
    }
    for (what, failure) in [
        ("ECC counters", s.ecc.failure()),
        ("remapped rows", s.remapped_rows.failure()),
        ("fabric", s.fabric.failure()),
        ("recovery action", s.recovery_action.failure()),
    ] {
        if let Some(e) = failure {
            push(
                &mut out,
                "nvml_read",
                Warn,
                s,
                format!("cannot read {what}: {e}"),
            );
        }
    }
    out
}

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

/// Node-level checks: GPU count against config and PCI, driver, and that
/// every GPU of an NVLink domain reports the same clique.
pub fn check_node(
    cfg: &HealthConfig,
    nvml_count: u32,
    pci_count: Option<u32>,
    driver: Option<&str>,
    snapshots: &[GpuSnapshot],
) -> Vec<Finding> {
    let mut out = Vec::new();
    let node = |check: &str, detail: String| Finding {
        check: check.into(),
        severity: Severity::Drain,
        gpu: None,
        detail,
    };
    if cfg.expected_gpus > 0 && nvml_count != cfg.expected_gpus {
        out.push(node(
            "gpu_count",
            format!(
                "NVML sees {nvml_count} GPUs, expected_gpus = {}",
                cfg.expected_gpus
            ),
        ));
    }
    if let Some(pci) = pci_count {
        if pci > nvml_count {
            out.push(node("gpu_count", format!("NVML sees {nvml_count} GPUs but the PCI bus has {pci}: a GPU fell off the bus or failed to initialise")));
        }
    }
    if !cfg.expected_driver.is_empty() {
        match driver {
            Some(d) if d == cfg.expected_driver => {}
            other => out.push(node(
                "driver",
                format!(
                    "driver {} but expected_driver = {}",
                    other.unwrap_or("unknown"),
                    cfg.expected_driver
                ),
            )),
        }
    }
    let cliques: std::collections::BTreeSet<(String, u32)> = snapshots
        .iter()
        .filter_map(|s| s.fabric.value())
        .filter(|f| f.state == "COMPLETED")
        .map(|f| (f.cluster_uuid.clone(), f.clique_id))
        .collect();
    if cliques.len() > 1 {
        let list: Vec<String> = cliques.iter().map(|(u, c)| format!("{u}.{c}")).collect();
        out.push(node(
            "fabric_clique",
            format!("GPUs report different NVLink cliques: {}", list.join(" ")),
        ));
    }
    out
}

/// XIDs logged since the last checkpoint on the given GPUs.
pub fn check_xids(events: &[XidEvent], snapshots: &[GpuSnapshot]) -> Vec<Finding> {
    let mut out = Vec::new();
    for e in events {
        let gpu = snapshots.iter().find(|s| s.pci == e.pci);
        let severity = if is_drain_class(e.xid) {
            Severity::Drain
        } else if e.bucket == Bucket::Ignore {
            continue;
        } else {
            Severity::Warn
        };
        out.push(Finding {
            check: "xid".into(),
            severity,
            gpu: gpu.and_then(gpu_ref),
            detail: format!(
                "XID {} ({}) on {}: {}",
                e.xid,
                e.bucket.as_str(),
                e.pci,
                e.message
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::snapshot::*;

    fn healthy() -> GpuSnapshot {
        GpuSnapshot {
            index: 2,
            uuid: "GPU-2".into(),
            serial: "1650924060002".into(),
            pci: "0000:1b:00".into(),
            ecc: Reading::Value(EccCounts::default()),
            retired_pages: Reading::Value(RetiredPages::default()),
            remapped_rows: Reading::Value(RemappedRows::default()),
            recovery_action: Reading::Value(0),
            fabric: Reading::Value(FabricInfo {
                state: "COMPLETED".into(),
                status: 0,
                clique_id: 1,
                cluster_uuid: "u".into(),
                health_mask: 0,
                health_summary: "HEALTHY".into(),
            }),
            nvlink: Reading::Value(vec![LinkState {
                link: 0,
                active: true,
                ..Default::default()
            }]),
            compute_pids: Reading::Value(vec![]),
            persistence: Reading::Value(true),
            ecc_enabled: Reading::Value(true),
            mig_enabled: Reading::Value(false),
            inforom_valid: Reading::Value(true),
            throttle_reasons: Reading::Value(0),
            pcie_width: Reading::Value(PcieWidth {
                current: 16,
                max: 16,
            }),
            ..Default::default()
        }
    }

    fn checks(s: &GpuSnapshot) -> Vec<(String, Severity)> {
        check_gpu(s, &HealthConfig::default(), Phase::Prolog)
            .into_iter()
            .map(|f| (f.check, f.severity))
            .collect()
    }

    #[test]
    fn healthy_gpu_has_no_findings() {
        assert!(check_gpu(&healthy(), &HealthConfig::default(), Phase::Prolog).is_empty());
    }

    #[test]
    fn not_supported_is_never_a_finding() {
        let s = GpuSnapshot {
            index: 0,
            uuid: "GPU-0".into(),
            ..Default::default()
        };
        assert!(check_gpu(&s, &HealthConfig::default(), Phase::Prolog).is_empty());
    }

    #[test]
    fn each_drain_check_fires() {
        let d = |f: &dyn Fn(&mut GpuSnapshot), check: &str| {
            let mut s = healthy();
            f(&mut s);
            let found = checks(&s);
            assert!(
                found.contains(&(check.to_string(), Severity::Drain)),
                "{check}: {found:?}"
            );
        };
        d(&|s| s.lost = true, "gpu_lost");
        d(
            &|s| s.recovery_action = Reading::Value(4),
            "recovery_action",
        );
        d(
            &|s| {
                s.remapped_rows = Reading::Value(RemappedRows {
                    pending: true,
                    ..Default::default()
                })
            },
            "row_remap",
        );
        d(
            &|s| {
                s.remapped_rows = Reading::Value(RemappedRows {
                    failure: true,
                    ..Default::default()
                })
            },
            "row_remap",
        );
        d(
            &|s| {
                s.remapped_rows = Reading::Value(RemappedRows {
                    uncorrectable: 512,
                    ..Default::default()
                })
            },
            "row_remap",
        );
        d(
            &|s| {
                s.retired_pages = Reading::Value(RetiredPages {
                    pending: true,
                    ..Default::default()
                })
            },
            "retired_pages",
        );
        d(
            &|s| {
                s.retired_pages = Reading::Value(RetiredPages {
                    sbe: 60,
                    dbe: 3,
                    pending: false,
                })
            },
            "retired_pages",
        );
        d(
            &|s| {
                s.ecc = Reading::Value(EccCounts {
                    volatile_dbe: 1,
                    ..Default::default()
                })
            },
            "ecc_dbe",
        );
        d(
            &|s| {
                s.fabric = Reading::Value(FabricInfo {
                    state: "IN_PROGRESS".into(),
                    ..Default::default()
                })
            },
            "fabric",
        );
        d(
            &|s| {
                if let Reading::Value(f) = &mut s.fabric {
                    f.status = 0x19
                }
            },
            "fabric",
        );
        d(
            &|s| {
                if let Reading::Value(f) = &mut s.fabric {
                    f.health_summary = "UNHEALTHY".into()
                }
            },
            "fabric",
        );
        d(
            &|s| {
                s.nvlink = Reading::Value(vec![
                    LinkState {
                        link: 0,
                        active: true,
                        ..Default::default()
                    },
                    LinkState {
                        link: 1,
                        active: false,
                        ..Default::default()
                    },
                ])
            },
            "nvlink",
        );
        d(
            &|s| s.compute_pids = Reading::Value(vec![4242]),
            "leftover_processes",
        );
        d(&|s| s.ecc_enabled = Reading::Value(false), "ecc_mode");
    }

    #[test]
    fn limits_are_exclusive_below_and_warnings_do_not_drain() {
        let mut s = healthy();
        s.remapped_rows = Reading::Value(RemappedRows {
            uncorrectable: 511,
            correctable: 9,
            ..Default::default()
        });
        s.retired_pages = Reading::Value(RetiredPages {
            sbe: 62,
            dbe: 0,
            pending: false,
        });
        assert!(checks(&s).is_empty());
        s.persistence = Reading::Value(false);
        s.inforom_valid = Reading::Value(false);
        s.throttle_reasons = Reading::Value(0x40);
        s.pcie_width = Reading::Value(PcieWidth {
            current: 8,
            max: 16,
        });
        if let Reading::Value(f) = &mut s.fabric {
            f.health_summary = "LIMITED_CAPACITY".into();
            f.health_mask = 5 << 8;
        }
        let found = check_gpu(&s, &HealthConfig::default(), Phase::Prolog);
        assert_eq!(found.len(), 5, "{found:?}");
        assert!(found.iter().all(|f| f.severity == Severity::Warn));
        assert!(found
            .iter()
            .any(|f| f.detail.contains("insufficient NVLinks")));
        let strict = HealthConfig {
            require_persistence: true,
            ..Default::default()
        };
        assert!(check_gpu(&s, &strict, Phase::Prolog)
            .iter()
            .any(|f| f.check == "persistence" && f.severity == Severity::Drain));
    }

    #[test]
    fn leftover_processes_only_before_a_job() {
        let mut s = healthy();
        s.compute_pids = Reading::Value(vec![7]);
        assert!(check_gpu(&s, &HealthConfig::default(), Phase::Epilog).is_empty());
    }

    #[test]
    fn mig_policy() {
        let mut s = healthy();
        s.mig_enabled = Reading::Value(true);
        assert!(check_gpu(&s, &HealthConfig::default(), Phase::Check).is_empty());
        let off = HealthConfig {
            mig: MigPolicy::Off,
            ..Default::default()
        };
        assert_eq!(check_gpu(&s, &off, Phase::Check)[0].check, "mig_mode");
    }

    #[test]
    fn node_checks() {
        let cfg = HealthConfig {
            expected_gpus: 8,
            expected_driver: "580.95.05".into(),
            ..Default::default()
        };
        let f = check_node(&cfg, 7, Some(8), Some("580.95.05"), &[]);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f[1].detail.contains("PCI bus has 8"));
        assert!(
            check_node(&cfg, 8, Some(8), Some("580.95.05"), &[healthy(), healthy()]).is_empty()
        );
        assert_eq!(
            check_node(&cfg, 8, None, Some("570.00"), &[])[0].check,
            "driver"
        );
        let mut other = healthy();
        if let Reading::Value(f) = &mut other.fabric {
            f.clique_id = 2;
        }
        assert_eq!(
            check_node(&cfg, 8, Some(8), Some("580.95.05"), &[healthy(), other])[0].check,
            "fabric_clique"
        );
    }

    #[test]
    fn xids_are_attributed_and_bucketed() {
        let s = healthy();
        let ev = |xid, pci: &str| {
            crate::xid::parse_line(
                &format!("NVRM: Xid (PCI:{pci}): {xid}, pid=1, name=x, msg"),
                1,
            )
            .unwrap()
        };
        let f = check_xids(
            &[
                ev(79, "0000:1b:00"),
                ev(13, "0000:1b:00"),
                ev(43, "0000:1b:00"),
                ev(119, "0000:99:00"),
            ],
            &[s],
        );
        assert_eq!(f.len(), 3);
        assert_eq!(
            (f[0].severity, f[0].gpu.as_ref().unwrap().index),
            (Severity::Drain, 2)
        );
        assert!(f[0].detail.contains("XID 79 (REBOOT)"));
        assert_eq!(f[1].severity, Severity::Warn);
        assert_eq!(f[2].severity, Severity::Drain);
        assert!(f[2].gpu.is_none());
    }
}
