//! GPU node health: findings, severities, verdicts and drain reasons
//! (`checks`), the time-bounded gate that reads the GPUs and runs the
//! checks (`gate`), a fabric probe not done yet across checks
//! (`fabric_wait`), the names of the checks outside the tables
//! (`check_names`), and every class of drain reason (`reasons`).

pub mod check_names;
pub mod checks;
pub mod fabric_wait;
pub mod gate;
pub mod reasons;

use serde::{Deserialize, Serialize};
use slurm_imex_core::text::printable;

/// Every drain reason we write starts with this, so we only ever undrain
/// nodes we drained ourselves.
pub const DRAIN_PREFIX: &str = "imex-health:";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Severity {
    Warn,
    Drain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Warn,
    Drain,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Warn => "WARN",
            Verdict::Drain => "DRAIN",
        }
    }

    pub fn parse(s: &str) -> Option<Verdict> {
        match s.to_ascii_uppercase().as_str() {
            "PASS" => Some(Verdict::Pass),
            "WARN" => Some(Verdict::Warn),
            "DRAIN" => Some(Verdict::Drain),
            _ => None,
        }
    }
}

/// The GPU a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuRef {
    pub index: u32,
    pub serial: String,
    pub uuid: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub check: String,
    pub severity: Severity,
    pub gpu: Option<GpuRef>,
    pub detail: String,
}

impl Finding {
    /// A drain-class finding about the node as a whole (no one GPU).
    pub fn node_drain(check: &str, detail: String) -> Finding {
        Finding {
            check: check.into(),
            severity: Severity::Drain,
            gpu: None,
            detail,
        }
    }

    /// `imex-health: <check> gpu<i> <serial>: <detail>`, one printable line
    /// (a NUL would make an `scontrol` argument no program starts with).
    pub fn reason(&self) -> String {
        printable(&self.one_line())
    }

    fn one_line(&self) -> String {
        let detail = self.detail.split_whitespace().collect::<Vec<_>>().join(" ");
        match &self.gpu {
            Some(g) => {
                let serial = if g.serial.is_empty() {
                    "no-serial"
                } else {
                    &g.serial
                };
                format!(
                    "{DRAIN_PREFIX} {} gpu{} {serial}: {detail}",
                    self.check, g.index
                )
            }
            None => format!("{DRAIN_PREFIX} {}: {detail}", self.check),
        }
    }
}

pub fn verdict_of(findings: &[Finding]) -> Verdict {
    match findings.iter().map(|f| f.severity).max() {
        None => Verdict::Pass,
        Some(Severity::Warn) => Verdict::Warn,
        Some(Severity::Drain) => Verdict::Drain,
    }
}

/// The first drain-class finding's reason (what Slurm's node reason shows).
pub fn drain_reason(findings: &[Finding]) -> Option<String> {
    findings
        .iter()
        .find(|f| f.severity == Severity::Drain)
        .map(Finding::reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_format_and_verdict() {
        let f = Finding {
            check: "row_remap".into(),
            severity: Severity::Drain,
            gpu: Some(GpuRef {
                index: 3,
                serial: "1654321".into(),
                uuid: "GPU-x".into(),
            }),
            detail: "row remap pending:\nreset needed".into(),
        };
        assert_eq!(
            f.reason(),
            "imex-health: row_remap gpu3 1654321: row remap pending: reset needed"
        );
        let w = Finding {
            check: "persistence".into(),
            severity: Severity::Warn,
            gpu: None,
            detail: "off".into(),
        };
        assert_eq!(w.reason(), "imex-health: persistence: off");
        assert_eq!(verdict_of(&[]), Verdict::Pass);
        assert_eq!(verdict_of(std::slice::from_ref(&w)), Verdict::Warn);
        assert_eq!(verdict_of(&[w.clone(), f.clone()]), Verdict::Drain);
        assert_eq!(drain_reason(&[w, f.clone()]), Some(f.reason()));
    }

    #[test]
    fn a_reason_is_printable_whatever_the_detail_or_serial_holds() {
        let f = Finding {
            check: "xid".into(),
            severity: Severity::Drain,
            gpu: Some(GpuRef {
                index: 0,
                serial: "16\x0750".into(),
                uuid: String::new(),
            }),
            detail: "GPU has fallen\0 off the bus.".into(),
        };
        assert_eq!(
            f.reason(),
            "imex-health: xid gpu0 16\\x0750: GPU has fallen\\x00 off the bus."
        );
    }
}
