//! The checks against hand-made snapshots: each drain fires, limits hold,
//! NOT_SUPPORTED stays silent, phases and policies apply.

use super::*;
use crate::config::MigPolicy;
use crate::nvml::snapshot::*;
use crate::xid::checkpoint::Checkpoint;
use crate::xid::log::Numbering;

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
            ..Default::default()
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
    check_gpu(s, &HealthConfig::default(), Hook::Prolog)
        .into_iter()
        .map(|f| (f.check, f.severity))
        .collect()
}

#[test]
fn healthy_gpu_has_no_findings() {
    assert!(check_gpu(&healthy(), &HealthConfig::default(), Hook::Prolog).is_empty());
}

#[test]
fn not_supported_is_never_a_finding() {
    let s = GpuSnapshot {
        index: 0,
        uuid: "GPU-0".into(),
        ..Default::default()
    };
    assert!(check_gpu(&s, &HealthConfig::default(), Hook::Prolog).is_empty());
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
    let found = check_gpu(&s, &HealthConfig::default(), Hook::Prolog);
    assert_eq!(found.len(), 5, "{found:?}");
    assert!(found.iter().all(|f| f.severity == Severity::Warn));
    assert!(found
        .iter()
        .any(|f| f.detail.contains("insufficient NVLinks")));
    let strict = HealthConfig {
        require_persistence: true,
        ..Default::default()
    };
    assert!(check_gpu(&s, &strict, Hook::Prolog)
        .iter()
        .any(|f| f.check == "persistence" && f.severity == Severity::Drain));
}

#[test]
fn leftover_processes_only_before_a_job() {
    let mut s = healthy();
    s.compute_pids = Reading::Value(vec![7]);
    assert!(check_gpu(&s, &HealthConfig::default(), Hook::Epilog).is_empty());
}

#[test]
fn mig_policy() {
    let mut s = healthy();
    s.mig_enabled = Reading::Value(true);
    assert!(check_gpu(&s, &HealthConfig::default(), Hook::Check).is_empty());
    let off = HealthConfig {
        mig: MigPolicy::Off,
        ..Default::default()
    };
    assert_eq!(check_gpu(&s, &off, Hook::Check)[0].check, "mig_mode");
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
    assert!(check_node(&cfg, 8, Some(8), Some("580.95.05"), &[healthy(), healthy()]).is_empty());
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

#[test]
fn every_recovery_action_is_named_and_only_recover_imex_domain_spares_the_node() {
    let found = |action: u64, hook: Hook| {
        let mut s = healthy();
        s.recovery_action = Reading::Value(action);
        check_gpu(&s, &HealthConfig::default(), hook)
    };
    // RECOVER_IMEX_DOMAIN (R595): said, never a drain, at any hook.
    for hook in [Hook::Prolog, Hook::Epilog, Hook::Check] {
        let f = found(5, hook);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            (f[0].check.as_str(), f[0].severity),
            ("recovery_action", Severity::Warn)
        );
        assert!(f[0].reason().starts_with(
            "imex-health: recovery_action gpu2 1650924060002: driver asks for recovery action \
             RECOVER_IMEX_DOMAIN (5): the GPU's IMEX domain must be restored"
        ));
    }
    // BUS_RESET and SYSTEM_REBOOT (R615) drain, naming what to do; a value
    // newer than this release by its number.
    for (action, says) in [
        (6, "BUS_RESET (6): reset the GPU's PCIe bus"),
        (7, "SYSTEM_REBOOT (7): reboot the system"),
        (8, "8, unknown to this slurm-imex: "),
        (1, "GPU_RESET (1): reset the GPU"),
    ] {
        let f = found(action, Hook::Check);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Drain, "{action}");
        assert!(
            f[0].detail
                .starts_with(&format!("driver asks for recovery action {says}")),
            "{}",
            f[0].detail
        );
    }
    assert!(found(0, Hook::Check).is_empty());
}

