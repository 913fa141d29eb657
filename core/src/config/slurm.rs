//! `[slurm]`: where slurm-imex reads Slurm's own configuration, and the
//! scontrol it runs (the SPANK plugin reads it to find slurm.conf).

use super::{AutoPath, HumanDuration};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// Where slurm-imex reads Slurm's own configuration.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SlurmConfig {
    /// slurm.conf: "auto" ($SLURM_CONF, else the configless cache
    /// /run/slurm/conf/slurm.conf, else /etc/slurm/slurm.conf) or a path.
    pub config: AutoPath,
    /// The rack (NVLink domain) description of topology/block: "auto"
    /// (topology.yaml, else topology.conf, beside slurm.conf), "none", or a path.
    pub topology: AutoPath,
    /// The scontrol every controller call runs (`crate::slurm::Scontrol`),
    /// looked up in PATH when not absolute.
    pub scontrol: PathBuf,
    /// Bound on each scontrol call.
    pub scontrol_timeout: HumanDuration,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            config: AutoPath::Auto,
            topology: AutoPath::Auto,
            scontrol: "scontrol".into(),
            scontrol_timeout: HumanDuration(Duration::from_secs(15)),
        }
    }
}
