//! The slurm-imex configuration (`/etc/slurm/imex.toml`): its keys, their
//! defaults, where the file is found, and the one-line errors for bad files.
//! Every key has a default, and the file may be absent at its default path.

use crate::error::{Error, Result};
use serde::de::{self, Deserializer};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod bounds;
pub mod http_url;
mod locate;
pub mod store_access;
pub use bounds::MAX_NODES_LIMIT;

/// Largest config file read (the shipped example is about 7 KB).
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Where the config lives when nobody says otherwise.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/slurm/imex.toml";
/// Environment variable that overrides the default config path.
pub const CONFIG_ENV: &str = "SLURM_IMEX_CONFIG";
/// The driver's hard limit on IMEX channels (20-bit dev_t minor).
pub const MAX_CHANNEL_COUNT: u32 = 1 << 20;

/// Where the config is read when nobody names it: `imex.toml` beside the
/// slurm.conf in `$SLURM_CONF` when one is there (slurmd gives a prolog its
/// SLURM_CONF; a Slurm built into a prefix keeps both in `<prefix>/etc`),
/// else [`DEFAULT_CONFIG_PATH`].
pub fn default_config_path() -> PathBuf {
    let slurm_conf = std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    if let Some(dir) = slurm_conf.as_deref().and_then(Path::parent) {
        let beside = dir.join("imex.toml");
        if std::fs::symlink_metadata(&beside).is_ok() {
            return beside;
        }
    }
    PathBuf::from(DEFAULT_CONFIG_PATH)
}

#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub node: NodeConfig,
    pub imex: ImexConfig,
    pub slurm: SlurmConfig,
    pub gpu: GpuConfig,
    pub health: HealthConfig,
    pub database: DatabaseConfig,
    pub metrics: MetricsConfig,
    pub job: JobViewConfig,
    /// One line per deprecated key the file used, naming `file:line` and the
    /// new key. The hooks send them to the journal (never to stderr, where a
    /// failing hook says one line); `slurm-imex status` prints them.
    #[serde(skip)]
    pub deprecations: Vec<String>,
    /// The file this config was read from (None: defaults, no file). Paths
    /// that default to "beside imex.toml" are found from it.
    #[serde(skip)]
    pub source: Option<PathBuf>,
    /// Keys the file gave under an old name, so lines about them name what
    /// the admin wrote.
    #[serde(skip)]
    renamed: Renamed,
    /// `file:line` of the keys whose files are read later
    /// ([`store_access::KEYS`]), for the lines about those files.
    #[serde(skip)]
    places: Vec<(&'static str, String)>,
}

/// What slurm-imex keeps on the node itself.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NodeConfig {
    /// The node's state directory (`crate::state`): IMEX job records and
    /// domain owner, GPU start snapshots, the XID checkpoint, the node's
    /// standing. Keep it on a tmpfs so a reboot clears it.
    pub state_dir: PathBuf,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            state_dir: "/run/slurm-imex".into(),
        }
    }
}

/// Debian's prometheus-node-exporter reads this directory by default.
pub const DEBIAN_TEXTFILE_DIR: &str = "/var/lib/prometheus/node-exporter";

/// The Prometheus textfile export (slurm_imex_jobdb::metrics).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// node_exporter's textfile collector directory: "auto" (Debian's
    /// /var/lib/prometheus/node-exporter, only when it exists), "none", or
    /// a path (must exist).
    pub textfile_dir: AutoPath,
    /// How many of this node's latest jobs the per-job export
    /// (slurm_imex_jobs.prom) keeps, so Prometheus scrapes each at least
    /// once while the series per node stay bounded; 0: no per-job export.
    pub job_series: u32,
    /// A job leaves the per-job export this long after its epilog (or
    /// sooner, when `job_series` newer jobs push it out).
    pub job_series_for: HumanDuration,
}

impl MetricsConfig {
    /// Where the export goes, if anywhere: `auto` exports only when Debian's
    /// node_exporter directory exists; a configured path always (it must exist).
    pub fn textfile_dir(&self) -> Option<PathBuf> {
        match &self.textfile_dir {
            AutoPath::None => None,
            AutoPath::Path(p) => Some(p.clone()),
            AutoPath::Auto => {
                let p = Path::new(DEBIAN_TEXTFILE_DIR);
                p.is_dir().then(|| p.to_path_buf())
            }
        }
    }
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            textfile_dir: AutoPath::Auto,
            job_series: 16,
            job_series_for: HumanDuration(Duration::from_secs(30 * 60)),
        }
    }
}

