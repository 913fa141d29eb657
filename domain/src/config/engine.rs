//! `[imex]`'s engine keys: what the prolog and epilog do about a job's IMEX
//! domain (per job or per rack, across racks, on shared nodes), the daemon's
//! per-job port, how long the domain may take to come UP, how many nodes a
//! job may have, and the rack map; with the `daemon`, `addresses` and
//! `watch` tables. Its schema, defaults and bounds, checked at load by the
//! programs; the plugin reads `[imex]`'s channel keys only (core).

use super::{AddressesConfig, DaemonConfig, WatchConfig};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use slurm_imex_core::config::bounds::{first_violation, CountBound, DurationBound, HOUR, MIN, MS};
use slurm_imex_core::config::{AutoPath, Documented, HumanDuration, Key, Section};
use slurm_imex_core::slurm::hostlist::MAX_HOSTS_LIMIT;
use std::time::Duration;

/// `[imex]` as the engine reads it. The channel keys there are the
/// plugin's (no `deny_unknown_fields`: the whole file's reader refuses a
/// key neither knows).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct EngineConfig {
    /// What an `--imex` job whose nodes lie in several NVLink domains gets.
    pub span: Span,
    /// Who an IMEX domain belongs to: one job, or the whole rack.
    pub domain: DomainScope,
    /// What the job_submit script does with an `--imex` job (per-job
    /// domains) that could land on a node another job shares; read by
    /// conf-examples/job_submit.lua in slurmctld and by the doctor.
    pub shared_nodes: SharedNodes,
    pub port_base: u16,
    pub port_span: PortSpan,
    pub ready_timeout: HumanDuration,
    /// Longest pause between two readiness polls (20 ms for the first second).
    pub ready_poll_max: HumanDuration,
    /// Upper bound on the hosts one job's hostlist may expand to.
    pub max_nodes: usize,
    /// The rack map (`crate::rack::map`): "auto" (imex-racks.d, the indexed
    /// map, else imex-racks.toml beside this file, when it exists), "none",
    /// or a path to either (must exist).
    pub rack_map: AutoPath,
    pub daemon: DaemonConfig,
    pub addresses: AddressesConfig,
    pub watch: WatchConfig,
}

