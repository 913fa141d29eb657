//! Why two jobs running at once in one rack-wide IMEX domain (`[imex]
//! domain = "rack"`) can never hold the same channel. There the channel is
//! the only thing that keeps jobs apart (docs/imex.md §3, §5), so the rule
//! must hold by construction, not by luck:
//!
//! - with Slurm's `switch/nvidia_imex` (`channels = "slurm"`, or `"auto"`
//!   beside it), slurmctld hands each job the first free channel of one
//!   cluster-wide bitmap: unique among running jobs;
//! - with slurm-imex's channels, `1 + job_id mod (channel_count - 1)` is
//!   one-to-one on any `channel_count - 1` consecutive job ids, and Slurm
//!   keeps running jobs' ids distinct inside `FirstJobId..MaxJobId` (it
//!   wraps there, skipping ids in use: `get_next_job_id` in slurmctld's
//!   `job_mgr.c`). So it holds when slurm.conf keeps the range's size,
//!   `MaxJobId - FirstJobId + 1`, at most `channel_count - 1`, and for a job
//!   whose id lies in that range (an id an operator requested, or a
//!   federated one, may not).
//!
//! Anything else is refused: every `--imex` job fails with one line saying
//! what to set, and nothing is drained (the cluster's configuration is at
//! fault, not the node).

use crate::context::HookContext;
use slurm_imex_core::config::ChannelMode;
use slurm_imex_core::error::{Error, Result};

/// What makes channels unique among a rack's running jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RackChannels {
    /// Slurm's switch/nvidia_imex allocates them.
    Slurm,
    /// slurm-imex's channel is one-to-one on these job ids (inclusive).
    JobIds { first: u32, max: u32 },
}

/// The guarantee in force, or the line that refuses the configuration.
/// slurm.conf is the one `ctx` read.
pub fn guarantee(ctx: &HookContext) -> Result<RackChannels> {
    let (mode, _) = ctx.channel_mode();
    if mode == ChannelMode::Slurm {
        return Ok(RackChannels::Slurm);
    }
    let conf = ctx
        .slurm_conf()
        .ok_or_else(|| {
            "[slurm] config = \"none\", so nothing says which job ids Slurm hands out".to_string()
        })
        .and_then(|read| read.map_err(|e| e.to_string()))
        .map_err(|why| {
            Error::invalid(format!(
                "[imex] domain = \"rack\" keeps jobs apart by channel alone, and the job id range \
                 cannot be checked: {why} (set [slurm] config to this node's slurm.conf)"
            ))
        })?;
    let (first, max) = conf.job_id_range()?;
    judge(
        first,
        max,
        ctx.cfg.imex.channel_count.0,
        &conf.path.display().to_string(),
    )
}

/// slurm-imex's channels on job ids `first..=max` with `channel_count`
/// channels (channel 0 never handed out).
fn judge(first: u32, max: u32, channel_count: u32, origin: &str) -> Result<RackChannels> {
    let distinct = u64::from(channel_count) - 1;
    let ids = u64::from(max).saturating_sub(u64::from(first)) + 1;
    if ids <= distinct {
        return Ok(RackChannels::JobIds { first, max });
    }
    let fitting_max = u64::from(first) + distinct - 1;
    Err(Error::invalid(format!(
        "[imex] domain = \"rack\" keeps jobs apart by channel alone, but slurm-imex's channel \
         1 + job_id mod {distinct} repeats within job ids {first}..{max} (FirstJobId..MaxJobId, \
         {origin}), so two running jobs of a rack could share one: set MaxJobId={fitting_max} in \
         slurm.conf (job ids then wrap within the channels; raise NVreg_ImexChannelCount and \
         [imex] channel_count, up to 1048576, for more ids), or let Slurm hand out channels \
         (SwitchType=switch/nvidia_imex)"
    )))
}

impl RackChannels {
    /// Whether `job_id`'s channel is covered: None when it is, else the
    /// job's failure line.
    pub fn refuses(&self, job_id: u32) -> Option<String> {
        match *self {
            RackChannels::Slurm => None,
            RackChannels::JobIds { first, max } if (first..=max).contains(&job_id) => None,
            RackChannels::JobIds { first, max } => Some(format!(
                "job id {job_id} lies outside FirstJobId..MaxJobId = {first}..{max} (slurm.conf), \
                 so its channel could be another running job's in this rack-wide IMEX domain: \
                 let Slurm choose the id (no --jobid), or let Slurm hand out channels \
                 (SwitchType=switch/nvidia_imex)"
            )),
        }
    }

