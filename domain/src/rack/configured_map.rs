//! The rack map the config names (`[imex] rack_map`): where it is, and
//! reading it in whichever form it takes, the one file (`crate::rack::map`)
//! or the indexed map read in pieces (`crate::rack::index`). Its own module
//! above both, so that the map's format and the index's do not depend on
//! each other's loading.

use crate::config::Config;
use crate::rack::index;
use crate::rack::map::{RackMap, DIR_NAME, FILE_NAME};
use slurm_imex_core::config::AutoPath;
use slurm_imex_core::error::Result;
use std::path::{Path, PathBuf};

/// Where the rack map is, if anywhere: an explicit path (which must then
/// exist), or with "auto" `imex-racks.d` (the indexed map, once it holds
/// its index.toml) or else `imex-racks.toml` beside the config file in
/// force (`/etc/slurm` when none was read), only when it exists.
pub fn locate(cfg: &Config) -> Option<PathBuf> {
    match &cfg.engine.rack_map {
        AutoPath::None => None,
        AutoPath::Path(p) => Some(p.clone()),
        AutoPath::Auto => {
            let dir = cfg
                .source
                .as_deref()
                .and_then(Path::parent)
                .unwrap_or(Path::new("/etc/slurm"));
            // A directory only once it holds its index: one being copied
            // in for the first time does not hide a good one-file map.
            let indexed = dir.join(DIR_NAME);
            if index::holds_index(&indexed) {
                return Some(indexed);
            }
            let beside = dir.join(FILE_NAME);
            std::fs::symlink_metadata(&beside).is_ok().then_some(beside)
        }
    }
}

impl RackMap {
    /// Read the map `cfg` names, held to the trust boundary (it decides who
    /// can import a job's memory). None when there is none.
    /// Every rack: for the tools that compare the whole map
    /// (`topology --check`, doctor), never for a prolog.
    pub fn load_configured(cfg: &Config) -> Result<Option<RackMap>> {
        let Some(path) = locate(cfg) else {
            return Ok(None);
        };
        if !index::is_indexed(&path) {
            trust_file(&path)?;
        }
        RackMap::load(&path, cfg.engine.max_nodes).map(Some)
    }

    /// The racks of `nodes` (a job's nodes, this node among them): from an
    /// indexed map only the pieces they need, so a prolog's read does not
    /// grow with the cluster; a one-file map is read whole, as before.
    /// Ask [`RackMap::rack_of`] only about `nodes` and the nodes of their
    /// racks.
    pub fn load_configured_for(cfg: &Config, nodes: &[String]) -> Result<Option<RackMap>> {
        let Some(path) = locate(cfg) else {
            return Ok(None);
        };
        if index::is_indexed(&path) {
            return index::load_for(&path, cfg.engine.max_nodes, nodes).map(Some);
        }
        trust_file(&path)?;
        RackMap::load(&path, cfg.engine.max_nodes).map(Some)
    }

    /// Read the map at `path`, whole: one file, or an indexed map's
    /// `map.toml` held to its index. `max_nodes` (`[imex] max_nodes`)
    /// bounds every rack's hostlist, [`MAX_MAP_NODES`] the whole map.
    pub fn load(path: &Path, max_nodes: usize) -> Result<RackMap> {
        if index::is_indexed(path) {
            return index::load_whole(path, max_nodes);
        }
        RackMap::load_file(path, max_nodes)
    }
}

fn trust_file(path: &Path) -> Result<()> {
    slurm_imex_core::trust::check(
        path,
        slurm_imex_core::trust::Expect::File,
        "[imex] rack_map",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_finds_the_map_only_beside_the_config_in_force() {
        let d = tempfile::tempdir().unwrap();
        let mut cfg = Config::default();
        cfg.core.source = Some(d.path().join("imex.toml"));
        assert_eq!(locate(&cfg), None);
        std::fs::write(d.path().join(FILE_NAME), "").unwrap();
        assert_eq!(locate(&cfg), Some(d.path().join(FILE_NAME)));
        // The indexed map wins once it holds its index, not while empty.
        std::fs::create_dir(d.path().join(DIR_NAME)).unwrap();
        assert_eq!(locate(&cfg), Some(d.path().join(FILE_NAME)));
        std::fs::write(d.path().join(DIR_NAME).join("index.toml"), "").unwrap();
        assert_eq!(locate(&cfg), Some(d.path().join(DIR_NAME)));
        cfg.engine.rack_map = AutoPath::None;
        assert_eq!(locate(&cfg), None);
        cfg.engine.rack_map = AutoPath::Path("/x/racks.toml".into());
        assert_eq!(locate(&cfg), Some(PathBuf::from("/x/racks.toml")));
    }
}
