//! The node's count of IMEX domain events by kind (`watch-counters.json`):
//! part of the node's standing, with no job label. Only the domain watchers
//! add to it ([`count_events`]) and the export reads it (`NodeState::load`),
//! so no other writer of the standing can lose an increment. The kinds are
//! the watcher's (`slurm_imex_jobsummary::imex_event::ImexEventKind`), kept
//! here as the labels they are.

use super::StateDir;
use crate::error::Result;
use std::collections::BTreeMap;

/// Add `kinds` (one count each) to the node's event counters.
pub fn count_events(state: &StateDir, kinds: &[&str]) -> Result<()> {
    let mut counts = event_counts(state);
    for kind in kinds {
        let n = counts.entry(kind.to_string()).or_default();
        *n = n.saturating_add(1);
    }
    state.write_json(&state.watch_counters_path(), &counts)
}

/// The node's event counters by kind (none yet: empty).
pub fn event_counts(state: &StateDir) -> BTreeMap<String, u64> {
    state
        .read_json(&state.watch_counters_path(), "IMEX event counters")
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_counters_add_up_and_survive_a_corrupt_file() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        state.ensure().unwrap();
        count_events(&state, &["daemon-died", "daemon-died", "domain-up"]).unwrap();
        count_events(&state, &["daemon-died"]).unwrap();
        let counts = event_counts(&state);
        assert_eq!(counts.get("daemon-died"), Some(&3));
        assert_eq!(counts.get("domain-up"), Some(&1));
        std::fs::write(dir.path().join("watch-counters.json"), "{").unwrap();
        assert!(event_counts(&state).is_empty());
    }
}
