//! The two files the IMEX daemon reads: its `config.cfg` (rendered per job
//! from the admin's base config) and `nodes_config.cfg` (the job's nodes).
//!
//! config.cfg is NVIDIA's plain `KEY=VALUE` format with `#` comments, read
//! only at daemon start. The parser is hand-rolled because the format has no
//! published grammar beyond that and no crate for it; rendering keeps every
//! line of the admin's file (comments, order, unknown keys) and changes only
//! the values of the keys we must own.

use slurm_imex_core::error::{Error, Result};
use std::path::Path;

/// Defaults of NVIDIA's shipped config.cfg (docs/imex.md §1).
pub const DEFAULT_CMD_PORT: u16 = 50005;
pub const DEFAULT_LOG_FILE: &str = "/var/log/nvidia-imex.log";

/// A parsed daemon config: the original lines plus key lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonConfigFile {
    lines: Vec<String>,
}

fn split_key_value(line: &str) -> Option<(&str, &str)> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return None;
    }
    let (k, v) = t.split_once('=')?;
    Some((k.trim(), v.trim()))
}

impl DaemonConfigFile {
    pub fn parse(text: &str) -> DaemonConfigFile {
        DaemonConfigFile {
            lines: text.lines().map(str::to_string).collect(),
        }
    }

    pub fn read(path: &Path) -> Result<DaemonConfigFile> {
        // NVIDIA's file is a few KiB; a FIFO or a huge file is refused.
        let text = slurm_imex_core::fsutil::read_bounded_text(path, 1 << 20).map_err(|e| {
            Error::new(format!(
                "cannot read the IMEX daemon base config {} ([imex.daemon] base_config): {e}",
                path.display()
            ))
        })?;
        Ok(DaemonConfigFile::parse(&text))
    }

    /// The last value given for `key` (the daemon reads top to bottom).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.lines
            .iter()
            .rev()
            .filter_map(|l| split_key_value(l))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    /// `IMEX_CMD_PORT`, defaulted; a non-numeric value is an error naming the file.
    pub fn cmd_port(&self, origin: &Path) -> Result<u16> {
        match self.get("IMEX_CMD_PORT") {
            None | Some("") => Ok(DEFAULT_CMD_PORT),
            Some(v) => v.parse::<u16>().map_err(|_| {
                Error::new(format!(
                    "{}: IMEX_CMD_PORT={v} is not a port number",
                    origin.display()
                ))
            }),
        }
    }

    /// Where the daemon logs (`LOG_FILE_NAME`; empty means stderr).
    pub fn log_file(&self) -> Option<String> {
        match self.get("LOG_FILE_NAME") {
            None => Some(DEFAULT_LOG_FILE.to_string()),
            Some("") => None,
            Some(v) => Some(v.to_string()),
        }
    }

    /// A copy with each `(key, value)` set: every existing line for the key
    /// is rewritten in place, and keys never seen are appended.
    pub fn with_overrides(&self, overrides: &[(&str, String)]) -> DaemonConfigFile {
        let mut seen = vec![false; overrides.len()];
        let mut lines: Vec<String> = self
            .lines
            .iter()
            .map(|line| {
                if let Some((k, _)) = split_key_value(line) {
                    if let Some(i) = overrides.iter().position(|(ok, _)| *ok == k) {
                        seen[i] = true;
                        return format!("{}={}", k, overrides[i].1);
                    }
                }
                line.clone()
            })
            .collect();
        let missing: Vec<_> = overrides
            .iter()
            .zip(&seen)
            .filter(|(_, s)| !**s)
            .map(|((k, v), _)| format!("{k}={v}"))
            .collect();
        if !missing.is_empty() {
            lines.push("# set by slurm-imex for this job".to_string());
            lines.extend(missing);
        }
        DaemonConfigFile { lines }
    }

    pub fn render(&self) -> String {
        let mut s = self.lines.join("\n");
        s.push('\n');
        s
    }
}

/// nodes_config.cfg: one address per line, in the given (Slurm) order. The
/// line index is the IMEX node id, so every node must write the same bytes.
pub fn render_nodes_config(addresses: &[String]) -> String {
    addresses.iter().map(|a| format!("{a}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "# NVIDIA IMEX config\nLOG_LEVEL=4\nSERVER_PORT=50000\n\
        IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n# comment kept\nIMEX_CMD_PORT=50005\nIMEX_CMD_ENABLED=1\n";

    #[test]
    fn overrides_only_the_owned_keys_and_keeps_the_rest() {
        let base = DaemonConfigFile::parse(BASE);
        let out = base
            .with_overrides(&[
                ("IMEX_NODE_CONFIG_FILE", "/run/x/nodes.cfg".into()),
                ("SERVER_PORT", "33834".into()),
            ])
            .render();
        assert_eq!(
            out,
            "# NVIDIA IMEX config\nLOG_LEVEL=4\nSERVER_PORT=33834\n\
             IMEX_NODE_CONFIG_FILE=/run/x/nodes.cfg\n# comment kept\nIMEX_CMD_PORT=50005\nIMEX_CMD_ENABLED=1\n"
        );
    }

    #[test]
    fn missing_keys_are_appended_and_lookup_defaults() {
        let base = DaemonConfigFile::parse("LOG_FILE_NAME=\n");
        assert_eq!(base.log_file(), None);
        assert_eq!(base.cmd_port(Path::new("c")).unwrap(), 50005);
        let out = base.with_overrides(&[("SERVER_PORT", "40000".into())]);
        assert_eq!(out.get("SERVER_PORT"), Some("40000"));
        assert!(out.render().ends_with("SERVER_PORT=40000\n"));
        let empty = DaemonConfigFile::parse("");
        assert_eq!(empty.log_file().as_deref(), Some(DEFAULT_LOG_FILE));
    }

    #[test]
    fn last_value_wins_and_bad_port_is_reported() {
        let c = DaemonConfigFile::parse("IMEX_CMD_PORT=1\n #x\n IMEX_CMD_PORT = 2 \n");
        assert_eq!(c.cmd_port(Path::new("c")).unwrap(), 2);
        let c = DaemonConfigFile::parse("IMEX_CMD_PORT=abc\n");
        let e = c
            .cmd_port(Path::new("/etc/nvidia-imex/config.cfg"))
            .unwrap_err();
        assert!(e
            .to_string()
            .contains("/etc/nvidia-imex/config.cfg: IMEX_CMD_PORT=abc"));
    }

    #[test]
    fn nodes_config_is_one_address_per_line_in_order() {
        let a = vec!["10.0.0.3".to_string(), "10.0.0.1".into(), "fd00::2".into()];
        assert_eq!(render_nodes_config(&a), "10.0.0.3\n10.0.0.1\nfd00::2\n");
        assert_eq!(render_nodes_config(&[]), "");
    }
}