/// `slurm-imex job` and the summary store on the controller host
/// (slurm_imex_jobsummary): where the nodes' per-job series are queried, and
/// when an ended job's summary is written to Slurm's accounting.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct JobViewConfig {
    /// The Prometheus server that scrapes the nodes' node_exporter, or a
    /// store with its query API (`http://host:9090`, `https://...`); empty:
    /// none, `slurm-imex job` reads only the stored summaries.
    pub prometheus_url: String,
    /// `https://` only: the PEM file of the CA that signed the store's
    /// certificate; None: the system's CA store.
    pub prometheus_ca_file: Option<PathBuf>,
    /// Basic auth's user name; its password is in `prometheus_password_file`.
    pub prometheus_user: String,
    /// A root-only file holding basic auth's password (one line).
    pub prometheus_password_file: Option<PathBuf>,
    /// A root-only file holding a bearer token (one line), instead of basic auth.
    pub prometheus_bearer_token_file: Option<PathBuf>,
    /// Longest wait for one Prometheus query.
    pub query_timeout: HumanDuration,
    /// `slurm-imex job --store`: a job is stored once every node of it has
    /// reported, or this long after it ended with what reported by then.
    pub store_wait: HumanDuration,
    /// `slurm-imex job --store` looks this far back for ended jobs without
    /// a summary (the backfill).
    pub store_backfill: HumanDuration,
}

impl Default for JobViewConfig {
    fn default() -> Self {
        JobViewConfig {
            prometheus_url: String::new(),
            prometheus_ca_file: None,
            prometheus_user: String::new(),
            prometheus_password_file: None,
            prometheus_bearer_token_file: None,
            query_timeout: HumanDuration(Duration::from_secs(10)),
            store_wait: HumanDuration(Duration::from_secs(15 * 60)),
            store_backfill: HumanDuration(Duration::from_secs(2 * 86400)),
        }
    }
}

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

/// Where slurm-imex reads Slurm's own configuration.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SlurmConfig {
    /// slurm.conf: "auto" ($SLURM_CONF, else the configless cache
    /// /run/slurm/conf/slurm.conf, else /etc/slurm/slurm.conf) or a path.
    pub config: AutoPath,
    /// The rack (NVLink domain) description of topology/block: "auto"
    /// (topology.yaml, else topology.conf, beside slurm.conf), "none", or a path.
    pub topology: AutoPath,
    /// The scontrol every controller call runs (`crate::slurm::Scontrol`),
    /// looked up in PATH when not absolute.
    pub scontrol: PathBuf,
    /// Bound on each scontrol call.
    pub scontrol_timeout: HumanDuration,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            config: AutoPath::Auto,
            topology: AutoPath::Auto,
            scontrol: "scontrol".into(),
            scontrol_timeout: HumanDuration(Duration::from_secs(15)),
        }
    }
}

/// A path that may also be "auto" (found the way Slurm finds it) or "none".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoPath {
    Auto,
    None,
    Path(PathBuf),
}

impl<'de> Deserialize<'de> for AutoPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "auto" => Ok(AutoPath::Auto),
            "none" => Ok(AutoPath::None),
            p if p.starts_with('/') => Ok(AutoPath::Path(PathBuf::from(p))),
            other => Err(de::Error::custom(format!(
                "\"{other}\" is neither \"auto\", \"none\" nor an absolute path"
            ))),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct GpuConfig {
    pub nvml_library: PathBuf,
    pub kmsg: PathBuf,
    /// The kernel's boot id: the XID checkpoint holds only within the boot
    /// that wrote it (a test seam, as `kmsg` is).
    pub boot_id: PathBuf,
    /// NVML accounting mode on the job's GPUs (per-process utilization and
    /// peak memory for the job's stats): turned on by the prolog, or left.
    pub accounting: Accounting,
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig {
            nvml_library: "libnvidia-ml.so.1".into(),
            kmsg: "/dev/kmsg".into(),
            boot_id: "/proc/sys/kernel/random/boot_id".into(),
            accounting: Accounting::On,
        }
    }
}

