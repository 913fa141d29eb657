//! The driver's kernel-log lines beyond XIDs (`xid::signature`) since the
//! last check, as findings: one per signature and GPU (or the node), under
//! the signature's check, naming how many lines there were. A line about a
//! GPU whose XID the signature defers to is in the same read (a GPU off the
//! bus with its XID 79) is left to the XID's finding.

use super::gpu_ref;
use crate::health::Finding;
use crate::nvml::snapshot::GpuSnapshot;
use crate::xid::checkpoint::{Checkpoint, NODE};
use crate::xid::signature::{named, Sighting, Signature, SIGNATURES};
use crate::xid::XidEvent;

/// What the lines of one read are judged against.
pub struct LogLines<'a> {
    /// The last record already judged, per GPU and for the node.
    pub judged: &'a Checkpoint,
    /// Every XID of the same read, judged already or not.
    pub xids: &'a [XidEvent],
    /// Whether lines about the GPU of this PCI id are this gate's (a job's
    /// gate keeps its own GPUs').
    pub keep: &'a dyn Fn(&str) -> bool,
}

/// The findings of the sightings' lines that are new since the checkpoint.
pub fn check_signatures(
    sightings: &[Sighting],
    lines: &LogLines,
    snapshots: &[GpuSnapshot],
) -> Vec<Finding> {
    let mut found = Vec::new();
    for sighting in sightings {
        let Some(signature) = named(sighting.check) else {
            continue;
        };
        if !lines.concern(sighting, signature) {
            continue;
        }
        let key = sighting.pci.as_deref().unwrap_or(NODE);
        let count = sighting.lines_after(lines.judged.judged_for(key));
        if count == 0 {
            continue;
        }
        let gpu = sighting
            .pci
            .as_ref()
            .and_then(|pci| snapshots.iter().find(|s| s.pci == *pci));
        found.push(Finding {
            check: signature.check.into(),
            severity: signature.severity,
            gpu: gpu.map(gpu_ref),
            detail: detail(signature, sighting, count),
        });
    }
    // In the table's order (drains first), not the log's.
    found.sort_by_key(|f| SIGNATURES.iter().position(|s| s.check == f.check));
    found
}

impl LogLines<'_> {
    /// Whether a sighting is this gate's to judge: lines about the node
    /// always, about a GPU when the gate keeps it and no XID the signature
    /// defers to names the same GPU in the read.
    fn concern(&self, sighting: &Sighting, signature: &Signature) -> bool {
        let Some(pci) = &sighting.pci else {
            return true;
        };
        let told_by_xid = signature
            .unless_xid
            .is_some_and(|xid| self.xids.iter().any(|e| e.xid == xid && e.pci == *pci));
        (self.keep)(pci) && !told_by_xid
    }
}

/// `10000 lines since the last check: <means>; <action>; newest: <line>`,
/// the count first, so a drain reason cut to its length still holds it.
pub(crate) fn detail(signature: &Signature, sighting: &Sighting, count: usize) -> String {
    let lines = if count == 1 { "line" } else { "lines" };
    format!(
        "{count} {lines} since the last check: {}; {}; newest: {}",
        signature.means, signature.action, sighting.newest
    )
}
