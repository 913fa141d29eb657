//! The scenario a fake NVML plays: GPUs with identity, counters (some that
//! advance with time, as they do while a job runs), ECC, row remapping,
//! recovery action, fabric and NVLink state, processes and accounting, and
//! faults (a lost GPU, a hanging call, a failing init).
//!
//! Read from `$FAKE_NVML_SCENARIO`, else /run/fakehw/nvml.toml, at every
//! nvmlInit, so a test can change the hardware between prolog and epilog.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_driver")]
    pub driver_version: String,
    /// Make nvmlInit fail with this NVML return code (e.g. 9 = DRIVER_NOT_LOADED).
    #[serde(default)]
    pub init_error: Option<u32>,
    /// nvmlInit takes this long, as it does on a node without persistence
    /// mode (the driver loads and initialises every GPU first).
    #[serde(default)]
    pub init_delay_ms: u64,
    #[serde(default, rename = "gpu")]
    pub gpus: Vec<Gpu>,
    /// When the scenario file was created: counters advance from here.
    #[serde(skip, default = "SystemTime::now")]
    pub written: SystemTime,
}

fn default_driver() -> String {
    "580.95.05".into()
}
fn yes() -> bool {
    true
}
fn sixteen() -> u32 {
    16
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Fabric {
    /// not_started, in_progress, completed.
    pub state: String,
    #[serde(default)]
    pub status: u32,
    #[serde(default)]
    pub clique_id: u32,
    #[serde(default)]
    pub cluster_uuid: String,
    #[serde(default)]
    pub health_mask: u32,
    /// healthy, unhealthy, limited_capacity, not_supported.
    #[serde(default = "healthy")]
    pub health_summary: String,
    /// The probe reads `state` until this long after the scenario was
    /// written, then COMPLETED (a probe that completes during a prolog, as
    /// one does about 30 s after a reboot: DRA driver #1264, #1276).
    #[serde(default)]
    pub completes_after_s: Option<f64>,
    /// v4's typed cliques (R615, driver 615+), as NVML lists them: sorted
    /// by type then id; `kind` 0 UNICAST_POINTER, 1 MULTICAST_POINTER,
    /// 2 and 3 the logical-endpoint ones. Default: one UNICAST_POINTER
    /// entry of `clique_id` (which v3 reports, as NVML says it maps).
    #[serde(default)]
    pub cliques: Option<Vec<Clique>>,
}

/// One typed clique of v4's fabric info.
#[derive(Debug, Clone, Copy, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Clique {
    pub kind: u8,
    pub id: u32,
}

impl Fabric {
    /// The probe's state now (`completes_after_s`).
    pub fn state_now(&self, scenario: &Scenario) -> &str {
        match self.completes_after_s {
            Some(after) if scenario.elapsed_s() >= after => "completed",
            _ => &self.state,
        }
    }
}

