//! Memory health of one GPU: the driver's recovery action, row remapping,
//! retired pages and volatile double-bit ECC errors, against DCGM's limits.

use super::{GpuFindings, Hook, MAX_RETIRED_PAGES, MAX_UNCORRECTABLE_REMAPS};
use crate::config::HealthConfig;
use crate::nvml::snapshot::{recovery_action_name, Reading};

pub(super) fn recovery_action(f: &mut GpuFindings, _: &HealthConfig, _: Hook) {
    if let Reading::Value(action) = f.gpu.recovery_action {
        if action != 0 {
            let name = recovery_action_name(action);
            f.drain(format!("driver asks for recovery action {name}"));
        }
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
