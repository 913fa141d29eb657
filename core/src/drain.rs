//! Setting and clearing our drain reason on a node through scontrol, bounded
//! in time, with an argument vector (never a shell). Only drains whose
//! reason starts with `imex-health:` are ever cleared.

use crate::config::HealthConfig;
use crate::error::{Error, Result};
use crate::health::DRAIN_PREFIX;
use crate::process::run_bounded;

/// `scontrol update NodeName=<node> State=DRAIN Reason=<reason>`.
pub fn set_drain(cfg: &HealthConfig, node: &str, reason: &str) -> Result<()> {
    let out = run_bounded(
        &cfg.scontrol,
        &[
            "update",
            &format!("NodeName={node}"),
            "State=DRAIN",
            &format!("Reason={reason}"),
        ],
        cfg.scontrol_timeout.0,
    )?;
    if !out.success() {
        return Err(Error::new(format!(
            "scontrol update NodeName={node} State=DRAIN failed: {}",
            out.one_line()
        )));
    }
    Ok(())
}

/// A node's state and reason as `scontrol show node -o` prints them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    pub state: String,
    pub reason: Option<String>,
}

/// Parse one `scontrol show node -o` line. `Reason=` is free text (it may
/// hold spaces) followed by ` [user@time]`; it is the last field that can.
pub fn parse_node_line(line: &str) -> Option<NodeStatus> {
    let state = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("State="))?
        .to_string();
    let reason = line.find(" Reason=").map(|at| {
        let text = &line[at + " Reason=".len()..];
        let end = text.rfind(" [").unwrap_or(text.len());
        text[..end].trim().to_string()
    });
    Some(NodeStatus {
        state,
        reason: reason.filter(|r| !r.is_empty() && r != "(null)"),
    })
}

pub fn node_status(cfg: &HealthConfig, node: &str) -> Result<NodeStatus> {
    let out = run_bounded(
        &cfg.scontrol,
        &["show", "node", node, "-o"],
        cfg.scontrol_timeout.0,
    )?;
    if !out.success() {
        return Err(Error::new(format!(
            "scontrol show node {node} failed: {}",
            out.one_line()
        )));
    }
    parse_node_line(out.stdout.trim()).ok_or_else(|| {
        Error::new(format!(
            "cannot read node {node} from scontrol output: {}",
            out.one_line()
        ))
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undrain {
    Resumed(String),
    NotDrained,
    /// Drained by someone else: left alone.
    NotOurs(String),
}

/// Resume `node` only if its drain reason is ours.
pub fn undrain(cfg: &HealthConfig, node: &str) -> Result<Undrain> {
    let status = node_status(cfg, node)?;
    if !status.state.contains("DRAIN") {
        return Ok(Undrain::NotDrained);
    }
    match status.reason {
        Some(r) if r.starts_with(DRAIN_PREFIX) => {
            let out = run_bounded(
                &cfg.scontrol,
                &["update", &format!("NodeName={node}"), "State=RESUME"],
                cfg.scontrol_timeout.0,
            )?;
            if !out.success() {
                return Err(Error::new(format!(
                    "scontrol update NodeName={node} State=RESUME failed: {}",
                    out.one_line()
                )));
            }
            Ok(Undrain::Resumed(r))
        }
        other => Ok(Undrain::NotOurs(other.unwrap_or_default())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scontrol_node_lines() {
        let l = "NodeName=n2 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 State=IDLE+DRAIN ThreadsPerCore=1 \
                 Partitions=imex BootTime=2026-11-22T01:00:00 LastBusyTime=2026-11-22T02:00:00 \
                 Reason=imex-health: xid gpu0 1650924060001: XID 79 (REBOOT) on 0000:1a:00: GPU has fallen off the bus. [root@2026-11-22T02:10:00]";
        let s = parse_node_line(l).unwrap();
        assert_eq!(s.state, "IDLE+DRAIN");
        assert_eq!(s.reason.as_deref(), Some("imex-health: xid gpu0 1650924060001: XID 79 (REBOOT) on 0000:1a:00: GPU has fallen off the bus."));
        let s = parse_node_line("NodeName=n1 State=IDLE Partitions=imex").unwrap();
        assert_eq!(s.reason, None);
        assert!(parse_node_line("garbage").is_none());
    }
}
