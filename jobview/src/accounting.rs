//! The job as Slurm's accounting knows it: `sacct` (which asks SlurmDBD,
//! never slurmctld) for its owner, state, times, nodes and AdminComment,
//! and `sacctmgr` to store the summary in that AdminComment. Both are found
//! beside `[slurm] scontrol` and run bounded, with no shell.

use slurm_imex_core::config::Config;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::process::{run_bounded, run_checked};
use slurm_imex_core::text::{cap, PIECE_MAX};
use std::path::PathBuf;
use std::time::Duration;

/// The fields read, in order; AdminComment last, so a `|` inside another
/// tool's comment cannot shift the others.
const FIELDS: &str = "JobIDRaw,User,UID,State,Start,End,NodeList,AdminComment";
/// The states a job ends in (sacct's short names).
const ENDED_STATES: &str = "BF,CA,CD,DL,F,NF,OOM,PR,TO";
/// Most jobs one `sacct` listing is trusted to return.
const MAX_JOBS: usize = 200_000;

/// One job (its allocation, `sacct -X`) in Slurm's accounting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountedJob {
    pub job_id: u32,
    pub user: String,
    pub uid: Option<u32>,
    pub state: String,
    /// Unix seconds (`times_as_epoch_seconds`); None: not started, or
    /// still running.
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// Slurm's hostlist of the job's nodes (`gb-r1-[01-18]`).
    pub node_list: String,
    pub admin_comment: String,
}

impl AccountedJob {
    /// Whether the job has ended (it has an end time).
    pub fn ended(&self) -> bool {
        self.end.is_some()
    }

    /// The job's nodes, expanded; none when it never had any.
    pub fn nodes(&self, max: usize) -> Result<Vec<String>> {
        if self.node_list.is_empty() || self.node_list.starts_with("None") {
            return Ok(Vec::new());
        }
        slurm_imex_core::slurm::hostlist::expand(&self.node_list, max)
            .map_err(|e| e.context(format!("job {}'s NodeList", self.job_id)))
    }
}

/// A Slurm client beside the configured scontrol (same directory, or PATH
/// when scontrol is found in PATH).
fn client(cfg: &Config, name: &str) -> PathBuf {
    match cfg
        .slurm
        .scontrol
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        Some(dir) => dir.join(name),
        None => PathBuf::from(name),
    }
}

fn limit(cfg: &Config) -> Duration {
    cfg.slurm.scontrol_timeout.0
}

/// A sacct that ran past `[slurm] scontrol_timeout`, said as the service
/// to look at and what to do; any other failure as it is.
fn slow(e: Error) -> Error {
    if e.kind() != slurm_imex_core::error::Kind::Timeout {
        return e;
    }
    Error::timeout(format!(
        "Slurm's accounting (sacct, SlurmDBD) is slow: {e}; ask again later, check slurmdbd and its database, \
         or raise [slurm] scontrol_timeout in imex.toml"
    ))
}

/// Times as Unix seconds: `SLURM_TIME_FORMAT=%s` for every sacct this
/// process runs (set once, before any thread starts, by the CLI).
pub fn times_as_epoch_seconds() {
    std::env::set_var("SLURM_TIME_FORMAT", "%s");
}

/// The job's record, or None when accounting has no such job (for a user
/// with SlurmDBD's `PrivateData=jobs`, also another user's job).
pub fn job(cfg: &Config, job_id: u32) -> Result<Option<AccountedJob>> {
    let id = job_id.to_string();
    let args = ["-X", "-n", "-P", "-j", &id, "--format", FIELDS];
    let out = run_checked(&client(cfg, "sacct"), &args, limit(cfg), "sacct").map_err(slow)?;
    Ok(parse(&out.stdout)?.into_iter().find(|j| j.job_id == job_id))
}

/// Every job that ended in the last `back` (all users: for root on the
/// controller host).
pub fn ended_since(cfg: &Config, back: Duration) -> Result<Vec<AccountedJob>> {
    let start = format!("now-{}seconds", back.as_secs());
    // With the final states named, sacct selects jobs by when they reached
    // one (their end), not by when they became eligible: a record SlurmDBD
    // got the end of before its start shows eligible time 0 until the start
    // arrives (seen on 22.05), and would not be listed otherwise.
    let args = [
        "-X",
        "-n",
        "-P",
        "-a",
        "-S",
        &start,
        "-E",
        "now",
        "--state",
        ENDED_STATES,
        "--format",
        FIELDS,
    ];
    let out = run_checked(&client(cfg, "sacct"), &args, limit(cfg), "sacct").map_err(slow)?;
    Ok(parse(&out.stdout)?
        .into_iter()
        .filter(AccountedJob::ended)
        .collect())
}