/// What the prolog does about NVML accounting mode, which is off after
/// every boot and driver load (docs/gpu-health.md, "Accounting").
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Accounting {
    /// Turn it on for the job's GPUs where it is off (needs root).
    On,
    /// Leave it as the admin set it (`nvidia-smi -am`).
    Leave,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GpuJobs {
    /// Every job is a GPU job; jobs without SLURM_JOB_GPUS own every GPU.
    All,
    /// Only jobs with SLURM_JOB_GPUS (GRES) are GPU jobs.
    Gres,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MigPolicy {
    Any,
    On,
    Off,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    pub enabled: bool,
    pub gpu_jobs: GpuJobs,
    /// GPUs this node must have; 0 = only compare NVML with the PCI bus.
    pub expected_gpus: u32,
    /// Driver version this node must run; "" = any.
    pub expected_driver: String,
    pub require_ecc: bool,
    /// Persistence mode off: a drain when true, a warning when false.
    pub require_persistence: bool,
    pub mig: MigPolicy,
    /// Hard cap on the whole gate.
    pub gate_timeout: HumanDuration,
    /// A drain-class post-job finding makes the epilog fail (Slurm drains the node).
    pub drain_from_epilog: bool,
    /// Also write our reason on the node with `scontrol update`.
    pub set_drain_reason: bool,
    /// Deprecated names of `[slurm] scontrol` and `scontrol_timeout`, still
    /// read (with a warning); `Config::parse` moves them there, so they are
    /// always None after loading.
    pub scontrol: Option<PathBuf>,
    pub scontrol_timeout: Option<HumanDuration>,
    /// Where NVIDIA GPUs are counted on the PCI bus.
    pub pci_devices: PathBuf,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            enabled: true,
            gpu_jobs: GpuJobs::All,
            expected_gpus: 0,
            expected_driver: String::new(),
            require_ecc: true,
            require_persistence: false,
            mig: MigPolicy::Any,
            gate_timeout: HumanDuration(Duration::from_secs(10)),
            drain_from_epilog: true,
            set_drain_reason: false,
            scontrol: None,
            scontrol_timeout: None,
            pci_devices: "/sys/bus/pci/devices".into(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    pub path: PathBuf,
    /// Records older than this are deleted (at most once a day, by the epilog).
    pub retention: HumanDuration,
    /// How long a writer waits for a lock held by another prolog/epilog.
    pub busy_timeout: HumanDuration,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            path: "/var/lib/slurm-imex/jobs.db".into(),
            retention: HumanDuration(Duration::from_secs(180 * 86400)),
            busy_timeout: HumanDuration(Duration::from_secs(10)),
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

/// A duration written as `"60s"`, `"500ms"`, `"2m"`, or a number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Secs(i64),
            Text(String),
            Other(toml::Value),
        }
        match Raw::deserialize(d)? {
            Raw::Secs(s) if s < 0 => Err(de::Error::custom(format!(
                "{s} is negative: write a duration such as \"60s\""
            ))),
            Raw::Secs(s) => Ok(HumanDuration(Duration::from_secs(s as u64))),
            Raw::Text(t) => humantime::parse_duration(t.trim())
                .map(HumanDuration)
                .map_err(|e| {
                    de::Error::custom(format!(
                        "\"{t}\" is not a duration ({e}): write e.g. \"60s\", \"500ms\" or \"2m\""
                    ))
                }),
            Raw::Other(v) => Err(de::Error::custom(format!(
                "a {} is not a duration: write e.g. \"60s\", \"500ms\" or \"2m\"",
                v.type_str()
            ))),
        }
    }
}

/// toml's message on one line. An integer past 64 bits reaches serde as an
/// i128 ("invalid type: integer `99999999999999999999` as i128, expected
/// u16"); it is said as what it is, a number too large for the key.
fn plain_message(message: &str) -> String {
    let msg = message.trim().replace('\n', " ");
    if msg.starts_with("invalid type: integer `") && msg.contains("` as i128, expected ") {
        return "number too large to fit in target type".to_string();
    }
    msg
}

impl Config {
    /// Parse config text; `origin` names the file in error messages. Every
    /// error is one line naming `file:line`, the key and the fix.
    pub fn parse(text: &str, origin: &Path) -> Result<Config> {
        let mut config: Config = toml::from_str(text).map_err(|e| {
            let offset = e.span().map(|s| s.start);
            let at = match offset {
                Some(o) => format!("{}:{}", origin.display(), locate::line_of(text, o)),
                None => origin.display().to_string(),
            };
            let key = offset
                .and_then(|o| locate::key_at(text, o))
                .map(|k| format!("{}: ", key_label(&k)))
                .unwrap_or_default();
            let msg = plain_message(e.message());
            Error::invalid(format!(
                "bad config {at}: {key}{msg} (every key is documented in conf-examples/imex.toml)"
            ))
        })?;
        let used = config.take_renamed_keys(text, origin)?;
        config.validate(text, origin, &used)?;
        config.renamed = used;
        config.places = store_access::KEYS
            .iter()
            .filter(|k| locate::line_of_key(text, k).is_some())
            .map(|k| (*k, place(text, origin, k)))
            .collect();
        Ok(config)
    }

    /// `file:line` of `key` (one of [`store_access::KEYS`]) as the file
    /// read wrote it; the file alone when it did not write the key.
    pub fn place_of(&self, key: &str) -> String {
        let file = || {
            self.source
                .as_deref()
                .map_or(DEFAULT_CONFIG_PATH.into(), |p| p.display().to_string())
        };
        self.places
            .iter()
            .find(|(k, _)| *k == key)
            .map_or_else(file, |(_, at)| at.clone())
    }

    /// Keys that moved keep working under their old names, with a
    /// deprecation line naming the line to change: `[imex] state_dir` is now
    /// `[node] state_dir`, `[health] scontrol` and `scontrol_timeout` are
    /// now in `[slurm]`. Both names with different values is an error.
    /// Returns the new names whose value came from an old one (for errors).
    fn take_renamed_keys(&mut self, text: &str, origin: &Path) -> Result<Renamed> {
        let path = |p: &PathBuf| format!("\"{}\"", p.display());
        let duration = |d: &HumanDuration| format!("\"{}\"", humantime::format_duration(d.0));
        let moved = [
            (
                ("imex.state_dir", "node.state_dir"),
                move_renamed(self.imex.state_dir.take(), &mut self.node.state_dir, path),
            ),
            (
                ("health.scontrol", "slurm.scontrol"),
                move_renamed(self.health.scontrol.take(), &mut self.slurm.scontrol, path),
            ),
            (
                ("health.scontrol_timeout", "slurm.scontrol_timeout"),
                move_renamed(
                    self.health.scontrol_timeout.take(),
                    &mut self.slurm.scontrol_timeout,
                    duration,
                ),
            ),
        ];
        let mut used = Renamed::default();
        for (keys, seen) in moved {
            if let Some(seen) = seen {
                used.note(text, origin, keys, seen, &mut self.deprecations)?;
            }
        }
        Ok(used)
    }

    fn validate(&self, text: &str, origin: &Path, used: &Renamed) -> Result<()> {
        let at = |key: &str| place(text, origin, key);
        if let Some((key, why)) = bounds::first_violation(self) {
            let key = used.as_written(key);
            return Err(Error::invalid(format!(
                "bad config {}: {} = {why}",
                at(key),
                key_label(key)
            )));
        }
        if let Some(why) = http_url::problem(&self.job.prometheus_url) {
            return Err(Error::invalid(format!(
                "bad config {}: [job] prometheus_url = {:?} {why}",
                at("job.prometheus_url"),
                crate::text::cap(
                    &http_url::without_credentials(&self.job.prometheus_url),
                    crate::text::PIECE_MAX
                )
            )));
        }
        if let Some((key, value, why)) = store_access::problem(&self.job) {
            return Err(Error::invalid(format!(
                "bad config {}: {} = {value} {why}",
                at(key),
                key_label(key)
            )));
        }
        let i = &self.imex;
        let last = i.port_base as u32 + i.port_span.0 as u32 - 1;
        if i.port_base == 0 || last > 65535 {
            return Err(Error::invalid(format!(
                "bad config {}: [imex] port_base = {} with port_span = {} reaches port {last}: \
                 keep port_base >= 1 and port_base + port_span - 1 <= 65535",
                at("imex.port_base"),
                i.port_base,
                i.port_span.0
            )));
        }
        for (key, p) in [
            ("imex.channel_dir", &i.channel_dir),
            (used.as_written("node.state_dir"), &self.node.state_dir),
            ("imex.daemon.nodes_config", &i.daemon.nodes_config),
            ("imex.daemon.job_config", &i.daemon.job_config),
            ("imex.daemon.base_config", &i.daemon.base_config),
            ("database.path", &self.database.path),
        ] {
            if !p.is_absolute() {
                return Err(Error::invalid(format!(
                    "bad config {}: {} = \"{}\" must be an absolute path",
                    at(key),
                    key_label(key),
                    p.display()
                )));
            }
        }
        Ok(())
    }

    /// The file [`Config::load`] reads, and whether it must exist: an
    /// explicit path or `$SLURM_IMEX_CONFIG` must, the default may be absent.
    pub fn path_to_load(explicit: Option<&Path>) -> (PathBuf, bool) {
        let from_env = std::env::var_os(CONFIG_ENV).filter(|v| !v.is_empty());
        match (explicit, from_env) {
            (Some(p), _) => (p.to_path_buf(), true),
            (None, Some(p)) => (PathBuf::from(p), true),
            (None, None) => (default_config_path(), false),
        }
    }

    /// Load from an explicit path (must exist), or else from `$SLURM_IMEX_CONFIG`
    /// (must exist), or else from [`default_config_path`] (may be absent: defaults).
    /// The file is held to the trust boundary ([`crate::trust`]) and read
    /// without blocking, so a FIFO in its place cannot hang anyone.
    pub fn load(explicit: Option<&Path>) -> Result<(Config, PathBuf)> {
        let (path, must_exist) = Config::path_to_load(explicit);
        if !must_exist && std::fs::symlink_metadata(&path).is_err() {
            return Ok((Config::default(), path));
        }
        let absolute = if path.is_absolute() {
            path.clone()
        } else {
            std::env::current_dir()
                .map(|d| d.join(&path))
                .unwrap_or_else(|_| path.clone())
        };
        crate::trust::check(&absolute, crate::trust::Expect::File, "config").map_err(|e| {
            e.context("fix the file or the path given by config=, --config or $SLURM_IMEX_CONFIG")
        })?;
        let bytes = crate::fsutil::read_bounded(&absolute, MAX_CONFIG_BYTES).map_err(|e| {
            Error::of(
                e.kind(),
                format!("{e} (fix the path given by config=, --config or ${CONFIG_ENV})"),
            )
        })?;
        let text = utf8_config(bytes, &path)?;
        let mut config = Config::parse(&text, &path)?;
        config.source = Some(absolute);
        for line in &config.deprecations {
            crate::logging::warn_to_journal(&format!("slurm-imex: {line}"));
        }
        Ok((config, path))
    }

    /// Hold the programs and files this config names to the trust boundary,
    /// before root runs or reads any of them. Programs not installed on this
    /// node are skipped here (running them fails with its own line).
    pub fn check_trust(&self) -> Result<()> {
        let d = &self.imex.daemon;
        let programs = [
            ("imex.daemon.binary", &d.binary),
            ("imex.daemon.ctl", &d.ctl),
            ("imex.daemon.systemctl", &d.systemctl),
            ("slurm.scontrol", &self.slurm.scontrol),
        ];
        for (key, program) in programs {
            let what = key_label(self.renamed.as_written(key));
            let what = what.as_str();
            if let Some(found) = crate::trust::resolve_program(program) {
                if found.exists() {
                    crate::trust::check(&found, crate::trust::Expect::Program, what)?;
                }
            }
        }
        let files = [
            ("[imex.daemon] base_config", &d.base_config),
            ("[gpu] nvml_library", &self.gpu.nvml_library),
        ];
        for (what, file) in files {
            if file.is_absolute() && file.exists() {
                crate::trust::check(file, crate::trust::Expect::File, what)?;
            }
        }
        Ok(())
    }
}

/// The keys a file gave under an old name: (new, old) pairs, so an error
/// about the value names the key the admin wrote.
#[derive(Debug, Clone, Default, PartialEq)]
struct Renamed(Vec<(&'static str, &'static str)>);

impl Renamed {
    /// The old key was read into the new one: refuse it when the new key is
    /// also written, with another value (`seen`: the old key's value and
    /// the new key's, as the file writes them), else note the deprecation.
    fn note(
        &mut self,
        text: &str,
        origin: &Path,
        (old, new): (&'static str, &'static str),
        (value, mine): (String, String),
        deprecations: &mut Vec<String>,
    ) -> Result<()> {
        let at = |key: &str| match locate::line_of_key(text, key) {
            Some(l) => format!("{}:{l}", origin.display()),
            None => origin.display().to_string(),
        };
        if locate::line_of_key(text, new).is_some() && value != mine {
            return Err(Error::invalid(format!(
                "bad config {}: {} = {value} and {} = {mine} disagree: keep only {}",
                at(old),
                key_label(old),
                key_label(new),
                key_label(new)
            )));
        }
        deprecations.push(format!(
            "{}: {} is deprecated: rename it to {} (same meaning)",
            at(old),
            key_label(old),
            key_label(new)
        ));
        self.0.push((new, old));
        Ok(())
    }

    /// The key as the file wrote it.
    fn as_written(&self, key: &'static str) -> &'static str {
        self.0
            .iter()
            .find(|(new, _)| *new == key)
            .map_or(key, |(_, old)| old)
    }
}

/// The config's text. TOML is UTF-8 by definition; a byte that is not is
/// named with its line, never replaced silently.
fn utf8_config(bytes: Vec<u8>, path: &Path) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let good = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = 1 + bytes[..good].iter().filter(|b| **b == b'\n').count();
        Error::invalid(format!(
            "bad config {}:{line}: byte {:#04x} is not UTF-8: save the file as UTF-8",
            path.display(),
            bytes[good]
        ))
    })
}

