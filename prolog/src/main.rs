//! slurm-imex-prolog: Slurm's `Prolog=` program. Jobs without `--imex`
//! return at once; `--imex` jobs get their IMEX domain built and checked.
//! Exit status: 0 unless this node is at fault (Slurm then drains it).

use slurm_imex_core::config::Config;
use slurm_imex_core::imex::domain::{setup, SetupOutcome};
use slurm_imex_core::slurm_env::{JobEnv, IMEX_REQUEST_VAR};
use std::process::ExitCode;

fn main() -> ExitCode {
    // The common case pays for one getenv and nothing else.
    if std::env::var(IMEX_REQUEST_VAR).map_or(true, |v| v.trim() != "1") {
        return ExitCode::SUCCESS;
    }
    slurm_imex_core::logging::init("slurm-imex-prolog");
    let job = match JobEnv::from_process_env() {
        Ok(j) => j,
        Err(e) => return fail(&format!("slurm-imex-prolog: {e}")),
    };
    let span = slurm_imex_core::logging::job_span(job.job_id, &job.node_name);
    let _guard = span.enter();
    let config = match Config::load(None) {
        Ok((c, _)) => c,
        Err(e) => return fail(&format!("slurm-imex-prolog on {}: {e}", job.node_name)),
    };
    match setup(&job, &config) {
        SetupOutcome::Ready { channel, waited } => {
            tracing::info!(
                channel,
                waited_ms = waited.as_millis() as u64,
                "IMEX domain UP"
            );
            ExitCode::SUCCESS
        }
        SetupOutcome::JobFailure(cause) => {
            // Not this node's fault: the plugin fails the job with this cause.
            tracing::warn!("job {} cannot use IMEX: {cause}", job.job_id);
            ExitCode::SUCCESS
        }
        SetupOutcome::NodeFault(cause) => fail(&format!("slurm-imex-prolog: {cause}")),
    }
}

fn fail(line: &str) -> ExitCode {
    tracing::error!("{line}");
    eprintln!("{line}");
    ExitCode::FAILURE
}
