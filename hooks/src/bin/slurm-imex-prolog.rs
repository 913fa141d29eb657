//! slurm-imex-prolog: Slurm's `Prolog=` program, run as root on every node
//! of every job. The GPU health gate runs for GPU jobs; `--imex` jobs also
//! get their IMEX domain. Exit status is non-zero only for a fault of this
//! node (Slurm then drains it and requeues the job).

fn main() -> std::process::ExitCode {
    slurm_imex_hooks::lifecycle::run_prolog_from_env().into()
}
