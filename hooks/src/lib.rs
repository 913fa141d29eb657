//! slurm-imex-hooks: Slurm's `Prolog=` and `Epilog=` programs (the two thin
//! binaries in `src/bin`), the third hook `slurm-imex check` (slurmd's
//! HealthCheckProgram; the CLI parses and prints it), and what they run.
//!
//! - `lifecycle`: a hook start to end: environment, config, the IMEX domain
//!   and the GPU side side by side, acting on the verdict, the exit status
//! - `gpu_job`: the GPU side of a job: the gate before it, the start
//!   snapshot, and after it the deltas, verdict and database row (judge and
//!   record only: acting on a verdict is `drain`)
//! - `check`: the health check hook, and publishing the node's clique
//! - `imex_check`: the node's IMEX daemon as one of that check's findings
//! - `watch_program`: the job's domain watcher (`slurm-imex-watch`), from
//!   the prolog to the epilog: a dead daemon restarted, every event
//!   recorded (`watch_program/recorder.rs`)
//! - `exit`: what a prolog or epilog run ends with (its status, its lines)
//! - `drain`: what a drain-class finding does to the node in Slurm, for the
//!   prolog, the epilog and the check alike
//! - `config_fault`: what an imex.toml the node's programs cannot load does
//!   to the node (the rule for a bad key), for the same three

pub mod check;
pub mod config_fault;
pub mod drain;
pub mod exit;
pub mod gpu_job;
pub mod imex_check;
pub mod lifecycle;
pub mod watch_program;
