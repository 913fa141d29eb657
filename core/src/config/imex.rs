//! `[imex]` and its subtables (`daemon`, `addresses`, `watch`): the IMEX
//! channels the SPANK plugin hands out and the domain the prolog and
//! epilog run. The plugin reads this section.

use super::{AutoPath, HumanDuration};
use serde::de::{self, Deserializer};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// The driver's hard limit on IMEX channels (20-bit dev_t minor).
pub const MAX_CHANNEL_COUNT: u32 = 1 << 20;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ImexConfig {
    /// The driver's NVreg_ImexChannelCount.
    pub channel_count: ChannelCount,
    pub channel_dir: PathBuf,
    pub proc_devices: PathBuf,
    pub hide_channels_from_other_jobs: bool,
    /// Who hands out IMEX channels: this plugin, Slurm's switch/nvidia_imex,
    /// or whichever slurm.conf says (see [`ChannelMode`]).
    pub channels: ChannelMode,
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
    /// Deprecated name of `[node] state_dir`, still read (with a warning);
    /// `Config::parse` moves it there, so it is always None after loading.
    pub state_dir: Option<PathBuf>,
    /// Upper bound on the hosts one job's hostlist may expand to.
    pub max_nodes: usize,
    /// The rack map (`slurm_imex_domain::rack::map`): "auto" (imex-racks.d, the
    /// indexed map, else imex-racks.toml beside this file, when it exists),
    /// "none", or a path to either (must exist).
    pub rack_map: AutoPath,
    pub daemon: DaemonConfig,
    pub addresses: AddressesConfig,
    pub watch: WatchConfig,
}

impl Default for ImexConfig {
    fn default() -> Self {
        ImexConfig {
            channel_count: ChannelCount(2048),
            channel_dir: "/dev/nvidia-caps-imex-channels".into(),
            proc_devices: "/proc/devices".into(),
            hide_channels_from_other_jobs: true,
            channels: ChannelMode::Auto,
            span: Span::Split,
            domain: DomainScope::Job,
            shared_nodes: SharedNodes::Exclusive,
            port_base: 33792,
            port_span: PortSpan(16384),
            ready_timeout: HumanDuration(Duration::from_secs(60)),
            ready_poll_max: HumanDuration(Duration::from_secs(1)),
            state_dir: None,
            max_nodes: 4096,
            rack_map: AutoPath::Auto,
            daemon: DaemonConfig::default(),
            addresses: AddressesConfig::default(),
            watch: WatchConfig::default(),
        }
    }
}

/// What an `--imex` job whose nodes lie in more than one NVLink domain
/// (rack) gets.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
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
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
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
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
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

/// Who hands out IMEX channels to jobs.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChannelMode {
    /// "slurm" when slurm.conf has `SwitchType=switch/nvidia_imex`, else "plugin".
    Auto,
    /// slurm-imex: an `--imex` job gets `channel<1 + job_id mod (count-1)>` in
    /// every step; other jobs see an empty directory (hide_channels_from_other_jobs).
    Plugin,
    /// Slurm's switch/nvidia_imex: Slurm allocates the channel (unique
    /// cluster-wide) and mounts it; slurm-imex never mounts on the channel
    /// directory, and only hands an `--imex` job's channel to the job's user.
    Slurm,
}

impl ChannelMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelMode::Auto => "auto",
            ChannelMode::Plugin => "plugin",
            ChannelMode::Slurm => "slurm",
        }
    }
}

/// The watcher of a per-job IMEX domain while its job runs
/// (`slurm-imex-watch`, docs/guide.md "While the job runs").
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WatchConfig {
    /// Watch each `--imex` job's domain on every node of it.
    pub enabled: bool,
    /// How often the daemon is looked at and the domain asked for.
    pub interval: HumanDuration,
    /// Deaths of the daemon one job may see restarted; the next one leaves
    /// it down and the node is drained after the job. 0: never restart.
    pub max_restarts: u32,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            enabled: true,
            interval: HumanDuration(Duration::from_secs(2)),
            max_restarts: 3,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DaemonManager {
    /// `systemctl restart/stop <unit>`; the unit must start the daemon with
    /// `-c <job_config>` (see conf-examples/nvidia-imex.service.d).
    Systemd,
    /// The prolog spawns `<binary> -c <job_config>` itself and keeps a pid file.
    Process,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    pub manager: DaemonManager,
    pub unit: String,
    /// The systemctl the systemd manager runs.
    pub systemctl: PathBuf,
    pub binary: PathBuf,
    pub ctl: PathBuf,
    /// The admin's daemon config; never modified.
    pub base_config: PathBuf,
    /// Where the per-job node list is written (and emptied when idle).
    pub nodes_config: PathBuf,
    /// Where the per-job daemon config is rendered; the daemon runs with it.
    pub job_config: PathBuf,
    /// SIGTERM-to-SIGKILL grace (process) or systemctl stop bound (systemd).
    pub stop_timeout: HumanDuration,
    /// Bound on `systemctl restart`.
    pub start_timeout: HumanDuration,
    /// Bound on each `nvidia-imex-ctl` call.
    pub ctl_timeout: HumanDuration,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            manager: DaemonManager::Systemd,
            unit: "nvidia-imex".into(),
            systemctl: "systemctl".into(),
            binary: "/usr/bin/nvidia-imex".into(),
            ctl: "/usr/bin/nvidia-imex-ctl".into(),
            base_config: "/etc/nvidia-imex/config.cfg".into(),
            nodes_config: "/etc/nvidia-imex/nodes_config.cfg".into(),
            job_config: "/run/slurm-imex/nvidia-imex.cfg".into(),
            stop_timeout: HumanDuration(Duration::from_secs(10)),
            start_timeout: HumanDuration(Duration::from_secs(30)),
            ctl_timeout: HumanDuration(Duration::from_secs(5)),
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AddressSource {
    /// Resolve each Slurm node name through the system resolver (IPv4 first).
    Dns,
    /// Write the Slurm node name itself; the daemon resolves it (driver >= 570.158).
    Hostname,
    /// Look each node up in `map_file` (`node = "address"` lines).
    Map,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AddressesConfig {
    pub source: AddressSource,
    pub map_file: PathBuf,
}

impl Default for AddressesConfig {
    fn default() -> Self {
        AddressesConfig {
            source: AddressSource::Dns,
            map_file: "/etc/slurm/imex-addresses.toml".into(),
        }
    }
}

/// `channel_count`: 2..=2^20 (channel 0 is never handed out, so at least
/// one more channel must exist).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelCount(pub u32);

impl<'de> Deserialize<'de> for ChannelCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = i64::deserialize(d)?;
        if !(2..=MAX_CHANNEL_COUNT as i64).contains(&v) {
            return Err(de::Error::custom(format!(
                "channel_count = {v} is out of range: use the driver's NVreg_ImexChannelCount, \
                 between 2 and {MAX_CHANNEL_COUNT}"
            )));
        }
        Ok(ChannelCount(v as u32))
    }
}

/// `port_span`: at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

impl ImexConfig {
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
