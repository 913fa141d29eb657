//! The per-job IMEX domain lifecycle: `setup` (prolog) builds it and waits
//! until it is UP; `teardown` (epilog) returns the node to idle. Both decide
//! who is to blame (docs/blame.md): only a fault of this node is a `NodeFault`
//! (the prolog fails, Slurm drains the node); anything else is recorded for
//! the SPANK plugin, which fails the job and leaves the node up.

use crate::addresses;
use crate::bail;
use crate::channel::{channel_for_job, channel_major};
use crate::config::{ChannelMode, Config, DaemonManager, DomainScope, Span};
use crate::error::{Error, Result};
use crate::fsutil::{remove_if_exists, write_atomic};
use crate::hostlist;
use crate::imex::ctl::{assess_members, Ctl, NotReady, Readiness};
use crate::imex::daemon_config::{render_nodes_config, DaemonConfigFile};
use crate::imex::job_record::{JobRecord, Outcome};
use crate::imex::manager::{Liveness, Manager};
use crate::imex::port::server_port;
use crate::imex::rack_domain;
use crate::racks::RackSources;
use crate::slurm_conf;
use crate::slurm_env::JobEnv;
use crate::state::StateDir;
use crate::topology::NvlinkDomain;
use std::time::{Duration, Instant};

/// What the prolog concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupOutcome {
    /// Domain UP; the job may start.
    Ready { waited: Duration },
    /// Not this node's fault: recorded; the plugin fails the job's tasks.
    JobFailure(String),
    /// This node is at fault: the prolog must fail (drain + requeue).
    NodeFault(String),
}

/// How many daemon log lines a failure message carries.
const LOG_TAIL_LINES: usize = 3;

/// Build this job's IMEX domain on this node and wait until it is UP.
pub fn setup(job: &JobEnv, cfg: &Config) -> SetupOutcome {
    let state = StateDir::of(cfg);
    let (mode, warning) = slurm_conf::channel_mode(cfg);
    if let Some(w) = warning {
        tracing::warn!("{w}");
    }
    // With Slurm's switch/nvidia_imex, Slurm picks the channel; the prolog never learns it.
    let channel = (mode == ChannelMode::Plugin)
        .then(|| channel_for_job(job.job_id, cfg.imex.channel_count.0));
    let mut record = JobRecord {
        job_id: job.job_id,
        channel,
        server_port: 0,
        nodes: Vec::new(),
        domain: None,
        rack_source: None,
        outcome: Outcome::Ready { waited_ms: 0 },
        prolog_ms: None,
    };
    let outcome = match setup_inner(job, cfg, &state, &mut record) {
        Ok(o) => o,
        Err(e) => SetupOutcome::NodeFault(e.to_string()),
    };
    record.outcome = match &outcome {
        SetupOutcome::Ready { waited, .. } => Outcome::Ready {
            waited_ms: waited.as_millis() as u64,
        },
        SetupOutcome::JobFailure(c) => Outcome::Failed {
            cause: c.clone(),
            node_fault: false,
        },
        SetupOutcome::NodeFault(c) => Outcome::Failed {
            cause: c.clone(),
            node_fault: true,
        },
    };
    if let Err(e) = state.write_record(&record) {
        // Without a record the plugin cannot let the job run: this node is broken.
        return SetupOutcome::NodeFault(format!("cannot record the IMEX job state: {e}"));
    }
    outcome
}

/// Note the whole prolog's wall time in the job's record (for `status` and
/// the rack benchmark). Best effort: a record that cannot be updated only
/// loses the figure.
pub fn note_prolog_time(job_id: u32, cfg: &Config, elapsed: Duration) {
    let state = StateDir::of(cfg);
    if let Ok(Some(mut record)) = state.read_record(job_id) {
        record.prolog_ms = Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
        if let Err(e) = state.write_record(&record) {
            tracing::warn!("cannot note the prolog time: {e}");
        }
    }
}

