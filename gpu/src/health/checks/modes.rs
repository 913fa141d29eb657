//! The GPU's configured modes against the site's policy: ECC, MIG,
//! persistence, and whether its infoROM is intact.

use super::{GpuFindings, Hook};
use crate::nvml::snapshot::Reading;
use slurm_imex_core::config::{HealthConfig, MigPolicy};

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
