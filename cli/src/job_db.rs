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
    if !path.exists() {
        match &problem {
            Some(p) => err!("slurm-imex: warning: {p}"),
            None => err!(
                "slurm-imex: note: no job database at {} yet: no GPU job has finished on this node \
                 (or set --db / [database] path)",
                path.display()
            ),
        }
        return Ok(None);
    }
    if let Some(line) = roots_database(&path) {
        return Err(slurm_imex_core::error::Error::new(line));
    }
    let opened = JobDb::open_to_read(&path, config.database.busy_timeout.0);
    // Said once: a refusal that names the problem already is not preceded
    // by the same words as a warning.
    if let Some(p) = problem {
        if !matches!(&opened, Err(e) if e.to_string().contains(&p)) {
            err!("slurm-imex: warning: {p}");
        }
    }
    opened.map(Some)
}

/// A user who is not root reading the node's job database, which is
/// root's (the epilog writes it, mode 0600): what is true for them, and the
/// view that is theirs. None for root, or a database that is not root's
/// (a test's `--db`, judged by the usual trust rules).
fn roots_database(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if nix::unistd::geteuid().is_root() {
        return None;
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let owner_of = |p: &std::path::Path| std::fs::symlink_metadata(p).ok().map(|m| m.uid());
    let roots = owner_of(path) == Some(0) || dir.and_then(owner_of) == Some(0);
    roots.then(|| {
        format!(
            "the job database {} is root's: the epilog records every job there as root, and only \
             root reads it (sudo slurm-imex …); a job of yours across its nodes is `slurm-imex job \
             JOBID`",
            path.display()
        )
    })
}
