//! slurm-imex-hooks: Slurm's `Prolog=` and `Epilog=` programs (the two thin
//! binaries in `src/bin`) and what they run.
//!
//! - `lifecycle`: a hook start to end: environment, config, the IMEX domain
//!   and the GPU side side by side, acting on the verdict, the exit status
//! - `gpu_job`: the GPU side of a job: the gate before it, the start
//!   snapshot, and after it the deltas, verdict and database row (judge and
//!   record only: acting on a verdict is `slurm_imex_gpu::drain`)

pub mod gpu_job;
pub mod lifecycle;
