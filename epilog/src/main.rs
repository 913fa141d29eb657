//! slurm-imex-epilog: Slurm's `Epilog=` program. For `--imex` jobs it
//! returns the node's IMEX daemon to idle. Idempotent; exits non-zero only
//! when the node cannot be returned to idle (Slurm then drains it).

use slurm_imex_core::config::Config;
use slurm_imex_core::imex::domain::{teardown, TeardownOutcome};
use slurm_imex_core::slurm_env::{JobEnv, IMEX_REQUEST_VAR};
use std::process::ExitCode;

fn main() -> ExitCode {
    if std::env::var(IMEX_REQUEST_VAR).map_or(true, |v| v.trim() != "1") {
        return ExitCode::SUCCESS;
    }
    slurm_imex_core::logging::init("slurm-imex-epilog");
    let job = match JobEnv::from_process_env() {
        Ok(j) => j,
        Err(e) => return fail(&format!("slurm-imex-epilog: {e}")),
    };
    let span = slurm_imex_core::logging::job_span(job.job_id, &job.node_name);
    let _guard = span.enter();
    let config = match Config::load(None) {
        Ok((c, _)) => c,
        Err(e) => return fail(&format!("slurm-imex-epilog on {}: {e}", job.node_name)),
    };
    match teardown(job.job_id, &config) {
        Ok(TeardownOutcome::LeftToOwner(owner)) => {
            tracing::info!("IMEX domain belongs to job {owner}; left untouched");
            ExitCode::SUCCESS
        }
        Ok(outcome) => {
            tracing::info!(?outcome, "IMEX domain torn down");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!(
            "slurm-imex-epilog on {}: cannot return IMEX to idle: {e}",
            job.node_name
        )),
    }
}

fn fail(line: &str) -> ExitCode {
    tracing::error!("{line}");
    eprintln!("{line}");
    ExitCode::FAILURE
}
