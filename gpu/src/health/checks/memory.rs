//! Memory health of one GPU: the driver's recovery action, row remapping,
//! retired pages and volatile double-bit ECC errors, against DCGM's limits.

use super::{GpuFindings, Hook, MAX_RETIRED_PAGES, MAX_UNCORRECTABLE_REMAPS};
use crate::config::HealthConfig;
use crate::nvml::snapshot::Reading;
use crate::recovery::{Asks, RecoveryAction};

/// The driver's recovery action (`crate::recovery`): RECOVER_IMEX_DOMAIN is
/// said, never a drain here (the next `--imex` job's fresh domain restores
/// it, and that job's prolog reads it again once the domain is UP); every
/// other action but NONE drains, naming what it asks.
pub(super) fn recovery_action(f: &mut GpuFindings, _: &HealthConfig, _: Hook) {
    let Reading::Value(value) = f.gpu.recovery_action else {
        return;
    };
    let action = RecoveryAction(value);
    match action.asks() {
        Asks::Nothing => {}
        Asks::RestoreImexDomain => f.warn(action.finding_detail()),
        Asks::Drain { .. } => f.drain(action.finding_detail()),
    }
}

pub(super) fn row_remap(f: &mut GpuFindings, _: &HealthConfig, _: Hook) {
    let Reading::Value(rows) = &f.gpu.remapped_rows else {
        return;
    };
    let detail = if rows.failure {
        "row remapping failed: RMA candidate".to_string()
    } else if rows.uncorrectable >= MAX_UNCORRECTABLE_REMAPS {
        format!(
            "{} uncorrectable remapped rows: RMA candidate",
            rows.uncorrectable
        )
    } else if rows.pending {
        "row remap pending: GPU reset needed".to_string()
    } else {
        return;
    };
    f.drain(detail);
}

pub(super) fn retired_pages(f: &mut GpuFindings, _: &HealthConfig, _: Hook) {
    let Reading::Value(pages) = &f.gpu.retired_pages else {
        return;
    };
    let retired = pages.sbe + pages.dbe;
    if pages.pending {
        f.drain("page retirement pending: GPU reset needed".into());
    } else if retired >= MAX_RETIRED_PAGES {
        f.drain(format!(
            "{retired} retired pages (limit {MAX_RETIRED_PAGES})"
        ));
    }
}

pub(super) fn ecc_dbe(f: &mut GpuFindings, _: &HealthConfig, _: Hook) {
    if let Reading::Value(ecc) = &f.gpu.ecc {
        if ecc.volatile_dbe > 0 {
            let count = ecc.volatile_dbe;
            f.drain(format!("{count} volatile double-bit ECC errors"));
        }
    }
}
