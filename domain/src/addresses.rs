//! Turning Slurm node names into the addresses written to nodes_config.cfg:
//! through DNS, a static map file, or the node name itself.

use crate::config::{AddressSource, AddressesConfig};
use slurm_imex_core::error::{Error, Result};
use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::path::Path;

/// Why some nodes have no address: the caller decides who is to blame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub nodes: Vec<String>,
    pub detail: String,
}

/// The configured way to find nodes' addresses, loaded. Loading can fail
/// only on this node's own files (an unreadable or bad map); resolving can
/// fail only on names, which the caller blames.
pub enum Resolver {
    Hostname,
    Map {
        map: HashMap<String, IpAddr>,
        file: std::path::PathBuf,
    },
    Dns,
}

impl Resolver {
    pub fn new(cfg: &AddressesConfig) -> Result<Resolver> {
        Ok(match cfg.source {
            AddressSource::Hostname => Resolver::Hostname,
            AddressSource::Map => Resolver::Map {
                map: load_map(&cfg.map_file)?,
                file: cfg.map_file.clone(),
            },
            AddressSource::Dns => Resolver::Dns,
        })
    }

    /// Every node's address, in order; or the nodes that have none.
    pub fn resolve_all(&self, nodes: &[String]) -> std::result::Result<Vec<String>, Unresolved> {
        let mut out = Vec::with_capacity(nodes.len());
        let mut missing = Vec::new();
        for n in nodes {
            match self.resolve(n) {
                Some(addr) => out.push(addr),
                None => missing.push(n.clone()),
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let detail = match self {
            Resolver::Map { file, .. } => format!("not listed in {}", file.display()),
            _ => "no address from the system resolver".into(),
        };
        Err(Unresolved {
            nodes: missing,
            detail,
        })
    }

    fn resolve(&self, node: &str) -> Option<String> {
        match self {
            Resolver::Hostname => Some(node.to_string()),
            Resolver::Map { map, .. } => map.get(node).map(|ip| ip.to_string()),
            Resolver::Dns => resolve_dns(node).map(|ip| ip.to_string()),
        }
    }
}

/// IPv4 first (what IMEX deployments use), else the first IPv6 address.
fn resolve_dns(name: &str) -> Option<IpAddr> {
    let addrs: Vec<IpAddr> = (name, 0).to_socket_addrs().ok()?.map(|a| a.ip()).collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
}

/// Largest address map read: 1 MiB is about 30,000 `node = "address"` lines.
const MAX_MAP_BYTES: u64 = 1 << 20;

/// The map file: TOML, `node = "address"` at top level or under `[nodes]`.
/// Every value must be an IP literal, so a typo cannot reach the daemon.
/// It decides where a job's daemon connects, so it is held to the trust
/// boundary (root's, writable by root only) and read bounded.
pub fn load_map(path: &Path) -> Result<HashMap<String, IpAddr>> {
    slurm_imex_core::trust::check(
        path,
        slurm_imex_core::trust::Expect::File,
        "[imex.addresses] map_file",
    )?;
    let text = slurm_imex_core::fsutil::read_bounded_text(path, MAX_MAP_BYTES)
        .map_err(|e| e.context("the address map ([imex.addresses] map_file)"))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .unwrap_or(0);
        Error::new(format!(
            "bad address map {}:{line}: {}",
            path.display(),
            e.message().trim()
        ))
    })?;
    let entries = match table.get("nodes") {
        Some(toml::Value::Table(t)) => t.clone(),
        _ => table,
    };
    let mut map = HashMap::new();
    for (node, value) in entries {
        let ip = value
            .as_str()
            .and_then(|s| s.trim().parse::<IpAddr>().ok())
            .ok_or_else(|| {
                Error::new(format!(
                    "bad address map {}: {node} = {value} is not an IP address in quotes",
                    path.display()
                ))
            })?;
        map.insert(node, ip);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(source: AddressSource, map: &Path) -> AddressesConfig {
        AddressesConfig {
            source,
            map_file: map.to_path_buf(),
        }
    }

    #[test]
    fn map_resolves_in_order_and_reports_missing() {
        let d = tempfile::tempdir().unwrap();
        let m = d.path().join("map.toml");
        std::fs::write(&m, "n1 = \"10.0.0.1\"\nn2 = \"fd00::2\"\n").unwrap();
        let c = cfg(AddressSource::Map, &m);
        let nodes = vec!["n2".to_string(), "n1".to_string()];
        assert_eq!(
            Resolver::new(&c).unwrap().resolve_all(&nodes).unwrap(),
            ["fd00::2", "10.0.0.1"]
        );
        let nodes = vec!["n1".to_string(), "n9".to_string()];
        let u = Resolver::new(&c).unwrap().resolve_all(&nodes).unwrap_err();
        assert_eq!(u.nodes, ["n9"]);
        std::fs::write(&m, "[nodes]\nn1 = \"10.0.0.1\"\n").unwrap();
        assert_eq!(
            Resolver::new(&c)
                .unwrap()
                .resolve_all(&["n1".to_string()])
                .unwrap(),
            ["10.0.0.1"]
        );
    }

    #[test]
    fn bad_map_is_a_config_error() {
        let d = tempfile::tempdir().unwrap();
        let m = d.path().join("map.toml");
        std::fs::write(&m, "n1 = \"10.0.0.300\"\n").unwrap();
        let e = Resolver::new(&cfg(AddressSource::Map, &m)).err().unwrap();
        assert!(e.to_string().contains("not an IP address"), "{e}");
        std::fs::write(&m, "n1 = \n").unwrap();
        let e = Resolver::new(&cfg(AddressSource::Map, &m)).err().unwrap();
        assert!(e.to_string().contains("map.toml:1"), "{e}");
        let e = Resolver::new(&cfg(AddressSource::Map, &d.path().join("x")));
        assert!(e.err().unwrap().to_string().contains("map_file"));
    }

    #[test]
    fn dns_and_hostname_sources() {
        let c = cfg(AddressSource::Dns, Path::new("/x"));
        assert_eq!(
            Resolver::new(&c)
                .unwrap()
                .resolve_all(&["localhost".into()])
                .unwrap(),
            ["127.0.0.1"]
        );
        let u = Resolver::new(&c)
            .unwrap()
            .resolve_all(&["no-such-host.invalid".into()])
            .unwrap_err();
        assert_eq!(u.nodes, ["no-such-host.invalid"]);
        let c = cfg(AddressSource::Hostname, Path::new("/x"));
        assert_eq!(
            Resolver::new(&c)
                .unwrap()
                .resolve_all(&["gb-01".into()])
                .unwrap(),
            ["gb-01"]
        );
    }
}
