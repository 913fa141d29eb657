//! Shared pieces of the fake `nvidia-imex` daemon and `nvidia-imex-ctl`
//! (test doubles, never shipped): the config.cfg reader with NVIDIA's
//! defaults, the daemon's status model as it travels to the ctl, and the
//! timestamp formats of the real tools (docs/imex.md §1–2).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub const DEFAULT_CONFIG: &str = "/etc/nvidia-imex/config.cfg";
pub const FAKE_VERSION: &str = "580.95.05";

/// config.cfg as the daemon reads it: KEY=VALUE, `#` comments.
#[derive(Debug, Clone, Default)]
pub struct DaemonCfg {
    pub values: BTreeMap<String, String>,
}

impl DaemonCfg {
    pub fn read(path: &Path) -> std::io::Result<DaemonCfg> {
        let text = std::fs::read_to_string(path)?;
        let mut values = BTreeMap::new();
        for line in text.lines() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            if let Some((k, v)) = t.split_once('=') {
                values.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
        Ok(DaemonCfg { values })
    }

    /// The value, or NVIDIA's shipped default.
    pub fn get(&self, key: &str) -> String {
        if let Some(v) = self.values.get(key) {
            return v.clone();
        }
        match key {
            "LOG_LEVEL" => "4",
            "LOG_FILE_NAME" => "/var/log/nvidia-imex.log",
            "LOG_APPEND_TO_LOG" => "1",
            "LOG_FILE_MAX_SIZE" => "1024",
            "LOG_USE_SYSLOG" => "0",
            "DAEMONIZE" => "1",
            "SERVER_PORT" => "50000",
            "IMEX_NODE_CONFIG_FILE" => "/etc/nvidia-imex/nodes_config.cfg",
            "IMEX_CMD_ENABLED" => "1",
            "IMEX_CMD_PORT" => "50005",
            "IMEX_WAIT_FOR_QUORUM" => "RECOVERY",
            _ => "",
        }
        .to_string()
    }

    pub fn port(&self, key: &str) -> Option<u16> {
        self.get(key).parse().ok()
    }
}

/// One node as the daemon reports it to the ctl.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeView {
    pub host: String,
    pub host_name: String,
    /// READY or UNAVAILABLE (or the local daemon's own state word).
    pub status: String,
    pub version: String,
    /// Peer index → CONNECTED, NEVER_CONNECTED, INVALID, DISCONNECTED, …
    pub connections: BTreeMap<usize, String>,
}

/// The daemon's answer to the ctl's STATUS request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DomainView {
    pub local_state: String,
    pub domain: String,
    pub timestamp: String,
    pub nodes: BTreeMap<usize, NodeView>,
}

fn tm_now() -> (libc::tm, u32) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: localtime_r writes into the tm we own; secs is a valid time_t.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&secs, &mut tm) };
    (tm, now.subsec_millis())
}

/// `5/12/2025 06:08:10.580` (the -N timestamp and the log banner).
pub fn ctl_timestamp() -> String {
    let (t, ms) = tm_now();
    format!(
        "{}/{}/{} {:02}:{:02}:{:02}.{:03}",
        t.tm_mon + 1,
        t.tm_mday,
        t.tm_year + 1900,
        t.tm_hour,
        t.tm_min,
        t.tm_sec,
        ms
    )
}

/// `[Mar 25 2025 10:41:54]` (the log line prefix).
pub fn log_timestamp() -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (t, _) = tm_now();
    format!(
        "[{} {:02} {} {:02}:{:02}:{:02}]",
        MONTHS[t.tm_mon.clamp(0, 11) as usize],
        t.tm_mday,
        t.tm_year + 1900,
        t.tm_hour,
        t.tm_min,
        t.tm_sec
    )
}
