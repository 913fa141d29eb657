//! The node's state directory (`[node] state_dir`, default /run/slurm-imex:
//! a tmpfs, so a reboot clears it). This module owns its layout (every path
//! in it is named here and nowhere else), how its JSON files are read and
//! written (atomically, a corrupt file set aside), and the sweep of what
//! killed writers leave behind (`sweep`).
//!
//! ```text
//! domain.lock, domain.owner   which job owns this node's IMEX daemon (domain.rs)
//! jobs/<job>.json             what the prolog concluded for an --imex job (job_record.rs, domain.rs)
//! nvidia-imex.pid, .out       the daemon the process manager spawned (slurm_imex_domain::imex::daemon)
//! watch.pid                   the job's domain watcher, pid and start time (slurm_imex_domain::imex::watcher_pid)
//! watch.json                  what that watcher saw of the daemon: deaths, restarts (slurm_imex_domain::imex::watch_state)
//! watch-counters.json         the node's domain events by kind, for the export (event_counts.rs; only watchers write it)
//! gpu-jobs/<job>.json         a GPU job's start snapshot, prolog -> epilog
//! xid-checkpoint.json         per GPU (and "node"), the last kernel-log record already judged
//! node-metrics.json           this node's standing for the export (node.rs)
//! published-clique            the NVLink clique last published in Slurm (published.rs)
//! extra-left-alone            Extra held someone else's text (said once)
//! no-nvidia-gpu               a gate found no NVIDIA GPU here (published.rs)
//! ```

mod domain;
mod event_counts;
pub mod job_record;
mod node;
mod published;
pub mod sweep;

pub use domain::DomainLock;
pub use event_counts::{count_events, event_counts};
pub use node::NodeState;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::fsutil::{ensure_dir, read_bounded_text, write_atomic};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Largest state file read back (a start snapshot of 72 GPUs is ~100 KiB).
const MAX_STATE_FILE_BYTES: u64 = 16 << 20;