fn healthy() -> String {
    "healthy".into()
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    #[serde(default)]
    pub used_memory: u64,
    #[serde(default)]
    pub gpu_util: u32,
    #[serde(default)]
    pub mem_util: u32,
    #[serde(default)]
    pub max_memory: u64,
    #[serde(default)]
    pub time_ms: u64,
    /// Still holding a compute context (listed as running).
    #[serde(default)]
    pub running: bool,
    /// When it started, µs since the epoch (0: NVML reports none).
    #[serde(default)]
    pub start_us: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub uuid: String,
    #[serde(default)]
    pub serial: String,
    /// NVML form, e.g. "00000000:1A:00.0".
    pub pci_bus_id: String,
    #[serde(default = "gpu_name")]
    pub name: String,
    /// Every call answers NVML_ERROR_GPU_IS_LOST.
    #[serde(default)]
    pub lost: bool,
    /// Energy at `written`, and the draw that advances it (mW = mJ/s).
    #[serde(default)]
    pub energy_mj: Option<u64>,
    #[serde(default)]
    pub power_mw: u64,
    #[serde(default)]
    pub ecc_volatile_sbe: u64,
    #[serde(default)]
    pub ecc_volatile_dbe: u64,
    #[serde(default)]
    pub ecc_aggregate_sbe: u64,
    #[serde(default)]
    pub ecc_aggregate_dbe: u64,
    #[serde(default)]
    pub retired_sbe: u32,
    #[serde(default)]
    pub retired_dbe: u32,
    #[serde(default)]
    pub retired_pending: bool,
    /// None: GetRemappedRows is NOT_SUPPORTED (pre-Ampere).
    #[serde(default)]
    pub remap_correctable: Option<u32>,
    #[serde(default)]
    pub remap_uncorrectable: u32,
    #[serde(default)]
    pub remap_pending: bool,
    #[serde(default)]
    pub remap_failure: bool,
    #[serde(default)]
    pub recovery_action: u64,
    /// The driver clears `recovery_action` once the node's IMEX daemon
    /// has come up READY after it was raised (RECOVER_IMEX_DOMAIN: "GPU
    /// recovery requires restoring the IMEX domain", DCGM 4.7): this names
    /// the fake `nvidia-imex`'s events file (`<run dir>/fake-events`), and
    /// a `ready` line in it newer than the scenario clears the action.
    #[serde(default)]
    pub recovery_clears_on_imex_ready: Option<PathBuf>,
    #[serde(default)]
    pub pcie_replays: u32,
    #[serde(default = "sixteen")]
    pub pcie_width: u32,
    #[serde(default = "sixteen")]
    pub pcie_max_width: u32,
    #[serde(default)]
    pub temperature: u32,
    #[serde(default = "yes")]
    pub persistence: bool,
    #[serde(default = "yes")]
    pub ecc_enabled: bool,
    #[serde(default)]
    pub mig: bool,
    #[serde(default = "yes")]
    pub inforom_valid: bool,
    #[serde(default)]
    pub throttle_reasons: u64,
    /// Violation time per policy (power, thermal, sync_boost, board_limit,
    /// low_utilization, reliability) at `written`, ns.
    #[serde(default)]
    pub violation_ns: BTreeMap<String, u64>,
    /// How fast power-cap violation time grows, ns per second.
    #[serde(default)]
    pub power_violation_ns_per_s: u64,
    /// None: fabric NOT_SUPPORTED (no NVLink fabric).
    #[serde(default)]
    pub fabric: Option<Fabric>,
    /// NVLinks; 0: NVLink NOT_SUPPORTED.
    #[serde(default)]
    pub nvlinks: u32,
    #[serde(default)]
    pub nvlinks_down: Vec<u32>,
    #[serde(default)]
    pub nvlink_crc_flit: u64,
    #[serde(default)]
    pub nvlink_replay: u64,
    /// Accounting mode after the driver loaded (a real driver: off).
    #[serde(default)]
    pub accounting: bool,
    /// Processes the accounting buffer keeps (the H100's: 4000).
    #[serde(default = "accounting_buffer")]
    pub accounting_buffer: u32,
    /// Accounting mode now: on since (µs), as this client sees it
    /// (`driver::Driver` keeps it between clients). Set at nvmlInit.
    #[serde(skip)]
    pub accounting_since: Option<u64>,
    #[serde(default, rename = "process")]
    pub processes: Vec<Process>,
    /// Make one call hang: "fabric", "remap", "ecc", "processes" …
    #[serde(default)]
    pub hang_in: Option<String>,
    #[serde(default)]
    pub hang_ms: u64,
}

fn accounting_buffer() -> u32 {
    4000
}

fn gpu_name() -> String {
    "NVIDIA GB200".into()
}

impl Scenario {
    pub fn path() -> PathBuf {
        std::env::var_os("FAKE_NVML_SCENARIO")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/run/fakehw/nvml.toml"))
    }

