//! The node's NVLink clique, read from its GPUs' fabric info: `ClusterUUID`
//! plus `CliqueId`, written `<uuid>.<id>` as NVIDIA's GPU Feature Discovery
//! writes its `nvidia.com/gpu.clique` label. The GPUs that share a clique
//! are one NVLink (multi-node NVLink) domain: an NVL72 rack.
//!
//! Outside a healthy NVL72 NVML still answers, with values that must never
//! split a domain: fabric not COMPLETED, a failed registration (status ≠ 0,
//! e.g. "Insufficient Resources"), the nil ClusterUUID, and clique ids 0 or
//! 0xFFFFFFFF. Such a GPU has no clique; a node whose GPUs disagree has none
//! either (the health gate drains it: `fabric_clique`).

use crate::nvml::snapshot::FabricInfo;
use crate::nvml::GpuSnapshot;
use slurm_imex_core::clique::is_clique;

/// One GPU's clique, when its fabric info can be trusted: registration
/// COMPLETED and successful, and the value in the shape Slurm may be told
/// (`slurm_imex_core::clique::is_clique`, the one owner of that rule).
pub fn gpu_clique(fabric: &FabricInfo) -> Option<String> {
    if fabric.state != "COMPLETED" || fabric.status != 0 {
        return None;
    }
    let uuid = fabric.cluster_uuid.trim().to_ascii_lowercase();
    let clique = format!("{uuid}.{}", fabric.clique_id);
    is_clique(&clique).then_some(clique)
}

/// The node's clique: the one every GPU with fabric info reports. None when
/// no GPU has a trusted clique, or when any two differ.
pub fn node_clique(gpus: &[GpuSnapshot]) -> Option<String> {
    let mut found: Option<String> = None;
    for gpu in gpus {
        let Some(fabric) = gpu.fabric.value() else {
            continue;
        };
        let clique = gpu_clique(fabric)?;
        match &found {
            Some(seen) if *seen != clique => return None,
            _ => found = Some(clique),
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fabric(state: &str, status: u32, clique_id: u32, uuid: &str) -> FabricInfo {
        FabricInfo {
            state: state.into(),
            status,
            clique_id,
            cluster_uuid: uuid.into(),
            ..FabricInfo::default()
        }
    }

    const UUID: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278";

    #[test]
    fn only_a_completed_registered_fabric_has_a_clique() {
        // tests/data/samples/nvidia-smi-q-excerpts.txt: a healthy clique 2 ...
        assert_eq!(
            gpu_clique(&fabric("COMPLETED", 0, 2, UUID)).as_deref(),
            Some("dc6e40c4-d722-4357-9ba6-5291dd461278.2")
        );
        // ... "Insufficient Resources" with clique 0 and the nil UUID ...
        let nil = "00000000-0000-0000-0000-000000000000";
        assert_eq!(gpu_clique(&fabric("COMPLETED", 25, 0, nil)), None);
        // ... and training still in progress.
        assert_eq!(gpu_clique(&fabric("IN_PROGRESS", 0, 2, UUID)), None);
        assert_eq!(gpu_clique(&fabric("COMPLETED", 0, 2, nil)), None);
        assert_eq!(gpu_clique(&fabric("COMPLETED", 0, 0, UUID)), None);
        assert_eq!(gpu_clique(&fabric("COMPLETED", 0, u32::MAX, UUID)), None);
        assert_eq!(gpu_clique(&fabric("COMPLETED", 0, 2, "not-a-uuid")), None);
        assert_eq!(gpu_clique(&fabric("NOT_SUPPORTED", 0, 0, "")), None);
        // Upper case is the same clique.
        let upper = UUID.to_ascii_uppercase();
        assert_eq!(
            gpu_clique(&fabric("COMPLETED", 0, 32766, &upper)).as_deref(),
            Some("dc6e40c4-d722-4357-9ba6-5291dd461278.32766")
        );
    }
}
