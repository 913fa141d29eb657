//! What the domain watcher of the job that owns this node's daemon saw of
//! it (`watch.json` in the state directory): how many times it died and
//! was restarted in this job, whether it was left down (the epilog then
//! drains the node after the job), and whether a restart is under way
//! (`slurm-imex check` does not drain a node for a daemon being restarted
//! within the bound). One writer, the watcher; read by the epilog and the
//! health check. The node's count of events by kind is the node's
//! standing's (`slurm_imex_core::state::count_events`).

use serde::{Deserialize, Serialize};
use slurm_imex_core::error::Result;
use slurm_imex_core::fsutil::remove_if_exists;
use slurm_imex_core::state::StateDir;

/// The watcher's standing for one job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WatchState {
    pub job_id: u32,
    /// Deaths of the daemon seen in this job.
    pub deaths: u32,
    pub restarts: u32,
    /// Unix ms of the restart under way (the daemon dead or not READY yet
    /// after it); None once it is READY again, or left down.
    pub restarting_since_ms: Option<i64>,
    /// Died more often than `[imex.watch] max_restarts`: left down. The
    /// line says so, for the drain reason.
    pub left_down: Option<String>,
}

impl WatchState {
    /// The watch state of `job_id` (a missing, corrupt or other job's file
    /// is a fresh one).
    pub fn load(state: &StateDir, job_id: u32) -> WatchState {
        state
            .read_json::<WatchState>(&state.watch_state_path(), "IMEX watch state")
            .filter(|w| w.job_id == job_id)
            .unwrap_or(WatchState {
                job_id,
                ..WatchState::default()
            })
    }

    /// Whatever job's watch state is there (for the health check).
    pub fn current(state: &StateDir) -> Option<WatchState> {
        state.read_json::<WatchState>(&state.watch_state_path(), "IMEX watch state")
    }

    pub fn save(&self, state: &StateDir) -> Result<()> {
        state.write_json(&state.watch_state_path(), self)
    }

    /// Forget it (the epilog, once the job's domain is torn down).
    pub fn clear(state: &StateDir) -> Result<()> {
        remove_if_exists(&state.watch_state_path())
    }

    /// A restart within the bound is under way for `owner`'s daemon.
    pub fn restarting(&self, owner: u32) -> bool {
        self.job_id == owner && self.restarting_since_ms.is_some() && self.left_down.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_jobs_state_is_not_this_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        state.ensure().unwrap();
        let w = WatchState {
            job_id: 7,
            deaths: 2,
            restarts: 2,
            restarting_since_ms: Some(5),
            left_down: None,
        };
        w.save(&state).unwrap();
        assert_eq!(WatchState::load(&state, 7), w);
        assert_eq!(WatchState::load(&state, 8).deaths, 0);
        assert!(WatchState::current(&state).unwrap().restarting(7));
        assert!(!WatchState::current(&state).unwrap().restarting(8));
        WatchState::clear(&state).unwrap();
        assert!(WatchState::current(&state).is_none());
    }

    #[test]
    fn a_daemon_left_down_is_not_restarting() {
        let w = WatchState {
            job_id: 7,
            restarting_since_ms: Some(5),
            left_down: Some("died 4 times".into()),
            ..WatchState::default()
        };
        assert!(!w.restarting(7));
    }
}
