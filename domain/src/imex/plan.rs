//! The engine both kinds of IMEX domain run (`job_domain`, `rack_domain`):
//! the daemon's two files for one domain rendered from the admin's base
//! config ([`DomainPlan`]), written atomically, the daemon (re)started on
//! them, and the wait until the domain's members are READY and connected,
//! ending in who is to blame when they are not (docs/blame.md): this node's
//! daemon that cannot start or become READY is this node's fault, a peer
//! that never connects, or one with another node map, is the job's.

use crate::addresses;
use crate::config::Config;
use crate::config::DaemonManager;
use crate::imex::ctl::{assess_members, Ctl, NotReady, Readiness};
use crate::imex::daemon::{Daemon, Liveness};
use crate::imex::daemon_config::{render_nodes_config, DaemonConfigFile};
use crate::imex::port::server_port;
use crate::rack::nvlink_domain::NvlinkDomain;
use slurm_imex_core::bail;
use slurm_imex_core::blame::{Blame, Blamed, Fault};
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::fsutil::write_atomic;
use slurm_imex_core::poll::{Backoff, Wait};
use slurm_imex_core::slurm::env::JobEnv;
use std::time::{Duration, Instant};

/// How many daemon log lines a failure message carries.
const LOG_TAIL_LINES: usize = 3;

/// Which SERVER_PORT a domain's daemon listens on.
pub enum Port {
    /// A per-job domain: `port_base + job_id mod port_span`, skipping
    /// IMEX_CMD_PORT (`imex::port`).
    PerJob(u32),
    /// A rack-wide domain, shared by every job: the base config's own
    /// (IMEX's default 50000 when unset).
    Base,
}

/// What the epilog did to this node's IMEX domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TeardownOutcome {
    TornDown,
    AlreadyIdle,
    /// Another job owns this node's domain; it was not touched.
    LeftToOwner(u32),
    /// `[imex] domain = "rack"`: the rack's daemon keeps running.
    RackDomainKept,
}

/// The IMEX addresses of a domain's nodes, in its order; a node without one
/// is the job's failure, naming it.
pub fn domain_addresses(cfg: &Config, domain: &NvlinkDomain) -> Blamed<Vec<String>> {
    // The address map the whole cluster shares: the job's fault.
    let resolver = addresses::Resolver::new(&cfg.engine.addresses).job()?;
    resolver.resolve_all(&domain.nodes).map_err(|u| {
        let rack = match &domain.name {
            Some(name) => format!(" of {name}"),
            None => String::new(),
        };
        Fault::job(format!(
            "no IMEX address for node(s) {}{rack}: {} (fix [imex.addresses])",
            slurm_imex_core::text::summarize_list(&u.nodes, slurm_imex_core::text::PIECE_MAX),
            slurm_imex_core::text::cap(&u.detail, slurm_imex_core::text::PIECE_MAX)
        ))
    })
}

/// The daemon's two files for one domain, rendered from the admin's base
/// config, and what failure lines need to know about them.
pub struct DomainPlan {
    pub port: u16,
    /// Appended to failure lines: an unreserved port is a likely cause.
    port_hint: String,
    log_file: Option<String>,
    nodes_config: String,
    job_config: String,
}

/// One wait for a domain: whose, since when, and which of its nodes must be
/// ready (all of a per-job domain; the job's nodes of a rack-wide one).
pub struct WaitFor<'a> {
    pub job: &'a JobEnv,
    pub cfg: &'a Config,
    pub started: Instant,
    pub domain: &'a NvlinkDomain,
    /// The IMEX address of each of the domain's nodes, in its order.
    pub addrs: &'a [String],
    /// Indexes into `domain.nodes` that must be READY and connected.
    pub members: &'a [usize],
}

impl WaitFor<'_> {
    /// Every node of the domain is a member: the domain must say UP too.
    fn whole_domain(&self) -> bool {
        self.members.len() == self.domain.nodes.len()
    }

    /// This node's place in the domain's node list.
    fn local_index(&self) -> usize {
        let node = &self.job.node_name;
        self.domain
            .nodes
            .iter()
            .position(|n| n == node)
            .unwrap_or(0)
    }
}

/// How a wait ended without the domain ready: what the ctl said last (a
/// status, or why it could not say).
enum Polled {
    Ready(Duration),
    TimedOut {
        last: Option<NotReady>,
        last_error: Option<Error>,
    },
}

impl DomainPlan {
    /// The admin's base daemon config, which must let the ctl answer.
    pub fn base(cfg: &Config) -> Result<DaemonConfigFile> {
        let path = &cfg.engine.daemon.base_config;
        let base = DaemonConfigFile::read(path)?;
        if let Some(v) = base.get("IMEX_CMD_ENABLED").filter(|v| *v != "1") {
            bail!(
                "{}: IMEX_CMD_ENABLED={v}, but readiness is checked through nvidia-imex-ctl: \
                 set IMEX_CMD_ENABLED=1",
                path.display()
            );
        }
        Ok(base)
    }