    /// One line for `doctor`.
    pub fn describe(&self) -> String {
        match self {
            RackChannels::Slurm => {
                "Slurm's switch/nvidia_imex hands out channels, unique cluster-wide".into()
            }
            RackChannels::JobIds { first, max } => format!(
                "job ids {first}..{max} (FirstJobId..MaxJobId) each map to their own channel"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use slurm_imex_core::channel::channel_for_job;
    use slurm_imex_core::config::AutoPath;

    #[test]
    fn the_mapping_is_one_to_one_exactly_when_the_range_fits() {
        // 2048 channels: ids 1..=2047 fit, 1..=2048 do not (2048 and 1 share channel 2).
        assert_eq!(
            judge(1, 2047, 2048, "s"),
            Ok(RackChannels::JobIds {
                first: 1,
                max: 2047
            })
        );
        assert_eq!(channel_for_job(2048, 2048), channel_for_job(1, 2048));
        let e = judge(1, 2048, 2048, "/etc/slurm/slurm.conf")
            .unwrap_err()
            .to_string();
        assert!(e.contains("job ids 1..2048"), "{e}");
        assert!(e.contains("set MaxJobId=2047 in slurm.conf"), "{e}");
        assert!(e.contains("SwitchType=switch/nvidia_imex"), "{e}");
        // Any window of channel_count - 1 ids is one-to-one.
        let RackChannels::JobIds { first, max } = judge(5000, 5062, 64, "s").unwrap() else {
            panic!()
        };
        let mut seen = std::collections::BTreeSet::new();
        for id in first..=max {
            assert!(seen.insert(channel_for_job(id, 64)), "id {id}");
        }
        assert!(judge(5000, 5063, 64, "s").is_err());
        // Slurm's default MaxJobId never fits 2^20 channels.
        assert!(judge(1, 0x03ff_0000, 1 << 20, "s").is_err());
        assert!(judge(1, (1 << 20) - 1, 1 << 20, "s").is_ok());
    }

    #[test]
    fn a_job_id_outside_the_range_is_refused() {
        let g = RackChannels::JobIds { first: 10, max: 20 };
        assert_eq!(g.refuses(10), None);
        assert_eq!(g.refuses(20), None);
        let e = g.refuses(83).unwrap();
        assert!(
            e.contains("job id 83 lies outside FirstJobId..MaxJobId = 10..20"),
            "{e}"
        );
        assert_eq!(RackChannels::Slurm.refuses(u32::MAX), None);
    }

    #[test]
    fn slurm_conf_decides() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("slurm.conf");
        let mut cfg = Config::default();
        cfg.slurm.config = AutoPath::Path(conf.clone());
        std::fs::write(&conf, "SwitchType=switch/none\n").unwrap();
        let e = guarantee(&HookContext::new(&cfg)).unwrap_err().to_string();
        assert!(
            e.contains("job ids 1..67043328") && e.contains("slurm.conf"),
            "{e}"
        );
        std::fs::write(&conf, "MaxJobId=2047\n").unwrap();
        assert_eq!(
            guarantee(&HookContext::new(&cfg)),
            Ok(RackChannels::JobIds {
                first: 1,
                max: 2047
            })
        );
        // Numbers as slurmctld reads them: 03777 is octal 2047, not 3777.
        std::fs::write(&conf, "MaxJobId=03777\n").unwrap();
        assert_eq!(
            guarantee(&HookContext::new(&cfg)),
            Ok(RackChannels::JobIds {
                first: 1,
                max: 2047
            })
        );
        // A range slurmctld refuses is named as such (it used to pass).
        std::fs::write(&conf, "FirstJobId=5000\nMaxJobId=2047\n").unwrap();
        let e = guarantee(&HookContext::new(&cfg)).unwrap_err().to_string();
        assert!(
            e.contains("FirstJobId 5000 is above MaxJobId 2047")
                && e.contains("slurmctld refuses this slurm.conf"),
            "{e}"
        );
        std::fs::write(&conf, "SwitchType=\"switch/nvidia_imex\"\n").unwrap();
        assert_eq!(guarantee(&HookContext::new(&cfg)), Ok(RackChannels::Slurm));
        cfg.imex.channels = ChannelMode::Plugin;
        assert!(guarantee(&HookContext::new(&cfg)).is_err());
        cfg.slurm.config = AutoPath::Path(d.path().join("absent.conf"));
        let e = guarantee(&HookContext::new(&cfg)).unwrap_err().to_string();
        assert!(
            e.contains("cannot be checked") && e.contains("absent.conf"),
            "{e}"
        );
    }
}
