//! `[imex.addresses]`: how a Slurm node name becomes the address written to
//! nodes_config.cfg (`crate::addresses` resolves them).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AddressSource {
    /// Resolve each Slurm node name through the system resolver (IPv4 first).
    Dns,
    /// Write the Slurm node name itself; the daemon resolves it (driver >= 570.158).
    Hostname,
    /// Look each node up in `map_file` (`node = "address"` lines).
    Map,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AddressesConfig {
    pub source: AddressSource,
    pub map_file: PathBuf,
}

impl Default for AddressesConfig {
    fn default() -> Self {
        AddressesConfig {
            source: AddressSource::Dns,
            map_file: "/etc/slurm/imex-addresses.toml".into(),
        }
    }
}