    /// Render nodes_config.cfg for `addrs` and the daemon config: the base
    /// config (read once) with our nodes config and `port` as SERVER_PORT.
    pub fn render(cfg: &Config, addrs: &[String], port: Port) -> Result<DomainPlan> {
        let imex = &cfg.engine;
        let daemon = &imex.daemon;
        let base = Self::base(cfg)?;
        let port = match port {
            Port::PerJob(job_id) => server_port(
                job_id,
                imex.port_base,
                imex.port_span.0,
                Some(base.cmd_port(&daemon.base_config)?),
            ),
            Port::Base => base_server_port(&base, &daemon.base_config)?,
        };
        let port_hint = match crate::imex::port::check_ephemeral(port) {
            Some(w) => {
                tracing::warn!("{w}");
                format!("; {w}")
            }
            None => String::new(),
        };
        let mut overrides = vec![
            (
                "IMEX_NODE_CONFIG_FILE",
                daemon.nodes_config.to_string_lossy().into_owned(),
            ),
            ("SERVER_PORT", port.to_string()),
        ];
        if daemon.manager == DaemonManager::Process {
            // The process manager must know the daemon's pid, so it must not fork.
            overrides.push(("DAEMONIZE", "0".to_string()));
        }
        let rendered = base.with_overrides(&overrides);
        Ok(DomainPlan {
            port,
            port_hint,
            log_file: rendered.log_file(),
            nodes_config: render_nodes_config(addrs),
            job_config: rendered.render(),
        })
    }

    /// Both files, atomically.
    pub fn write(&self, cfg: &Config) -> Result<()> {
        let daemon = &cfg.engine.daemon;
        write_config_file(
            &daemon.nodes_config,
            self.nodes_config.as_bytes(),
            "nodes_config",
        )?;
        write_config_file(&daemon.job_config, self.job_config.as_bytes(), "job_config")
    }

    /// Both files already hold exactly this plan.
    pub fn is_written(&self, cfg: &Config) -> bool {
        let daemon = &cfg.engine.daemon;
        let holds = |path: &std::path::Path, want: &str| {
            std::fs::read(path).is_ok_and(|have| have == want.as_bytes())
        };
        holds(&daemon.nodes_config, &self.nodes_config)
            && holds(&daemon.job_config, &self.job_config)
    }

    /// (Re)start the daemon on the written files; failing is this node's fault.
    pub fn start(&self, daemon: &mut Daemon, node: &str) -> Result<()> {
        daemon.start().map_err(|e| {
            e.context(format!("nvidia-imex could not start on {node}"))
                .with_log(daemon, self.log_file.as_deref())
        })
    }

    /// Poll until the domain's members are ready, or say who is to blame.
    pub fn wait_ready(&self, daemon: &mut Daemon, wait: &WaitFor) -> Blamed<Duration> {
        let imex = &wait.cfg.engine;
        let ctl = Ctl {
            program: &imex.daemon.ctl,
            config: &imex.daemon.job_config,
            timeout: imex.daemon.ctl_timeout.0,
        };
        match self.poll_until_ready(daemon, &ctl, wait).node()? {
            Polled::Ready(waited) => Ok(waited),
            Polled::TimedOut { last, last_error } => {
                Err(self.blame_not_ready(wait, daemon, &ctl, last, last_error))
            }
        }
    }

    /// Ask the ctl until the domain is UP or the deadline passes. Polls
    /// every 20 ms for the first second (domains of healthy nodes form in a
    /// few hundred ms), then backs off exponentially to `ready_poll_max`. A
    /// daemon that exits meanwhile is this node's fault.
    fn poll_until_ready(&self, daemon: &mut Daemon, ctl: &Ctl, wait: &WaitFor) -> Result<Polled> {
        let (local, whole) = (wait.local_index(), wait.whole_domain());
        let backoff =
            Backoff::doubling(Duration::from_millis(20), wait.cfg.engine.ready_poll_max.0)
                .steady_for(Duration::from_secs(1));
        let deadline = Wait::new(
            "the IMEX domain to be UP",
            wait.cfg.engine.ready_timeout.0,
            backoff,
        )
        .since(wait.started);
        let mut last: Option<NotReady> = None;
        let mut last_error: Option<Error> = None;
        let polled = deadline.until(|| {
            if let Liveness::Exited(how) = daemon.liveness() {
                return Some(Err(Error::new(format!(
                    "nvidia-imex on {} {how} while starting{}",
                    wait.job.node_name, self.port_hint
                ))
                .with_log(daemon, self.log_file.as_deref())));
            }
            match ctl.domain_status() {
                Ok(status) => match assess_members(&status, wait.members, local, whole) {
                    Readiness::Ready => return Some(Ok(wait.started.elapsed())),
                    Readiness::NotReady(n) => last = Some(n),
                },
                Err(e) => last_error = Some(e),
            }
            None
        });
        match polled {
            Ok(ready) => ready.map(Polled::Ready),
            // What it last saw says whose fault it is (blame_not_ready).
            Err(_) => Ok(Polled::TimedOut { last, last_error }),
        }
    }

