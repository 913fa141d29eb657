//! The Prometheus textfile export (`<textfile_dir>/slurm_imex.prom`, read
//! by node_exporter's textfile collector): per-board lifetime counters from
//! the job database's totals, and this node's IMEX, drain and timing state.
//! Refreshed atomically by the epilog and by `slurm-imex check`. Labels are
//! board identity only (serial, uuid, pci) and small fixed sets (XID class,
//! throttle reason, IMEX event kind): never a job id, so series do not grow
//! with jobs.
//!
//! The exposition text is written here (HELP, TYPE, escaped labels; `render`)
//! rather than with the prometheus or prometheus-client crates: those keep a
//! live registry for a `/metrics` endpoint, while the textfile collector wants
//! a file rebuilt from the database's totals and replaced atomically.

use crate::config::{DatabaseConfig, MetricsConfig};
use crate::query::BoardCounters;
use crate::JobDb;
use slurm_imex_core::error::Result;
use slurm_imex_core::state::NodeState;
use slurm_imex_jobsummary::imex_event::ImexEventKind;
use slurm_imex_jobsummary::series::escape_label;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

pub const FILE_NAME: &str = "slurm_imex.prom";

/// Rebuild the textfile from the database totals and `node`, and the
/// per-job textfile beside it (`crate::job_export`). Returns the node-wide
/// file written, or None when export is off. Never creates the database.
pub fn refresh(
    database: &DatabaseConfig,
    metrics: &MetricsConfig,
    node: &NodeState,
) -> Result<Option<PathBuf>> {
    let Some(dir) = metrics.textfile_dir() else {
        return Ok(None);
    };
    let db = if database.path.exists() {
        Some(JobDb::open_to_read(
            &database.path,
            database.busy_timeout.0,
        )?)
    } else {
        None
    };
    let boards = match &db {
        Some(db) => db.board_counters()?,
        None => Vec::new(),
    };
    // Through a directory descriptor: on Debian the parent belongs to the
    // prometheus user, so the path-based trust check would refuse it.
    let path = slurm_imex_core::fsutil::write_atomic_in(
        &dir,
        FILE_NAME,
        render(&boards, node).as_bytes(),
        0o644,
    )?;
    crate::job_export::refresh(
        metrics,
        db.as_ref(),
        &dir,
        slurm_imex_core::timespec::now_s(),
    )?;
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

/// Where a metric's samples come from: one per board (extra labels and
/// value for each sample), or one for the node (labels and value).
pub enum Source {
    Board(fn(&BoardCounters) -> Vec<(String, String)>),
    Node(fn(&NodeState) -> Option<(String, String)>),
    /// Several samples for the node, each with its labels (a fixed set).
    NodeEach(fn(&NodeState) -> Vec<(String, String)>),
}

/// One exported metric; [`METRICS`] lists them all, and the dashboard and
/// alert tests check their expressions against it.
pub struct Metric {
    pub name: &'static str,
    pub kind: &'static str,
    pub help: &'static str,
    pub source: Source,
}

fn one(v: impl ToString) -> Vec<(String, String)> {
    vec![(String::new(), v.to_string())]
}

fn per_key(
    map: &BTreeMap<String, i64>,
    known: &[&str],
    label: &str,
    scale: f64,
) -> Vec<(String, String)> {
    with_zeros(map, known)
        .into_iter()
        .map(|(k, v)| {
            let value = if scale == 1.0 {
                v.to_string()
            } else {
                format!("{:.9}", v as f64 / scale)
            };
            (format!(",{label}=\"{}\"", escape_label(&k)), value)
        })
        .collect()
}

/// The node's IMEX domain events by kind: every kind of the closed set
/// (`ImexEventKind::ALL`), 0 when the watcher saw none, so the series are
/// fixed and `increase()` sees the first of each.
fn imex_events_by_kind(n: &NodeState) -> Vec<(String, String)> {
    ImexEventKind::ALL
        .into_iter()
        .map(|k| {
            let count = n.imex_events.get(k.as_str()).copied().unwrap_or(0);
            (format!("{{kind=\"{}\"}}", k.as_str()), count.to_string())
        })
        .collect()
}

fn node_value(v: impl ToString) -> Option<(String, String)> {
    Some((String::new(), v.to_string()))
}

/// One of the board's usage counters, 0 before its first accounted job.
fn usage(b: &BoardCounters, key: &str) -> i64 {
    b.usage.get(key).copied().unwrap_or(0)
}

fn seconds(ms: Option<u64>) -> Option<(String, String)> {
    ms.map(|m| (String::new(), format!("{:.3}", m as f64 / 1000.0)))
}

fn verdict_value(v: &str) -> i64 {
    match v {
        "DRAIN" => 2,
        "WARN" => 1,
        _ => 0,
    }
}

macro_rules! metric {
    ($name:literal, $kind:literal, $help:literal, $source:expr) => {
        Metric {
            name: $name,
            kind: $kind,
            help: $help,
            source: $source,
        }
    };
}

pub const METRICS: &[Metric] = &[
    metric!("slurm_imex_gpu_jobs_total", "counter", "Jobs that used this GPU board.", Source::Board(|b| one(b.jobs))),
    metric!("slurm_imex_gpu_drains_total", "counter", "Jobs after which this board was judged DRAIN.", Source::Board(|b| one(b.drains))),
    metric!("slurm_imex_gpu_warnings_total", "counter", "Jobs after which this board was judged WARN.", Source::Board(|b| one(b.warns))),
    metric!("slurm_imex_gpu_xids_total", "counter", "XID events on this board, by NVIDIA catalog class (reboot, reset_gpu and workflow are drain-class).",
        Source::Board(|b| per_key(&b.xids, &XID_CLASSES, "class", 1.0))),
    metric!("slurm_imex_gpu_energy_joules_total", "counter", "Energy this board used during jobs.",
        Source::Board(|b| one(format!("{:.3}", b.energy_mj as f64 / 1000.0)))),
    metric!("slurm_imex_gpu_energy_resets_total", "counter", "Jobs during which the board's energy counter went backwards (reset).", Source::Board(|b| one(b.energy_resets))),
    metric!("slurm_imex_gpu_remapped_rows_total", "counter", "Memory rows remapped during jobs (correctable and uncorrectable).", Source::Board(|b| one(b.remapped_rows))),
    metric!("slurm_imex_gpu_ecc_dbe_errors_total", "counter", "Volatile double-bit ECC errors during jobs.", Source::Board(|b| one(b.ecc_dbe))),
    metric!("slurm_imex_gpu_retired_pages_total", "counter", "Pages retired during jobs.", Source::Board(|b| one(b.retired_pages))),
    metric!("slurm_imex_gpu_throttle_seconds_total", "counter", "Time the board was throttled during jobs, by reason.",
        Source::Board(|b| per_key(&b.throttle_ns, &THROTTLE_REASONS, "reason", 1e9))),
    metric!("slurm_imex_gpu_busy_seconds_total", "counter", "Time a kernel of a job's processes ran on this board (NVML accounting), for jobs whose use is known.",
        Source::Board(|b| one(format!("{:.3}", usage(b, "busy_ms") as f64 / 1000.0)))),
    metric!("slurm_imex_gpu_held_seconds_total", "counter", "Time jobs whose use is known held this board; busy / held is its utilization.",
        Source::Board(|b| one(format!("{:.3}", usage(b, "held_ms") as f64 / 1000.0)))),
    metric!("slurm_imex_gpu_accounted_jobs_total", "counter", "Jobs whose use of this board is known (NVML accounting mode was on).", Source::Board(|b| one(usage(b, "accounted_jobs")))),
    metric!("slurm_imex_gpu_idle_jobs_total", "counter", "Jobs that held this board but never ran a process on it.", Source::Board(|b| one(usage(b, "idle_jobs")))),
    metric!("slurm_imex_gpu_remap_pending", "gauge", "1 when the board had a row remap pending (GPU reset needed) after its last job.",
        Source::Board(|b| one(b.remap_pending as i64))),
    metric!("slurm_imex_gpu_recovery_action", "gauge", "The GPU recovery action the driver asked for after the board's last job (NVML field 230): 0 NONE, 1 GPU_RESET, 2 NODE_REBOOT, 3 DRAIN_P2P, 4 DRAIN_AND_RESET, 5 RECOVER_IMEX_DOMAIN, 6 BUS_RESET, 7 SYSTEM_REBOOT, a higher value unknown to this slurm-imex; 0 also where the driver does not report it.",
        Source::Board(|b| one(b.recovery_action))),
    metric!("slurm_imex_gpu_last_verdict", "gauge", "The board's verdict after its last job: 0 PASS, 1 WARN, 2 DRAIN.",
        Source::Board(|b| one(verdict_value(&b.last_verdict)))),
    metric!("slurm_imex_node_info", "gauge", "This node's Slurm name and the slurm-imex version (always 1).",
        Source::Node(|n| Some((format!("{{node=\"{}\",version=\"{}\"}}", escape_label(&n.node), env!("CARGO_PKG_VERSION")), "1".into())))),
    metric!("slurm_imex_domain_owned", "gauge", "1 when a job owns this node's per-job IMEX domain: the per-job IMEX-expected signal (0 between jobs, when no nvidia-imex runs here by design).",
        Source::Node(|n| node_value(n.domain_owned as i64))),
    metric!("slurm_imex_domain_up", "gauge", "1 when this node's IMEX domain is UP.", Source::Node(|n| node_value(n.domain_up as i64))),
    metric!("slurm_imex_imex_expected", "gauge", "1 when IMEX is expected on this node now: a job owns its per-job IMEX domain, or it serves the rack-wide one (its rack daemon runs, or an --imex job is on it). Gate DCGM's IMEX health on it.",
        Source::Node(|n| node_value(n.imex_expected as i64))),
    metric!("slurm_imex_node_drained", "gauge", "1 when slurm-imex drained this node (a drain finding) and it is not back in service.",
        Source::Node(|n| node_value(n.drained_since.is_some() as i64))),
    metric!("slurm_imex_node_drained_since_timestamp_seconds", "gauge", "When slurm-imex drained this node (0 when it is not drained).",
        Source::Node(|n| node_value(n.drained_since.unwrap_or(0)))),
    metric!("slurm_imex_last_gate_duration_seconds", "gauge", "Wall time of the last prolog's GPU health gate.", Source::Node(|n| seconds(n.last_gate_ms))),
    metric!("slurm_imex_last_prolog_duration_seconds", "gauge", "Wall time of the last prolog.", Source::Node(|n| seconds(n.last_prolog_ms))),
    metric!("slurm_imex_last_epilog_duration_seconds", "gauge", "Wall time of the last epilog (up to this export).", Source::Node(|n| seconds(n.last_epilog_ms))),
    metric!("slurm_imex_imex_events_total", "counter", "IMEX domain events the watcher saw on this node while jobs ran, by kind (daemon-died, daemon-restarted, daemon-left-down, domain-degraded, domain-up, member-lost, member-back); since the state directory began (boot).",
        Source::NodeEach(imex_events_by_kind)),
];

/// The exposition text: HELP and TYPE for every metric, then its samples.
pub fn render(boards: &[BoardCounters], node: &NodeState) -> String {
    let mut out = String::with_capacity(256 + boards.len() * 4096);
    for m in METRICS {
        let _ = writeln!(
            out,
            "# HELP {} {}\n# TYPE {} {}",
            m.name, m.help, m.name, m.kind
        );
        match m.source {
            Source::Board(samples) => {
                for b in boards {
                    let id = format!(
                        "serial=\"{}\",uuid=\"{}\",pci=\"{}\"",
                        escape_label(&b.serial),
                        escape_label(&b.uuid),
                        escape_label(&b.pci)
                    );
                    for (extra, value) in samples(b) {
                        let _ = writeln!(out, "{}{{{id}{extra}}} {value}", m.name);
                    }
                }
            }
            Source::Node(sample) => {
                if let Some((labels, value)) = sample(node) {
                    let _ = writeln!(out, "{}{labels} {value}", m.name);
                }
            }
            Source::NodeEach(samples) => {
                for (labels, value) in samples(node) {
                    let _ = writeln!(out, "{}{labels} {value}", m.name);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events counter's HELP names every kind it has a series for, in
    /// their order.
    #[test]
    fn the_event_counters_help_names_exactly_the_event_kinds() {
        let help = METRICS
            .iter()
            .find(|m| m.name == "slurm_imex_imex_events_total")
            .unwrap()
            .help;
        let listed = help
            .split_once("by kind (")
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(kinds, _)| kinds.split(", ").collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no \"by kind (…)\" in {help:?}"));
        let kinds: Vec<&str> = ImexEventKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(listed, kinds, "{help}");
    }

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
    fn imex_events_are_counted_by_kind_with_every_kind_present() {
        let mut node = NodeState::default();
        node.imex_events.insert("daemon-died".into(), 3);
        node.imex_events.insert("domain-up".into(), 1);
        // A kind this version does not know is not exported (fixed set).
        node.imex_events.insert("daemon-exploded".into(), 9);
        let text = render(&[], &node);
        assert!(
            text.contains("# HELP slurm_imex_imex_events_total IMEX domain events the watcher saw")
        );
        assert!(text.contains("# TYPE slurm_imex_imex_events_total counter\n"));
        let samples: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("slurm_imex_imex_events_total{"))
            .collect();
        assert_eq!(
            samples,
            [
                "slurm_imex_imex_events_total{kind=\"daemon-died\"} 3",
                "slurm_imex_imex_events_total{kind=\"daemon-restarted\"} 0",
                "slurm_imex_imex_events_total{kind=\"daemon-left-down\"} 0",
                "slurm_imex_imex_events_total{kind=\"domain-degraded\"} 0",
                "slurm_imex_imex_events_total{kind=\"domain-up\"} 1",
                "slurm_imex_imex_events_total{kind=\"member-lost\"} 0",
                "slurm_imex_imex_events_total{kind=\"member-back\"} 0",
            ]
        );
        assert!(!text.contains("daemon-exploded"));
        assert_eq!(
            render(&[], &NodeState::default())
                .lines()
                .filter(|l| l.starts_with("slurm_imex_imex_events_total{"))
                .count(),
            7,
            "all seven from the start"
        );
    }

    #[test]
    fn imex_expected_is_exported_beside_domain_owned() {
        let text = render(&[], &NodeState::default());
        assert!(text.contains("\nslurm_imex_imex_expected 0\n"), "{text}");
        assert!(text.contains(
            "# HELP slurm_imex_domain_owned 1 when a job owns this node's per-job IMEX domain: \
             the per-job IMEX-expected signal"
        ));
        assert!(text.contains("# TYPE slurm_imex_imex_expected gauge\n"));
        let node = NodeState {
            imex_expected: true,
            ..Default::default()
        };
        assert!(render(&[], &node).contains("\nslurm_imex_imex_expected 1\n"));
    }

    #[test]
    fn the_recovery_action_after_the_last_job_is_a_gauge_whose_help_names_every_value() {
        let mut b = board();
        b.recovery_action = 5;
        let text = render(&[b, board()], &NodeState::default());
        assert!(text.contains("# TYPE slurm_imex_gpu_recovery_action gauge\n"));
        let samples: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("slurm_imex_gpu_recovery_action{"))
            .collect();
        assert_eq!(
            samples,
            [
                "slurm_imex_gpu_recovery_action{serial=\"1650924060000\",uuid=\"GPU-1\",pci=\"00000000:1A:00.0\"} 5",
                "slurm_imex_gpu_recovery_action{serial=\"1650924060000\",uuid=\"GPU-1\",pci=\"00000000:1A:00.0\"} 0",
            ]
        );
        let help = METRICS
            .iter()
            .find(|m| m.name == "slurm_imex_gpu_recovery_action")
            .unwrap()
            .help;
        for (v, name) in slurm_imex_core::recovery_action::NAMES.iter().enumerate() {
            assert!(help.contains(&format!("{v} {name}")), "{v} {name}: {help}");
        }
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
        let ours: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
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

    /// The names a guide's spelling stands for: `{a,b}` is each of a and b,
    /// `(x)` is with and without x, and a `{label}` (no comma) is left out.
    fn spelled(spelling: &str) -> Vec<String> {
        let Some(open) = spelling.find(['{', '(']) else {
            return vec![spelling.to_string()];
        };
        let close_char = if spelling.as_bytes()[open] == b'{' {
            '}'
        } else {
            ')'
        };
        let close = open + spelling[open..].find(close_char).unwrap();
        let (head, inner, tail) = (
            &spelling[..open],
            &spelling[open + 1..close],
            &spelling[close + 1..],
        );
        let choices: Vec<&str> = match close_char {
            ')' => vec!["", inner],
            _ if inner.contains(',') => inner.split(',').collect(),
            _ => vec![""],
        };
        choices
            .iter()
            .flat_map(|c| spelled(&format!("{head}{c}{tail}")))
            .collect()
    }

    #[test]
    fn the_guide_names_every_metric_and_counts_an_8_gpu_nodes_series() {
        let guide = include_str!("../../docs/guide.md");
        let at = guide.find("## Fleet view").unwrap();
        let section = &guide[at..];
        let section = &section[..section[3..].find("\n## ").unwrap() + 3];
        let named: Vec<String> = section
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|s| s.starts_with("slurm_imex_"))
            .flat_map(spelled)
            .collect();
        for m in METRICS {
            assert!(
                named.iter().any(|n| n == m.name),
                "docs/guide.md's fleet view does not name {}",
                m.name
            );
        }
        let boards: Vec<BoardCounters> = (0..8)
            .map(|i| BoardCounters {
                serial: format!("S{i}"),
                ..Default::default()
            })
            .collect();
        let node = NodeState {
            last_gate_ms: Some(1),
            last_prolog_ms: Some(1),
            last_epilog_ms: Some(1),
            ..Default::default()
        };
        let text = render(&boards, &node);
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        let per_board = samples
            .iter()
            .filter(|l| l.contains("serial=\"S0\""))
            .count();
        let for_node = samples.len() - 8 * per_board;
        let words = section.split_whitespace().collect::<Vec<_>>().join(" ");
        let said = format!(
            "an 8-GPU node exports {} series ({per_board} per board and {for_node} for the node)",
            samples.len()
        );
        assert!(words.contains(&said), "docs/guide.md should say: {said}");
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
        assert_eq!(exprs.len(), 7);
        assert_exported(&exprs, "slurm-imex.rules.yml");
    }
}