/// The state directory of one node.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    pub fn new(root: &Path) -> StateDir {
        StateDir {
            root: root.to_path_buf(),
        }
    }

    /// The directory `[node] state_dir` names.
    pub fn of(cfg: &Config) -> StateDir {
        StateDir::new(&cfg.node.state_dir)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn jobs_dir(&self) -> PathBuf {
        self.root.join("jobs")
    }

    fn gpu_jobs_dir(&self) -> PathBuf {
        self.root.join("gpu-jobs")
    }

    /// Every directory of the state, for the sweep.
    pub fn dirs(&self) -> [PathBuf; 3] {
        [self.root.clone(), self.jobs_dir(), self.gpu_jobs_dir()]
    }

    /// The IMEX job record of `job_id`.
    pub fn record_path(&self, job_id: u32) -> PathBuf {
        self.jobs_dir().join(format!("{job_id}.json"))
    }

    fn owner_path(&self) -> PathBuf {
        self.root.join("domain.owner")
    }

    fn lock_path(&self) -> PathBuf {
        self.root.join("domain.lock")
    }

    pub fn pid_file(&self) -> PathBuf {
        self.root.join("nvidia-imex.pid")
    }

    /// The domain watcher of the job that owns the daemon: `<pid> <start>`.
    pub fn watcher_pid_file(&self) -> PathBuf {
        self.root.join("watch.pid")
    }

    /// What that watcher saw of the daemon
    /// (`slurm_imex_domain::imex::watch_state::WatchState`).
    pub fn watch_state_path(&self) -> PathBuf {
        self.root.join("watch.json")
    }

    /// The node's domain events by kind (`event_counts`).
    fn watch_counters_path(&self) -> PathBuf {
        self.root.join("watch-counters.json")
    }

    /// Where a daemon spawned by the process manager writes stdout/stderr.
    pub fn daemon_output(&self) -> PathBuf {
        self.root.join("nvidia-imex.out")
    }

    /// What the prolog leaves for the epilog of a GPU job.
    pub fn gpu_start_path(&self, job_id: u32) -> PathBuf {
        self.gpu_jobs_dir().join(format!("{job_id}.json"))
    }

    /// Per GPU (PCI id) the last kmsg sequence already judged, with the
    /// boot it counts in (a persistent state directory keeps it across a
    /// reboot, which restarts kmsg numbering).
    pub fn xid_checkpoint_path(&self) -> PathBuf {
        self.root.join("xid-checkpoint.json")
    }

    /// Per GPU (UUID) since when `slurm-imex check` has seen its fabric
    /// probe not done yet (NOT_STARTED or IN_PROGRESS), so a probe that
    /// stays so drains at a later check, and a first one does not.
    pub fn fabric_seen_path(&self) -> PathBuf {
        self.root.join("fabric-seen.json")
    }

    fn node_state_path(&self) -> PathBuf {
        self.root.join("node-metrics.json")
    }

    fn published_clique_path(&self) -> PathBuf {
        self.root.join("published-clique")
    }

    fn extra_left_alone_path(&self) -> PathBuf {
        self.root.join("extra-left-alone")
    }

    fn accounting_noted_path(&self) -> PathBuf {
        self.root.join("accounting-turned-on")
    }

    fn no_gpu_path(&self) -> PathBuf {
        self.root.join("no-nvidia-gpu")
    }

    /// The root and `jobs/`, created when missing and held to the trust
    /// boundary.
    pub fn ensure(&self) -> Result<()> {
        ensure_dir(&self.root, 0o755)?;
        ensure_dir(&self.jobs_dir(), 0o755)
    }

    /// Read a state file (`what`, for the log) of at most `max_bytes`,
    /// under the same trust rules as the config (`crate::trust`): owned by
    /// root (or the caller), writable by nobody else, and a symlink judged
    /// by where it leads. Missing (or gone meanwhile): `Ok(None)`. The file
    /// itself untrusted: renamed to `<name>.untrusted` (replacing an older
    /// one), one line logged, and `Ok(None)`: the caller starts afresh, as
    /// without the file (the XID checkpoint: the kernel log is judged from
    /// its start). Its directory untrusted, a directory at its path, or
    /// unreadable: the error, and nothing is moved (the fault is not the
    /// file's, and moving it would lose a record the epilog needs).
    pub fn read_text(&self, path: &Path, what: &str, max_bytes: u64) -> Result<Option<String>> {
        let Some(meta) = metadata_unless_missing(path)? else {
            return Ok(None);
        };
        if meta.is_dir() {
            return Err(Error::invalid(format!(
                "{what} {} is a directory, not a file: remove it",
                path.display()
            )));
        }
        if let Err(why) = crate::trust::check(path, crate::trust::Expect::File, what) {
            // Whose fault, asked only on failure (the check above already
            // walked the directories: no second walk on the hooks' path).
            if let Some(dir) = path.parent() {
                crate::trust::check(dir, crate::trust::Expect::Dir, "the state directory")?;
            }
            if metadata_unless_missing(path)?.is_none() {
                return Ok(None);
            }
            set_aside_untrusted(path, what, &why);
            return Ok(None);
        }
        read_bounded_text(path, max_bytes).map(Some)
    }

    /// Whether the marker file `path` is there, and trusted (one that is
    /// not is set aside as [`StateDir::read_text`] does: not there).
    pub fn has_marker(&self, path: &Path, what: &str) -> bool {
        matches!(self.read_text(path, what, 4096), Ok(Some(_)))
    }

    /// Read a JSON state file we wrote, under [`StateDir::read_text`]'s
    /// trust rules. Missing or untrusted: None. Unreadable or corrupt:
    /// logged with its path, renamed to `<name>.corrupt` (replacing an older
    /// one) so the next write starts clean and an admin can look, then None.
    pub fn read_json<T: DeserializeOwned>(&self, path: &Path, what: &str) -> Option<T> {
        let text = match self.read_text(path, what, MAX_STATE_FILE_BYTES) {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!("{what} unreadable, ignored: {e}");
                return None;
            }
        };
        match serde_json::from_str(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                let aside = path.with_extension("json.corrupt");
                let moved = std::fs::rename(path, &aside).is_ok();
                let line = format!(
                    "corrupt {what} {} ({e}){}",
                    path.display(),
                    if moved {
                        format!("; moved aside to {}", aside.display())
                    } else {
                        String::new()
                    }
                );
                crate::logging::report_error(&format!("slurm-imex: {line}"));
                None
            }
        }
    }

    /// Write `value` as JSON to `path` (a path of this directory),
    /// atomically, creating its directory when missing.
    pub fn write_json<T: Serialize>(&self, path: &Path, value: &T) -> Result<()> {
        let text = serde_json::to_vec(value)
            .map_err(|e| Error::new(format!("cannot encode {}: {e}", path.display())))?;
        if let Some(dir) = path.parent() {
            ensure_dir(dir, 0o755)?;
        }
        write_atomic(path, &text, 0o644)
    }
}