    /// The domain did not come UP in time: the job's failure when this node
    /// is READY (naming the peers with another node map, else those that
    /// never became ready or connected), else this node's fault.
    fn blame_not_ready(
        &self,
        wait: &WaitFor,
        daemon: &Daemon,
        ctl: &Ctl,
        last: Option<NotReady>,
        last_error: Option<Error>,
    ) -> Fault {
        match last {
            Some(n) if n.local_ready => Fault::job(peers_not_ready(wait, &n)),
            _ => {
                let local_state = ctl.local_state().unwrap_or_else(|e| e.to_string());
                let detail = match last_error {
                    Some(e) if last.is_none() => format!("; last ctl error: {e}"),
                    _ => String::new(),
                };
                Fault::Node(
                    Error::new(format!(
                        "nvidia-imex on {} not READY after {} (state: {local_state}){detail}{}",
                        wait.job.node_name,
                        humantime::format_duration(wait.cfg.engine.ready_timeout.0),
                        self.port_hint
                    ))
                    .with_log(daemon, self.log_file.as_deref()),
                )
            }
        }
    }
}

/// The job's failure line when this node is READY but its peers are not:
/// those with another node map (the nodes read different rack files), else
/// those that never became ready or connected.
fn peers_not_ready(wait: &WaitFor, n: &NotReady) -> String {
    let (nodes, addrs) = (&wait.domain.nodes, wait.addrs);
    let node = &wait.job.node_name;
    let block = match &wait.domain.name {
        Some(name) => format!(" in NVLink block {name}"),
        None => String::new(),
    };
    let waited = humantime::format_duration(wait.cfg.engine.ready_timeout.0);
    let name = |i: &usize| format!("{} ({})", nodes[*i], addrs[*i]);
    let list = |ids: &[usize]| {
        let named: Vec<String> = ids.iter().map(name).collect();
        slurm_imex_core::text::summarize_list(&named, slurm_imex_core::text::PIECE_MAX)
    };
    if !n.map_mismatch.is_empty() {
        return format!(
            "IMEX domain of job {}{block} not ready after {waited}: {} hold(s) another node map \
             (NODE_MAP_MISMATCH): the nodes disagree on who is in this domain; this node {node} \
             put {} in it from {}: every node must read the same topology file and rack map \
             (compare `sha256sum` of them on these nodes)",
            wait.job.job_id,
            list(&n.map_mismatch),
            slurm_imex_core::slurm::hostlist::compress(nodes),
            wait.domain
                .source
                .as_deref()
                .unwrap_or("the job's node list alone (no rack file)")
        );
    }
    let mut culprits: Vec<usize> = n.not_ready.clone();
    culprits.extend(n.not_connected.iter().filter(|i| !n.not_ready.contains(i)));
    format!(
        "IMEX domain of job {}{block} not ready after {waited}: peer(s) never became ready or \
         connected: {}; domain {} (this node {node} is READY)",
        wait.job.job_id,
        list(&culprits),
        n.domain
    )
}

/// Write one of the daemon's files atomically; a failure names the key
/// that chose the path, so the admin knows what to fix.
fn write_config_file(path: &std::path::Path, contents: &[u8], key: &str) -> Result<()> {
    write_atomic(path, contents, 0o644).map_err(|e| {
        let missing = path.parent().is_some_and(|d| !d.exists());
        let hint = if missing {
            ": its directory does not exist (create it, or point the key elsewhere)"
        } else {
            ""
        };
        e.context(format!(
            "[imex.daemon] {key} = \"{}\"{hint}",
            slurm_imex_core::text::cap(
                &path.display().to_string(),
                slurm_imex_core::text::PIECE_MAX
            )
        ))
    })
}

/// The base config's SERVER_PORT (IMEX's default 50000 when unset): the
/// port of a rack-wide domain, which every job of the rack shares.
fn base_server_port(base: &DaemonConfigFile, origin: &std::path::Path) -> Result<u16> {
    match base.get("SERVER_PORT") {
        None => Ok(50000),
        Some(v) => v.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
            Error::new(format!(
                "{}: SERVER_PORT={} is not a port: use 1..=65535",
                origin.display(),
                slurm_imex_core::text::cap(v, slurm_imex_core::text::PIECE_MAX)
            ))
        }),
    }
}

/// A node fault line, with the daemon's last log lines when it has any.
trait WithLog {
    fn with_log(self, daemon: &Daemon, log_file: Option<&str>) -> Error;
}

impl WithLog for Error {
    fn with_log(self, daemon: &Daemon, log_file: Option<&str>) -> Error {
        let tail = daemon.log_tail(log_file, LOG_TAIL_LINES);
        if tail.is_empty() {
            self
        } else {
            let tail =
                slurm_imex_core::text::cap(&tail.join(" | "), slurm_imex_core::text::PIECE_MAX);
            Error::new(format!("{self}; daemon log: {tail}"))
        }
    }
}