/// `Err` means a fault of this node (its config, files, daemon); a problem
/// of the job itself is `Ok(JobFailure)`. Steps run in this order, and
/// nothing is claimed or started before the job is known to fit.
fn setup_inner(
    job: &JobEnv,
    cfg: &Config,
    state: &StateDir,
    record: &mut JobRecord,
) -> Result<SetupOutcome> {
    let node = &job.node_name;
    channel_major(&cfg.imex.proc_devices)
        .map_err(|e| e.context(format!("IMEX channel device missing on {node}")))?;
    let (racks, domain) = match nvlink_domain(job, cfg)? {
        Ok(found) => found,
        Err(cause) => return Ok(SetupOutcome::JobFailure(cause)),
    };
    if cfg.imex.domain == DomainScope::Rack {
        return rack_domain::join(job, cfg, state, record, &racks, domain);
    }
    if let Some(cause) = claim_domain(job, cfg, state)? {
        return Ok(SetupOutcome::JobFailure(cause));
    }
    record.nodes = domain.nodes.clone();
    record.domain = domain.name.clone();
    record.rack_source = domain.source.clone();
    let addrs = match domain_addresses(cfg, &domain)? {
        Ok(a) => a,
        Err(cause) => return Ok(SetupOutcome::JobFailure(cause)),
    };
    let plan = DomainPlan::render(cfg, &addrs, Port::PerJob(job.job_id))?;
    plan.write(cfg)?;
    record.server_port = plan.port;
    let mut manager = Manager::new(&cfg.imex.daemon, state);
    let started = Instant::now();
    plan.start(&mut manager, &job.node_name)?;
    let everyone: Vec<usize> = (0..domain.nodes.len()).collect();
    plan.wait_ready(&mut manager, job, cfg, started, &domain, &addrs, &everyone)
}

/// The IMEX addresses of a domain's nodes, in its order; the inner `Err` is
/// the job's failure line naming the nodes without one (per-job and
/// rack-wide domains alike).
pub(super) fn domain_addresses(
    cfg: &Config,
    domain: &NvlinkDomain,
) -> Result<std::result::Result<Vec<String>, String>> {
    Ok(
        addresses::resolve_all(&domain.nodes, &cfg.imex.addresses)?.map_err(|u| {
            let rack = match &domain.name {
                Some(name) => format!(" of {name}"),
                None => String::new(),
            };
            format!(
                "no IMEX address for node(s) {}{rack}: {} (fix [imex.addresses])",
                crate::text::summarize_list(&u.nodes, crate::text::PIECE_MAX),
                crate::text::cap(&u.detail, crate::text::PIECE_MAX)
            )
        }),
    )
}

/// The job's hosts that form this node's IMEX domain, in Slurm's order: a
/// valid hostlist that holds this node, cut to this node's NVLink domain by
/// the rack files on this node (`crate::racks`; no controller call), or
/// refused when it spans racks and `[imex] span = "refuse"`. The inner
/// `Err` is the job's problem.
fn nvlink_domain(
    job: &JobEnv,
    cfg: &Config,
) -> Result<std::result::Result<(RackSources, NvlinkDomain), String>> {
    let node = &job.node_name;
    let nodes = match hostlist::expand(&job.node_list, cfg.imex.max_nodes) {
        Ok(n) => n,
        Err(e) => return Ok(Err(format!("SLURM_JOB_NODELIST: {e}"))),
    };
    if !nodes.iter().any(|n| n == node) {
        return Ok(Err(format!(
            "this node ({node}) is not in the job's node list {}",
            crate::text::cap(&job.node_list, crate::text::PIECE_MAX)
        )));
    }
    let racks = RackSources::read(cfg)?;
    if let Some(cause) = racks.disagreement(&nodes) {
        return Ok(Err(cause));
    }
    let domain = racks.domain_of(node, &nodes);
    let chosen = match (cfg.imex.span, &racks.blocks) {
        (Span::Split, _) => Ok(domain),
        (Span::Refuse, Some(blocks)) if blocks.block_of(&nodes).is_some() => blocks
            .check_one_block(&nodes)
            .map(|()| NvlinkDomain::whole_job(nodes)),
        (Span::Refuse, _) if domain.nodes.len() < nodes.len() => Err(format!(
            "the job's nodes span more than one NVLink rack (the rack map {}; this node {node} \
             is in {}); one IMEX domain must stay in one rack: submit with --segment=<nodes per \
             job>, or to a partition per rack",
            domain.source.as_deref().unwrap_or("-"),
            domain.name.as_deref().unwrap_or("none")
        )),
        (Span::Refuse, _) => Ok(NvlinkDomain::whole_job(nodes)),
    };
    Ok(chosen.map(|domain| (racks, domain)))
}

