//! slurm-imex-watch: the watcher of one `--imex` job's IMEX domain on this
//! node, started by the prolog once the domain is UP and stopped by the
//! epilog (`slurm_imex_hooks::watch_program`). `slurm-imex-watch --job N --node NAME`.

fn main() -> std::process::ExitCode {
    slurm_imex_hooks::watch_program::run_from_args().into()
}
