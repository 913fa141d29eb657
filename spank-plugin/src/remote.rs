//! Remote context (slurmstepd, per task, as root before privileges drop).
//! With channels = "plugin", give `--imex` tasks a private channel directory
//! holding only their channel, and everyone else an empty one. With
//! channels = "slurm", leave Slurm's switch/nvidia_imex mount alone and hand
//! an `--imex` job's channel to its user. Either way a job whose domain the
//! prolog could not build is failed here with the prolog's cause; the node
//! stays up.

use crate::plugin_args::PluginArgs;
use crate::IMEX_OPTION;
use crate::{log_error, log_verbose};
use slurm_imex_core::channel::{
    adopt_slurm_channel, channel_for_job, channel_major, isolate_channel_dir, ChannelGrant,
};
use slurm_imex_core::config::{ChannelMode, Config};
use slurm_imex_core::slurm::{conf as slurm_conf, hostlist};
use slurm_imex_core::state::job_record::{JobRecord, Outcome};
use slurm_imex_core::state::StateDir;
use slurm_spank::SpankHandle;
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
            log_error(format!("{e}; channels are not hidden from this job"));
            return Ok(());
        }
    };
    let (mode, warning) = slurm_conf::channel_mode(&config);
    if let Some(w) = warning {
        log_error(w);
    }
    if !imex {
        // Slurm's mode: the job keeps exactly what switch/nvidia_imex gave it.
        if mode == ChannelMode::Plugin && config.imex.hide_channels_from_other_jobs {
            isolate_channel_dir(&config.imex.channel_dir, None)
                .map_err(|e| format!("cannot hide IMEX channels from this job: {e}"))?;
        }
        return Ok(());
    }

    let job_id = spank.job_id()?;
    let node = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "this node".into());
    let record = ready_record(&config, job_id, &node)?;
    let major = channel_major(&config.imex.proc_devices)?;
    let (uid, gid) = (spank.job_uid()?, spank.job_gid()?);
    let channel = match mode {
        ChannelMode::Slurm => {
            match adopt_slurm_channel(&config.imex.channel_dir, major, uid, gid)? {
                Some(c) => c,
                None => {
                    log_verbose(format!(
                        "Slurm's switch/nvidia_imex gave this step of job {job_id} no \
                         IMEX channel (before Slurm 25.11 only srun steps get one)"
                    ));
                    return Ok(());
                }
            }
        }
        _ => {
            let grant = plugin_grant(&config, &record, &node, major, uid, gid)?;
            isolate_channel_dir(&config.imex.channel_dir, Some(&grant))?;
            grant.channel
        }
    };
    set_task_env(spank, channel, &record)?;
    log_verbose(format!(
        "job {job_id} task uses IMEX channel {channel} on {node} (channels = \"{}\")",
        mode.as_str()
    ));
    Ok(())
}

/// What the task learns: its channel (ours, and the container runtimes'
/// name for it) and its IMEX domain (the rack, and its nodes).
fn set_task_env(
    spank: &mut SpankHandle,
    channel: u32,
    record: &JobRecord,
) -> Result<(), Box<dyn Error>> {
    let n = channel.to_string();
    spank.setenv("SLURM_IMEX_CHANNEL", &n, true)?;
    spank.setenv("NVIDIA_IMEX_CHANNELS", &n, true)?;
    spank.setenv("SLURM_IMEX_DOMAIN", record.domain_name(), true)?;
    let nodes = hostlist::compress(&record.nodes);
    spank.setenv("SLURM_IMEX_DOMAIN_NODES", nodes, true)?;
    Ok(())
}

/// The prolog's record of a domain that is UP, or the line that fails the
/// task (a String: SPANK prints it as is to the user's step).
fn ready_record(config: &Config, job_id: u32, node: &str) -> Result<JobRecord, String> {
    let state = StateDir::of(config);
    match state.read_record(job_id).map_err(|e| e.to_string())? {
        None => Err(format!(
            "job {job_id} has no IMEX domain on {node}: the allocation was made without \
             --imex (pass --imex to sbatch/salloc), or the prolog did not run (slurm.conf needs \
             Prolog=slurm-imex-prolog and PrologFlags=Alloc)"
        )),
        Some(JobRecord {
            outcome: Outcome::Failed { cause, .. },
            ..
        }) => Err(format!("job {job_id} cannot use IMEX on {node}: {cause}")),
        Some(record) => Ok(record),
    }
}

/// channels = "plugin": the job's channel by the contract formula, checked
/// against what the prolog recorded; Err is the line that fails the task.
fn plugin_grant(
    config: &Config,
    record: &JobRecord,
    node: &str,
    major: u32,
    uid: u32,
    gid: u32,
) -> Result<ChannelGrant, String> {
    let channel = channel_for_job(record.job_id, config.imex.channel_count.0);
    match record.channel {
        Some(c) if c == channel => Ok(ChannelGrant {
            channel,
            major,
            uid,
            gid,
        }),
        Some(c) => Err(format!(
            "channel mismatch on {node}: the prolog prepared channel {c} but this node's \
             config gives {channel}; make [imex] channel_count equal on all nodes"
        )),
        None => Err(format!(
            "on {node} the prolog left IMEX channels to Slurm's switch/nvidia_imex, but \
             this step runs with channels = \"plugin\"; make [imex] channels and slurm.conf's \
             SwitchType agree on every node"
        )),
    }
}