/// Make this job the owner of the node's daemon, unless another job's
/// domain is here (returned as the job's failure; it is never disturbed).
/// A domain left by a job Slurm says has ended is reclaimed first.
fn claim_domain(job: &JobEnv, cfg: &Config, state: &StateDir) -> Result<Option<String>> {
    let lock = state.lock()?;
    match state.owner(&lock)? {
        Some(other) if other != job.job_id => {
            let ended = crate::slurm_job::has_ended(&cfg.health, other);
            if let Ok(Some(true)) = ended {
                tracing::warn!(
                    "reclaiming the IMEX domain left behind by job {other}, which has ended"
                );
                stop_daemon(cfg, state)?;
                state.remove_record(other)?;
                state.set_owner(&lock, job.job_id)?;
                return Ok(None);
            }
            let unsure = match ended {
                Ok(Some(_)) => String::new(),
                Ok(None) => " (Slurm could not say whether it is still running)".into(),
                Err(e) => format!(" (cannot ask Slurm whether it is still running: {e})"),
            };
            Ok(Some(format!(
                "node {} already serves the IMEX domain of job {other}{unsure}; IMEX jobs need \
                 whole nodes (use an exclusive partition or --exclusive)",
                job.node_name
            )))
        }
        _ => {
            state.set_owner(&lock, job.job_id)?;
            Ok(None)
        }
    }
}

/// Which SERVER_PORT a domain's daemon listens on.
pub(super) enum Port {
    /// A per-job domain: `port_base + job_id mod port_span`, skipping
    /// IMEX_CMD_PORT (`imex::port`).
    PerJob(u32),
    /// A rack-wide domain, shared by every job: the base config's own
    /// (IMEX's default 50000 when unset).
    Base,
}

/// The daemon's two files for one domain, rendered from the admin's base
/// config, and what failure lines need to know about them.
pub(super) struct DomainPlan {
    pub(super) port: u16,
    /// Appended to failure lines: an unreserved port is a likely cause.
    port_hint: String,
    log_file: Option<String>,
    nodes_config: String,
    job_config: String,
}

