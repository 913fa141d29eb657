//! What a prolog or epilog killed mid-write (Slurm's timeout, an admin's
//! kill -9) leaves behind: our temporary files whose writer is gone. This
//! module knows every directory slurm-imex writes to (the state directory,
//! the daemon's config files, the node_exporter textfile directory), and the
//! epilog sweeps them all once, whatever job or hook was killed.

use super::StateDir;
use crate::config::Config;
use std::path::PathBuf;

/// Every directory slurm-imex writes files to on this node: the state
/// directory's, and `others` (the directories of the files the other
/// sections name: the daemon's config files, the textfile directory).
pub fn written_dirs(cfg: &Config, others: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = StateDir::of(cfg).dirs().into();
    dirs.extend(others);
    dirs.sort();
    dirs.dedup();
    dirs
}

/// Remove dead writers' temporary files from every directory we write to.
pub fn sweep_orphan_temps(cfg: &Config, others: impl IntoIterator<Item = PathBuf>) {
    for dir in written_dirs(cfg, others) {
        crate::fsutil::remove_orphan_temps(&dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_covers_the_state_dir_and_the_dirs_it_is_given() {
        let mut cfg = Config::default();
        cfg.node.state_dir = "/run/x".into();
        let others = ["/etc/nvidia-imex", "/var/lib/prom"].map(PathBuf::from);
        let dirs = written_dirs(&cfg, others);
        for want in [
            "/run/x",
            "/run/x/jobs",
            "/run/x/gpu-jobs",
            "/etc/nvidia-imex",
            "/var/lib/prom",
        ] {
            assert!(dirs.contains(&PathBuf::from(want)), "{want} in {dirs:?}");
        }
    }
}
