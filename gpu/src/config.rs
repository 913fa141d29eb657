//! `[gpu]` and `[health]`: where NVML and the kernel log are read, and
//! what the health gate holds the node's GPUs to. Their schema, defaults
//! and bounds live here, beside the code that reads them; the programs
//! assemble them with the rest of the file (`slurm-imex-settings`).

use serde::{Deserialize, Serialize};
use slurm_imex_core::config::bounds::{first_violation, CountBound, DurationBound, MIN, MS};
use slurm_imex_core::config::{Config, Documented, HumanDuration, Key, Section};
use std::path::PathBuf;
use std::time::Duration;

/// What the GPU side reads of the config: the core sections (the node's
/// state directory) and its own. The programs' whole config is one.
pub trait GpuSections {
    fn core(&self) -> &Config;
    fn gpu(&self) -> &GpuConfig;
    fn health(&self) -> &HealthConfig;
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct GpuConfig {
    pub nvml_library: PathBuf,
    pub kmsg: PathBuf,
    /// The kernel's boot id: the XID checkpoint holds only within the boot
    /// that wrote it (a test seam, as `kmsg` is).
    pub boot_id: PathBuf,
    /// NVML accounting mode on the job's GPUs (per-process utilization and
    /// peak memory for the job's stats): turned on by the prolog, or left.
    pub accounting: Accounting,
}

impl Documented for GpuConfig {
    const TABLE: &'static str = "gpu";
    const READ_BY: &'static str =
        "the prolog and epilog (the health gate), `slurm-imex check`, doctor";
    const KEYS: &'static [Key] = &[
        Key::new("nvml_library", r#""libnvidia-ml.so.1""#, "The NVML library loaded at run time by the GPU health gate."),
        Key::new("kmsg", r#""/dev/kmsg""#, "The kernel log read for XID events."),
        Key::new("boot_id", r#""/proc/sys/kernel/random/boot_id""#, "The kernel's boot id: the XID checkpoint holds only within the boot that wrote it."),
        Key::new("accounting", r#""on""#, "NVML accounting mode on the job's GPUs (per-job utilization and peak memory): \"on\" (the prolog turns it on) or \"leave\"."),
    ];
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig {
            nvml_library: "libnvidia-ml.so.1".into(),
            kmsg: "/dev/kmsg".into(),
            boot_id: "/proc/sys/kernel/random/boot_id".into(),
            accounting: Accounting::On,
        }
    }
}

/// What the prolog does about NVML accounting mode, which is off after
/// every boot and driver load (docs/gpu-health.md, "Accounting").
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Accounting {
    /// Turn it on for the job's GPUs where it is off (needs root).
    On,
    /// Leave it as the admin set it (`nvidia-smi -am`).
    Leave,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GpuJobs {
    /// Every job is a GPU job; jobs without SLURM_JOB_GPUS own every GPU.
    All,
    /// Only jobs with SLURM_JOB_GPUS (GRES) are GPU jobs.
    Gres,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MigPolicy {
    Any,
    On,
    Off,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    pub enabled: bool,
    pub gpu_jobs: GpuJobs,
    /// GPUs this node must have; 0 = only compare NVML with the PCI bus.
    pub expected_gpus: u32,
    /// Driver version this node must run; "" = any.
    pub expected_driver: String,
    pub require_ecc: bool,
    /// Persistence mode off: a drain when true, a warning when false.
    pub require_persistence: bool,
    pub mig: MigPolicy,
    /// Hard cap on the whole gate.
    pub gate_timeout: HumanDuration,
    /// How long a GPU's NVLink fabric probe may stay NOT_STARTED or
    /// IN_PROGRESS before it drains: the prolog waits this long for it
    /// within the gate, `slurm-imex check` counts it across its runs.
    pub fabric_wait: HumanDuration,
    /// A drain-class post-job finding makes the epilog fail (Slurm drains the node).
    pub drain_from_epilog: bool,
    /// Also write our reason on the node with `scontrol update`.
    pub set_drain_reason: bool,
    /// Deprecated names of `[slurm] scontrol` and `scontrol_timeout`, still
    /// read (with a warning); the loader moves them there (core's
    /// `OldHealthKeys`), so they are always None after loading.
    #[serde(skip_serializing)]
    pub scontrol: Option<PathBuf>,
    #[serde(skip_serializing)]
    pub scontrol_timeout: Option<HumanDuration>,
    /// Where NVIDIA GPUs are counted on the PCI bus.
    pub pci_devices: PathBuf,
}

impl Documented for HealthConfig {
    const TABLE: &'static str = "health";
    const READ_BY: &'static str =
        "the prolog and epilog (the health gate), `slurm-imex check`, doctor";
    const KEYS: &'static [Key] = &[
        Key::new("enabled", "true", "The quick GPU health gate in the prolog and the post-job check in the epilog."),
        Key::new("gpu_jobs", r#""all""#, "Which jobs are GPU jobs: \"all\" (a job without SLURM_JOB_GPUS owns every GPU) or \"gres\" (only jobs with SLURM_JOB_GPUS)."),
        Key::new("expected_gpus", "0", "GPUs this node must have (0 to 1024; 0: only compare NVML's count with the PCI bus)."),
        Key::new("expected_driver", r#""""#, "Driver version this node must run (\"\": any)."),
        Key::new("require_ecc", "true", "ECC must be enabled on every GPU."),
        Key::new("require_persistence", "false", "Persistence mode off drains when true, warns when false."),
        Key::new("mig", r#""any""#, "MIG mode required: \"on\", \"off\" or \"any\"."),
        Key::new("gate_timeout", r#""10s""#, "Hard cap on the whole gate; each check also has its own budget, scaled up in proportion above 10s (100ms to 10m)."),
        Key::new("fabric_wait", r#""30s""#, "How long a GPU's fabric probe may stay NOT_STARTED or IN_PROGRESS before it drains (0s to 10m)."),
        Key::new("drain_from_epilog", "true", "A drain-class finding after a job fails the epilog, so Slurm drains the node before the next job."),
        Key::new("set_drain_reason", "false", "Also set our drain reason in Slurm from the prolog or epilog at once (one scontrol call each)."),
        Key::new("pci_devices", r#""/sys/bus/pci/devices""#, "Where NVIDIA GPUs are counted on the PCI bus."),
    ];
    const OLD_NAMES: &'static [&'static str] = &["scontrol", "scontrol_timeout"];
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            enabled: true,
            gpu_jobs: GpuJobs::All,
            expected_gpus: 0,
            expected_driver: String::new(),
            require_ecc: true,
            require_persistence: false,
            mig: MigPolicy::Any,
            gate_timeout: HumanDuration(crate::nvml::BUDGET_GATE),
            fabric_wait: HumanDuration(Duration::from_secs(30)),
            drain_from_epilog: true,
            set_drain_reason: false,
            scontrol: None,
            scontrol_timeout: None,
            pci_devices: "/sys/bus/pci/devices".into(),
        }
    }
}

impl Section for GpuConfig {
    fn first_problem(&self) -> Option<(&'static str, String)> {
        None
    }
}

impl Section for HealthConfig {
    fn first_problem(&self) -> Option<(&'static str, String)> {
        let gate = self.gate_timeout.0;
        let durations = vec![
            DurationBound::of("health.gate_timeout", 100 * MS, 10 * MIN, gate),
            DurationBound::of(
                "health.fabric_wait",
                Duration::ZERO,
                10 * MIN,
                self.fabric_wait.0,
            ),
        ];
        let gpus = self.expected_gpus as u64;
        let counts = vec![CountBound::of("health.expected_gpus", 0, 1024, gpus)];
        first_violation(durations, counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_in_range_and_extremes_are_not() {
        assert!(HealthConfig::default().first_problem().is_none());
        let h = HealthConfig {
            expected_gpus: 4096,
            ..HealthConfig::default()
        };
        assert_eq!(h.first_problem().unwrap().0, "health.expected_gpus");
    }
}
