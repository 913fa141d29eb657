//! `[node]`: what slurm-imex keeps on the node itself (the SPANK plugin
//! reads it).

use super::{Documented, Key};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What slurm-imex keeps on the node itself.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NodeConfig {
    /// The node's state directory (`crate::state`): IMEX job records and
    /// domain owner, GPU start snapshots, the XID checkpoint, the node's
    /// standing. Keep it on a tmpfs so a reboot clears it.
    pub state_dir: PathBuf,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            state_dir: "/run/slurm-imex".into(),
        }
    }
}

impl Documented for NodeConfig {
    const TABLE: &'static str = "node";
    const READ_BY: &'static str = "the SPANK plugin and every program";
    const KEYS: &'static [Key] = &[Key::new(
        "state_dir",
        r#""/run/slurm-imex""#,
        "The node's state directory (job records, the daemon's owner, GPU snapshots, the node's standing); keep it on a tmpfs. Formerly `[imex] state_dir`.",
    )];
}