/// `file:line` of `key` in `text`, or the file alone when not written.
fn place(text: &str, origin: &Path, key: &str) -> String {
    match locate::line_of_key(text, key) {
        Some(l) => format!("{}:{l}", origin.display()),
        None => origin.display().to_string(),
    }
}

/// `imex.daemon.ctl` as an admin reads it: `[imex.daemon] ctl`.
fn key_label(dotted: &str) -> String {
    match dotted.rsplit_once('.') {
        Some((section, key)) => format!("[{section}] {key}"),
        None => dotted.to_string(),
    }
}

/// An old key's value, if set, put under its new name; both values, old
/// first, as the config file would spell them (for the conflict check).
fn move_renamed<T>(
    old: Option<T>,
    new: &mut T,
    spell: impl Fn(&T) -> String,
) -> Option<(String, String)> {
    let mine = std::mem::replace(new, old?);
    Some((spell(new), spell(&mine)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<Config> {
        Config::parse(t, Path::new("/etc/slurm/imex.toml"))
    }

    #[test]
    fn a_config_that_is_not_utf8_is_refused_naming_the_line() {
        let e = utf8_config(
            b"[imex]\n# caf\xe9\nport_base = 1\n".to_vec(),
            Path::new("/e/imex.toml"),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "bad config /e/imex.toml:2: byte 0xe9 is not UTF-8: save the file as UTF-8"
        );
        assert_eq!(
            utf8_config(b"a = 1".to_vec(), Path::new("x")).unwrap(),
            "a = 1"
        );
    }

    #[test]
    fn shared_nodes_is_exclusive_or_refuse_and_a_bad_value_names_its_line() {
        assert_eq!(parse("").unwrap().imex.shared_nodes, SharedNodes::Exclusive);
        let c = parse("[imex]\nshared_nodes = \"refuse\"\n").unwrap();
        assert_eq!(c.imex.shared_nodes, SharedNodes::Refuse);
        let e = parse("[imex]\n\nshared_nodes = \"share\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("bad config /etc/slurm/imex.toml:3: [imex] shared_nodes"),
            "{e}"
        );
    }

    #[test]
    fn the_old_state_dir_key_still_works_with_a_deprecation_line() {
        let c = parse("[imex]\nstate_dir = \"/run/old\"\n").unwrap();
        assert_eq!(c.node.state_dir, Path::new("/run/old"));
        assert_eq!(c.imex.state_dir, None);
        assert_eq!(
            c.deprecations,
            ["/etc/slurm/imex.toml:2: [imex] state_dir is deprecated: rename it to [node] state_dir (same meaning)"]
        );
        let c = parse("[node]\nstate_dir = \"/run/new\"\n").unwrap();
        assert_eq!(c.node.state_dir, Path::new("/run/new"));
        assert!(c.deprecations.is_empty());
        let same = "[node]\nstate_dir = \"/run/x\"\n[imex]\nstate_dir = \"/run/x\"\n";
        assert_eq!(parse(same).unwrap().node.state_dir, Path::new("/run/x"));
        let e = parse("[node]\nstate_dir = \"/run/a\"\n[imex]\nstate_dir = \"/run/b\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("imex.toml:4") && e.contains("disagree"), "{e}");
        let e = parse("[node]\nstate_dir = \"run\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(":2") && e.contains("[node] state_dir") && e.contains("absolute"),
            "{e}"
        );
    }

    #[test]
    fn scontrol_moved_to_slurm_and_the_old_keys_still_work() {
        let c =
            parse("[health]\nscontrol = \"/opt/slurm/bin/scontrol\"\nscontrol_timeout = \"20s\"\n")
                .unwrap();
        assert_eq!(c.slurm.scontrol, Path::new("/opt/slurm/bin/scontrol"));
        assert_eq!(c.slurm.scontrol_timeout.0, Duration::from_secs(20));
        assert_eq!(
            (c.health.scontrol.clone(), c.health.scontrol_timeout),
            (None, None)
        );
        assert_eq!(
            c.deprecations,
            [
                "/etc/slurm/imex.toml:2: [health] scontrol is deprecated: rename it to [slurm] scontrol (same meaning)",
                "/etc/slurm/imex.toml:3: [health] scontrol_timeout is deprecated: rename it to [slurm] scontrol_timeout (same meaning)",
            ]
        );
        let c = parse("[slurm]\nscontrol = \"/x\"\n").unwrap();
        assert_eq!(c.slurm.scontrol, Path::new("/x"));
        assert!(c.deprecations.is_empty());
        let same = "[slurm]\nscontrol = \"/x\"\n[health]\nscontrol = \"/x\"\n";
        assert_eq!(parse(same).unwrap().slurm.scontrol, Path::new("/x"));
        let e = parse("[slurm]\nscontrol_timeout = \"5s\"\n[health]\nscontrol_timeout = \"9s\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("imex.toml:4") && e.contains("disagree") && e.contains("\"9s\""),
            "{e}"
        );
    }

    #[test]
    fn empty_file_gives_contract_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.imex.channel_count.0, 2048);
        assert_eq!(c.imex.port_base, 33792);
        assert_eq!(c.imex.port_span.0, 16384);
        assert_eq!(c.imex.ready_timeout.0, Duration::from_secs(60));
        assert_eq!(c.imex.daemon.manager, DaemonManager::Systemd);
        assert_eq!(c.imex.addresses.source, AddressSource::Dns);
        assert_eq!(
            c.database.path,
            PathBuf::from("/var/lib/slurm-imex/jobs.db")
        );
    }

    #[test]
    fn shipped_example_parses_and_equals_defaults() {
        let text = include_str!("../../../conf-examples/imex.toml");
        let c = parse(text).unwrap();
        assert_eq!(
            c,
            Config::default(),
            "conf-examples/imex.toml must document the defaults"
        );
    }

    #[test]
    fn values_are_read() {
        let c = parse(
            "[imex]\nready_timeout = \"750ms\"\nchannel_count = 16\n[imex.daemon]\nmanager = \"process\"\n\
             [imex.addresses]\nsource = \"map\"\nmap_file = \"/x.toml\"\n",
        )
        .unwrap();
        assert_eq!(c.imex.ready_timeout.0, Duration::from_millis(750));
        assert_eq!(c.imex.channel_count.0, 16);
        assert_eq!(c.imex.daemon.manager, DaemonManager::Process);
        assert_eq!(c.imex.addresses.source, AddressSource::Map);
        let c = parse("[imex]\nready_timeout = 5\n").unwrap();
        assert_eq!(c.imex.ready_timeout.0, Duration::from_secs(5));
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e = parse("[imex]\nchannel_count = 8\nchanel_dir = \"/x\"\n").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("/etc/slurm/imex.toml:3"), "{s}");
        assert!(s.contains("chanel_dir"), "{s}");
        assert!(!s.contains('\n'));
    }

    #[test]
    fn bad_values_name_line_and_what_to_do() {
        let e = parse("\n[imex]\nchannel_count = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":3") && e.contains("channel_count = 1"), "{e}");
        let e = parse("[imex]\nready_timeout = \"soon\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":2") && e.contains("not a duration"), "{e}");
        let e = parse("[imex.daemon]\nmanager = \"upstart\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":2") && e.contains("upstart"), "{e}");
        let e = parse("[imex]\nport_base = 60000\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("port_base") && e.contains("65535"), "{e}");
        let e = parse("[imex]\nstate_dir = \"run\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[imex] state_dir") && e.contains("absolute"),
            "{e}"
        );
        let e = parse("[imex\n").unwrap_err().to_string();
        assert!(e.contains("imex.toml:1"), "{e}");
    }

    #[test]
    fn a_url_is_checked_when_the_file_is_read() {
        let e = parse("[job]\n\nprometheus_url = \"host:9090\"\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "bad config /etc/slurm/imex.toml:3: [job] prometheus_url = \"host:9090\" has no scheme: \
             write \"http://host:9090\" or \"https://host:9090\""
        );
        let c = parse("[job]\nprometheus_url = \"http://prom:9090\"\n").unwrap();
        assert_eq!(c.job.prometheus_url, "http://prom:9090");
    }

    #[test]
    fn the_stores_tls_and_credentials_are_checked_when_the_file_is_read() {
        let head = "[job]\nprometheus_url = \"https://prom:9090\"\n";
        for (body, line, key, says) in [
            ("prometheus_ca_file = \"ca.pem\"\n", 3, "prometheus_ca_file = \"ca.pem\"", "must be an absolute path"),
            ("prometheus_ca_file = 5\n", 3, "prometheus_ca_file: invalid type", "conf-examples/imex.toml"),
            ("\nprometheus_password_file = \"/etc/slurm/p\"\n", 4, "prometheus_password_file = \"/etc/slurm/p\"", "needs [job] prometheus_user"),
            ("prometheus_user = \"imex\"\n", 3, "prometheus_user = \"imex\"", "needs [job] prometheus_password_file"),
            ("prometheus_user = \"a:b\"\nprometheus_password_file = \"/p\"\n", 3, "prometheus_user = \"a:b\"", "':'"),
            ("prometheus_bearer_token_file = \"t\"\n", 3, "prometheus_bearer_token_file = \"t\"", "absolute path"),
            ("prometheus_user = \"u\"\nprometheus_password_file = \"/p\"\nprometheus_bearer_token_file = \"/t\"\n", 5, "prometheus_bearer_token_file = \"/t\"", "keep one"),
        ] {
            let e = parse(&format!("{head}{body}")).unwrap_err().to_string();
            let start = format!("bad config /etc/slurm/imex.toml:{line}: [job] {key}");
            assert!(e.starts_with(&start), "{start}\n{e}");
            assert!(e.contains(says), "{e}");
        }
        let e = parse(
            "[job]\nprometheus_url = \"http://prom:9090\"\nprometheus_bearer_token_file = \"/t\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("bad config /etc/slurm/imex.toml:3: [job] prometheus_bearer_token_file = \"/t\" but [job] prometheus_url is \"http://prom:9090\", plain http"),
            "{e}"
        );
        let e = parse("[job]\nprometheus_url = \"https://imex:s3cret@prom\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            !e.contains("s3cret") && e.contains("never in the URL"),
            "{e}"
        );
        let c = parse(&format!("{head}prometheus_ca_file = \"/etc/slurm/ca.pem\"\n\nprometheus_user = \"imex\"\nprometheus_password_file = \"/etc/slurm/p\"\n")).unwrap();
        assert_eq!(c.job.prometheus_user, "imex");
        assert_eq!(
            c.place_of("job.prometheus_password_file"),
            "/etc/slurm/imex.toml:6"
        );
        assert_eq!(
            c.place_of("job.prometheus_bearer_token_file"),
            "/etc/slurm/imex.toml"
        );
    }

    #[test]
    fn missing_explicit_file_is_an_error_but_missing_default_is_not() {
        let e = Config::load(Some(Path::new("/nonexistent/imex.toml"))).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/imex.toml"), "{e}");
    }
}
