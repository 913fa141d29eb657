//! Talking to `nvidia-imex-ctl` and understanding its answers: `-q` (local
//! daemon state), `-N -j` (domain status as JSON) and the `-N` text table,
//! and the verdict "is this job's domain ready, and if not, whose fault".
//!
//! Parsing is tolerant by design (docs/imex.md §2, "How we parse it"): NVIDIA's own
//! fixtures show tab-indented, sparse and minimal JSON, so readiness is
//! decided from the top-level `status` and each configured node's `status`,
//! and missing fields are "unknown", never a crash.

use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::process::run_bounded;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeStatus {
    pub status: Option<String>,
    pub host: Option<String>,
    pub version: Option<String>,
    /// Peer index → connection status (CONNECTED, NEVER_CONNECTED, INVALID…).
    pub connections: BTreeMap<usize, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainStatus {
    /// UP, DEGRADED, DOWN (or whatever a newer daemon says).
    pub domain: String,
    pub nodes: BTreeMap<usize, NodeStatus>,
}

/// Parse `nvidia-imex-ctl -N -j` output.
pub fn parse_domain_json(text: &str) -> Result<DomainStatus> {
    let v: serde_json::Value = serde_json::from_str(text.trim()).map_err(|e| {
        Error::new(format!(
            "nvidia-imex-ctl -N -j printed no valid JSON ({e}): {}",
            snippet(text)
        ))
    })?;
    let domain = v
        .get("status")
        .and_then(|s| s.as_str())
        .ok_or_else(|| {
            Error::new(format!(
                "nvidia-imex-ctl -N -j output has no top-level \"status\": {}",
                snippet(text)
            ))
        })
        .map(state_text)?;
    let mut nodes = BTreeMap::new();
    if let Some(map) = v.get("nodes").and_then(|n| n.as_object()) {
        for (key, node) in map {
            let Ok(index) = key.trim().parse::<usize>() else {
                continue; // not a node index: ignore rather than guess
            };
            let text_of = |k: &str| node.get(k).and_then(|x| x.as_str()).map(state_text);
            let mut connections = BTreeMap::new();
            if let Some(conns) = node.get("connections").and_then(|c| c.as_object()) {
                for (peer, c) in conns {
                    if let (Ok(p), Some(s)) = (
                        peer.trim().parse::<usize>(),
                        c.get("status").and_then(|s| s.as_str()),
                    ) {
                        connections.insert(p, state_text(s));
                    }
                }
            }
            nodes.insert(
                index,
                NodeStatus {
                    status: text_of("status"),
                    host: text_of("host"),
                    version: text_of("version"),
                    connections,
                },
            );
        }
    }
    Ok(DomainStatus { domain, nodes })
}

/// Parse the `-N` text form (older drivers print no Version column). Used as
/// a fallback only; JSON is preferred whenever the daemon offers it.
pub fn parse_domain_text(text: &str) -> Result<DomainStatus> {
    let mut status = DomainStatus::default();
    let mut matrix_columns: Vec<usize> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Domain State:") {
            status.domain = state_text(rest.trim());
        } else if let Some(rest) = t.strip_prefix("Node #") {
            // "Node #0   - 172.31.48.81    - READY                - Version: 570.172"
            let fields: Vec<&str> = rest.split(" - ").map(str::trim).collect();
            if let Some(Ok(index)) = fields.first().map(|f| f.parse::<usize>()) {
                let node = status.nodes.entry(index).or_default();
                node.host = fields.get(1).map(|s| state_text(s));
                node.status = fields.get(2).map(|s| state_text(s));
                node.version = fields
                    .get(3)
                    .and_then(|v| v.strip_prefix("Version:"))
                    .map(|v| state_text(v.trim()));
            }
        } else if let Some(rest) = t.strip_prefix("Nodes From\\To") {
            matrix_columns = rest
                .split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect();
        } else if !matrix_columns.is_empty() {
            let mut cells = t.split_whitespace();
            if let Some(Ok(row)) = cells.next().map(|c| c.parse::<usize>()) {
                let node = status.nodes.entry(row).or_default();
                for (col, cell) in matrix_columns.iter().zip(cells) {
                    node.connections
                        .insert(*col, connection_word(cell).to_string());
                }
            }
        }
    }
    if status.domain.is_empty() {
        return Err(Error::new(format!(
            "nvidia-imex-ctl -N printed no \"Domain State:\" line: {}",
            snippet(text)
        )));
    }
    Ok(status)
}

