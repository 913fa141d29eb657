//! Which of slurm-imex's moments is running: Slurm's prolog before a job,
//! its epilog after one, or a health check between jobs (`slurm-imex check`,
//! Slurm's HealthCheckProgram). The one name for that distinction: the
//! health checks use it to know what to check, the drain decision to know
//! what a drain finding does, the lifecycle to name its program.

/// When something runs relative to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `slurm-imex-prolog`: before the job, on each of its nodes.
    Prolog,
    /// `slurm-imex-epilog`: after the job, on each of its nodes.
    Epilog,
    /// `slurm-imex check`: between jobs.
    Check,
}

impl Hook {
    /// The program that runs at this moment, as its error lines name it.
    pub fn program(self) -> &'static str {
        match self {
            Hook::Prolog => "slurm-imex-prolog",
            Hook::Epilog => "slurm-imex-epilog",
            Hook::Check => "slurm-imex",
        }
    }
}