impl DomainPlan {
    /// The admin's base daemon config, which must let the ctl answer.
    pub(super) fn base(cfg: &Config) -> Result<DaemonConfigFile> {
        let path = &cfg.imex.daemon.base_config;
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
    pub(super) fn render(cfg: &Config, addrs: &[String], port: Port) -> Result<DomainPlan> {
        let imex = &cfg.imex;
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
    pub(super) fn write(&self, cfg: &Config) -> Result<()> {
        let daemon = &cfg.imex.daemon;
        write_config_file(
            &daemon.nodes_config,
            self.nodes_config.as_bytes(),
            "nodes_config",
        )?;
        write_config_file(&daemon.job_config, self.job_config.as_bytes(), "job_config")
    }

    /// Both files already hold exactly this plan.
    pub(super) fn is_written(&self, cfg: &Config) -> bool {
        let daemon = &cfg.imex.daemon;
        let holds = |path: &std::path::Path, want: &str| {
            std::fs::read(path).is_ok_and(|have| have == want.as_bytes())
        };
        holds(&daemon.nodes_config, &self.nodes_config)
            && holds(&daemon.job_config, &self.job_config)
    }

    /// (Re)start the daemon on the written files; failing is this node's fault.
    pub(super) fn start(&self, manager: &mut Manager, node: &str) -> Result<()> {
        manager.start().map_err(|e| {
            e.context(format!("nvidia-imex could not start on {node}"))
                .with_log(manager, self.log_file.as_deref())
        })
    }

    /// Poll until the domain's `members` (indexes into `domain.nodes`; all
    /// of a per-job domain, the job's nodes of a rack-wide one) are ready,
    /// or say who is to blame.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn wait_ready(
        &self,
        manager: &mut Manager,
        job: &JobEnv,
        cfg: &Config,
        started: Instant,
        domain: &NvlinkDomain,
        addrs: &[String],
        members: &[usize],
    ) -> Result<SetupOutcome> {
        let imex = &cfg.imex;
        let daemon = &imex.daemon;
        let node = &job.node_name;
        let ctl = Ctl {
            program: &daemon.ctl,
            config: &daemon.job_config,
            timeout: daemon.ctl_timeout.0,
        };
        let wait = ReadyWait {
            node,
            members,
            whole_domain: members.len() == domain.nodes.len(),
            local_index: domain.nodes.iter().position(|n| n == node).unwrap_or(0),
            started,
            deadline: started + imex.ready_timeout.0,
            poll_max: imex.ready_poll_max.0,
        };
        let (last, last_error) = match self.poll_until_ready(manager, &ctl, &wait)? {
            Polled::Ready(waited) => return Ok(SetupOutcome::Ready { waited }),
            Polled::TimedOut { last, last_error } => (last, last_error),
        };
        self.blame_not_ready(job, cfg, manager, &ctl, last, last_error, domain, addrs)
    }

    /// Ask the ctl until the domain is UP or the deadline passes. Polls
    /// every 20 ms for the first second (domains of healthy nodes form in a
    /// few hundred ms), then backs off exponentially to `poll_max`. A daemon
    /// that exits meanwhile is this node's fault.
    fn poll_until_ready(
        &self,
        manager: &mut Manager,
        ctl: &Ctl,
        wait: &ReadyWait,
    ) -> Result<Polled> {
        let fast_phase = Duration::from_secs(1);
        let mut pause = Duration::from_millis(20);
        let mut last: Option<NotReady> = None;
        let mut last_error: Option<Error> = None;
        loop {
            if let Liveness::Exited(how) = manager.liveness() {
                return Err(Error::new(format!(
                    "nvidia-imex on {} {how} while starting{}",
                    wait.node, self.port_hint
                ))
                .with_log(manager, self.log_file.as_deref()));
            }
            match ctl.domain_status() {
                Ok(status) => {
                    match assess_members(&status, wait.members, wait.local_index, wait.whole_domain)
                    {
                        Readiness::Ready => return Ok(Polled::Ready(wait.started.elapsed())),
                        Readiness::NotReady(n) => last = Some(n),
                    }
                }
                Err(e) => last_error = Some(e),
            }
            let now = Instant::now();
            if now >= wait.deadline {
                return Ok(Polled::TimedOut { last, last_error });
            }
            std::thread::sleep(pause.min(wait.deadline - now));
            if wait.started.elapsed() >= fast_phase {
                pause = (pause * 2).min(wait.poll_max);
            }
        }
    }

    /// The domain did not come UP in time: a peer's fault (job failure) when
    /// this node is READY, else this node's.
    #[allow(clippy::too_many_arguments)]
    fn blame_not_ready(
        &self,
        job: &JobEnv,
        cfg: &Config,
        manager: &Manager,
        ctl: &Ctl,
        last: Option<NotReady>,
        last_error: Option<Error>,
        domain: &NvlinkDomain,
        addrs: &[String],
    ) -> Result<SetupOutcome> {
        let node = &job.node_name;
        let nodes = &domain.nodes;
        let block = match &domain.name {
            Some(name) => format!(" in NVLink block {name}"),
            None => String::new(),
        };
        let waited = humantime::format_duration(cfg.imex.ready_timeout.0);
        let name = |i: &usize| format!("{} ({})", nodes[*i], addrs[*i]);
        match last {
            Some(n) if n.local_ready && !n.map_mismatch.is_empty() => {
                let list: Vec<String> = n.map_mismatch.iter().map(name).collect();
                Ok(SetupOutcome::JobFailure(format!(
                    "IMEX domain of job {}{block} not ready after {waited}: {} hold(s) another \
                     node map (NODE_MAP_MISMATCH): the nodes disagree on who is in this domain; \
                     this node {node} put {} in it from {}: every node must read the same \
                     topology file and rack map (compare `sha256sum` of them on these nodes)",
                    job.job_id,
                    crate::text::summarize_list(&list, crate::text::PIECE_MAX),
                    crate::hostlist::compress(nodes),
                    domain
                        .source
                        .as_deref()
                        .unwrap_or("the job's node list alone (no rack file)")
                )))
            }
            Some(n) if n.local_ready => {
                let mut culprits: Vec<usize> = n.not_ready.clone();
                culprits.extend(n.not_connected.iter().filter(|i| !n.not_ready.contains(i)));
                let list: Vec<String> = culprits.iter().map(name).collect();
                Ok(SetupOutcome::JobFailure(format!(
                    "IMEX domain of job {}{block} not ready after {waited}: peer(s) never became \
                     ready or connected: {}; domain {} (this node {node} is READY)",
                    job.job_id,
                    crate::text::summarize_list(&list, crate::text::PIECE_MAX),
                    n.domain
                )))
            }
            _ => {
                let local_state = ctl.local_state().unwrap_or_else(|e| e.to_string());
                let detail = match last_error {
                    Some(e) if last.is_none() => format!("; last ctl error: {e}"),
                    _ => String::new(),
                };
                Err(Error::new(format!(
                    "nvidia-imex on {node} not READY after {waited} (state: {local_state})\
                     {detail}{}",
                    self.port_hint
                ))
                .with_log(manager, self.log_file.as_deref()))
            }
        }
    }
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
            crate::text::cap(&path.display().to_string(), crate::text::PIECE_MAX)
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
                crate::text::cap(v, crate::text::PIECE_MAX)
            ))
        }),
    }
}