/// The legend letters of the `-N` matrix, spelled as the JSON does.
fn connection_word(cell: &str) -> &'static str {
    match cell {
        "C" => "CONNECTED",
        "N" => "NEVER_CONNECTED",
        "I" => "INVALID",
        "R" => "RECOVERING",
        "D" => "DISCONNECTED",
        "A" => "AUTHENTICATING",
        "!V!" => "VERSION_MISMATCH",
        "!M!" => "NODE_MAP_MISMATCH",
        _ => "UNKNOWN",
    }
}

fn snippet(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.len() > 160 {
        format!(
            "{}…",
            &one[..one.char_indices().nth(160).map_or(one.len(), |(i, _)| i)]
        )
    } else if one.is_empty() {
        "(empty)".to_string()
    } else {
        one
    }
}

/// Longest state word kept from the daemon (the longest real one,
/// WAITING_FOR_RECOVERY, has 20 characters). A longer "state" is not one,
/// and any state or status string is cut to this, so no line built from
/// the daemon's answers outgrows `text::LINE_MAX`.
const STATE_MAX: usize = 64;

/// A state or status string from the daemon, bounded.
fn state_text(s: &str) -> String {
    slurm_imex_core::text::cap(s, STATE_MAX)
}

/// The `-q` answer: exactly one state word (READY, INITIALIZING, …).
pub fn parse_query(stdout: &str) -> Option<String> {
    let t = stdout.trim();
    let word_like = !t.is_empty()
        && t.len() <= STATE_MAX
        && t.chars().all(|c| c.is_ascii_uppercase() || c == '_');
    word_like.then(|| t.to_string())
}

/// Is the job's domain usable, from this node's point of view?
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    NotReady(NotReady),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    pub domain: String,
    /// This node's own entry is READY.
    pub local_ready: bool,
    /// Configured indexes whose status is not READY (or absent).
    pub not_ready: Vec<usize>,
    /// Peers this node reports as not CONNECTED (when it reports connections).
    pub not_connected: Vec<usize>,
    /// Of those, the peers whose node map differs from this node's (`!M!`,
    /// NODE_MAP_MISMATCH: the daemons disabled communication). Nodes that
    /// read different rack files get this, not a peer fault.
    pub map_mismatch: Vec<usize>,
}

/// Decide readiness for a domain of `node_count` nodes in which this node has
/// index `local`: UP, every configured node READY, and (where the daemon
/// lists them) every connection of this node CONNECTED.
pub fn assess(status: &DomainStatus, node_count: usize, local: usize) -> Readiness {
    let everyone: Vec<usize> = (0..node_count).collect();
    assess_members(status, &everyone, local, true)
}

/// Readiness of the configured nodes at `members` (indexes; this node is
/// `local`): each READY, and each CONNECTED to this node where it lists
/// connections. `need_up`: the domain itself must say UP, as a per-job
/// domain must; a rack-wide domain may be DEGRADED by a node no job of
/// ours uses.
pub fn assess_members(
    status: &DomainStatus,
    members: &[usize],
    local: usize,
    need_up: bool,
) -> Readiness {
    let is_ready = |i: &usize| {
        status
            .nodes
            .get(i)
            .and_then(|n| n.status.as_deref())
            .is_some_and(|s| s == "READY")
    };
    let not_ready: Vec<usize> = members.iter().copied().filter(|i| !is_ready(i)).collect();
    let not_connected: Vec<usize> = match status.nodes.get(&local) {
        Some(n) if !n.connections.is_empty() => members
            .iter()
            .copied()
            .filter(|p| *p != local)
            .filter(|p| n.connections.get(p).map(String::as_str) != Some("CONNECTED"))
            .collect(),
        _ => Vec::new(),
    };
    let map_mismatch: Vec<usize> = match status.nodes.get(&local) {
        Some(n) => not_connected
            .iter()
            .copied()
            .filter(|p| n.connections.get(p).is_some_and(|s| is_map_mismatch(s)))
            .collect(),
        None => Vec::new(),
    };
    let up = status.domain == "UP" || !need_up;
    if up && not_ready.is_empty() && not_connected.is_empty() {
        Readiness::Ready
    } else {
        Readiness::NotReady(NotReady {
            domain: status.domain.clone(),
            local_ready: is_ready(&local),
            not_ready,
            not_connected,
            map_mismatch,
        })
    }
}

