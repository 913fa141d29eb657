//! The kernel's XID events since the last checkpoint, as findings on the
//! GPU they name: drain-class XIDs drain, ignorable ones are dropped.

use super::gpu_ref;
use crate::health::check_names::XID;
use crate::health::{Finding, Severity};
use crate::nvml::snapshot::GpuSnapshot;
use crate::xid::{is_drain_class, Bucket, XidEvent};

/// XIDs logged since the last checkpoint on the given GPUs.
pub fn check_xids(events: &[XidEvent], snapshots: &[GpuSnapshot]) -> Vec<Finding> {
    let mut out = Vec::new();
    for e in events {
        let gpu = snapshots.iter().find(|s| s.pci == e.pci);
        let severity = if is_drain_class(e.xid) {
            Severity::Drain
        } else if e.bucket == Bucket::Ignore {
            continue;
        } else {
            Severity::Warn
        };
        out.push(Finding {
            check: XID.into(),
            severity,
            gpu: gpu.map(gpu_ref),
            detail: format!(
                "XID {} ({}) on {}: {}",
                e.xid,
                e.bucket.as_str(),
                e.pci,
                e.message
            ),
        });
    }
    out
}
