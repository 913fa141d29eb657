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

/// Most bytes of a daemon config read (NVIDIA's shipped one is ~10 KiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Which daemon config a file is: what it is called in a line, and what an
/// admin does about a bad one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The admin's base config, from which every daemon config is rendered.
    Base,
    /// The copy the running daemon was started on (`[imex.daemon]
    /// job_config`), which the watcher restarts a dead daemon on.
    Running,
}

impl Origin {
    pub fn key(self) -> &'static str {
        match self {
            Origin::Base => "[imex.daemon] base_config",
            Origin::Running => "[imex.daemon] job_config",
        }
    }

    pub fn what(self) -> &'static str {
        match self {
            Origin::Base => "the IMEX daemon base config",
            Origin::Running => "the running IMEX daemon's config",
        }
    }

    fn fix(self) -> String {
        match self {
            Origin::Base => "install NVIDIA's config.cfg there (KEY=VALUE lines), or set [imex.daemon] base_config".into(),
            Origin::Running => "remove it while no job on this node uses IMEX: each --imex prolog renders it anew from [imex.daemon] base_config".into(),
        }
    }
}

/// A daemon config refused: what was found (naming the file), and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub found: String,
    pub fix: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.found, self.fix)
    }
}

/// A daemon config's text: UTF-8 with no control character but tab, CR
/// and LF, as NVIDIA's `KEY=VALUE` file is. Err says where the first byte
/// that is not lies (a binary or random bytes in the config's place).
pub fn config_text(bytes: Vec<u8>) -> std::result::Result<String, String> {
    let line_of = |bytes: &[u8], at: usize| 1 + bytes[..at].iter().filter(|b| **b == b'\n').count();
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        format!(
            "byte {:#04x} on line {} is not UTF-8",
            bytes[at],
            line_of(bytes, at)
        )
    })?;
    if let Some((at, c)) = text
        .char_indices()
        .find(|(_, c)| c.is_control() && !matches!(c, '\t' | '\r' | '\n'))
    {
        let what = match c {
            '\0' => "a NUL byte".to_string(),
            c if (c as u32) < 0x80 => format!("the control byte {:#04x}", c as u32),
            c => format!("the control character U+{:04X}", c as u32),
        };
        return Err(format!(
            "line {} holds {what}",
            line_of(text.as_bytes(), at)
        ));
    }
    Ok(text)
}

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

    /// The admin's base config (`[imex.daemon] base_config`); Err is the
    /// one line naming it, what is wrong and what to do.
    pub fn read(path: &Path) -> Result<DaemonConfigFile> {
        Self::read_as(path, Origin::Base).map_err(|r| Error::invalid(r.to_string()))
    }

    /// The config at `path` in its `origin`'s role: read bounded (a FIFO or
    /// a huge file is refused, NVIDIA's file is a few KiB) and refused
    /// unless it is text ([`config_text`]), never read lossily: random
    /// bytes must not become a job's daemon config.
    pub fn read_as(path: &Path, origin: Origin) -> std::result::Result<DaemonConfigFile, Refused> {
        let refused = |found: String| Refused {
            found,
            fix: origin.fix(),
        };
        let named = || format!("{} {} ({})", origin.what(), path.display(), origin.key());
        let bytes = slurm_imex_core::fsutil::read_bounded(path, MAX_CONFIG_BYTES)
            .map_err(|e| refused(format!("cannot read {}: {e}", named())))?;
        let text =
            config_text(bytes).map_err(|why| refused(format!("{} is not text: {why}", named())))?;
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
    fn a_config_that_is_not_text_is_refused_naming_the_file_line_and_fix() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("config.cfg");
        let mut random = vec![0u8; 4096];
        let mut x: u32 = 0x9e37_79b9;
        for b in &mut random {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        for (bytes, says) in [
            (random, "is not text: "),
            (
                b"LOG_LEVEL=4\nIMEX_CMD_PORT=50005\0\n".to_vec(),
                "is not text: line 2 holds a NUL byte",
            ),
            (
                b"LOG_LEVEL=4\n# caf\xe9\n".to_vec(),
                "is not text: byte 0xe9 on line 2 is not UTF-8",
            ),
            (
                b"\x1b[2JLOG_LEVEL=4\n".to_vec(),
                "is not text: line 1 holds the control byte 0x1b",
            ),
            (
                "A=1\nB=\u{85}\n".as_bytes().to_vec(),
                "is not text: line 2 holds the control character U+0085",
            ),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            let e = DaemonConfigFile::read(&path).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!(
                    "the IMEX daemon base config {} ([imex.daemon] base_config) {says}",
                    path.display()
                )) && e.ends_with(
                    ": install NVIDIA's config.cfg there (KEY=VALUE lines), or set [imex.daemon] base_config"
                ) && !e.contains('\n'),
                "{says}: {e}"
            );
            let r = DaemonConfigFile::read_as(&path, Origin::Running).unwrap_err();
            assert!(
                r.found.starts_with(&format!(
                    "the running IMEX daemon's config {} ([imex.daemon] job_config) is not text",
                    path.display()
                )) && r
                    .fix
                    .contains("remove it while no job on this node uses IMEX"),
                "{r}"
            );
        }
        // Tabs, CRs and LFs are text, and so is any other UTF-8.
        std::fs::write(&path, "# café\r\nLOG_LEVEL =\t4\r\n").unwrap();
        assert_eq!(
            DaemonConfigFile::read(&path).unwrap().get("LOG_LEVEL"),
            Some("4")
        );
        std::fs::remove_file(&path).unwrap();
        let e = DaemonConfigFile::read(&path).unwrap_err().to_string();
        assert!(
            e.starts_with("cannot read the IMEX daemon base config")
                && e.contains("install NVIDIA's config.cfg"),
            "{e}"
        );
    }

    #[test]
    fn nodes_config_is_one_address_per_line_in_order() {
        let a = vec!["10.0.0.3".to_string(), "10.0.0.1".into(), "fd00::2".into()];
        assert_eq!(render_nodes_config(&a), "10.0.0.3\n10.0.0.1\nfd00::2\n");
        assert_eq!(render_nodes_config(&[]), "");
    }
}
