//! Per-node runtime state under `[imex] state_dir` (a tmpfs such as /run, so
//! a reboot clears it): which job owns this node's IMEX daemon, and what the
//! prolog concluded for each job, which the SPANK plugin reads before a task
//! starts. All writes are atomic; ownership changes happen under a lock.

use crate::error::{Error, Result};
use crate::fsutil::{ensure_dir, remove_if_exists, write_atomic};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

/// What the prolog concluded for one job on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: u32,
    /// The channel slurm-imex hands out; None when Slurm's switch/nvidia_imex does.
    pub channel: Option<u32>,
    pub server_port: u16,
    /// The job's nodes in nodes_config order.
    pub nodes: Vec<String>,
    pub outcome: Outcome,
    /// The whole prolog's wall time on this node (GPU gate and domain, run
    /// side by side), written once both are done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prolog_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Outcome {
    /// Domain UP with every node READY and connected.
    Ready { waited_ms: u64 },
    /// The job cannot use IMEX here; `cause` is shown to the user.
    Failed { cause: String, node_fault: bool },
}

/// The state directory of one node.
pub struct StateDir {
    root: PathBuf,
}

/// Held while ownership of the daemon is read or changed.
pub struct DomainLock {
    _lock: Flock<File>,
}

impl StateDir {
    pub fn new(root: &Path) -> StateDir {
        StateDir {
            root: root.to_path_buf(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn jobs_dir(&self) -> PathBuf {
        self.root.join("jobs")
    }

    /// Every directory the state is written in.
    pub fn dirs(&self) -> [PathBuf; 2] {
        [self.root.clone(), self.jobs_dir()]
    }

    pub fn record_path(&self, job_id: u32) -> PathBuf {
        self.jobs_dir().join(format!("{job_id}.json"))
    }

    pub fn pid_file(&self) -> PathBuf {
        self.root.join("nvidia-imex.pid")
    }

    /// Where a daemon spawned by the process manager writes stdout/stderr.
    pub fn daemon_output(&self) -> PathBuf {
        self.root.join("nvidia-imex.out")
    }

    fn owner_path(&self) -> PathBuf {
        self.root.join("domain.owner")
    }

    pub fn ensure(&self) -> Result<()> {
        ensure_dir(&self.root, 0o755)?;
        ensure_dir(&self.jobs_dir(), 0o755)
    }

    /// Exclusive lock on this node's domain ownership (blocks).
    pub fn lock(&self) -> Result<DomainLock> {
        self.ensure()?;
        let path = self.root.join("domain.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::new(format!("cannot open {}: {e}", path.display())))?;
        let lock = Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, e)| Error::new(format!("cannot lock {}: {e}", path.display())))?;
        Ok(DomainLock { _lock: lock })
    }

    /// The job whose domain this node's daemon serves, if any.
    pub fn owner(&self, _lock: &DomainLock) -> Result<Option<u32>> {
        self.read_owner()
    }

    /// Lock-free read, for status displays only.
    pub fn read_owner(&self) -> Result<Option<u32>> {
        let path = self.owner_path();
        match std::fs::read_to_string(&path) {
            Ok(t) => t.trim().parse::<u32>().map(Some).map_err(|_| {
                Error::new(format!(
                    "{} holds \"{}\", not a job id: remove it once no IMEX job runs here",
                    path.display(),
                    t.trim()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::new(format!("cannot read {}: {e}", path.display()))),
        }
    }

    pub fn set_owner(&self, _lock: &DomainLock, job_id: u32) -> Result<()> {
        write_atomic(&self.owner_path(), format!("{job_id}\n").as_bytes(), 0o644)
    }

    pub fn clear_owner(&self, _lock: &DomainLock) -> Result<()> {
        remove_if_exists(&self.owner_path())
    }

    pub fn write_record(&self, record: &JobRecord) -> Result<()> {
        self.ensure()?;
        let text = serde_json::to_vec_pretty(record)
            .map_err(|e| Error::new(format!("cannot encode job record: {e}")))?;
        write_atomic(&self.record_path(record.job_id), &text, 0o644)
    }

    /// None when the prolog left no record for this job.
    pub fn read_record(&self, job_id: u32) -> Result<Option<JobRecord>> {
        let path = self.record_path(job_id);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Error::new(format!("corrupt IMEX job record {}: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::new(format!("cannot read {}: {e}", path.display()))),
        }
    }

    pub fn remove_record(&self, job_id: u32) -> Result<()> {
        remove_if_exists(&self.record_path(job_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_missing_is_none() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::new(&d.path().join("state"));
        assert_eq!(s.read_record(5).unwrap(), None);
        let r = JobRecord {
            job_id: 5,
            channel: Some(6),
            server_port: 33797,
            nodes: vec!["n1".into(), "n2".into()],
            outcome: Outcome::Failed {
                cause: "peer n2 never connected".into(),
                node_fault: false,
            },
            prolog_ms: Some(12),
        };
        s.write_record(&r).unwrap();
        assert_eq!(s.read_record(5).unwrap(), Some(r));
        s.remove_record(5).unwrap();
        s.remove_record(5).unwrap();
        assert_eq!(s.read_record(5).unwrap(), None);
    }

    #[test]
    fn owner_is_set_and_cleared_under_lock() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::new(d.path());
        let lock = s.lock().unwrap();
        assert_eq!(s.owner(&lock).unwrap(), None);
        s.set_owner(&lock, 77).unwrap();
        assert_eq!(s.owner(&lock).unwrap(), Some(77));
        s.clear_owner(&lock).unwrap();
        assert_eq!(s.read_owner().unwrap(), None);
        std::fs::write(d.path().join("domain.owner"), "junk").unwrap();
        assert!(s
            .read_owner()
            .unwrap_err()
            .to_string()
            .contains("not a job id"));
    }

    #[test]
    fn corrupt_record_is_an_error_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::new(d.path());
        s.ensure().unwrap();
        std::fs::write(s.record_path(9), "{").unwrap();
        assert!(s.read_record(9).unwrap_err().to_string().contains("9.json"));
    }
}