/// A connection status that says the two nodes' maps differ: the text
/// table's `!M!` (read as NODE_MAP_MISMATCH), or any JSON spelling of it.
fn is_map_mismatch(status: &str) -> bool {
    let s = status.to_ascii_uppercase();
    s.contains("MAP") && s.contains("MISMATCH")
}

/// Client for one daemon config.
pub struct Ctl<'a> {
    pub program: &'a Path,
    pub config: &'a Path,
    pub timeout: Duration,
}

impl Ctl<'_> {
    /// `nvidia-imex-ctl -c <cfg> -N -j`, parsed; a build whose `-j` prints
    /// no JSON (older drivers) is asked for the `-N` text table instead.
    pub fn domain_status(&self) -> Result<DomainStatus> {
        let out = self.run(&["-N", "-j"])?;
        match parse_domain_json(&out) {
            Ok(s) => Ok(s),
            Err(json_error) => parse_domain_text(&self.run(&["-N"])?).map_err(|_| json_error),
        }
    }

    fn run(&self, mode: &[&str]) -> Result<String> {
        let cfg = self.config.to_string_lossy();
        let mut args = vec!["-c", &cfg];
        args.extend_from_slice(mode);
        self.run_with(&args, &mode.join(" "))
    }

    /// The daemon's unix socket, when the config it runs on names one.
    fn unix_socket(&self) -> Option<String> {
        let config = crate::imex::daemon_config::DaemonConfigFile::read_as(
            self.config,
            crate::imex::daemon_config::Origin::Running,
        )
        .ok()?;
        let path = config.get("IMEX_CMD_UNIX_DOMAIN_PATH")?.trim();
        (!path.is_empty()).then(|| path.to_string())
    }

    fn run_with(&self, args: &[&str], mode: &str) -> Result<String> {
        let out = run_bounded(self.program, args, self.timeout)?;
        if !out.success() {
            return Err(Error::new(format!(
                "nvidia-imex-ctl {} exited {}: {}",
                mode,
                out.code.map_or("on a signal".into(), |c| c.to_string()),
                snippet(&out.one_line())
            )));
        }
        Ok(out.stdout)
    }

    /// `nvidia-imex-ctl -q`: the local daemon's state word. Asked over the
    /// daemon's unix socket when its config sets IMEX_CMD_UNIX_DOMAIN_PATH
    /// (`-u`), else through the config (`-c`, the command port). `-N`
    /// cannot go over the socket: NVIDIA's ctl takes one of `-i`, `-u`,
    /// `-c`, and `-N` needs the config (docs/imex.md §2).
    pub fn local_state(&self) -> Result<String> {
        let out = match self.unix_socket() {
            Some(socket) => self.run_with(&["-u", &socket, "-q"], "-q")?,
            None => self.run(&["-q"])?,
        };
        parse_query(&out).ok_or_else(|| {
            Error::new(format!(
                "nvidia-imex-ctl -q printed no state: {}",
                snippet(&out)
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_state_is_asked_over_the_unix_socket_when_the_config_names_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ctl = dir.path().join("ctl");
        std::fs::write(
            &ctl,
            "#!/bin/sh\ncase \"$1 $2 $3\" in\n  \"-u /run/imex/cmd.sock -q\") echo READY;;\n  \"-c \"*\" -q\") echo INITIALIZING;;\n  *) exit 1;;\nesac\n",
        )
        .unwrap();
        std::fs::set_permissions(&ctl, std::fs::Permissions::from_mode(0o755)).unwrap();
        let with_socket = dir.path().join("with.cfg");
        std::fs::write(
            &with_socket,
            "IMEX_CMD_UNIX_DOMAIN_PATH=/run/imex/cmd.sock\n",
        )
        .unwrap();
        let without = dir.path().join("without.cfg");
        std::fs::write(
            &without,
            "IMEX_CMD_UNIX_DOMAIN_PATH=\nIMEX_CMD_PORT=50005\n",
        )
        .unwrap();
        let ask = |config: &Path| {
            Ctl {
                program: &ctl,
                config,
                timeout: Duration::from_secs(5),
            }
            .local_state()
            .unwrap()
        };
        assert_eq!(ask(&with_socket), "READY");
        assert_eq!(ask(&without), "INITIALIZING");
    }

    #[test]
    fn huge_state_strings_are_bounded() {
        let word = "A".repeat(100_000);
        assert_eq!(parse_query(&format!("{word}\n")), None);
        let j = format!(r#"{{"nodes":{{"0":{{"status":"{word}"}}}},"status":"{word}"}}"#);
        let s = parse_domain_json(&j).unwrap();
        assert!(s.domain.len() < 100, "{}", s.domain.len());
        assert!(s.nodes[&0].status.as_ref().unwrap().len() < 100);
        let t = parse_domain_text(&format!(
            "Node #0   - 10.0.0.1 - {word}\nDomain State: {word}\n"
        ))
        .unwrap();
        assert!(s.domain.len() < 100 && t.domain.len() < 100);
        assert!(t.nodes[&0].status.as_ref().unwrap().len() < 100);
    }

    fn sample(name: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/../tests/data/samples/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn parses_dcgm_fixture_with_tabs_sparse_connections_and_self_links() {
        let s = parse_domain_json(&sample("imex-ctl-N-j-1.json")).unwrap();
        assert_eq!(s.domain, "DEGRADED");
        assert_eq!(s.nodes.len(), 2);
        assert_eq!(s.nodes[&3].host.as_deref(), Some("10.76.186.255"));
        assert_eq!(s.nodes[&3].version.as_deref(), Some("580.30"));
        assert_eq!(s.nodes[&3].connections[&6], "CONNECTED");
        assert_eq!(s.nodes[&1].connections[&1], "CONNECTED");
        // Nodes 0 and 2 are configured but absent: not ready, never a crash.
        match assess(&s, 4, 1) {
            Readiness::NotReady(n) => {
                assert_eq!(n.not_ready, vec![0, 2]);
                assert!(n.local_ready);
                assert_eq!(n.not_connected, vec![2, 3]);
            }
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn parses_minimal_and_shortened_fixtures() {
        let s = parse_domain_json(&sample("imex-ctl-N-j-2.json")).unwrap();
        assert_eq!(s.domain, "UP");
        assert_eq!(s.nodes[&0].status.as_deref(), Some("READY"));
        assert!(s.nodes[&0].host.is_none() && s.nodes[&0].connections.is_empty());
        assert_eq!(assess(&s, 1, 0), Readiness::Ready);
        let s = parse_domain_json(&sample("imex-ctl-N-j-3.json")).unwrap();
        assert_eq!(s.domain, "DEGRADED");
        assert_eq!(s.nodes[&5].host.as_deref(), Some("10.76.189.233"));
    }

    #[test]
    fn up_requires_every_configured_node_ready_and_connected() {
        let j = r#"{"nodes":{"0":{"status":"READY","connections":{"1":{"status":"CONNECTED"}}},
                   "1":{"status":"UNAVAILABLE","version":"","connections":{"0":{"status":"INVALID"}}}},
                   "timestamp":"x","status":"DEGRADED"}"#;
        let s = parse_domain_json(j).unwrap();
        match assess(&s, 2, 0) {
            Readiness::NotReady(n) => assert_eq!((n.not_ready, n.local_ready), (vec![1], true)),
            r => panic!("{r:?}"),
        }
        match assess(&s, 2, 1) {
            Readiness::NotReady(n) => {
                assert!(!n.local_ready);
                assert_eq!(n.not_connected, vec![0]);
            }
            r => panic!("{r:?}"),
        }
        // A domain that says UP but misses a configured node is not ready.
        let s = parse_domain_json(r#"{"nodes":{"0":{"status":"READY"}},"status":"UP"}"#).unwrap();
        assert!(matches!(assess(&s, 2, 0), Readiness::NotReady(_)));
    }

    #[test]
    fn a_peer_with_another_node_map_is_named_as_such() {
        let j = r#"{"nodes":{"0":{"status":"READY","connections":{"1":{"status":"NODE_MAP_MISMATCH"},
                   "2":{"status":"CONNECTED"}}},"1":{"status":"READY"},"2":{"status":"READY"}},
                   "status":"DEGRADED"}"#;
        match assess(&parse_domain_json(j).unwrap(), 3, 0) {
            Readiness::NotReady(n) => {
                assert_eq!((n.not_connected, n.map_mismatch), (vec![1], vec![1]))
            }
            r => panic!("{r:?}"),
        }
        let t = "Nodes:\nNode #0   - 10.0.0.1 - READY - Version: 580\nNode #1   - 10.0.0.2 - READY - Version: 580\n\n Nodes From\\To  0   1\n       0        C   !M!\n       1        !M! C\n\nDomain State: DEGRADED\n";
        match assess(&parse_domain_text(t).unwrap(), 2, 0) {
            Readiness::NotReady(n) => assert_eq!(n.map_mismatch, vec![1]),
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn malformed_json_is_an_error_not_a_panic() {
        for bad in [
            "",
            "{",
            "[]",
            "null",
            r#"{"nodes":{}}"#,
            r#"{"status":7}"#,
            "Query Status returned error code: 14 - failed to connect to all addresses",
        ] {
            assert!(parse_domain_json(bad).is_err(), "{bad}");
        }
        // Odd node keys and odd field types are ignored, not fatal.
        let s = parse_domain_json(
            r#"{"nodes":{"x":{},"0":{"status":5,"connections":[1]},"1":"READY"},"status":"DOWN"}"#,
        )
        .unwrap();
        assert_eq!(s.nodes[&0].status, None);
        assert!(matches!(assess(&s, 2, 0), Readiness::NotReady(_)));
    }

    #[test]
    fn parses_every_published_text_table() {
        let s = parse_domain_text(&sample("imex-ctl-N-1.txt")).unwrap();
        assert_eq!(s.domain, "UP");
        assert_eq!(s.nodes.len(), 18);
        assert_eq!(s.nodes[&17].host.as_deref(), Some("172.31.56.47"));
        assert_eq!(s.nodes[&17].version.as_deref(), Some("570.172"));
        assert_eq!(s.nodes[&4].connections.len(), 18);
        assert_eq!(assess(&s, 18, 4), Readiness::Ready);
        let s = parse_domain_text(&sample("imex-ctl-N-4.txt")).unwrap();
        assert_eq!(assess(&s, 18, 0), Readiness::Ready);
        let s = parse_domain_text(&sample("imex-ctl-N-2.txt")).unwrap();
        assert_eq!((s.domain.as_str(), s.nodes.len()), ("UP", 1));
        assert_eq!(s.nodes[&0].version, None);
        let s = parse_domain_text(&sample("imex-ctl-N-3.txt")).unwrap();
        assert_eq!(s.nodes[&1].host.as_deref(), Some("10.136.206.48"));
        assert_eq!(s.nodes[&1].connections[&0], "CONNECTED");
        assert_eq!(assess(&s, 2, 1), Readiness::Ready);
        assert!(parse_domain_text("Nodes:\n").is_err());
    }

    #[test]
    fn falls_back_to_the_text_table_when_j_prints_no_json() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let table = d.path().join("table.txt");
        std::fs::write(&table, sample("imex-ctl-N-3.txt")).unwrap();
        // An old ctl: -j is not understood, -N prints the published 570.00 table.
        let ctl = d.path().join("nvidia-imex-ctl");
        std::fs::write(
            &ctl,
            format!(
                "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -j ] && {{ echo 'Usage: nvidia-imex-ctl'; exit 0; }}; done\ncat {}\n",
                table.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&ctl, std::fs::Permissions::from_mode(0o755)).unwrap();
        let c = Ctl {
            program: &ctl,
            config: Path::new("/x.cfg"),
            timeout: Duration::from_secs(5),
        };
        let s = c.domain_status().unwrap();
        assert_eq!(s.domain, "UP");
        assert_eq!(assess(&s, 2, 0), Readiness::Ready);
        // Neither form: the JSON error is the one reported.
        std::fs::write(&table, "garbage").unwrap();
        assert!(c
            .domain_status()
            .unwrap_err()
            .to_string()
            .contains("no valid JSON"));
    }

    #[test]
    fn query_output_samples() {
        let q = sample("imex-ctl-q.txt");
        let blocks: Vec<&str> = q.split("----").collect();
        assert_eq!(parse_query(blocks[0]), Some("READY".into()));
        for b in &blocks[1..] {
            assert_eq!(parse_query(b), None, "{b}");
        }
        assert_eq!(
            parse_query("WAITING_FOR_PEERS\n"),
            Some("WAITING_FOR_PEERS".into())
        );
    }
}
