//! slurm-imex-epilog: Slurm's `Epilog=` program, run as root on every node
//! of every job. `--imex` jobs get their IMEX domain torn down (idempotent);
//! GPU jobs get their stats and post-job health recorded. Exit status is
//! non-zero only when this node cannot go back to service (Slurm drains it).

fn main() -> std::process::ExitCode {
    slurm_imex_hooks::lifecycle::run_epilog_from_env().into()
}
