//! The GPU's configured modes against the site's policy: ECC, MIG,
//! persistence, whether its infoROM is intact, and whether the prolog could
//! turn NVML accounting mode on.

use super::{GpuFindings, Hook};
use crate::config::{HealthConfig, MigPolicy};
use crate::nvml::snapshot::Reading;

pub(super) fn ecc_mode(f: &mut GpuFindings, cfg: &HealthConfig, _: Hook) {
    if let (true, Reading::Value(false)) = (cfg.require_ecc, &f.gpu.ecc_enabled) {
        f.drain("ECC is disabled (require_ecc = true)".into());
    }
}

pub(super) fn mig_mode(f: &mut GpuFindings, cfg: &HealthConfig, _: Hook) {
    let Reading::Value(mig) = f.gpu.mig_enabled else {
        return;
    };
    let wrong = match cfg.mig {
        MigPolicy::Any => false,
        MigPolicy::On => !mig,
        MigPolicy::Off => mig,
    };
    if wrong {
        let is = if mig { "on" } else { "off" };
        let detail = format!("MIG is {is} but [health] mig = {:?}", cfg.mig);
        f.drain(detail.to_lowercase());
    }
}

pub(super) fn persistence(f: &mut GpuFindings, cfg: &HealthConfig, _: Hook) {
    if let Reading::Value(false) = f.gpu.persistence {
        let detail = "persistence mode is off".to_string();
        if cfg.require_persistence {
            f.drain(detail);
        } else {
            f.warn(detail);
        }
    }
}

pub(super) fn inforom(f: &mut GpuFindings, _: &HealthConfig, _: Hook) {
    if let Reading::Value(false) = f.gpu.inforom_valid {
        f.warn("infoROM is corrupted".into());
    }
}

/// The prolog could not turn accounting mode on (`[gpu] accounting = "on"`):
/// the job runs, but its utilization and peak memory are not recorded.
pub(super) fn accounting(f: &mut GpuFindings, _: &HealthConfig, _: Hook) {
    if let Some(Err(e)) = &f.gpu.accounting_set {
        f.warn(format!(
            "cannot turn NVML accounting mode on ({e}): the job's utilization and peak memory \
             are not recorded (the prolog must run as root; or set [gpu] accounting = \"leave\")"
        ));
    }
}