#[test]
fn a_fabric_probe_not_done_drains_only_past_the_wait() {
    let cfg = HealthConfig::default(); // fabric_wait = 30s
    let judged = |state: &str, seen_ms: Option<u64>| {
        let mut s = healthy();
        if let Reading::Value(f) = &mut s.fabric {
            f.state = state.into();
            f.transitional_ms = seen_ms;
        }
        check_gpu(&s, &cfg, Hook::Check)
            .into_iter()
            .map(|f| (f.severity, f.detail))
            .collect::<Vec<_>>()
    };
    // A first look (0 s), and one within the bound: a warning.
    for state in ["IN_PROGRESS", "NOT_STARTED"] {
        let f = judged(state, Some(0));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].0, Severity::Warn, "{f:?}");
        assert!(f[0].1.contains(&format!("fabric state {state}")), "{f:?}");
        assert!(f[0].1.ends_with("past [health] fabric_wait = 30s"), "{f:?}");
    }
    assert_eq!(judged("IN_PROGRESS", Some(29_999))[0].0, Severity::Warn);
    // Past it: a drain naming how long.
    let f = judged("IN_PROGRESS", Some(95_000));
    assert_eq!(f[0].0, Severity::Drain);
    assert!(
        f[0].1
            .ends_with("for 95.0 s, past [health] fabric_wait = 30s"),
        "{f:?}"
    );
    // Nobody waited (the epilog): a drain, as before.
    assert_eq!(judged("IN_PROGRESS", None)[0].0, Severity::Drain);
    // Completed after a wait: nothing to say.
    assert!(judged("COMPLETED", Some(10_200)).is_empty());
    // fabric_wait = 0: judged at once.
    let at_once = HealthConfig {
        fabric_wait: slurm_imex_core::config::HumanDuration(std::time::Duration::ZERO),
        ..HealthConfig::default()
    };
    let mut s = healthy();
    if let Reading::Value(f) = &mut s.fabric {
        f.state = "IN_PROGRESS".into();
        f.transitional_ms = Some(0);
    }
    assert_eq!(
        check_gpu(&s, &at_once, Hook::Prolog)[0].severity,
        Severity::Drain
    );
}

#[test]
fn an_unassigned_fabric_partition_is_named() {
    let mut s = healthy();
    if let Reading::Value(f) = &mut s.fabric {
        f.health_summary = "UNHEALTHY".into();
        // PARTITION_ASSIGNED FALSE (R595), every other flag FALSE.
        f.health_mask = (2 << 12) | 0xaa;
    }
    let f = check_gpu(&s, &HealthConfig::default(), Hook::Prolog);
    assert_eq!(f[0].severity, Severity::Drain);
    assert!(
        f[0].detail
            .ends_with("(mask 0x20aa: no fabric partition assigned)"),
        "{}",
        f[0].detail
    );
}

/// The findings of the driver's lines in `log` since `judged`, on the
/// healthy GPU 2 (0000:1b:00), for a gate that keeps `keep`'s GPUs.
fn signature_findings(log: &str, judged: &Checkpoint, keep: &dyn Fn(&str) -> bool) -> Vec<Finding> {
    let read = crate::xid::log::parse_log(log);
    let lines = LogLines {
        judged,
        xids: &read.events,
        keep,
    };
    check_signatures(&read.signatures, &lines, &[healthy()])
}

const POST_RX: &str =
    "NVRM: knvlinkDiscoverPostRxDetLinks_GB100: Getting peer3's postRxDetLinkMask failed!";
const IMEX_NOTIFY: &str = "NVRM: _fabricNotifyEvent: Unable to notify ImexSessionApi";

