//! The CLI's arguments, as clap parses them: the global flags (`Cli`), one
//! variant per subcommand (`Command`), and the argument groups of the
//! bigger ones. What each subcommand runs is `crate::commands`; this file
//! only says what may be asked (and refuses a flag where it would do
//! nothing). The man pages are generated from these definitions.

use clap::{Parser, Subcommand};
use slurm_imex_core::error::{Error, Result};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "slurm-imex",
    version,
    about = "Per-job IMEX domains and GPU health history for Slurm"
)]
pub struct Cli {
    /// Config file (default: $SLURM_IMEX_CONFIG, else imex.toml beside $SLURM_CONF
    /// when there, else /etc/slurm/imex.toml).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Job database (default: [database] path of the config).
    #[arg(long, global = true)]
    pub db: Option<PathBuf>,
    /// Print JSON instead of a table (shapes: docs/json.md).
    #[arg(long, global = true)]
    pub json: bool,
    /// The --json shape version to print; 1 is the only one so far. Within
    /// a version fields are only ever added.
    #[arg(long, global = true, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1))]
    pub json_version: u32,
    /// Table columns to show, in order, like sacct --format (history, gpus),
    /// e.g. JobID,Node,Verdict.
    #[arg(long, global = true)]
    pub format: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Jobs recorded on this node, newest first (like sacct). The IMEX
    /// column says "no" (no --imex), "yes", or "interrupted": the job's IMEX
    /// domain watcher saw the daemon die or left down, the domain leave UP,
    /// or a member lost while the job ran (show JOBID lists when; --json:
    /// imex_interrupted).
    History(HistoryArgs),
    /// Everything recorded for one job: its row per node, each GPU's stats,
    /// XIDs and processes, and one "imex event:" line per event of its IMEX
    /// domain there (the daemon died, was restarted or left down, the domain
    /// left UP or came back, a member was lost or came back).
    Show { job_id: u32 },
    /// Per-GPU totals, flakiest boards first.
    Gpus {
        /// Only jobs that started since (7d, 12h, 2026-11-01); default: lifetime totals.
        #[arg(long)]
        since: Option<String>,
        /// Slurm node name or hostlist (gb-r1-[01-18]), like sacct -N.
        #[arg(long)]
        node: Option<String>,
        /// At most this many rows (1 to 1000000).
        #[arg(long, default_value_t = 100, allow_negative_numbers = true, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        limit: u64,
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
    /// The racks as the NVLink fabric sees them, from the clique every node
    /// publishes (one scontrol call; run it on the controller host or a
    /// login node, never from a prolog): a topology.conf (BlockName=)
    /// fragment, --yaml, or --map the rack map every node's prolog reads;
    /// --check compares Slurm's topology file and the rack map with the
    /// fabric and exits 1 on any disagreement.
    Topology(TopologyArgs),
    /// Preflight this node's installation: one PASS, WARN or FAIL line per
    /// check (Slurm wiring, plugin, config, IMEX daemon and channels, ports,
    /// systemd, NVML, database) with the exact remedy. Exit 1 on any FAIL.
    Doctor {
        /// Only the cluster-wide checks (Slurm's configuration, the plugin,
        /// Prolog/Epilog, topology, the config): for the slurmctld host or a
        /// login node, which run no IMEX daemon and have no GPUs.
        #[arg(long)]
        cluster: bool,
    },
    /// One job across all its nodes, from a login or controller host, for
    /// its owner or root: nodes, IMEX domains and channel, each node's
    /// prolog/epilog verdicts and blame, what happened to the IMEX domain
    /// on each node while the job ran (one line per node with events), each
    /// GPU's energy, use and health, and notes (idle GPUs, XIDs your code
    /// caused versus the hardware's).
    /// Reads the summary stored in the job's AdminComment (only when it
    /// names this job), else Prometheus ([job] prometheus_url). Exit 0 the
    /// summary is shown; 1 the job is known but has no summary yet (none
    /// stored, no node reported it; --store: a job could not be stored); 2
    /// no such job for you (not in Slurm's accounting, or another user's),
    /// or a wrong command line; 3 the config (imex.toml refused, or a key
    /// this needs unset); 4 sacct (SlurmDBD) or Prometheus could not be
    /// asked or gave no usable answer.
    Job {
        /// The job (as sacct -j).
        #[arg(allow_negative_numbers = true)]
        job_id: Option<u32>,
        /// On the controller host, as root (a systemd timer): store the
        /// summary of every ended job that has none yet in its AdminComment.
        #[arg(long)]
        store: bool,
    },
    /// Load imex.toml as the prolog, epilog and health check do (every
    /// section, then the trust of the programs and files it names): exit 0
    /// when it loads, 2 with the one line naming file:line: key when not
    /// (installing the package runs it and prints that line as a warning).
    /// --reference prints every key with its default and meaning instead.
    Config {
        /// Print the settings reference (Markdown, docs/settings.md): every
        /// key of every section, its default and what it does.
        #[arg(long)]
        reference: bool,
    },
    /// Write man pages for every slurm-imex program into DIR (packaging).
    #[command(hide = true)]
    Man { dir: PathBuf },
    /// Resume nodes drained by slurm-imex: a reason that starts with
    /// "imex-health:", or Slurm's "Prolog error" for a prolog of ours (run
    /// it on the node, whose standing says so). Never an admin's drain: each
    /// node of a hostlist is judged alone, by its own reason, one line each.
    /// Exit 0 all resumed or not drained, 1 one left drained (not ours), 2
    /// one could not be read or resumed.
    Undrain {
        /// Slurm node name or hostlist, such as gb-r1-[01-18] (default:
        /// $SLURMD_NODENAME, else the short hostname).
        #[arg(long)]
        node: Option<String>,
    },
}

#[derive(clap::Args)]
pub struct TopologyArgs {
    /// Print a topology.yaml fragment instead of topology.conf lines.
    #[arg(long, conflicts_with = "map")]
    pub yaml: bool,
    /// Print the rack map (TOML) to install as imex-racks.toml beside
    /// imex.toml on every node; racks take the names of Slurm's blocks
    /// where a topology file describes them.
    #[arg(long)]
    pub map: bool,
    /// Compare Slurm's topology file and the rack map with the fabric; list
    /// each disagreement.
    #[arg(long, conflicts_with_all = ["yaml", "map"])]
    pub check: bool,
    /// Write to this file (atomically, mode 0644) instead of stdout.
    #[arg(long, short = 'o', conflicts_with = "check")]
    pub output: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct HistoryArgs {
    /// Slurm node name or hostlist (gb-r1-[01-18]), like sacct -N.
    #[arg(long)]
    pub node: Option<String>,
    /// GPU board serial (or UUID).
    #[arg(long)]
    pub gpu: Option<String>,
    #[arg(long)]
    pub user: Option<String>,
    #[arg(long, allow_negative_numbers = true)]
    pub job: Option<u32>,
    /// Jobs that started since: an age (7d, 12h) or a UTC date (2026-11-01).
    #[arg(long)]
    pub since: Option<String>,
    #[arg(long)]
    pub until: Option<String>,
    /// pass, warn or drain.
    #[arg(long)]
    pub verdict: Option<String>,
    /// At most this many rows (1 to 1000000).
    #[arg(long, default_value_t = 100, allow_negative_numbers = true, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub limit: u64,
}

impl Cli {
    /// `--format` picks the columns of the `history` and `gpus` tables; any
    /// other command, or `--json`, would silently ignore it.
    pub fn refuse_format_where_it_does_nothing(&self) -> Result<()> {
        if self.format.is_none() {
            return Ok(());
        }
        let tabled = matches!(self.command, Command::History(_) | Command::Gpus { .. });
        match (tabled, self.json) {
            (true, false) => Ok(()),
            (true, true) => Err(Error::new(
                "--format picks table columns and --json prints every field: use one of them",
            )),
            (false, _) => Err(Error::new(
                "--format picks the columns of the history and gpus tables only: drop it for this command",
            )),
        }
    }
}