/// Rename a state file that failed the trust rules to `<name>.untrusted`
/// (the name itself, never where a symlink leads) and say so in one line.
/// `path`'s own metadata (a symlink's, not its target's); None when there
/// is nothing there.
fn metadata_unless_missing(path: &Path) -> Result<Option<std::fs::Metadata>> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("{}: {e}", path.display()))),
    }
}

fn set_aside_untrusted(path: &Path, what: &str, why: &Error) {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".untrusted");
    let aside = PathBuf::from(aside);
    let moved = match std::fs::rename(path, &aside) {
        Ok(()) => format!("set aside to {}", aside.display()),
        Err(e) => format!("cannot set it aside ({e}), ignored"),
    };
    crate::logging::report_error(&format!(
        "slurm-imex: {what} {} not trusted, {moved}; going on without it: {why}",
        path.display()
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn json_round_trips_and_a_corrupt_file_is_set_aside() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir::new(&d.path().join("state"));
        let path = state.xid_checkpoint_path();
        assert_eq!(state.read_json::<BTreeMap<String, u64>>(&path, "x"), None);
        let cp = BTreeMap::from([("0000:1a:00.0".to_string(), 7u64)]);
        state.write_json(&path, &cp).unwrap();
        assert_eq!(state.read_json(&path, "x"), Some(cp));
        std::fs::write(&path, "{").unwrap();
        assert_eq!(state.read_json::<BTreeMap<String, u64>>(&path, "x"), None);
        assert!(!path.exists());
        assert!(path.with_extension("json.corrupt").exists());
    }

    #[test]
    fn a_state_file_another_user_could_write_is_set_aside() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let state = StateDir::new(&d.path().join("state"));
        let path = state.xid_checkpoint_path();
        let cp = BTreeMap::from([("0000:1a:00".to_string(), 7u64)]);
        state.write_json(&path, &cp).unwrap();
        assert_eq!(state.read_json(&path, "XID checkpoint"), Some(cp.clone()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(
            state.read_json::<BTreeMap<String, u64>>(&path, "XID checkpoint"),
            None
        );
        assert!(!path.exists());
        assert!(d
            .path()
            .join("state/xid-checkpoint.json.untrusted")
            .exists());
        // A symlink to a file others may write: the link is set aside, not its target.
        let open = d.path().join("open.json");
        std::fs::write(&open, "{}").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
        std::os::unix::fs::symlink(&open, &path).unwrap();
        assert!(!state.has_marker(&path, "marker"));
        assert!(open.exists() && !path.exists());
        assert_eq!(state.read_text(&path, "x", 10).unwrap(), None);
    }

    #[test]
    fn a_fault_that_is_not_the_files_moves_nothing() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let state = StateDir::new(&d.path().join("state"));
        let path = state.xid_checkpoint_path();
        state
            .write_json(&path, &BTreeMap::from([("a", 1u64)]))
            .unwrap();
        // Its directory made group-writable: an error, and the file stays.
        let dir = path.parent().unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o775)).unwrap();
        let err = state.read_text(&path, "XID checkpoint", 4096).unwrap_err();
        assert!(err.to_string().contains("state directory"), "{err}");
        assert!(path.exists());
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A directory where the file should be: an error, nothing renamed.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let err = state.read_text(&path, "XID checkpoint", 4096).unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        assert!(path.is_dir());
    }

    #[test]
    fn every_file_lives_in_one_of_its_dirs() {
        let state = StateDir::new(Path::new("/run/slurm-imex"));
        let dirs = state.dirs();
        for file in [
            state.record_path(3),
            state.owner_path(),
            state.lock_path(),
            state.pid_file(),
            state.daemon_output(),
            state.gpu_start_path(3),
            state.xid_checkpoint_path(),
            state.node_state_path(),
            state.published_clique_path(),
            state.extra_left_alone_path(),
            state.no_gpu_path(),
            state.watcher_pid_file(),
            state.watch_state_path(),
            state.watch_counters_path(),
        ] {
            assert!(
                dirs.iter().any(|d| file.parent() == Some(d.as_path())),
                "{file:?}"
            );
        }
    }
}
