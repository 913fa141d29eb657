//! The Prometheus textfile export (`<textfile_dir>/slurm_imex.prom`, read
//! by node_exporter's textfile collector): per-board lifetime counters from
//! the job database's totals, and this node's IMEX, drain and timing state.
//! Refreshed atomically by the epilog and by `slurm-imex check`. Labels are
//! board identity only (serial, uuid, pci) and small fixed sets (XID class,
//! throttle reason): never a job id, so series do not grow with jobs.

use crate::config::{AutoPath, Config};
use crate::error::Result;
use crate::fsutil::{read_config_text, write_atomic};
use crate::jobdb::JobDb;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Debian's prometheus-node-exporter reads this directory by default.
pub const DEBIAN_TEXTFILE_DIR: &str = "/var/lib/prometheus/node-exporter";
pub const FILE_NAME: &str = "slurm_imex.prom";

/// One board's lifetime counters, as the database keeps them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BoardCounters {
    pub serial: String,
    pub uuid: String,
    pub pci: String,
    pub jobs: i64,
    pub drains: i64,
    pub warns: i64,
    pub energy_mj: i64,
    pub energy_resets: i64,
    pub remapped_rows: i64,
    pub ecc_dbe: i64,
    pub retired_pages: i64,
    pub remap_pending: bool,
    pub last_verdict: String,
    /// XID count per catalog class (lowercase bucket name).
    pub xids: BTreeMap<String, i64>,
    /// Throttle nanoseconds per reason.
    pub throttle_ns: BTreeMap<String, i64>,
}

/// This node's state for the export; kept between runs in
/// `<state_dir>/node-metrics.json` so each writer updates only its part.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeState {
    pub node: String,
    pub domain_owned: bool,
    pub domain_up: bool,
    /// Drained by slurm-imex (a drain finding of a prolog, epilog or check),
    /// and since when (Unix seconds).
    pub drained_since: Option<i64>,
    pub last_gate_ms: Option<u64>,
    pub last_prolog_ms: Option<u64>,
    pub last_epilog_ms: Option<u64>,
}

impl NodeState {
    fn path(cfg: &Config) -> PathBuf {
        cfg.imex.state_dir.join("node-metrics.json")
    }

