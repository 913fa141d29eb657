//! Remote context (slurmstepd, per task, as root before privileges drop):
//! give `--imex` tasks a private channel directory holding only their
//! channel, and everyone else an empty one. A job whose domain the prolog
//! could not build is failed here with the prolog's cause; the node stays up.

use crate::plugin_args::PluginArgs;
use crate::IMEX_OPTION;
use slurm_imex_core::channel::{channel_for_job, channel_major, isolate_channel_dir, ChannelGrant};
use slurm_imex_core::imex::job_record::{Outcome, StateDir};
use slurm_spank::{spank_log_verbose, SpankHandle};
use std::error::Error;

pub(crate) fn task_init_privileged(
    args: &PluginArgs,
    spank: &mut SpankHandle,
) -> Result<(), Box<dyn Error>> {
    let imex = spank.is_option_set(IMEX_OPTION);
    let config = match args.load_config() {
        Ok(c) => c,
        Err(e) if imex => return Err(e.into()),
        Err(e) => {
            // Not our job: never fail it over our own config.
            slurm_spank::spank_log_error!("{e}; channels are not hidden from this job");
            return Ok(());
        }
    };
    let dir = &config.imex.channel_dir;
    if !imex {
        if config.imex.hide_channels_from_other_jobs {
            isolate_channel_dir(dir, None)
                .map_err(|e| format!("imex: cannot hide IMEX channels from this job: {e}"))?;
        }
        return Ok(());
    }

    let job_id = spank.job_id()?;
    let node = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "this node".into());
    let state = StateDir::new(&config.imex.state_dir);
    let record = state
        .read_record(job_id)
        .map_err(|e| format!("imex: {e}"))?;
    let record = match record {
        None => {
            return Err(format!(
                "imex: job {job_id} has no IMEX domain on {node}: the allocation was made without \
                 --imex (pass --imex to sbatch/salloc), or the prolog did not run (slurm.conf needs \
                 Prolog=slurm-imex-prolog and PrologFlags=Alloc)"
            )
            .into())
        }
        Some(r) => r,
    };
    if let Outcome::Failed { cause, .. } = &record.outcome {
        return Err(format!("imex: job {job_id} cannot use IMEX on {node}: {cause}").into());
    }
    let channel = channel_for_job(job_id, config.imex.channel_count.0);
    if channel != record.channel {
        return Err(format!(
            "imex: channel mismatch on {node}: the prolog prepared channel {} but this node's \
             config gives {channel}; make [imex] channel_count equal on all nodes",
            record.channel
        )
        .into());
    }
    let major = channel_major(&config.imex.proc_devices).map_err(|e| format!("imex: {e}"))?;
    let grant = ChannelGrant {
        channel,
        major,
        uid: spank.job_uid()?,
        gid: spank.job_gid()?,
    };
    isolate_channel_dir(dir, Some(&grant)).map_err(|e| format!("imex: {e}"))?;
    let n = channel.to_string();
    spank.setenv("SLURM_IMEX_CHANNEL", &n, true)?;
    spank.setenv("NVIDIA_IMEX_CHANNELS", &n, true)?;
    spank_log_verbose!("imex: job {job_id} task uses IMEX channel {channel} on {node}");
    Ok(())
}
