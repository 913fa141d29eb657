//! What one GPU looked like at one moment: identity, reliability counters,
//! fabric and NVLink state, processes, modes. Snapshots are plain data, so
//! checks and deltas are pure functions over them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One NVML reading. NOT_SUPPORTED is a normal answer, never a failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Reading<T> {
    Value(T),
    #[default]
    NotSupported,
    Failed(String),
}

impl<T> Reading<T> {
    pub fn value(&self) -> Option<&T> {
        match self {
            Reading::Value(v) => Some(v),
            _ => None,
        }
    }
    pub fn failure(&self) -> Option<&str> {
        match self {
            Reading::Failed(e) => Some(e),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EccCounts {
    pub volatile_sbe: u64,
    pub volatile_dbe: u64,
    pub aggregate_sbe: u64,
    pub aggregate_dbe: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredPages {
    pub sbe: u64,
    pub dbe: u64,
    pub pending: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemappedRows {
    pub correctable: u64,
    pub uncorrectable: u64,
    pub pending: bool,
    pub failure: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricInfo {
    /// NOT_SUPPORTED, NOT_STARTED, IN_PROGRESS, COMPLETED.
    pub state: String,
    /// NVML return code of the fabric probe (0 = success; valid when COMPLETED).
    pub status: u32,
    /// The unicast-pointer clique: v3's `cliqueId`, or with v4 (R615) the
    /// id of the first UNICAST_POINTER entry, which NVML says is the same.
    pub clique_id: u32,
    pub cluster_uuid: String,
    pub health_mask: u32,
    /// NOT_SUPPORTED, HEALTHY, UNHEALTHY, LIMITED_CAPACITY.
    pub health_summary: String,
    /// Every typed clique, where the driver reports them (v4, R615+).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cliques: Vec<FabricClique>,
    /// How long the state was seen NOT_STARTED or IN_PROGRESS before this
    /// reading, ms: the prolog's own wait (kept also when the probe then
    /// completed), or, for `slurm-imex check`, since an earlier check first
    /// saw it so (`health::fabric_wait`). None: nobody waited (the epilog),
    /// or it was never seen transitional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transitional_ms: Option<u64>,
}

impl FabricInfo {
    /// NOT_STARTED or IN_PROGRESS: the probe is not done yet (after a
    /// reboot, or until a fabric partition is activated), which the gate
    /// waits out within `[health] fabric_wait` before judging.
    pub fn is_transitional(&self) -> bool {
        matches!(self.state.as_str(), "NOT_STARTED" | "IN_PROGRESS")
    }
}

/// One typed clique of NVML v4's fabric info (`nvmlGpuFabricClique_v1_t`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricClique {
    /// UNICAST_POINTER, MULTICAST_POINTER, UNICAST_LOGICAL_ENDPOINT,
    /// MULTICAST_LOGICAL_ENDPOINT, or `TYPE_<n>` for a type this release
    /// does not know.
    pub kind: String,
    pub id: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkState {
    pub link: u32,
    pub active: bool,
    pub crc_flit: u64,
    pub crc_data: u64,
    pub replay: u64,
    pub recovery: u64,
}

/// One process in NVML's accounting buffer (`nvmlAccountingStats_t`),
/// running or ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessAccounting {
    pub pid: u32,
    /// Percent of the process's life with a kernel running on the GPU.
    pub gpu_util: Option<u32>,
    /// Percent of its life with device memory being read or written.
    pub mem_util: Option<u32>,
    pub max_memory_bytes: Option<u64>,
    /// How long its compute context was active, ms (0 while it runs).
    pub time_ms: u64,
    /// When it started, µs since the epoch (0: unknown).
    #[serde(default)]
    pub start_us: u64,
    #[serde(default)]
    pub running: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcieWidth {
    pub current: u32,
    pub max: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuSnapshot {
    pub index: u32,
    pub uuid: String,
    pub serial: String,
    /// Normalised to the kernel's form, `0000:9b:00`.
    pub pci: String,
    pub name: String,
    pub taken_at_ms: u64,
    /// A call answered NVML_ERROR_GPU_IS_LOST.
    pub lost: bool,
    pub energy_mj: Reading<u64>,
    pub ecc: Reading<EccCounts>,
    pub retired_pages: Reading<RetiredPages>,
    pub remapped_rows: Reading<RemappedRows>,
    pub pcie_replays: Reading<u64>,
    /// Cumulative violation (throttle) time per reason, ns.
    pub violation_ns: BTreeMap<String, u64>,
    pub throttle_reasons: Reading<u64>,
    pub nvlink: Reading<Vec<LinkState>>,
    /// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (0 = NONE).
    pub recovery_action: Reading<u64>,
    pub fabric: Reading<FabricInfo>,
    pub compute_pids: Reading<Vec<u32>>,
    /// NVML accounting mode as read (before the prolog turned it on).
    #[serde(default)]
    pub accounting_mode: Reading<bool>,
    /// The prolog's attempt to turn accounting mode on: None when it did
    /// not try (it was on, `[gpu] accounting = "leave"`, or not a prolog).
    #[serde(default)]
    pub accounting_set: Option<Result<(), String>>,
    /// The processes in the accounting buffer (NotSupported: mode off).
    pub accounting: Reading<Vec<ProcessAccounting>>,
    pub persistence: Reading<bool>,
    pub ecc_enabled: Reading<bool>,
    pub mig_enabled: Reading<bool>,
    /// Ok(()) as Value(true); a corrupt infoROM as Value(false).
    pub inforom_valid: Reading<bool>,
    pub temperature_c: Reading<u32>,
    pub pcie_width: Reading<PcieWidth>,
}
