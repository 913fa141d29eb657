//! The job database as the reading commands (`history`, `show`, `gpus`)
//! open it: read-only, never created, `--db` before `[database] path`.

use crate::args::Cli;
use slurm_imex_core::error::Result;
use slurm_imex_jobdb::JobDb;
use slurm_imex_settings::Config;

/// Reading commands never create a database. None (with a note on
/// stderr) when this node has none yet: the answer is then empty, as
/// sacct's is for a cluster with no jobs.
pub fn open_db(cli: &Cli, config: &Config) -> Result<Option<JobDb>> {
    let path = cli
        .db
        .clone()
        .unwrap_or_else(|| config.database.path.clone());
    let problem = slurm_imex_jobdb::storage_problem(&path);
    if let Some(p) = &problem {
        eprintln!("slurm-imex: warning: {p}");
    }
    if !path.exists() {
        if problem.is_none() {
            eprintln!(
                "slurm-imex: note: no job database at {} yet: no GPU job has finished on this node \
                 (or set --db / [database] path)",
                path.display()
            );
        }
        return Ok(None);
    }
    JobDb::open_to_read(&path, config.database.busy_timeout.0).map(Some)
}
