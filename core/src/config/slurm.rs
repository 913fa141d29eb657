//! `[slurm]`: where slurm-imex reads Slurm's own configuration, and the
//! scontrol it runs (the SPANK plugin reads it to find slurm.conf).

use super::{AutoPath, Documented, HumanDuration, Key};
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

impl Documented for SlurmConfig {
    const TABLE: &'static str = "slurm";
    const READ_BY: &'static str = "the SPANK plugin (to find slurm.conf) and every program";
    const KEYS: &'static [Key] = &[
        Key::new("config", r#""auto""#, "slurm.conf, read as slurmctld reads it, never through the controller: \"auto\" ($SLURM_CONF, the configless cache, /etc/slurm/slurm.conf) or a path."),
        Key::new("topology", r#""auto""#, "The racks of Slurm's topology/block: \"auto\" (topology.yaml, else topology.conf, beside slurm.conf), \"none\", or an absolute path."),
        Key::new("scontrol", r#""scontrol""#, "The scontrol every call to slurmctld runs (looked up in PATH when not absolute). Formerly `[health] scontrol`."),
        Key::new("scontrol_timeout", r#""15s""#, "Bound on each scontrol call (1s to 5m). Formerly `[health] scontrol_timeout`."),
    ];
}