/// What waiting for the domain needs to know.
struct ReadyWait<'a> {
    node: &'a str,
    /// The nodes that must be ready (indexes into the domain's list).
    members: &'a [usize],
    /// `members` is the whole domain, which must then also say UP.
    whole_domain: bool,
    /// This node's place in the domain's node list.
    local_index: usize,
    started: Instant,
    deadline: Instant,
    poll_max: Duration,
}

enum Polled {
    Ready(Duration),
    /// What the ctl said last (a status, or why it could not say).
    TimedOut {
        last: Option<NotReady>,
        last_error: Option<Error>,
    },
}

trait WithLog {
    fn with_log(self, manager: &Manager, log_file: Option<&str>) -> Error;
}

impl WithLog for Error {
    fn with_log(self, manager: &Manager, log_file: Option<&str>) -> Error {
        let tail = manager.log_tail(log_file, LOG_TAIL_LINES);
        if tail.is_empty() {
            self
        } else {
            let tail = crate::text::cap(&tail.join(" | "), crate::text::PIECE_MAX);
            Error::new(format!("{self}; daemon log: {tail}"))
        }
    }
}

/// Return this node to idle after `job`: stop the daemon, empty the nodes
/// config, remove per-job files. Idempotent, and safe after a prolog that
/// failed, was killed anywhere, or never ran. A domain owned by another job
/// is left alone.
pub fn teardown(job_id: u32, cfg: &Config) -> Result<TeardownOutcome> {
    let state = StateDir::of(cfg);
    if cfg.imex.domain == DomainScope::Rack {
        // The rack's daemon serves the rack's other jobs: it stays up.
        state.remove_record(job_id)?;
        return Ok(TeardownOutcome::RackDomainKept);
    }
    let daemon = &cfg.imex.daemon;
    let outcome = {
        let lock = state.lock()?;
        match state.owner(&lock)? {
            Some(other) if other != job_id => TeardownOutcome::LeftToOwner(other),
            owner => {
                stop_daemon(cfg, &state)?;
                restore_idle_nodes_config(cfg)?;
                remove_if_exists(&daemon.job_config)?;
                state.clear_owner(&lock)?;
                if owner.is_some() {
                    TeardownOutcome::TornDown
                } else {
                    TeardownOutcome::AlreadyIdle
                }
            }
        }
    };
    state.remove_record(job_id)?;
    Ok(outcome)
}

