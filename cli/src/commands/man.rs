//! Man pages for every program the packages install, generated from the
//! clap definitions (clap_mangen) by the hidden `slurm-imex man DIR`, which
//! scripts/package.sh runs before building the .debs.

use clap::CommandFactory;
use slurm_imex_core::error::{Error, Result};
use std::path::Path;

fn write_page(dir: &Path, cmd: clap::Command, section: &str) -> Result<()> {
    let name = cmd.get_name().to_string();
    let man = clap_mangen::Man::new(cmd).section(section);
    let mut buf = Vec::new();
    man.render(&mut buf)
        .map_err(|e| Error::new(format!("cannot render the {name} man page: {e}")))?;
    let path = dir.join(format!("{name}.{section}"));
    std::fs::write(&path, buf)
        .map_err(|e| Error::new(format!("cannot write {}: {e}", path.display())))
}

/// A page for a program Slurm runs (no options: it reads its environment).
fn hook_page(name: &'static str, about: &'static str, long: &'static str) -> clap::Command {
    clap::Command::new(name)
        .version(env!("CARGO_PKG_VERSION"))
        .about(about)
        .long_about(long)
}

pub fn write_all(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::new(format!("cannot create {}: {e}", dir.display())))?;
    let mut cli = crate::args::Cli::command();
    cli.build();
    write_page(dir, cli.clone(), "1")?;
    for sub in cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let name: &'static str =
            Box::leak(format!("slurm-imex-{}", sub.get_name()).into_boxed_str());
        let page = sub.clone().name(name);
        write_page(dir, page, "1")?;
    }
    const ENV: &str = "Slurm runs it as root on every node of every job, with SLURM_JOB_ID, \
        SLURMD_NODENAME, SLURM_JOB_NODELIST, SLURM_JOB_GPUS, SLURM_JOB_USER and, for --imex \
        jobs, SPANK_IMEX=1 in its environment. The config is /etc/slurm/imex.toml \
        ($SLURM_IMEX_CONFIG overrides it). Exit status is non-zero only for a fault of this \
        node: Slurm then drains it. See /usr/share/doc/slurm-imex/README.md.";
    write_page(
        dir,
        hook_page(
            "slurm-imex-prolog",
            "Slurm Prolog: GPU health gate, and the job's IMEX domain for --imex jobs",
            Box::leak(format!("Set Prolog=/usr/sbin/slurm-imex-prolog and PrologFlags=Alloc in slurm.conf. The GPU health gate runs beside the IMEX daemon start; an --imex job starts only once its domain is UP. {ENV}").into_boxed_str()),
        ),
        "8",
    )?;
    write_page(
        dir,
        hook_page(
            "slurm-imex-epilog",
            "Slurm Epilog: per-job GPU stats, IMEX teardown, metrics and the journal summary",
            Box::leak(format!("Set Epilog=/usr/sbin/slurm-imex-epilog in slurm.conf. It tears the job's IMEX domain down, records the job's GPU stats in the local job database, refreshes the Prometheus textfile and logs one structured journal event per job. {ENV}").into_boxed_str()),
        ),
        "8",
    )?;
    write_page(
        dir,
        hook_page(
            "slurm-imex-watch",
            "the watcher of an --imex job's IMEX domain, from the prolog to the epilog",
            "Started by slurm-imex-prolog once a per-job IMEX domain is UP (slurm-imex-watch --job N \
             --node NAME), stopped by slurm-imex-epilog; never run by hand. Every [imex.watch] \
             interval it looks at the node's nvidia-imex and asks it for the domain: a daemon that \
             died is restarted on the job's config, up to [imex.watch] max_restarts times per job, \
             then left down and the node drained after the job. Each event (daemon died, restarted \
             or left down; domain left UP or UP again; peer lost or back) goes to the journal, the \
             job database (slurm-imex show JOBID) and the node's Prometheus counters \
             (slurm_imex_imex_events_total). See slurm-imex(1).",
        ),
        "8",
    )?;
    write_page(
        dir,
        hook_page(
            "slurm-imex-healthcheck",
            "Slurm HealthCheckProgram: slurm-imex check --drain --undrain",
            "Set HealthCheckProgram=/usr/sbin/slurm-imex-healthcheck in slurm.conf. It runs the GPU \
             health gate, drains the node with an \"imex-health:\" reason on a drain finding, resumes \
             a node it drained once healthy, and refreshes the Prometheus textfile. See slurm-imex(1).",
        ),
        "8",
    )?;
    Ok(())
}
