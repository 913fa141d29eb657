//! slurm-imex: the admin CLI. Reviews the epilog health history per node,
//! per GPU and per job, runs the health gate on demand (usable as Slurm's
//! HealthCheckProgram), shows this node's IMEX state, and clears our drains.
//! Every command prints a table or, with --json, JSON; errors are one line.
//!
//! This file parses the command line (`args`) and dispatches to the
//! subcommand's file (`commands`); what they share is `output` (printing:
//! the one writer to stdout and stderr, which makes outside text printable
//! and bounded), `table` and `cells` (table text), `job_db` and `this_node`.

#[macro_use]
mod output;
mod args;
mod cells;
mod commands;
mod job_db;
mod table;
mod this_node;

use args::{Cli, Command};
use clap::Parser;
use slurm_imex_core::error::Result;
use slurm_imex_settings::Config;
use std::process::ExitCode;

fn main() -> ExitCode {
    // As coreutils: a reader that goes away (`slurm-imex history | head`)
    // ends us quietly by SIGPIPE, not with a "broken pipe" panic.
    // SAFETY: restoring the default disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = run(&cli).and_then(|code| output::flush().map(|_| code));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            err!("slurm-imex: {e}");
            ExitCode::from(2)
        }
    }
}

/// The subcommand's exit status. `man`, `config`, `check`, `doctor` and
/// `job` run without loading the config here (the others load it
/// themselves: a refused one is their answer, drains the node with `check
/// --drain`, is a finding, or an exit status of its own); the rest share
/// one load.
fn run(cli: &Cli) -> Result<u8> {
    cli.refuse_format_where_it_does_nothing()?;
    match &cli.command {
        Command::Man { dir } => commands::man::write_all(dir).map(|_| 0),
        Command::Config { reference } => commands::config::config(cli, *reference),
        Command::Check {
            drain,
            undrain,
            node,
        } => commands::check::check(cli, *drain, *undrain, node.clone()),
        Command::Doctor { cluster } => commands::doctor::doctor(cli, *cluster),
        Command::Job { job_id, store } => commands::job::job(cli, *job_id, *store),
        _ => run_with_config(cli, &Config::load(cli.config.as_deref())?.0),
    }
}

/// The subcommands that read the config `main` loaded.
fn run_with_config(cli: &Cli, config: &Config) -> Result<u8> {
    match &cli.command {
        Command::History(args) => commands::history::history(cli, config, args),
        Command::Show { job_id } => commands::show::show(cli, config, *job_id),
        Command::Gpus { since, node, limit } => commands::gpus::gpus(
            cli,
            config,
            since.as_deref(),
            node.as_deref(),
            *limit as usize,
        ),
        Command::Status => commands::status::status(cli, config),
        Command::Topology(args) => commands::topology::topology(cli, config, args),
        Command::Undrain { node } => commands::undrain::undrain(cli, config, node.clone()),
        Command::Man { .. }
        | Command::Config { .. }
        | Command::Check { .. }
        | Command::Doctor { .. }
        | Command::Job { .. } => Ok(0),
    }
}