    /// Parse a scenario; errors are one line naming the file and line.
    pub fn parse(text: &str, origin: &Path) -> Result<Scenario, String> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|sp| text[..sp.start.min(text.len())].matches('\n').count() + 1)
                .unwrap_or(0);
            format!(
                "fake-nvml: bad scenario {}:{line}: {}",
                origin.display(),
                e.message().trim().replace('\n', " ")
            )
        })?;
        for g in &s.gpus {
            if g.uuid.is_empty() || g.pci_bus_id.is_empty() {
                return Err(format!(
                    "fake-nvml: bad scenario {}: every [[gpu]] needs uuid and pci_bus_id",
                    origin.display()
                ));
            }
        }
        // Counters advance from the file's birth: rewriting it in place
        // (a test changing ECC or XIDs mid-job) must not turn the energy
        // counter back, as no real driver does; replacing it (a new inode)
        // is like a driver reload. Where birth time is unknown, mtime.
        if let Ok(m) = std::fs::metadata(origin).and_then(|m| m.created().or_else(|_| m.modified()))
        {
            s.written = m;
        }
        Ok(s)
    }

    pub fn load() -> Result<Scenario, String> {
        let path = Scenario::path();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("fake-nvml: cannot read scenario {}: {e}", path.display()))?;
        Scenario::parse(&text, &path)
    }

    /// The driver's major version (615 of "615.20.01"); 0 when unreadable.
    pub fn driver_major(&self) -> u32 {
        let major = self.driver_version.split('.').next().unwrap_or("");
        major.trim().parse().unwrap_or(0)
    }

    /// GPU `g`'s recovery action now (`recovery_clears_on_imex_ready`).
    pub fn recovery_action_now(&self, g: &Gpu) -> u64 {
        match &g.recovery_clears_on_imex_ready {
            Some(events) if imex_ready_since(events, self.written) => 0,
            _ => g.recovery_action,
        }
    }

    pub fn elapsed_s(&self) -> f64 {
        SystemTime::now()
            .duration_since(self.written)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }
}

/// Whether the fake daemon's events file has a `ready` line (`<unix ms>
/// ready`) later than `since`.
fn imex_ready_since(events: &Path, since: SystemTime) -> bool {
    let since_ms = since
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let Ok(text) = std::fs::read_to_string(events) else {
        return false;
    };
    text.lines().any(|l| {
        let mut words = l.split_whitespace();
        let at = words.next().and_then(|w| w.parse::<u128>().ok());
        words.next() == Some("ready") && at.is_some_and(|at| at > since_ms)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_gpu() {
        let s = Scenario::parse(
            r#"
driver_version = "580.95.05"
[[gpu]]
uuid = "GPU-1"
serial = "1650924060001"
pci_bus_id = "00000000:1A:00.0"
energy_mj = 1000
power_mw = 700000
remap_correctable = 0
nvlinks = 18
fabric = { state = "completed", clique_id = 1, cluster_uuid = "dc6e40c4-d722-4357-9ba6-5291dd461278" }
[[gpu.process]]
pid = 42
max_memory = 1024
"#,
            Path::new("s.toml"),
        )
        .unwrap();
        assert_eq!(s.gpus.len(), 1);
        assert_eq!(s.gpus[0].processes[0].pid, 42);
        assert!(s.gpus[0].persistence && s.gpus[0].ecc_enabled);
        assert_eq!(s.gpus[0].fabric.as_ref().unwrap().health_summary, "healthy");
    }

    #[test]
    fn bad_scenarios_are_one_line_errors_with_file_and_line() {
        let e = Scenario::parse(
            "[[gpu]]\nuuid = \"a\"\npci_bus_id = \"x\"\nserail = \"typo\"\n",
            Path::new("/s.toml"),
        )
        .unwrap_err();
        assert!(e.contains("/s.toml:4") && e.contains("serail"), "{e}");
        let e = Scenario::parse(
            "[[gpu]]\nuuid = \"\"\npci_bus_id = \"x\"\n",
            Path::new("/s.toml"),
        )
        .unwrap_err();
        assert!(e.contains("needs uuid"), "{e}");
        let e = Scenario::parse(
            "[[gpu]]\nuuid = \"a\"\npci_bus_id = \"x\"\nnvlinks = -1\n",
            Path::new("/s.toml"),
        )
        .unwrap_err();
        assert!(e.contains(":4"), "{e}");
        assert!(!e.contains('\n'));
    }
}
