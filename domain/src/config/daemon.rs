//! `[imex.daemon]`: the node's IMEX daemon, its control tool and how it is
//! run (`crate::imex::daemon`): its schema, defaults, bounds, and the
//! programs and file it names, held to the trust boundary.

use serde::{Deserialize, Serialize};
use slurm_imex_core::config::bounds::{DurationBound, MIN, MS, S};
use slurm_imex_core::config::{
    check_file_trust, check_program_trust, key_label, must_be_absolute, Documented, HumanDuration,
    Key,
};
use slurm_imex_core::Result;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DaemonManager {
    /// `systemctl restart/stop <unit>`; the unit must start the daemon with
    /// `-c <job_config>` (see conf-examples/nvidia-imex.service.d).
    Systemd,
    /// The prolog spawns `<binary> -c <job_config>` itself and keeps a pid file.
    Process,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
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

impl Documented for DaemonConfig {
    const TABLE: &'static str = "imex.daemon";
    const READ_BY: &'static str = "the prolog, epilog, watcher, CLI and doctor";
    const KEYS: &'static [Key] = &[
        Key::new("manager", r#""systemd""#, "\"systemd\" (systemctl restart/stop the unit, which runs the per-job config) or \"process\" (the prolog spawns the daemon, the epilog stops it)."),
        Key::new("unit", r#""nvidia-imex""#, "The daemon's systemd unit (manager = \"systemd\")."),
        Key::new("systemctl", r#""systemctl""#, "The systemctl the systemd manager runs (looked up in PATH when not absolute)."),
        Key::new("binary", r#""/usr/bin/nvidia-imex""#, "The daemon the process manager spawns."),
        Key::new("ctl", r#""/usr/bin/nvidia-imex-ctl""#, "The control tool asked for the domain's state."),
        Key::new("base_config", r#""/etc/nvidia-imex/config.cfg""#, "The admin's daemon config, never modified: each job's config is rendered from it."),
        Key::new("nodes_config", r#""/etc/nvidia-imex/nodes_config.cfg""#, "The job's node addresses, one per line in Slurm's order; empty when idle."),
        Key::new("job_config", r#""/run/slurm-imex/nvidia-imex.cfg""#, "Where the per-job daemon config is rendered."),
        Key::new("stop_timeout", r#""10s""#, "Grace between SIGTERM and SIGKILL (process), or bound on systemctl stop (100ms to 10m)."),
        Key::new("start_timeout", r#""30s""#, "Bound on systemctl restart (1s to 10m)."),
        Key::new("ctl_timeout", r#""5s""#, "Bound on each nvidia-imex-ctl call (100ms to 5m)."),
    ];
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

impl DaemonConfig {
    /// Its duration bounds, for `EngineConfig`'s check.
    pub(super) fn durations(&self) -> Vec<(DurationBound, Duration)> {
        let d = DurationBound::of;
        vec![
            d(
                "imex.daemon.stop_timeout",
                100 * MS,
                10 * MIN,
                self.stop_timeout.0,
            ),
            d(
                "imex.daemon.start_timeout",
                S,
                10 * MIN,
                self.start_timeout.0,
            ),
            d(
                "imex.daemon.ctl_timeout",
                100 * MS,
                5 * MIN,
                self.ctl_timeout.0,
            ),
        ]
    }

    /// The first path key that must be absolute and is not.
    pub(super) fn relative_path(&self) -> Option<(&'static str, String)> {
        [
            ("imex.daemon.nodes_config", &self.nodes_config),
            ("imex.daemon.job_config", &self.job_config),
            ("imex.daemon.base_config", &self.base_config),
        ]
        .into_iter()
        .find(|(_, p)| !p.is_absolute())
        .map(|(key, p)| (key, must_be_absolute(p)))
    }

    /// The directories the daemon's files are written in (for the sweep
    /// of what killed writers leave: `slurm_imex_core::state::sweep`).
    pub fn written_dirs(&self) -> Vec<PathBuf> {
        [&self.nodes_config, &self.job_config]
            .into_iter()
            .filter_map(|file| file.parent().map(PathBuf::from))
            .collect()
    }

    /// Hold the programs it names and the base config to the trust
    /// boundary, before root runs or reads any of them.
    pub fn check_trust(&self) -> Result<()> {
        let programs = [
            ("imex.daemon.binary", &self.binary),
            ("imex.daemon.ctl", &self.ctl),
            ("imex.daemon.systemctl", &self.systemctl),
        ];
        for (key, program) in programs {
            check_program_trust(&key_label(key), program)?;
        }
        check_file_trust("[imex.daemon] base_config", &self.base_config)
    }
}
