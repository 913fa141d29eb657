//! Reading GPUs through nvml-wrapper: library loading by configured path,
//! and one snapshot per GPU taken in named stages, so the health gate can
//! give each check its own time budget and name the one that hangs.

use super::snapshot::*;
use super::{bounds, raw};
use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, PerformancePolicy, RetirementCause, TemperatureSensor,
};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::{Device, Nvml};
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::text::printable;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION.
const FIELD_RECOVERY_ACTION: u32 = 230;
/// NVML_NVLINK_MAX_LINKS in the 13.0 headers.
const MAX_NVLINKS: u32 = 18;

/// The reading stages, in order. Each maps to the health checks it feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    Identity,
    Memory,
    Recovery,
    Fabric,
    /// Polling a fabric probe that is NOT_STARTED or IN_PROGRESS until it
    /// completes, within `[health] fabric_wait` (the prolog only).
    FabricWait,
    NvLink,
    Processes,
    Modes,
    Counters,
}

impl Stage {
    pub const ALL: [Stage; 9] = [
        Stage::Identity,
        Stage::Memory,
        Stage::Recovery,
        Stage::Fabric,
        Stage::FabricWait,
        Stage::NvLink,
        Stage::Processes,
        Stage::Modes,
        Stage::Counters,
    ];

    /// The check name used in findings and drain reasons.
    pub fn check_name(self) -> &'static str {
        match self {
            Stage::Identity => "gpu_identity",
            Stage::Memory => "memory_health",
            Stage::Recovery => crate::health::checks::RECOVERY_ACTION,
            Stage::Fabric | Stage::FabricWait => "fabric",
            Stage::NvLink => "nvlink",
            Stage::Processes => "leftover_processes",
            Stage::Modes => "gpu_modes",
            Stage::Counters => "counters",
        }
    }

    /// Time budget of the stage on one GPU (docs/gpu-health.md, "Time budgets",
    /// with headroom), written for the default gate cap (`BUDGET_GATE`): a
    /// larger `[health] gate_timeout` scales it in proportion (a node whose
    /// NVML answers slowly, or one under emulation, is given room by the
    /// one setting), a smaller one never shrinks it. Waiting for the fabric
    /// probe gets the wait the reader was given (`fabric_wait`) on top of
    /// one fabric read.
    pub fn budget(
        self,
        fabric_wait: std::time::Duration,
        gate_timeout: std::time::Duration,
    ) -> std::time::Duration {
        use std::time::Duration;
        let base = match self {
            Stage::Identity => Duration::from_millis(500),
            Stage::Memory => Duration::from_millis(500),
            Stage::Recovery => Duration::from_millis(250),
            Stage::Fabric | Stage::FabricWait => Duration::from_millis(2500),
            Stage::NvLink => Duration::from_millis(500),
            Stage::Processes => Duration::from_millis(500),
            Stage::Modes => Duration::from_millis(500),
            Stage::Counters => Duration::from_millis(500),
        };
        let scale = (gate_timeout.as_secs_f64() / BUDGET_GATE.as_secs_f64()).max(1.0);
        let scaled = Duration::try_from_secs_f64(base.as_secs_f64() * scale).unwrap_or(base);
        if self == Stage::FabricWait {
            scaled.saturating_add(fabric_wait)
        } else {
            scaled
        }
    }
}

/// The gate cap the stage budgets are written for: `[health] gate_timeout`'s
/// default.
pub const BUDGET_GATE: std::time::Duration = std::time::Duration::from_secs(10);

/// A loaded NVML, shareable across reader threads.
#[derive(Clone)]
pub struct GpuReader {
    nvml: Arc<Nvml>,
    /// NVML v4's fabric info, where the driver has it (R615+).
    fabric_v4: Option<raw::FabricV4>,
    /// How long a fabric probe that is NOT_STARTED or IN_PROGRESS is
    /// polled for until it completes (the prolog); zero: read once.
    fabric_wait: std::time::Duration,
    /// Turn accounting mode on where it is off, as each GPU is read.
    turn_accounting_on: bool,
    /// Read each accounted process's stats, not only its pid (the epilog:
    /// the buffer holds up to 4,000 processes per GPU, so a read that needs
    /// only the pids, as the prolog's and `check`'s do, skips the calls).
    accounting_stats: bool,
}