/// After a domain formed: when the rack map puts this node in a clique its
/// own GPUs (`live`, read by the prolog's gate) do not report, the job
/// must not use it. Records the cause for the plugin, which fails the job's
/// tasks on this node naming it (the node stays up), and gives the cause;
/// None when the map agrees or says nothing about this node. The domain is
/// left to the job's epilog: stopped now, it would make every peer blame
/// this node as one that never became ready.
pub fn refuse_for_own_clique(job: &JobEnv, cfg: &Config, live: &str) -> Result<Option<String>> {
    // A map that cannot be read failed the setup already.
    let Ok(racks) = RackSources::read(cfg) else {
        return Ok(None);
    };
    let Some(cause) = racks.live_clique_disagreement(&job.node_name, live) else {
        return Ok(None);
    };
    let state = StateDir::of(cfg);
    if let Some(mut record) = state.read_record(job.job_id)? {
        record.outcome = Outcome::Failed {
            cause: cause.clone(),
            node_fault: false,
        };
        state.write_record(&record)?;
    }
    Ok(Some(cause))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TeardownOutcome {
    TornDown,
    AlreadyIdle,
    /// Another job owns this node's domain; it was not touched.
    LeftToOwner(u32),
    /// `[imex] domain = "rack"`: the rack's daemon keeps running.
    RackDomainKept,
}

/// Stop this node's daemon and prove it gone (no process of ours, nothing
/// on the command port).
fn stop_daemon(cfg: &Config, state: &StateDir) -> Result<()> {
    let mut manager = Manager::new(&cfg.imex.daemon, state);
    manager.stop()?;
    manager.verify_gone(command_address(cfg))
}

/// Where the daemon's command port listens (IMEX_CMD_BIND_INTERFACE_IP,
/// default loopback); None when the base config cannot say.
fn command_address(cfg: &Config) -> Option<std::net::SocketAddr> {
    let base = DaemonConfigFile::read(&cfg.imex.daemon.base_config).ok()?;
    let port = base.cmd_port(&cfg.imex.daemon.base_config).ok()?;
    let ip = base
        .get("IMEX_CMD_BIND_INTERFACE_IP")
        .and_then(|v| v.parse::<std::net::IpAddr>().ok())
        .filter(|ip| !ip.is_unspecified())
        .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
    Some(std::net::SocketAddr::new(ip, port))
}

/// The idle nodes config is empty, so a daemon started by accident joins no
/// domain (NVIDIA's own prolog does the same).
fn restore_idle_nodes_config(cfg: &Config) -> Result<()> {
    let path = &cfg.imex.daemon.nodes_config;
    match std::fs::metadata(path) {
        Ok(m) if m.len() == 0 => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match path.parent().map(|p| p.is_dir()) {
                Some(true) => write_atomic(path, b"", 0o644),
                _ => Ok(()),
            }
        }
        _ => write_atomic(path, b"", 0o644),
    }
}
