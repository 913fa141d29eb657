//! The IMEX daemon's effective config as the doctor judges it: the admin's
//! base config (`[imex.daemon] base_config`), from which every daemon
//! slurm-imex starts is rendered, and, when there is one, the per-job copy
//! (`[imex.daemon] job_config`) the running daemon was started on. That
//! copy keeps every key of the base config but the node list and
//! SERVER_PORT, so the two differ only when the base changed since.

use slurm_imex_domain::imex::daemon_config::{DaemonConfigFile, Origin, Refused};
use slurm_imex_settings::Config;
use std::path::{Path, PathBuf};

/// One config file, where it is, and which it is.
#[derive(Debug, Clone)]
pub struct DaemonCfg {
    pub path: PathBuf,
    pub file: DaemonConfigFile,
    pub origin: Origin,
}

impl DaemonCfg {
    /// Read as the domain reads it: refused unless it is text.
    pub fn read(path: &Path, origin: Origin) -> Result<DaemonCfg, Refused> {
        Ok(DaemonCfg {
            path: path.to_path_buf(),
            file: DaemonConfigFile::read_as(path, origin)?,
            origin,
        })
    }

    /// The key's value, trimmed; an absent key reads as empty.
    pub fn value(&self, key: &str) -> &str {
        self.file.get(key).unwrap_or("")
    }

    /// The file as a line names it: the running copy says what it is.
    pub fn named(&self) -> String {
        match self.origin {
            Origin::Base => self.path.display().to_string(),
            Origin::Running => format!(
                "{} (the running daemon's copy, {})",
                self.path.display(),
                self.origin.key()
            ),
        }
    }
}

/// The base config, and the running daemon's copy when one is there.
#[derive(Debug, Clone)]
pub struct Effective {
    pub base: DaemonCfg,
    pub running: Option<DaemonCfg>,
    /// The running copy is there but was refused (not a regular file, not
    /// text): every check that judges it says so, naming it.
    pub running_refused: Option<Refused>,
}

impl Effective {
    /// Err: the base config was refused (imex-config FAILs it).
    pub fn read(config: &Config) -> Result<Effective, Refused> {
        let d = &config.engine.daemon;
        let base = DaemonCfg::read(&d.base_config, Origin::Base)?;
        let (running, running_refused) = match std::fs::symlink_metadata(&d.job_config) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, None),
            _ => match DaemonCfg::read(&d.job_config, Origin::Running) {
                Ok(r) => (Some(r), None),
                Err(refused) => (None, Some(refused)),
            },
        };
        Ok(Effective {
            base,
            running,
            running_refused,
        })
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
        config.engine.daemon.base_config = d.path().join("config.cfg");
        config.engine.daemon.job_config = d.path().join("job.cfg");
        assert!(Effective::read(&config)
            .unwrap_err()
            .found
            .contains("base_config"));
        std::fs::write(&config.engine.daemon.base_config, "A=1\nB=2\n").unwrap();
        let e = Effective::read(&config).unwrap();
        assert!(e.running.is_none() && e.running_refused.is_none());
        assert_eq!(e.differing(&["A"]).len(), 1);
        std::fs::write(&config.engine.daemon.job_config, "A=1\nB=3\n").unwrap();
        let e = Effective::read(&config).unwrap();
        assert_eq!(e.differing(&["A"]).len(), 1);
        assert_eq!(e.differing(&["A", "B"]).len(), 2);
        assert_eq!(e.base.value("C"), "");
        assert!(
            e.differing(&["B"])[1]
                .named()
                .ends_with("job.cfg (the running daemon's copy, [imex.daemon] job_config)"),
            "{}",
            e.differing(&["B"])[1].named()
        );
        std::fs::remove_file(&config.engine.daemon.job_config).unwrap();
        std::fs::create_dir(&config.engine.daemon.job_config).unwrap();
        let e = Effective::read(&config).unwrap();
        let refused = e.running_refused.unwrap();
        assert!(
            refused.found.contains("job_config") && refused.found.contains("not a regular file"),
            "{refused}"
        );
    }

    #[test]
    fn a_config_that_is_not_text_is_refused_either_way() {
        let d = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.engine.daemon.base_config = d.path().join("config.cfg");
        config.engine.daemon.job_config = d.path().join("job.cfg");
        std::fs::write(&config.engine.daemon.base_config, b"A=1\0\n").unwrap();
        let e = Effective::read(&config).unwrap_err();
        assert!(
            e.found.contains(
                "config.cfg ([imex.daemon] base_config) is not text: line 1 holds a NUL byte"
            ),
            "{e}"
        );
        std::fs::write(&config.engine.daemon.base_config, b"A=1\n").unwrap();
        std::fs::write(&config.engine.daemon.job_config, b"A=\xff\n").unwrap();
        let e = Effective::read(&config).unwrap();
        assert!(e.running.is_none());
        let refused = e.running_refused.unwrap();
        assert!(
            refused
                .found
                .contains("job.cfg ([imex.daemon] job_config) is not text"),
            "{refused}"
        );
    }
}
