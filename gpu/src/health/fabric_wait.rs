//! A fabric probe that is not done yet, across `slurm-imex check` runs:
//! since when each GPU's probe has been seen NOT_STARTED or IN_PROGRESS
//! (`StateDir::fabric_seen_path`). The probe stays so for about 30 s after
//! a reboot, and until a fabric partition is activated (NVIDIA's DRA
//! driver, issue #1264); a check judges at once, so a first such reading
//! is only a warning, and one that lasts past `[health] fabric_wait` across
//! checks drains (`checks::fabric`). The prolog waits within the bound
//! itself (`nvml::GpuReader::waiting_for_fabric`).

use crate::nvml::GpuSnapshot;
use serde::{Deserialize, Serialize};
use slurm_imex_core::state::StateDir;
use std::collections::BTreeMap;

/// Per GPU UUID, the Unix time a check first saw its probe not done.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricSeen {
    pub since: BTreeMap<String, i64>,
}

/// Most GPUs a file keeps (a node has at most a few dozen): a file grown
/// past it by hand is read as empty, so every probe counts from now.
const MAX_GPUS: usize = 1024;

impl FabricSeen {
    /// What the last check left; empty when there is none (or it is
    /// unreadable, corrupt or untrusted, which `StateDir::read_json` sets
    /// aside): every probe not done then counts from this check.
    pub fn load(state: &StateDir) -> FabricSeen {
        state
            .read_json::<FabricSeen>(&state.fabric_seen_path(), "fabric probe state")
            .filter(|s| s.since.len() <= MAX_GPUS)
            .unwrap_or_default()
    }

    /// Keep it for the next check (best effort: lost, the next check
    /// counts from itself, which only delays a drain).
    pub fn save(&self, state: &StateDir) {
        if let Err(e) = state.write_json(&state.fabric_seen_path(), self) {
            tracing::warn!("cannot keep the fabric probe state: {e}");
        }
    }

    /// Mark each snapshot whose probe is not done with how long checks have
    /// seen it so (`transitional_ms`), and say what the next check is to
    /// know: only the GPUs whose probe is still not done, each since it was
    /// first seen so (a probe that completed starts over).
    pub fn apply(&self, snapshots: &mut [GpuSnapshot], now_s: i64) -> FabricSeen {
        let mut next = FabricSeen::default();
        for snap in snapshots {
            let uuid = snap.uuid.clone();
            let crate::nvml::Reading::Value(fabric) = &mut snap.fabric else {
                continue;
            };
            if !fabric.is_transitional() {
                continue;
            }
            let first = self
                .since
                .get(&uuid)
                .copied()
                .filter(|t| *t <= now_s)
                .unwrap_or(now_s);
            let seen_s = u64::try_from(now_s - first).unwrap_or(0);
            fabric.transitional_ms = Some(seen_s.saturating_mul(1000));
            next.since.insert(uuid, first);
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvml::snapshot::{FabricInfo, Reading};

    fn gpu(uuid: &str, state: &str) -> GpuSnapshot {
        GpuSnapshot {
            uuid: uuid.into(),
            fabric: Reading::Value(FabricInfo {
                state: state.into(),
                ..FabricInfo::default()
            }),
            ..GpuSnapshot::default()
        }
    }

    fn waited(s: &GpuSnapshot) -> Option<u64> {
        s.fabric.value().and_then(|f| f.transitional_ms)
    }

    #[test]
    fn a_probe_counts_from_the_first_check_that_saw_it_not_done() {
        let mut gpus = [gpu("GPU-a", "IN_PROGRESS"), gpu("GPU-b", "COMPLETED")];
        let first = FabricSeen::default().apply(&mut gpus, 1000);
        assert_eq!(waited(&gpus[0]), Some(0));
        assert_eq!(waited(&gpus[1]), None);
        assert_eq!(first.since, BTreeMap::from([("GPU-a".into(), 1000)]));
        let mut later = [gpu("GPU-a", "NOT_STARTED"), gpu("GPU-b", "COMPLETED")];
        let second = first.apply(&mut later, 1095);
        assert_eq!(waited(&later[0]), Some(95_000));
        assert_eq!(second, first);
        // Done: forgotten, so a later probe not done counts from anew.
        let mut done = [gpu("GPU-a", "COMPLETED")];
        assert!(second.apply(&mut done, 1200).since.is_empty());
    }

    #[test]
    fn a_time_in_the_future_counts_from_now() {
        let seen = FabricSeen {
            since: BTreeMap::from([("GPU-a".into(), 5000)]),
        };
        let mut gpus = [gpu("GPU-a", "IN_PROGRESS")];
        let next = seen.apply(&mut gpus, 1000);
        assert_eq!(waited(&gpus[0]), Some(0));
        assert_eq!(next.since["GPU-a"], 1000);
    }

    #[test]
    fn it_is_kept_in_the_state_directory() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir::new(d.path());
        assert_eq!(FabricSeen::load(&state), FabricSeen::default());
        let seen = FabricSeen {
            since: BTreeMap::from([("GPU-a".into(), 7)]),
        };
        seen.save(&state);
        assert_eq!(FabricSeen::load(&state), seen);
    }
}