/// `sacct -P` lines as jobs. A line that is not one (a step, a message)
/// is skipped; more than `MAX_JOBS` is an error.
// Hand-split: sacct's parsable output is `|`-separated fields with no
// quoting, so a CSV crate would mis-read a `"` in another tool's comment.
pub fn parse(text: &str) -> Result<Vec<AccountedJob>> {
    let mut jobs = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.splitn(8, '|').collect();
        let [id, user, uid, state, start, end, nodes, comment] = f[..] else {
            continue;
        };
        let Ok(job_id) = id.parse::<u32>() else {
            continue;
        };
        if jobs.len() >= MAX_JOBS {
            return Err(Error::new(format!(
                "sacct listed more than {MAX_JOBS} jobs: narrow [job] store_backfill"
            )));
        }
        // The user and state reach lines as they are: cut to a piece (a
        // real name or state is far shorter). The node list and the comment
        // are read whole (cut, neither would parse); where they are shown
        // they are cut there.
        jobs.push(AccountedJob {
            job_id,
            user: cap(user, PIECE_MAX),
            uid: uid.parse().ok(),
            state: cap(
                state.split_whitespace().next().unwrap_or_default(),
                PIECE_MAX,
            ),
            start: start.parse().ok().filter(|t| *t > 0),
            end: end.parse().ok().filter(|t| *t > 0),
            node_list: nodes.to_string(),
            admin_comment: comment.trim().to_string(),
        });
    }
    Ok(jobs)
}

/// Store `text` as the job's AdminComment (SlurmDBD; needs an operator:
/// root or SlurmUser).
pub fn store_admin_comment(cfg: &Config, job_id: u32, text: &str) -> Result<()> {
    let id = format!("jobid={job_id}");
    let set = format!("AdminComment={text}");
    let args = ["-i", "modify", "job", "where", &id, "set", &set];
    let program = client(cfg, "sacctmgr");
    let out = run_bounded(&program, &args, limit(cfg))?;
    // sacctmgr exits 0 and says so when nothing matched.
    if !out.success() || out.stdout.contains("Nothing modified") || out.stderr.contains("Nothing") {
        return Err(Error::new(format!(
            "sacctmgr modify job {job_id} failed: {}",
            out.one_line()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sacct_lines_become_jobs_and_a_comment_keeps_its_bars() {
        let text =
            "4242|alice|1000|COMPLETED|1790000000|1790000600|gb-r1-[01-02]|slurm-imex:1:abc\n\
                    4243|bob|1001|CANCELLED by 0|1790000000|Unknown|gb-r1-03|JS1:x|y|z\n\
                    4244.batch|bob|1001|COMPLETED|||gb-r1-03|\n\
                    sacct: error: something\n";
        let jobs = parse(text).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].nodes(100).unwrap(), vec!["gb-r1-01", "gb-r1-02"]);
        assert_eq!(
            (jobs[0].start, jobs[0].end),
            (Some(1_790_000_000), Some(1_790_000_600))
        );
        assert_eq!(jobs[1].state, "CANCELLED");
        assert_eq!(jobs[1].admin_comment, "JS1:x|y|z");
        assert!(!jobs[1].ended());
    }

    #[test]
    fn a_huge_user_or_state_is_cut_to_a_piece() {
        let huge = "u".repeat(1 << 20);
        let j = &parse(&format!("7|{huge}|1|{huge}|1|2|n1|\n")).unwrap()[0];
        assert!(j.user.len() < PIECE_MAX + 32 && j.user.starts_with("uuu"));
        assert!(j.state.len() < PIECE_MAX + 32);
    }

    #[test]
    fn a_job_that_never_ran_has_no_nodes() {
        let j = &parse("7|a|1|CANCELLED|None|1790000000|None assigned|\n").unwrap()[0];
        assert!(j.nodes(10).unwrap().is_empty());
    }
}
