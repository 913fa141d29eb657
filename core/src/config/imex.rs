//! `[imex]`'s channel keys: the only keys of `[imex]` the SPANK plugin
//! reads (the channel a job gets, where its device lives, who hands
//! channels out), and the old name of `[node] state_dir`. The rest of
//! `[imex]` is the domain engine's (`slurm_imex_domain::config`), which the
//! plugin never parses: a key of it, good or bad, never stops a submission.
//! The programs read both and refuse a key neither knows
//! (`slurm-imex-settings`).

use super::{Documented, Key};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The driver's hard limit on IMEX channels (20-bit dev_t minor).
pub const MAX_CHANNEL_COUNT: u32 = 1 << 20;

/// `[imex]` as the plugin reads it. Other keys of the table are left to
/// their reader (no `deny_unknown_fields`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct ImexConfig {
    /// The driver's NVreg_ImexChannelCount.
    pub channel_count: ChannelCount,
    pub channel_dir: PathBuf,
    pub proc_devices: PathBuf,
    pub hide_channels_from_other_jobs: bool,
    /// Who hands out IMEX channels: this plugin, Slurm's switch/nvidia_imex,
    /// or whichever slurm.conf says (see [`ChannelMode`]).
    pub channels: ChannelMode,
    /// Deprecated name of `[node] state_dir`, still read (with a warning);
    /// `Config::parse` moves it there, so it is always None after loading.
    #[serde(skip_serializing)]
    pub state_dir: Option<PathBuf>,
}

impl Documented for ImexConfig {
    const TABLE: &'static str = "imex";
    const READ_BY: &'static str =
        "the SPANK plugin (its channel keys, the only `[imex]` keys it reads) and every program";
    const KEYS: &'static [Key] = &[
        Key::new("channel_count", "2048", "The driver's NVreg_ImexChannelCount (2 to 1048576): a job gets channel 1 + job_id mod (channel_count - 1), never 0."),
        Key::new("channel_dir", r#""/dev/nvidia-caps-imex-channels""#, "Where IMEX channel devices live; inside a job's tasks a private tmpfs holding only the job's channel."),
        Key::new("proc_devices", r#""/proc/devices""#, "Where the channel device's major number is read (line `N nvidia-caps-imex-channels`)."),
        Key::new("hide_channels_from_other_jobs", "true", "Jobs without --imex see an empty channel directory (channels = \"plugin\" only)."),
        Key::new("channels", r#""auto""#, "Who hands out IMEX channels: \"plugin\" (slurm-imex), \"slurm\" (switch/nvidia_imex, Slurm >= 24.05), or \"auto\" (\"slurm\" when slurm.conf has that SwitchType)."),
    ];
    const OLD_NAMES: &'static [&'static str] = &["state_dir"];
}

impl Default for ImexConfig {
    fn default() -> Self {
        ImexConfig {
            channel_count: ChannelCount(2048),
            channel_dir: "/dev/nvidia-caps-imex-channels".into(),
            proc_devices: "/proc/devices".into(),
            hide_channels_from_other_jobs: true,
            channels: ChannelMode::Auto,
            state_dir: None,
        }
    }
}

/// Who hands out IMEX channels to jobs.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
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

/// `channel_count`: 2..=2^20 (channel 0 is never handed out, so at least
/// one more channel must exist).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
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
