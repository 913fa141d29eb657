//! Who the domain watcher of a job is (`watch.pid`: its pid, start time
//! and job): written when the prolog spawns it, read by the epilog that
//! stops it and by `slurm-imex check`, which leaves a node alone while the
//! owning job's watcher is there to restart its daemon. A watcher is that
//! job's only when the file names the job and that exact process still runs.

use crate::imex::daemon_proc::ProcId;
use slurm_imex_core::error::Result;
use slurm_imex_core::fsutil::write_atomic;
use slurm_imex_core::state::StateDir;

/// One job's watcher process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watcher {
    pub process: ProcId,
    pub job_id: u32,
}

impl Watcher {
    /// `<pid> <start> <job>`.
    pub fn render(self) -> String {
        format!(
            "{} {} {}\n",
            self.process.pid, self.process.start, self.job_id
        )
    }

    pub fn parse(text: &str) -> Option<Watcher> {
        let mut fields = text.split_whitespace();
        let pid = fields.next()?;
        let start = fields.next()?;
        let job_id = fields.next()?.parse().ok()?;
        let process = ProcId::parse(&format!("{pid} {start}"))?;
        fields
            .next()
            .is_none()
            .then_some(Watcher { process, job_id })
    }

    pub fn save(self, state: &StateDir) -> Result<()> {
        write_atomic(&state.watcher_pid_file(), self.render().as_bytes(), 0o644)
    }

    /// The watcher the state directory names, if that process still runs.
    pub fn running(state: &StateDir) -> Option<Watcher> {
        let text = state
            .read_text(&state.watcher_pid_file(), "IMEX watcher pid file", 4096)
            .ok()??;
        Watcher::parse(&text).filter(|w| w.process.alive())
    }

    /// `job_id`'s watcher, if it runs.
    pub fn of_job(state: &StateDir, job_id: u32) -> Option<Watcher> {
        Watcher::running(state).filter(|w| w.job_id == job_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pid_file_names_the_process_and_its_job() {
        let w = Watcher {
            process: ProcId { pid: 42, start: 7 },
            job_id: 9,
        };
        assert_eq!(Watcher::parse(&w.render()), Some(w));
        for bad in ["42 7", "42 7 x", "42 7 9 1", "1 7 9", "", "42 seven 9"] {
            assert_eq!(Watcher::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_a_live_process_of_the_job_is_its_watcher() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        state.ensure().unwrap();
        let me = ProcId::of(std::process::id() as i32).unwrap();
        Watcher {
            process: me,
            job_id: 9,
        }
        .save(&state)
        .unwrap();
        assert_eq!(Watcher::of_job(&state, 9).map(|w| w.job_id), Some(9));
        assert_eq!(Watcher::of_job(&state, 10), None);
        let gone = ProcId {
            pid: me.pid,
            start: me.start + 1,
        };
        Watcher {
            process: gone,
            job_id: 9,
        }
        .save(&state)
        .unwrap();
        assert_eq!(Watcher::running(&state), None);
    }
}
