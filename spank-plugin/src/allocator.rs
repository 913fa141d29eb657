//! Allocator (sbatch, salloc) and local (srun) context: validate `--imex` at
//! submission and pass the request to Prolog/Epilog as `SPANK_IMEX=1`.

use crate::plugin_args::PluginArgs;
use crate::IMEX_OPTION;
use slurm_spank::SpankHandle;
use std::error::Error;

pub(crate) fn init_post_opt(
    args: &PluginArgs,
    spank: &mut SpankHandle,
) -> Result<(), Box<dyn Error>> {
    if !spank.is_option_set(IMEX_OPTION) {
        return Ok(());
    }
    // A flag has no value; one can only arrive through the environment
    // (SLURM_SPANK__SLURM_SPANK_OPTION_imex_imex=...).
    if let Ok(Some(v)) = spank.get_option_value(IMEX_OPTION) {
        if !v.is_empty() && v != "(null)" {
            return Err(format!("--imex takes no value (got \"{v}\"): write just --imex").into());
        }
    }
    // The plugin's own keys ([node], [imex]'s channel keys, [slurm]),
    // checked: a bad one refuses the submission in one line naming
    // file:line: key. Other keys are the programs' (docs/blame.md).
    args.load_config()?;
    spank
        .job_control_setenv("IMEX", "1", true)
        .map_err(|e| format!("cannot pass --imex to the prolog (spank_job_control_setenv): {e}"))?;
    Ok(())
}
