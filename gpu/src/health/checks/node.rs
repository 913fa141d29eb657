//! Node-wide checks: the GPU count against the config and the PCI bus, the
//! driver version, and that every GPU of the node is in one NVLink clique.

use crate::config::HealthConfig;
use crate::health::check_names::{DRIVER, FABRIC_CLIQUE, GPU_COUNT};
use crate::health::Finding;
use crate::nvml::snapshot::GpuSnapshot;
use std::collections::BTreeSet;

/// Node-level checks: GPU count against config and PCI, driver, and that
/// every GPU of an NVLink domain reports the same clique.
pub fn check_node(
    cfg: &HealthConfig,
    nvml_count: u32,
    pci_count: Option<u32>,
    driver_version: Option<&str>,
    snapshots: &[GpuSnapshot],
) -> Vec<Finding> {
    let mut found = Vec::new();
    found.extend(gpu_count(cfg, nvml_count, pci_count));
    found.extend(driver(cfg, driver_version));
    found.extend(fabric_clique(snapshots));
    found
}

fn gpu_count(cfg: &HealthConfig, nvml_count: u32, pci_count: Option<u32>) -> Vec<Finding> {
    let mut found = Vec::new();
    let expected = cfg.expected_gpus;
    if expected > 0 && nvml_count != expected {
        let detail = format!("NVML sees {nvml_count} GPUs, expected_gpus = {expected}");
        found.push(Finding::node_drain(GPU_COUNT, detail));
    }
    if let Some(pci) = pci_count.filter(|pci| *pci > nvml_count) {
        let detail = format!(
            "NVML sees {nvml_count} GPUs but the PCI bus has {pci}: a GPU fell off the bus or \
             failed to initialise"
        );
        found.push(Finding::node_drain(GPU_COUNT, detail));
    }
    found
}

fn driver(cfg: &HealthConfig, version: Option<&str>) -> Option<Finding> {
    let expected = &cfg.expected_driver;
    if expected.is_empty() || version == Some(expected.as_str()) {
        return None;
    }
    let detail = format!(
        "driver {} but expected_driver = {expected}",
        version.unwrap_or("unknown")
    );
    Some(Finding::node_drain(DRIVER, detail))
}

/// Only GPUs whose fabric registration completed report a clique.
fn fabric_clique(snapshots: &[GpuSnapshot]) -> Option<Finding> {
    let cliques: BTreeSet<(String, u32)> = snapshots
        .iter()
        .filter_map(|s| s.fabric.value())
        .filter(|f| f.state == "COMPLETED")
        .map(|f| (f.cluster_uuid.clone(), f.clique_id))
        .collect();
    if cliques.len() <= 1 {
        return None;
    }
    let list: Vec<String> = cliques.iter().map(|(u, c)| format!("{u}.{c}")).collect();
    let detail = format!("GPUs report different NVLink cliques: {}", list.join(" "));
    Some(Finding::node_drain(FABRIC_CLIQUE, detail))
}
