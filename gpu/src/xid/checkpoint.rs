//! The XID checkpoint: per GPU (PCI id), the last kernel-log sequence
//! already judged, so an XID is reported once, not by every later gate. It
//! lives in the node state directory (`StateDir::xid_checkpoint_path`, on a
//! tmpfs, so a reboot, which restarts kmsg numbering, clears it). A corrupt
//! checkpoint is logged with its path and set aside (`.corrupt`); the gate
//! then judges every XID still in the kernel log, which may report one again
//! but never misses one.

use slurm_imex_core::state::StateDir;
use std::collections::BTreeMap;

/// Per GPU (PCI id), the last kmsg sequence already judged.
pub type Checkpoint = BTreeMap<String, u64>;

pub fn load(state: &StateDir) -> Checkpoint {
    state
        .read_json(&state.xid_checkpoint_path(), "XID checkpoint")
        .unwrap_or_default()
}

/// Mark everything up to `last_seq` judged for each GPU in `pcis`. A gate
/// that could not read the kernel log (`None`) advances nothing.
pub fn advance<'a>(state: &StateDir, last_seq: Option<u64>, pcis: impl Iterator<Item = &'a str>) {
    let Some(last) = last_seq else {
        return;
    };
    let mut checkpoint = load(state);
    for pci in pcis {
        let seen = checkpoint.entry(pci.to_string()).or_insert(0);
        *seen = (*seen).max(last);
    }
    if let Err(e) = state.write_json(&state.xid_checkpoint_path(), &checkpoint) {
        tracing::warn!("cannot save the XID checkpoint: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_per_gpu_and_never_goes_back() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir::new(d.path());
        advance(&state, Some(10), ["a", "b"].into_iter());
        advance(&state, Some(4), ["a"].into_iter());
        advance(&state, None, ["b"].into_iter());
        let cp = load(&state);
        assert_eq!(cp.get("a"), Some(&10));
        assert_eq!(cp.get("b"), Some(&10));
        advance(&state, Some(12), ["b"].into_iter());
        assert_eq!(load(&state).get("b"), Some(&12));
    }
}
