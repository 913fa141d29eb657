//! The driver's GPU recovery actions by name (NVML field 230,
//! `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`, values `nvmlDeviceGpuRecoveryAction_t`):
//! one spelling for the GPU side that reads them and decides what each asks
//! (`slurm_imex_gpu::recovery`) and for the records that show them (the job
//! database, the job summary). docs/gpu-health.md, "Recovery actions".

/// The names NVML gives the values it defines, in order (5 since R595, 6
/// and 7 since R615: NVML change log).
pub const NAMES: [&str; 8] = [
    "NONE",
    "GPU_RESET",
    "NODE_REBOOT",
    "DRAIN_P2P",
    "DRAIN_AND_RESET",
    "RECOVER_IMEX_DOMAIN",
    "BUS_RESET",
    "SYSTEM_REBOOT",
];

/// NVML's name for `value`, when this release knows it.
pub fn name(value: u64) -> Option<&'static str> {
    usize::try_from(value)
        .ok()
        .and_then(|i| NAMES.get(i).copied())
}

/// `RECOVER_IMEX_DOMAIN (5)`, or `8, unknown to this slurm-imex` for a
/// value this release does not know.
pub fn describe(value: u64) -> String {
    match name(value) {
        Some(name) => format!("{name} ({value})"),
        None => format!("{value}, unknown to this slurm-imex"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_named_in_nvmls_order_and_newer_ones_by_number() {
        assert_eq!(describe(0), "NONE (0)");
        assert_eq!(describe(5), "RECOVER_IMEX_DOMAIN (5)");
        assert_eq!(describe(7), "SYSTEM_REBOOT (7)");
        assert_eq!(describe(8), "8, unknown to this slurm-imex");
        assert_eq!(name(u64::MAX), None);
    }
}
