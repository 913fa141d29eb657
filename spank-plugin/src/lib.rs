//! libspank_imex.so — the SPANK adapter of slurm-imex. It holds no domain
//! logic: like pyxis' dispatcher, each SPANK callback is routed to the file
//! of its context (allocator/local, remote, job_script). Panics never cross
//! into Slurm (slurm-spank catches them), and errors reach the user through
//! the SPANK log.

mod allocator;
mod job_script;
mod plugin_args;
mod remote;

use slurm_spank::{spank_log_error, Context, Plugin, SpankHandle, SpankOption, SPANK_PLUGIN};
use std::error::Error;

include!(concat!(env!("OUT_DIR"), "/slurm_version.rs"));

SPANK_PLUGIN!(b"imex", TARGET_SLURM_VERSION, SpankImex);

// Bindings generated from a Slurm's headers carry its version: the stamp
// must name the same major.minor, or that Slurm refuses the plugin.
#[cfg(generated_bindings)]
const _: () = assert!(
    TARGET_SLURM_VERSION & 0xffff00 == slurm_spank::SLURM_VERSION_NUMBER & 0xffff00,
    "SLURM_VERSION_NUMBER and the headers the bindings came from disagree"
);

/// The option name: `--imex` on sbatch, salloc and srun.
pub(crate) const IMEX_OPTION: &str = "imex";

#[derive(Default)]
struct SpankImex {
    args: plugin_args::PluginArgs,
}

unsafe impl Plugin for SpankImex {
    /// The crate's default installs a tracing subscriber on the first
    /// callback; job_prolog/job_epilog run for every job, so stay cheap.
    fn setup(&mut self, _spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        Ok(())
    }

    fn report_error(&self, _spank: &mut SpankHandle, error: &dyn Error) {
        spank_log_error!("{error}");
    }

    fn init(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        match spank.context()? {
            Context::Allocator | Context::Local | Context::Remote => {
                spank.register_option(
                    SpankOption::new(IMEX_OPTION)
                        .usage("Give the job its own IMEX domain and a private IMEX channel (NVLink multi-node memory sharing)"),
                )?;
                self.args = plugin_args::PluginArgs::parse(&spank.plugin_argv()?);
            }
            _ => {}
        }
        Ok(())
    }

    fn init_post_opt(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        match spank.context()? {
            Context::Allocator | Context::Local => allocator::init_post_opt(&self.args, spank),
            _ => Ok(()),
        }
    }

    fn task_init_privileged(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        remote::task_init_privileged(&self.args, spank)
    }

    fn job_prolog(&mut self, _spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        job_script::job_prolog()
    }

    fn job_epilog(&mut self, _spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        job_script::job_epilog()
    }
}