impl Documented for EngineConfig {
    const TABLE: &'static str = "imex";
    const READ_BY: &'static str = "the prolog, epilog, watcher, CLI and doctor (never the plugin); `domain` and `shared_nodes` also job_submit.lua in slurmctld";
    const KEYS: &'static [Key] = &[
        Key::new("span", r#""split""#, "A job across several racks (NVLink domains): \"split\" (one IMEX domain per rack) or \"refuse\" (the job fails before any daemon starts)."),
        Key::new("domain", r#""job""#, "Who an IMEX domain belongs to: \"job\" (one per job, the daemon restarted for it) or \"rack\" (one long-lived domain per rack, jobs kept apart by their channels)."),
        Key::new("shared_nodes", r#""exclusive""#, "job_submit.lua's answer to an --imex job on a partition that shares nodes: \"exclusive\" (made whole-node) or \"refuse\"."),
        Key::new("port_base", "33792", "First per-job daemon SERVER_PORT: port_base + job_id mod port_span (skipping IMEX_CMD_PORT); port_base + port_span - 1 <= 65535."),
        Key::new("port_span", "16384", "How many ports the per-job SERVER_PORT takes (1 to 65535)."),
        Key::new("ready_timeout", r#""60s""#, "How long the prolog waits for the domain to be UP with every node READY (100ms to 1h)."),
        Key::new("ready_poll_max", r#""1s""#, "Longest pause between readiness polls, after 20 ms ones for the first second (1ms to 60s)."),
        Key::new("max_nodes", "4096", "Most hosts a job's hostlist (or a rack) may expand to (1 to 16384)."),
        Key::new("rack_map", r#""auto""#, "The rack map (`slurm-imex topology --map`): \"auto\" (imex-racks.d, else imex-racks.toml beside this file, when there), \"none\", or an absolute path."),
    ];
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            span: Span::Split,
            domain: DomainScope::Job,
            shared_nodes: SharedNodes::Exclusive,
            port_base: 33792,
            port_span: PortSpan(16384),
            ready_timeout: HumanDuration(Duration::from_secs(60)),
            ready_poll_max: HumanDuration(Duration::from_secs(1)),
            max_nodes: 4096,
            rack_map: AutoPath::Auto,
            daemon: DaemonConfig::default(),
            addresses: AddressesConfig::default(),
            watch: WatchConfig::default(),
        }
    }
}

/// Every bound of `[imex]`'s engine keys and of its tables.
impl Section for EngineConfig {
    fn first_problem(&self) -> Option<(&'static str, String)> {
        let d = DurationBound::of;
        let mut durations = vec![
            d("imex.ready_timeout", 100 * MS, HOUR, self.ready_timeout.0),
            d("imex.ready_poll_max", MS, MIN, self.ready_poll_max.0),
        ];
        let nodes = self.max_nodes as u64;
        let limit = MAX_HOSTS_LIMIT as u64;
        let mut counts = vec![CountBound::of("imex.max_nodes", 1, limit, nodes)];
        durations.extend(self.watch.durations());
        durations.extend(self.daemon.durations());
        counts.extend(self.watch.counts());
        first_violation(durations, counts)
            .or_else(|| self.port_problem())
            .or_else(|| self.daemon.relative_path())
    }
}

/// What an `--imex` job whose nodes lie in more than one NVLink domain
/// (rack) gets.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Span {
    /// One IMEX domain per NVLink domain: each node's nodes_config holds the
    /// job's nodes in its own rack; the job runs across racks (NCCL uses
    /// NVLink inside each rack and the network between them).
    Split,
    /// Today's rule for rack-local sites: such a job fails before any daemon
    /// starts, with one line naming the racks.
    Refuse,
}

/// What happens at submission to an `--imex` job in per-job domains that
/// Slurm could place on a node another job shares (docs/shared-nodes.md).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SharedNodes {
    /// The job is made whole-node, as `--exclusive` does, and waits for a
    /// free node.
    Exclusive,
    /// The job is refused in one line unless it asked for `--exclusive`
    /// (or its partition gives whole nodes).
    Refuse,
}

/// Who an IMEX domain belongs to (docs/imex.md §5).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DomainScope {
    /// A domain per job: nodes_config holds the job's nodes in the rack, the
    /// daemon is restarted for each job and stopped after it.
    Job,
    /// One long-lived domain per rack: nodes_config holds every node of the
    /// rack, the daemon is started once and kept running, and jobs are kept
    /// apart by their channels alone.
    Rack,
}

/// `port_span`: at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct PortSpan(pub u16);

impl<'de> Deserialize<'de> for PortSpan {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = i64::deserialize(d)?;
        if !(1..=65535).contains(&v) {
            return Err(de::Error::custom(format!(
                "port_span = {v} is out of range: use 1..=65535"
            )));
        }
        Ok(PortSpan(v as u16))
    }
}

impl EngineConfig {
    /// The daemon's port range when it leaves 1..=65535, as (key, why).
    pub fn port_problem(&self) -> Option<(&'static str, String)> {
        let last = self.port_base as u32 + self.port_span.0 as u32 - 1;
        (self.port_base == 0 || last > 65535).then(|| {
            (
                "imex.port_base",
                format!(
                    "{} with port_span = {} reaches port {last}: \
                     keep port_base >= 1 and port_base + port_span - 1 <= 65535",
                    self.port_base, self.port_span.0
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_in_range_and_extremes_are_not() {
        let mut c = EngineConfig::default();
        assert!(c.first_problem().is_none());
        c.max_nodes = usize::MAX;
        assert_eq!(c.first_problem().unwrap().0, "imex.max_nodes");
        c = EngineConfig::default();
        c.watch.max_restarts = 1000;
        assert_eq!(c.first_problem().unwrap().0, "imex.watch.max_restarts");
        c = EngineConfig::default();
        c.daemon.job_config = "job.cfg".into();
        assert_eq!(c.first_problem().unwrap().0, "imex.daemon.job_config");
    }
}