fn reading<T>(r: std::result::Result<T, NvmlError>, lost: &mut bool) -> Reading<T> {
    match r {
        Ok(v) => Reading::Value(v),
        Err(NvmlError::NotSupported) | Err(NvmlError::FunctionNotFound) => Reading::NotSupported,
        Err(NvmlError::GpuLost) => {
            *lost = true;
            Reading::Failed("GPU is lost (fell off the bus)".into())
        }
        Err(e) => Reading::Failed(e.to_string()),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl GpuReader {
    /// dlopen the configured library and nvmlInit.
    pub fn open(library: &Path) -> Result<GpuReader> {
        let nvml = Nvml::builder()
            .lib_path(library.as_os_str())
            .init()
            .map_err(|e| {
                Error::new(format!(
                    "NVML init failed with {} ([gpu] nvml_library): {e}",
                    library.display()
                ))
            })?;
        Ok(GpuReader {
            fabric_v4: raw::FabricV4::find(library),
            nvml: Arc::new(nvml),
            fabric_wait: std::time::Duration::ZERO,
            turn_accounting_on: false,
            accounting_stats: false,
        })
    }

    /// Read GPUs turning NVML accounting mode on where it is off (the
    /// prolog, `[gpu] accounting = "on"`; needs root).
    pub fn turning_accounting_on(mut self, on: bool) -> GpuReader {
        self.turn_accounting_on = on;
        self
    }

    /// Wait up to `wait` for a fabric probe that is not done yet (the
    /// prolog: after a reboot the probe completes within about 30 s).
    pub fn waiting_for_fabric(mut self, wait: std::time::Duration) -> GpuReader {
        self.fabric_wait = wait;
        self
    }

    /// Read every accounted process's stats (utilization, memory, start
    /// and time), not only the pids.
    pub fn reading_accounting_stats(mut self, stats: bool) -> GpuReader {
        self.accounting_stats = stats;
        self
    }

    pub fn device_count(&self) -> Result<u32> {
        self.nvml
            .device_count()
            .map_err(|e| Error::new(format!("nvmlDeviceGetCount failed: {e}")))
    }

    pub fn driver_version(&self) -> Option<String> {
        self.nvml.sys_driver_version().ok()
    }

    /// GPU `index`'s recovery action alone (`crate::recovery::reread`).
    pub fn recovery_action(&self, index: u32) -> Reading<u64> {
        let mut lost = false;
        match self.nvml.device_by_index(index) {
            Ok(device) => read_recovery_action(&device, &mut lost),
            Err(e) => reading(Err(e), &mut lost),
        }
    }

    /// Snapshot GPU `index`, calling `progress(stage)` as each stage starts.
    pub fn snapshot(&self, index: u32, mut progress: impl FnMut(Stage)) -> GpuSnapshot {
        let mut snap = GpuSnapshot {
            index,
            taken_at_ms: now_ms(),
            ..GpuSnapshot::default()
        };
        progress(Stage::Identity);
        let mut device = match self.nvml.device_by_index(index) {
            Ok(d) => d,
            Err(e) => {
                snap.lost = matches!(e, NvmlError::GpuLost);
                snap.uuid = format!("unknown-gpu{index}");
                snap.compute_pids = Reading::Failed(format!("cannot open GPU {index}: {e}"));
                return snap;
            }
        };
        read_identity(&device, &mut snap);
        progress(Stage::Memory);
        read_memory(&device, &mut snap);
        snap.remapped_rows = raw::remapped_rows(&self.nvml, &device);
        progress(Stage::Recovery);
        snap.recovery_action = read_recovery_action(&device, &mut snap.lost);
        progress(Stage::Fabric);
        snap.fabric = self.fabric(&device, &mut progress);
        progress(Stage::NvLink);
        snap.nvlink = read_nvlinks(&device, &mut snap.lost);
        progress(Stage::Processes);
        read_processes(&mut device, self, &mut snap);
        progress(Stage::Modes);
        read_modes(&device, &mut snap);
        progress(Stage::Counters);
        read_counters(&device, &mut snap);
        snap.violation_ns = read_violations(&device);
        snap
    }
}

impl GpuReader {
    /// The GPU's fabric info; when the probe is not done yet and the reader
    /// waits (`fabric_wait`), polled until it is or the wait is over, the
    /// wait kept in the reading (`transitional_ms`, whether it completed or
    /// not).
    fn fabric(&self, device: &Device, progress: &mut impl FnMut(Stage)) -> Reading<FabricInfo> {
        let read = || raw::fabric_info(&self.nvml, device, self.fabric_v4);
        let mut fabric = read();
        let transitional = |f: &Reading<FabricInfo>| f.value().is_some_and(|f| f.is_transitional());
        if !transitional(&fabric) || self.fabric_wait.is_zero() {
            return fabric;
        }
        progress(Stage::FabricWait);
        let started = std::time::Instant::now();
        while transitional(&fabric) && started.elapsed() < self.fabric_wait {
            let left = self.fabric_wait.saturating_sub(started.elapsed());
            std::thread::sleep(FABRIC_POLL.min(left));
            fabric = read();
        }
        let waited = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Reading::Value(f) = &mut fabric {
            f.transitional_ms = Some(waited);
        }
        fabric
    }
}

/// How often a fabric probe that is not done yet is read again.
const FABRIC_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// UUID, serial, name (made printable: they reach drain reasons and
/// records) and PCI id.
fn read_identity(device: &Device, snap: &mut GpuSnapshot) {
    let text = |s: std::result::Result<String, NvmlError>| printable(&s.unwrap_or_default());
    snap.uuid = text(device.uuid());
    snap.serial = text(device.serial());
    snap.name = text(device.name());
    match device.pci_info() {
        Ok(p) => snap.pci = crate::xid::normalise_pci(&p.bus_id),
        Err(NvmlError::GpuLost) => snap.lost = true,
        Err(_) => {}
    }
}

/// ECC counters and retired pages (row remapping is read through `raw`).
fn read_memory(device: &Device, snap: &mut GpuSnapshot) {
    let lost = &mut snap.lost;
    let ecc = |err, counter| device.total_ecc_errors(err, counter);
    let counts = || {
        Ok(EccCounts {
            volatile_sbe: ecc(MemoryError::Corrected, EccCounter::Volatile)?,
            volatile_dbe: ecc(MemoryError::Uncorrected, EccCounter::Volatile)?,
            aggregate_sbe: ecc(MemoryError::Corrected, EccCounter::Aggregate)?,
            aggregate_dbe: ecc(MemoryError::Uncorrected, EccCounter::Aggregate)?,
        })
    };
    snap.ecc = reading(counts(), lost);
    let retired = |cause| device.retired_pages(cause).map(|pages| pages.len() as u64);
    let pages = || {
        Ok(RetiredPages {
            sbe: retired(RetirementCause::MultipleSingleBitEccErrors)?,
            dbe: retired(RetirementCause::DoubleBitEccError)?,
            pending: device.are_pages_pending_retired()?,
        })
    };
    snap.retired_pages = reading(pages(), lost);
}

/// The driver's recovery action (a field value, NVML 570+).
fn read_recovery_action(device: &Device, lost: &mut bool) -> Reading<u64> {
    match device.field_values_for(&[FieldId(FIELD_RECOVERY_ACTION)]) {
        Ok(mut v) if !v.is_empty() => match v.remove(0).map(|s| s.value) {
            Ok(Ok(value)) => Reading::Value(sample_u64(value)),
            Ok(Err(e)) | Err(e) => reading(Err(e), lost),
        },
        Ok(_) => Reading::NotSupported,
        Err(e) => reading(Err(e), lost),
    }
}

/// Compute processes now, and per-process accounting when it is enabled
/// (turned on first when the reader turns it on and it is off).
fn read_processes(device: &mut Device, how: &GpuReader, snap: &mut GpuSnapshot) {
    let lost = &mut snap.lost;
    let pids = device
        .running_compute_processes()
        .map(|p| p.into_iter().map(|p| p.pid).collect());
    snap.compute_pids = reading(pids, lost);
    snap.accounting_mode = reading(device.is_accounting_enabled(), lost);
    let mut enabled = snap.accounting_mode.value().copied().unwrap_or(false);
    if how.turn_accounting_on && snap.accounting_mode == Reading::Value(false) {
        let set = device.set_accounting(true).map_err(|e| e.to_string());
        enabled = set.is_ok();
        snap.accounting_set = Some(set);
    }
    snap.accounting = match &snap.accounting_mode {
        Reading::Value(_) if enabled => reading(device.accounting_pids(), lost)
            .map_value(|pids| accounting_of(device, how, &pids)),
        Reading::Failed(e) => Reading::Failed(e.clone()),
        _ => Reading::NotSupported,
    };
}

/// The accounted processes: each with its stats when the reader reads them,
/// else its pid alone. A pid is one process, however often it is listed:
/// on a pid collision NVML reports only the latest process, so a pid read
/// twice would count that one twice.
fn accounting_of(device: &Device, how: &GpuReader, pids: &[u32]) -> Vec<ProcessAccounting> {
    let mut seen = std::collections::BTreeSet::new();
    let unique: Vec<u32> = pids.iter().copied().filter(|p| seen.insert(*p)).collect();
    let pids = unique.as_slice();
    if how.accounting_stats {
        return pids
            .iter()
            .filter_map(|pid| accounted(device, *pid))
            .collect();
    }
    pids.iter()
        .map(|&pid| ProcessAccounting {
            pid,
            ..Default::default()
        })
        .collect()
}

/// One process's accounting stats, each value held to its physical range
/// (`bounds`); None when NVML no longer has them.
fn accounted(device: &Device, pid: u32) -> Option<ProcessAccounting> {
    let s = device.accounting_stats_for(pid).ok()?;
    let p = ProcessAccounting {
        pid,
        gpu_util: s.gpu_utilization,
        mem_util: s.memory_utilization,
        max_memory_bytes: s.max_memory_usage,
        time_ms: s.time,
        start_us: s.start_time,
        running: s.is_running,
    };
    Some(bounds::process(p, now_ms().saturating_mul(1000)))
}

fn read_modes(device: &Device, snap: &mut GpuSnapshot) {
    let lost = &mut snap.lost;
    snap.persistence = reading(device.is_in_persistent_mode(), lost);
    snap.ecc_enabled = reading(device.is_ecc_enabled().map(|m| m.currently_enabled), lost);
    snap.mig_enabled = reading(device.mig_mode().map(|m| m.current == 1), lost);
    snap.inforom_valid = match device.validate_info_rom() {
        Ok(()) => Reading::Value(true),
        Err(NvmlError::CorruptedInfoROM) => Reading::Value(false),
        Err(e) => reading(Err(e), lost),
    };
}

fn read_counters(device: &Device, snap: &mut GpuSnapshot) {
    let lost = &mut snap.lost;
    snap.energy_mj = reading(device.total_energy_consumption(), lost);
    snap.pcie_replays = reading(device.pcie_replay_counter().map(u64::from), lost);
    snap.throttle_reasons = reading(device.current_throttle_reasons().map(|r| r.bits()), lost);
    snap.temperature_c =
        bounds::temperature(reading(device.temperature(TemperatureSensor::Gpu), lost));
    let width = || {
        Ok(PcieWidth {
            current: device.current_pcie_link_width()?,
            max: device.max_pcie_link_width()?,
        })
    };
    snap.pcie_width = bounds::pcie_width(reading(width(), lost));
}

/// Time spent throttled, per reason (ns); reasons the GPU lacks are absent.
fn read_violations(device: &Device) -> BTreeMap<String, u64> {
    let mut violations = BTreeMap::new();
    for (name, policy) in [
        ("power", PerformancePolicy::Power),
        ("thermal", PerformancePolicy::Thermal),
        ("sync_boost", PerformancePolicy::SyncBoost),
        ("board_limit", PerformancePolicy::BoardLimit),
        ("low_utilization", PerformancePolicy::LowUtilization),
        ("reliability", PerformancePolicy::Reliability),
    ] {
        if let Ok(v) = device.violation_status(policy) {
            violations.insert(name.to_string(), v.violation_time);
        }
    }
    violations
}

fn sample_u64(v: SampleValue) -> u64 {
    match v {
        SampleValue::U32(x) => x as u64,
        SampleValue::U64(x) => x,
        SampleValue::I64(x) => x.max(0) as u64,
        SampleValue::F64(x) => x.max(0.0) as u64,
    }
}

fn read_nvlinks(device: &Device, lost: &mut bool) -> Reading<Vec<LinkState>> {
    let mut links = Vec::new();
    for link in 0..MAX_NVLINKS {
        let l = device.link_wrapper_for(link);
        match l.is_active() {
            Ok(active) => {
                let count = |c| l.error_counter(c).unwrap_or(0);
                links.push(LinkState {
                    link,
                    active,
                    crc_flit: count(ErrorCounter::DlCrcFlit),
                    crc_data: count(ErrorCounter::DlCrcData),
                    replay: count(ErrorCounter::DlReplay),
                    recovery: count(ErrorCounter::DlRecovery),
                });
            }
            Err(NvmlError::NotSupported)
            | Err(NvmlError::InvalidArg)
            | Err(NvmlError::FunctionNotFound) => break,
            Err(e) => return reading(Err(e), lost),
        }
    }
    if links.is_empty() {
        Reading::NotSupported
    } else {
        Reading::Value(links)
    }
}

trait MapValue<T> {
    fn map_value<U>(self, f: impl FnOnce(T) -> U) -> Reading<U>;
}

impl<T> MapValue<T> for Reading<T> {
    fn map_value<U>(self, f: impl FnOnce(T) -> U) -> Reading<U> {
        match self {
            Reading::Value(v) => Reading::Value(f(v)),
            Reading::NotSupported => Reading::NotSupported,
            Reading::Failed(e) => Reading::Failed(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn budgets_are_written_for_the_default_gate_cap() {
        let gate = crate::config::HealthConfig::default().gate_timeout.0;
        assert_eq!(gate, BUDGET_GATE);
        assert_eq!(
            Stage::NvLink.budget(Duration::ZERO, gate),
            Duration::from_millis(500)
        );
        assert_eq!(
            Stage::Recovery.budget(Duration::ZERO, gate),
            Duration::from_millis(250)
        );
        let wait = Duration::from_secs(30);
        assert_eq!(
            Stage::FabricWait.budget(wait, gate),
            Duration::from_millis(32_500)
        );
    }

    #[test]
    fn a_larger_gate_cap_scales_every_budget_and_a_smaller_one_never_shrinks_it() {
        let six = Duration::from_secs(60);
        assert_eq!(
            Stage::NvLink.budget(Duration::ZERO, six),
            Duration::from_secs(3)
        );
        assert_eq!(
            Stage::Fabric.budget(Duration::ZERO, six),
            Duration::from_secs(15)
        );
        // the fabric wait is its own setting: added, never scaled
        let wait = Duration::from_secs(30);
        assert_eq!(Stage::FabricWait.budget(wait, six), Duration::from_secs(45));
        for stage in Stage::ALL {
            let small = stage.budget(Duration::ZERO, Duration::from_millis(100));
            assert_eq!(
                small,
                stage.budget(Duration::ZERO, BUDGET_GATE),
                "{stage:?}"
            );
        }
        // the largest cap the setting allows stays finite
        let max = Stage::Fabric.budget(Duration::ZERO, Duration::from_secs(600));
        assert_eq!(max, Duration::from_secs(150));
    }
}
