//! `[imex.addresses]`: how a Slurm node name becomes the address written to
//! nodes_config.cfg (`crate::addresses` resolves them).

use serde::{Deserialize, Serialize};
use slurm_imex_core::config::{Documented, Key};
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

impl Documented for AddressesConfig {
    const TABLE: &'static str = "imex.addresses";
    const READ_BY: &'static str = "the prolog, epilog, CLI and doctor";
    const KEYS: &'static [Key] = &[
        Key::new("source", r#""dns""#, "How a node name becomes its nodes_config address: \"dns\" (IPv4 first), \"hostname\" (the name; driver >= 570.158) or \"map\" (map_file)."),
        Key::new("map_file", r#""/etc/slurm/imex-addresses.toml""#, "The address map: `node = \"address\"` lines, at top level or under [nodes]."),
    ];
}

impl Default for AddressesConfig {
    fn default() -> Self {
        AddressesConfig {
            source: AddressSource::Dns,
            map_file: "/etc/slurm/imex-addresses.toml".into(),
        }
    }
}