#[test]
fn driver_lines_are_one_finding_per_signature_naming_the_count() {
    let mut log = String::new();
    for _ in 0..10_000 {
        log.push_str(IMEX_NOTIFY);
        log.push('\n');
    }
    log.push_str(&format!(
        "{POST_RX}\nNVRM: GPU 0000:1b:00.0: GPU has fallen off the bus.\n"
    ));
    let all = |_: &str| true;
    let f = signature_findings(&log, &Checkpoint::default(), &all);
    let reasons: Vec<String> = f.iter().map(Finding::reason).collect();
    assert_eq!(
        reasons,
        [
            format!(
                "imex-health: nvlink_post_rx_detect: 1 line since the last check: the driver \
                 failed to update an NVLink post-RX-detection link mask; reboot the node (gpud \
                 recommends a system reboot); newest: {POST_RX}"
            ),
            "imex-health: fallen_off_bus gpu2 1650924060002: 1 line since the last check: a GPU \
             has fallen off the bus and no XID 79 names it; reboot the node; reseat or RMA the \
             GPU if it recurs; newest: NVRM: GPU 0000:1b:00.0: GPU has fallen off the bus."
                .to_string(),
            format!(
                "imex-health: imex_notify: 10000 lines since the last check: the driver dropped \
                 IMEX fabric events: no IMEX daemon had registered for them; expected while no \
                 nvidia-imex runs (an idle node of per-job domains); during an --imex job or \
                 with a rack-wide daemon, look at the node's nvidia-imex; newest: {IMEX_NOTIFY}"
            ),
        ]
    );
    let severities: Vec<Severity> = f.iter().map(|f| f.severity).collect();
    assert_eq!(
        severities,
        [Severity::Drain, Severity::Drain, Severity::Warn]
    );
}

#[test]
fn driver_lines_count_from_the_checkpoint_node_wide_and_per_gpu() {
    // Lines 1-3 imex, 4 the GPU off the bus, 5-6 imex.
    let log = format!(
        "{IMEX_NOTIFY}\n{IMEX_NOTIFY}\n{IMEX_NOTIFY}\nNVRM: GPU 0000:1b:00.0: GPU has fallen off \
         the bus.\n{IMEX_NOTIFY}\n{IMEX_NOTIFY}\n"
    );
    let all = |_: &str| true;
    let judged = Checkpoint {
        numbering: Some(Numbering::Lines),
        judged: [("node".to_string(), 5), ("0000:1b:00".to_string(), 4)].into(),
        boot: None,
        restarts: 0,
    };
    let f = signature_findings(&log, &judged, &all);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].detail.starts_with("1 line since the last check"),
        "{}",
        f[0].detail
    );
    // Without a node position (a checkpoint from before 0.4, or the
    // epilog's from the prolog's position), the oldest GPU's counts.
    let old = Checkpoint {
        judged: [("0000:1b:00".to_string(), 2)].into(),
        ..judged
    };
    let f = signature_findings(&log, &old, &all);
    let details: Vec<(&str, &str)> = f
        .iter()
        .map(|f| (f.check.as_str(), &f.detail[..8]))
        .collect();
    assert_eq!(
        details,
        [("fallen_off_bus", "1 line s"), ("imex_notify", "3 lines ")]
    );
}

#[test]
fn a_gpu_off_the_bus_is_not_drained_twice_with_its_xid_79() {
    let pair = "Mar 21 20:18:56 pc kernel: [   65.315783] NVRM: Xid (PCI:0000:1b:00): 79, \
                pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n\
                Mar 21 20:18:56 pc kernel: [   65.315792] NVRM: GPU 0000:1b:00.0: GPU has \
                fallen off the bus.\n";
    let all = |_: &str| true;
    assert!(signature_findings(pair, &Checkpoint::default(), &all).is_empty());
    // The XID of another GPU does not hide it; nor does another XID.
    let other = pair.replace("Xid (PCI:0000:1b:00): 79", "Xid (PCI:0000:1c:00): 79");
    assert_eq!(
        signature_findings(&other, &Checkpoint::default(), &all).len(),
        1
    );
    let xid_13 = pair.replace("): 79,", "): 13,");
    assert_eq!(
        signature_findings(&xid_13, &Checkpoint::default(), &all).len(),
        1
    );
}

#[test]
fn a_jobs_gate_judges_its_own_gpus_and_the_node() {
    let log = format!(
        "NVRM: GPU 0000:1c:00.0: GPU has fallen off the bus.\n{POST_RX}\n\
         NVRM: GPU 0000:1b:00.0: GPU has fallen off the bus.\n"
    );
    let job = |pci: &str| pci == "0000:1b:00";
    let f = signature_findings(&log, &Checkpoint::default(), &job);
    let got: Vec<(&str, Option<u32>)> = f
        .iter()
        .map(|f| (f.check.as_str(), f.gpu.as_ref().map(|g| g.index)))
        .collect();
    assert_eq!(
        got,
        [("nvlink_post_rx_detect", None), ("fallen_off_bus", Some(2))]
    );
}
