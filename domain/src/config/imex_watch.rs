//! `[imex.watch]`: the domain watcher of a per-job IMEX domain while its
//! job runs (`slurm-imex-watch`, docs/guide.md "While the job runs"): its
//! schema, defaults and bounds.

use serde::{Deserialize, Serialize};
use slurm_imex_core::config::bounds::{CountBound, DurationBound, MIN, MS};
use slurm_imex_core::config::{Documented, HumanDuration, Key};
use std::time::Duration;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
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

impl Documented for WatchConfig {
    const TABLE: &'static str = "imex.watch";
    const READ_BY: &'static str =
        "the prolog (which starts the watcher), the watcher, the epilog and `slurm-imex check`";
    const KEYS: &'static [Key] = &[
        Key::new("enabled", "true", "Watch each --imex job's per-job domain while it runs: a dead daemon restarted, every change recorded."),
        Key::new("interval", r#""2s""#, "How often the daemon is looked at and the domain asked for (100ms to 10m)."),
        Key::new("max_restarts", "3", "Deaths of the daemon one job may see restarted; the next leaves it down and drains the node after the job (0 to 100; 0: never restart)."),
    ];
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

impl WatchConfig {
    /// Its duration bounds, for `EngineConfig`'s check.
    pub(super) fn durations(&self) -> Vec<(DurationBound, Duration)> {
        let interval = self.interval.0;
        vec![DurationBound::of(
            "imex.watch.interval",
            100 * MS,
            10 * MIN,
            interval,
        )]
    }

    /// Its count bounds, for `EngineConfig`'s check.
    pub(super) fn counts(&self) -> Vec<(CountBound, u64)> {
        let restarts = self.max_restarts as u64;
        vec![CountBound::of("imex.watch.max_restarts", 0, 100, restarts)]
    }
}
