//! What each subcommand runs, one file per subcommand: load what it needs
//! (the check and undrain run in `slurm_imex_hooks`, `job` in
//! `slurm_imex_jobview`), print a table or JSON, return the exit status.
//! Their arguments are `crate::args`; `main` dispatches to them.

pub mod check;
pub mod config;
pub mod doctor;
pub mod gpus;
pub mod history;
pub mod job;
pub mod man;
pub mod show;
pub mod status;
pub mod topology;
pub mod undrain;
