//! slurm-imex: the admin CLI. Reviews the epilog health history per node,
//! per GPU and per job, runs the health gate on demand (usable as Slurm's
//! HealthCheckProgram), shows this node's IMEX state, and clears our drains.
//! Every command prints a table or, with --json, JSON; errors are one line.

mod commands;
mod table;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "slurm-imex",
    version,
    about = "Per-job IMEX domains and GPU health history for Slurm"
)]
pub struct Cli {
    /// Config file (default: $SLURM_IMEX_CONFIG, else /etc/slurm/imex.toml).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Job database (default: [database] path of the config).
    #[arg(long, global = true)]
    pub db: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Jobs recorded on this node, newest first (like sacct).
    History(HistoryArgs),
    /// Everything recorded for one job.
    Show { job_id: u32 },
    /// Per-GPU totals, flakiest boards first.
    Gpus {
        /// Only jobs that started since (7d, 12h, 2026-11-01); default: lifetime totals.
        #[arg(long)]
        since: Option<String>,
        #[arg(long)]
        node: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Run the GPU health gate now. Exit 0 healthy (warnings allowed), 1 drain
    /// finding, 2 could not check. Usable as slurm.conf HealthCheckProgram.
    Check {
        /// On a drain finding, drain this node with our reason.
        #[arg(long)]
        drain: bool,
        /// When healthy, resume this node if we drained it.
        #[arg(long)]
        undrain: bool,
        /// Slurm node name (default: $SLURMD_NODENAME, else the short hostname).
        #[arg(long)]
        node: Option<String>,
    },
    /// This node's IMEX daemon and domain state.
    Status,
    /// Resume a node drained by slurm-imex (reason starts with "imex-health:").
    Undrain {
        /// Slurm node name (default: $SLURMD_NODENAME, else the short hostname).
        #[arg(long)]
        node: Option<String>,
    },
}

#[derive(clap::Args)]
pub struct HistoryArgs {
    #[arg(long)]
    pub node: Option<String>,
    /// GPU board serial (or UUID).
    #[arg(long)]
    pub gpu: Option<String>,
    #[arg(long)]
    pub user: Option<String>,
    #[arg(long)]
    pub job: Option<u32>,
    /// Jobs that started since: an age (7d, 12h) or a UTC date (2026-11-01).
    #[arg(long)]
    pub since: Option<String>,
    #[arg(long)]
    pub until: Option<String>,
    /// pass, warn or drain.
    #[arg(long)]
    pub verdict: Option<String>,
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match commands::run(&cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("slurm-imex: {e}");
            ExitCode::from(2)
        }
    }
}
