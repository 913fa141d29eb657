//! slurm-imex-epilog: Slurm's `Epilog=` program, run as root on every node
//! of every job. `--imex` jobs get their IMEX domain torn down (idempotent);
//! GPU jobs get their stats and post-job health recorded. Exit status is
//! non-zero only when this node cannot go back to service (Slurm drains it).

use slurm_imex_core::lifecycle::{run_from_env, Hook};

fn main() -> std::process::ExitCode {
    run_from_env(Hook::Epilog).into()
}
