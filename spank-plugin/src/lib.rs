//! libspank_imex.so — the SPANK adapter of slurm-imex. It holds no domain
//! logic: like pyxis' dispatcher, each SPANK callback is routed to the file
//! of its context (allocator/local, remote); the job_script context
//! (job_prolog, job_epilog) has nothing to do, all IMEX work being the
//! prolog's and epilog's programs, so the crate's defaults stand. Panics
//! never cross into Slurm (slurm-spank catches them), and errors reach the
//! user through the SPANK log, each line starting `imex: ` (added here, and
//! only here: [`log_error`], [`log_verbose`]). It links `slurm-imex-core`
//! only: the domain engine (`slurm-imex-domain`), NVML and SQLite stay out
//! of the `.so` (`cargo tree -p spank_imex`), and of the config it parses
//! only the keys it reads (`[node]`, `[imex]`'s channel keys, `[slurm]`).

mod allocator;
mod plugin_args;
mod remote;

use slurm_spank::{
    spank_log_error, spank_log_verbose, Context, Plugin, SpankHandle, SpankOption, SPANK_PLUGIN,
};
use std::error::Error;
use std::fmt::Display;

/// What every line the plugin writes starts with, so a user sees whose it is.
const LINE_PREFIX: &str = "imex: ";

/// `message` with [`LINE_PREFIX`] (once).
fn prefixed(message: impl Display) -> String {
    let text = message.to_string();
    if text.starts_with(LINE_PREFIX) {
        text
    } else {
        format!("{LINE_PREFIX}{text}")
    }
}

/// An error line in the user's output and slurmd's log.
pub(crate) fn log_error(message: impl Display) {
    spank_log_error!("{}", prefixed(message));
}

/// A line in slurmd's log at verbose level.
pub(crate) fn log_verbose(message: impl Display) {
    spank_log_verbose!("{}", prefixed(message));
}

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
        log_error(error);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_starts_with_the_prefix_once() {
        assert_eq!(
            prefixed("job 7 cannot use IMEX"),
            "imex: job 7 cannot use IMEX"
        );
        assert_eq!(prefixed("imex: already"), "imex: already");
        assert_eq!(prefixed(std::io::Error::other("boom")), "imex: boom");
    }
}
