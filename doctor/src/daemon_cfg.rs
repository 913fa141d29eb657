//! The IMEX daemon's effective config as the doctor judges it: the admin's
//! base config (`[imex.daemon] base_config`), from which every daemon
//! slurm-imex starts is rendered, and, when there is one, the per-job copy
//! (`[imex.daemon] job_config`) the running daemon was started on. That
//! copy keeps every key of the base config but the node list and
//! SERVER_PORT, so the two differ only when the base changed since.

use slurm_imex_core::fsutil::read_bounded_text;
use slurm_imex_domain::imex::daemon_config::DaemonConfigFile;
use slurm_imex_settings::Config;
use std::path::{Path, PathBuf};

/// Most bytes of a daemon config read (NVIDIA's shipped one is ~10 KiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// One config file and where it is.
#[derive(Debug, Clone)]
pub struct DaemonCfg {
    pub path: PathBuf,
    pub file: DaemonConfigFile,
}

impl DaemonCfg {
    pub fn read(path: &Path, what: &str) -> Result<DaemonCfg, String> {
        let text = read_bounded_text(path, MAX_CONFIG_BYTES).map_err(|e| format!("{what}: {e}"))?;
        Ok(DaemonCfg {
            path: path.to_path_buf(),
            file: DaemonConfigFile::parse(&text),
        })
    }

    /// The key's value, trimmed; an absent key reads as empty.
    pub fn value(&self, key: &str) -> &str {
        self.file.get(key).unwrap_or("")
    }
}

/// The base config, and the running daemon's copy when one is there.
#[derive(Debug, Clone)]
pub struct Effective {
    pub base: DaemonCfg,
    pub running: Option<DaemonCfg>,
}

impl Effective {
    /// Err is one line naming the file that could not be read.
    pub fn read(config: &Config) -> Result<Effective, String> {
        let d = &config.imex.daemon;
        let base = DaemonCfg::read(&d.base_config, "[imex.daemon] base_config")?;
        let running = match std::fs::symlink_metadata(&d.job_config) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            _ => Some(DaemonCfg::read(&d.job_config, "[imex.daemon] job_config")?),
        };
        Ok(Effective { base, running })
    }

    /// The base config, then the running copy when any of `keys` differs
    /// from the base (a daemon started before the admin's last edit).
    pub fn differing(&self, keys: &[&str]) -> Vec<&DaemonCfg> {
        let mut all = vec![&self.base];
        if let Some(running) = &self.running {
            if keys.iter().any(|k| running.value(k) != self.base.value(k)) {
                all.push(running);
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_copy_is_read_when_there_and_compared_by_key() {
        let d = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.imex.daemon.base_config = d.path().join("config.cfg");
        config.imex.daemon.job_config = d.path().join("job.cfg");
        assert!(Effective::read(&config)
            .unwrap_err()
            .contains("base_config"));
        std::fs::write(&config.imex.daemon.base_config, "A=1\nB=2\n").unwrap();
        let e = Effective::read(&config).unwrap();
        assert!(e.running.is_none());
        assert_eq!(e.differing(&["A"]).len(), 1);
        std::fs::write(&config.imex.daemon.job_config, "A=1\nB=3\n").unwrap();
        let e = Effective::read(&config).unwrap();
        assert_eq!(e.differing(&["A"]).len(), 1);
        assert_eq!(e.differing(&["A", "B"]).len(), 2);
        assert_eq!(e.base.value("C"), "");
        std::fs::remove_file(&config.imex.daemon.job_config).unwrap();
        std::fs::create_dir(&config.imex.daemon.job_config).unwrap();
        let e = Effective::read(&config).unwrap_err();
        assert!(
            e.contains("job_config") && e.contains("not a regular file"),
            "{e}"
        );
    }
}