    /// The saved state (a missing or corrupt file is a fresh state).
    pub fn load(cfg: &Config) -> NodeState {
        read_config_text(&Self::path(cfg), 64 * 1024)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    pub fn save(&self, cfg: &Config) -> Result<()> {
        crate::fsutil::ensure_dir(&cfg.imex.state_dir, 0o755)?;
        let text = serde_json::to_vec(self).unwrap_or_default();
        write_atomic(&Self::path(cfg), &text, 0o644)
    }

    /// Note a drain finding (`Some(now)`) or a node back in service (`None`);
    /// an existing drain keeps its start time.
    pub fn set_drained(&mut self, drained_at: Option<i64>) {
        self.drained_since = match (self.drained_since, drained_at) {
            (Some(since), Some(_)) => Some(since),
            (_, at) => at,
        };
    }
}

/// Where the export goes, if anywhere: `auto` exports only when Debian's
/// node_exporter directory exists; a configured path always (it must exist).
pub fn textfile_dir(cfg: &Config) -> Option<PathBuf> {
    match &cfg.metrics.textfile_dir {
        AutoPath::None => None,
        AutoPath::Path(p) => Some(p.clone()),
        AutoPath::Auto => {
            let p = Path::new(DEBIAN_TEXTFILE_DIR);
            p.is_dir().then(|| p.to_path_buf())
        }
    }
}

/// Rebuild the textfile from the database totals and `node`. Returns the
/// file written, or None when export is off. Never creates the database.
pub fn refresh(cfg: &Config, node: &NodeState) -> Result<Option<PathBuf>> {
    let Some(dir) = textfile_dir(cfg) else {
        return Ok(None);
    };
    let boards = if cfg.database.path.exists() {
        JobDb::open(&cfg.database.path, cfg.database.busy_timeout.0)?.board_counters()?
    } else {
        Vec::new()
    };
    // Through a directory descriptor: on Debian the parent belongs to the
    // prometheus user, so the path-based trust check would refuse it.
    let path =
        crate::fsutil::write_atomic_in(&dir, FILE_NAME, render(&boards, node).as_bytes(), 0o644)?;
    Ok(Some(path))
}

/// XID catalog classes (xid::Bucket, lowercased), each exported from 0 so
/// `increase()` sees a board's first XID of a class.
pub const XID_CLASSES: [&str; 6] = [
    "restart_app",
    "ignore",
    "reset_gpu",
    "reboot",
    "workflow",
    "unknown",
];
/// Throttle (violation) reasons the gate reads (gpu/reader.rs), from 0.
pub const THROTTLE_REASONS: [&str; 6] = [
    "power",
    "thermal",
    "sync_boost",
    "board_limit",
    "low_utilization",
    "reliability",
];

/// `seen` with every `known` key present (0 when not seen).
fn with_zeros(seen: &BTreeMap<String, i64>, known: &[&str]) -> BTreeMap<String, i64> {
    let mut all: BTreeMap<String, i64> = known.iter().map(|k| (k.to_string(), 0)).collect();
    for (k, v) in seen {
        *all.entry(k.clone()).or_insert(0) += v;
    }
    all
}

/// A label value in the exposition format: `\`, `"` and newlines escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Every metric we export: (name, type, help). The dashboard and alert
/// tests check their expressions against this list.
pub const METRICS: &[(&str, &str, &str)] = &[
    ("slurm_imex_gpu_jobs_total", "counter", "Jobs that used this GPU board."),
    ("slurm_imex_gpu_drains_total", "counter", "Jobs after which this board was judged DRAIN."),
    ("slurm_imex_gpu_warnings_total", "counter", "Jobs after which this board was judged WARN."),
    ("slurm_imex_gpu_xids_total", "counter", "XID events on this board, by NVIDIA catalog class (reboot, reset_gpu and workflow are drain-class)."),
    ("slurm_imex_gpu_energy_joules_total", "counter", "Energy this board used during jobs."),
    ("slurm_imex_gpu_energy_resets_total", "counter", "Jobs during which the board's energy counter went backwards (reset)."),
    ("slurm_imex_gpu_remapped_rows_total", "counter", "Memory rows remapped during jobs (correctable and uncorrectable)."),
    ("slurm_imex_gpu_ecc_dbe_errors_total", "counter", "Volatile double-bit ECC errors during jobs."),
    ("slurm_imex_gpu_retired_pages_total", "counter", "Pages retired during jobs."),
    ("slurm_imex_gpu_throttle_seconds_total", "counter", "Time the board was throttled during jobs, by reason."),
    ("slurm_imex_gpu_remap_pending", "gauge", "1 when the board had a row remap pending (GPU reset needed) after its last job."),
    ("slurm_imex_gpu_last_verdict", "gauge", "The board's verdict after its last job: 0 PASS, 1 WARN, 2 DRAIN."),
    ("slurm_imex_node_info", "gauge", "This node's Slurm name and the slurm-imex version (always 1)."),
    ("slurm_imex_domain_owned", "gauge", "1 when a job owns this node's IMEX domain."),
    ("slurm_imex_domain_up", "gauge", "1 when this node's IMEX domain is UP."),
    ("slurm_imex_node_drained", "gauge", "1 when slurm-imex drained this node (a drain finding) and it is not back in service."),
    ("slurm_imex_node_drained_since_timestamp_seconds", "gauge", "When slurm-imex drained this node (0 when it is not drained)."),
    ("slurm_imex_last_gate_duration_seconds", "gauge", "Wall time of the last prolog's GPU health gate."),
    ("slurm_imex_last_prolog_duration_seconds", "gauge", "Wall time of the last prolog."),
    ("slurm_imex_last_epilog_duration_seconds", "gauge", "Wall time of the last epilog (up to this export)."),
];

fn verdict_value(v: &str) -> i64 {
    match v {
        "DRAIN" => 2,
        "WARN" => 1,
        _ => 0,
    }
}

/// The exposition text: HELP and TYPE for every metric, then its samples.
pub fn render(boards: &[BoardCounters], node: &NodeState) -> String {
    let mut out = String::with_capacity(256 + boards.len() * 2048);
    for (name, kind, help) in METRICS {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for b in boards {
            let id = format!(
                "serial=\"{}\",uuid=\"{}\",pci=\"{}\"",
                label(&b.serial),
                label(&b.uuid),
                label(&b.pci)
            );
            let mut one = |extra: &str, value: String| {
                let _ = writeln!(out, "{name}{{{id}{extra}}} {value}");
            };
            match *name {
                "slurm_imex_gpu_jobs_total" => one("", b.jobs.to_string()),
                "slurm_imex_gpu_drains_total" => one("", b.drains.to_string()),
                "slurm_imex_gpu_warnings_total" => one("", b.warns.to_string()),
                "slurm_imex_gpu_xids_total" => {
                    for (class, n) in &with_zeros(&b.xids, &XID_CLASSES) {
                        one(&format!(",class=\"{}\"", label(class)), n.to_string());
                    }
                }
                "slurm_imex_gpu_energy_joules_total" => {
                    one("", format!("{:.3}", b.energy_mj as f64 / 1000.0))
                }
                "slurm_imex_gpu_energy_resets_total" => one("", b.energy_resets.to_string()),
                "slurm_imex_gpu_remapped_rows_total" => one("", b.remapped_rows.to_string()),
                "slurm_imex_gpu_ecc_dbe_errors_total" => one("", b.ecc_dbe.to_string()),
                "slurm_imex_gpu_retired_pages_total" => one("", b.retired_pages.to_string()),
                "slurm_imex_gpu_throttle_seconds_total" => {
                    for (reason, ns) in &with_zeros(&b.throttle_ns, &THROTTLE_REASONS) {
                        one(
                            &format!(",reason=\"{}\"", label(reason)),
                            format!("{:.9}", *ns as f64 / 1e9),
                        );
                    }
                }
                "slurm_imex_gpu_remap_pending" => one("", (b.remap_pending as i64).to_string()),
                "slurm_imex_gpu_last_verdict" => {
                    one("", verdict_value(&b.last_verdict).to_string())
                }
                _ => {}
            }
        }
        let secs = |ms: Option<u64>| ms.map(|m| format!("{:.3}", m as f64 / 1000.0));
        let value = match *name {
            "slurm_imex_node_info" => {
                let _ = writeln!(
                    out,
                    "{name}{{node=\"{}\",version=\"{}\"}} 1",
                    label(&node.node),
                    env!("CARGO_PKG_VERSION")
                );
                None
            }
            "slurm_imex_domain_owned" => Some((node.domain_owned as i64).to_string()),
            "slurm_imex_domain_up" => Some((node.domain_up as i64).to_string()),
            "slurm_imex_node_drained" => Some((node.drained_since.is_some() as i64).to_string()),
            "slurm_imex_node_drained_since_timestamp_seconds" => {
                Some(node.drained_since.unwrap_or(0).to_string())
            }
            "slurm_imex_last_gate_duration_seconds" => secs(node.last_gate_ms),
            "slurm_imex_last_prolog_duration_seconds" => secs(node.last_prolog_ms),
            "slurm_imex_last_epilog_duration_seconds" => secs(node.last_epilog_ms),
            _ => None,
        };
        if let Some(v) = value {
            let _ = writeln!(out, "{name} {v}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board() -> BoardCounters {
        BoardCounters {
            serial: "1650924060000".into(),
            uuid: "GPU-1".into(),
            pci: "00000000:1A:00.0".into(),
            jobs: 3,
            drains: 1,
            energy_mj: 1_500_250,
            last_verdict: "DRAIN".into(),
            xids: [("reboot".to_string(), 2)].into_iter().collect(),
            throttle_ns: [("sw_power_cap".to_string(), 1_500_000_000)]
                .into_iter()
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn renders_help_type_and_board_labels() {
        let node = NodeState {
            node: "gb-r1-01".into(),
            last_prolog_ms: Some(1643),
            ..Default::default()
        };
        let text = render(&[board()], &node);
        assert!(text.contains("# TYPE slurm_imex_gpu_jobs_total counter\n"));
        assert!(text.contains(
            "slurm_imex_gpu_jobs_total{serial=\"1650924060000\",uuid=\"GPU-1\",pci=\"00000000:1A:00.0\"} 3\n"
        ));
        assert!(text.contains("slurm_imex_gpu_energy_joules_total{serial=\"1650924060000\",uuid=\"GPU-1\",pci=\"00000000:1A:00.0\"} 1500.250\n"));
        assert!(text.contains(",class=\"reboot\"} 2\n"));
        assert!(text.contains(",reason=\"sw_power_cap\"} 1.500000000\n"));
        assert!(text.contains("slurm_imex_gpu_last_verdict{serial=\"1650924060000\",uuid=\"GPU-1\",pci=\"00000000:1A:00.0\"} 2\n"));
        assert!(text.contains("slurm_imex_last_prolog_duration_seconds 1.643\n"));
        assert!(
            !text.contains("\nslurm_imex_last_gate_duration_seconds "),
            "no sample when unknown"
        );
        assert!(text.contains("slurm_imex_node_info{node=\"gb-r1-01\""));
    }

    #[test]
    fn hostile_label_values_are_escaped() {
        let mut b = board();
        b.serial = "a\"b\\c\nd".into();
        let text = render(&[b], &NodeState::default());
        assert!(text.contains("serial=\"a\\\"b\\\\c\\nd\""), "{text}");
    }

    #[test]
    fn drain_keeps_its_first_time() {
        let mut n = NodeState::default();
        n.set_drained(Some(100));
        n.set_drained(Some(200));
        assert_eq!(n.drained_since, Some(100));
        n.set_drained(None);
        assert_eq!(n.drained_since, None);
    }

    /// Every `slurm_imex_*` name in an expression.
    fn names_in(expr: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = expr;
        while let Some(i) = rest.find("slurm_imex_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            out.push(tail[..end].to_string());
            rest = &tail[end..];
        }
        out
    }

    fn assert_exported(exprs: &[String], file: &str) {
        let ours: Vec<&str> = METRICS.iter().map(|m| m.0).collect();
        let mut seen = 0;
        for e in exprs {
            for name in names_in(e) {
                assert!(
                    ours.contains(&name.as_str()),
                    "{file}: {name} is not exported (in {e})"
                );
                seen += 1;
            }
        }
        assert!(seen > 0, "{file}: no slurm_imex_ metric used");
    }

    #[test]
    fn the_grafana_dashboard_uses_only_exported_metrics() {
        let text = include_str!("../../conf-examples/grafana/slurm-imex-dashboard.json");
        let dash: serde_json::Value = serde_json::from_str(text).unwrap();
        let exprs: Vec<String> = dash["panels"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
            .filter_map(|t| t["expr"].as_str().map(str::to_string))
            .collect();
        assert!(exprs.len() >= 7, "{exprs:?}");
        assert_exported(&exprs, "slurm-imex-dashboard.json");
    }

    #[test]
    fn the_alert_rules_use_only_exported_metrics() {
        let text = include_str!("../../conf-examples/prometheus/slurm-imex.rules.yml");
        let docs = yaml_rust2::YamlLoader::load_from_str(text).unwrap();
        let exprs: Vec<String> = docs[0]["groups"][0]["rules"]
            .as_vec()
            .unwrap()
            .iter()
            .filter_map(|r| r["expr"].as_str().map(str::to_string))
            .collect();
        assert_eq!(exprs.len(), 5);
        assert_exported(&exprs, "slurm-imex.rules.yml");
    }
}
