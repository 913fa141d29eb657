//! The IMEX side of the state directory: which job owns this node's
//! daemon (read and changed under an exclusive lock), and each `--imex`
//! job's record. All writes are atomic.

use super::StateDir;
use crate::error::{Error, Result};
use crate::fsutil::{remove_if_exists, write_atomic};
use crate::state::job_record::JobRecord;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};

/// Held while ownership of the daemon is read or changed.
pub struct DomainLock {
    _lock: Flock<File>,
}

impl StateDir {
    /// Exclusive lock on this node's domain ownership (blocks).
    pub fn lock(&self) -> Result<DomainLock> {
        self.ensure()?;
        let path = self.lock_path();
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
        match self.read_text(&path, "IMEX domain owner", 4096)? {
            Some(t) => t.trim().parse::<u32>().map(Some).map_err(|_| {
                Error::new(format!(
                    "{} holds \"{}\", not a job id: remove it once no IMEX job runs here",
                    path.display(),
                    crate::text::printable(&crate::text::cap(t.trim(), 64))
                ))
            }),
            None => Ok(None),
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
        match self.read_text(&path, "IMEX job record", super::MAX_STATE_FILE_BYTES)? {
            Some(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                Error::new(format!("corrupt IMEX job record {}: {e}", path.display()))
            }),
            None => Ok(None),
        }
    }

    pub fn remove_record(&self, job_id: u32) -> Result<()> {
        remove_if_exists(&self.record_path(job_id))
    }

    /// The jobs with a record on this node (their prolog ran, their epilog
    /// has not yet), in job order; none when `jobs/` does not exist. Only
    /// the names are read: `<job>.json`, nothing else in the directory.
    pub fn record_ids(&self) -> Result<Vec<u32>> {
        let dir = self.jobs_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::new(format!("cannot list {}: {e}", dir.display()))),
        };
        let mut ids: Vec<u32> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json")?.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::job_record::Outcome;

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
            domain: Some("b1".into()),
            rack_source: Some("/etc/slurm/topology.conf".into()),
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
    fn record_ids_are_the_records_present_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::new(&d.path().join("state"));
        assert_eq!(s.record_ids().unwrap(), Vec::<u32>::new(), "no jobs/ yet");
        s.ensure().unwrap();
        for id in [12, 7] {
            std::fs::write(s.record_path(id), "{}").unwrap();
        }
        // An atomic write's leftover and a stranger are not records.
        std::fs::write(d.path().join("state/jobs/.9.json.tmp"), "").unwrap();
        std::fs::write(d.path().join("state/jobs/notes.json"), "").unwrap();
        assert_eq!(s.record_ids().unwrap(), vec![7, 12]);
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
