//! The job as Slurm's accounting knows it: `sacct` (which asks SlurmDBD,
//! never slurmctld) for its owner, state, times, nodes and AdminComment,
//! and `sacctmgr` to store the summary in that AdminComment. Both are found
//! beside `[slurm] scontrol` and run bounded, with no shell.
//!
//! Many summaries are stored by one `sacctmgr -i` reading its commands on
//! stdin, as it does when given none (`src/sacctmgr/sacctmgr.c`: a command
//! that fails sets the exit status and the next command is still read;
//! with `-i` each modify is committed as it goes). Each `modify job` that
//! changed a job prints `  <jobid> submitted at <time>` under ` Modified
//! jobs...` (`as_mysql_modify_job`), so a job counts as stored only when
//! its own id is printed back, whatever the others' fate.

use slurm_imex_core::config::Config;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::process::{run_bounded, run_checked, run_streamed_fed};
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
/// root or SlurmUser), by a sacctmgr of its own: stored only when
/// sacctmgr prints the job's id back, as for a batch ([`stored_or_why`]).
pub fn store_admin_comment(cfg: &Config, job_id: u32, text: &str) -> Result<()> {
    let id = format!("jobid={job_id}");
    let set = format!("AdminComment={text}");
    let args = ["-i", "modify", "job", "where", &id, "set", &set];
    let program = client(cfg, "sacctmgr");
    let out = run_bounded(&program, &args, limit(cfg))?;
    let printed = out
        .stdout
        .lines()
        .filter_map(modified_job)
        .any(|m| m == job_id);
    let ran = Ran {
        code: out.code,
        stderr: out.stderr,
        timed_out: None,
        jobs: 1,
        not_stored: usize::from(!printed),
    };
    stored_or_why(job_id, printed, &ran)
}

/// How one sacctmgr process ended, for the reason a job of it failed.
struct Ran {
    code: Option<i32>,
    stderr: String,
    /// The line saying it ran past its limit and was killed.
    timed_out: Option<String>,
    /// Commands it was given, and how many of them it did not print back.
    jobs: usize,
    not_stored: usize,
}

/// The one rule for "stored": sacctmgr printed the job's id back
/// (`<id> submitted at ...`, `as_mysql_modify_job`). Otherwise the reason,
/// from how its sacctmgr ended: killed past its limit; an exit status and
/// the errors it printed (for its whole batch, said so: sacctmgr's errors
/// name no job); or exit 0 with the id not printed, the one case that is
/// "no such job" (an unknown id otherwise fails the command, exit 1).
fn stored_or_why(job_id: u32, printed: bool, ran: &Ran) -> Result<()> {
    if printed {
        return Ok(());
    }
    let batch = match ran.jobs {
        1 => String::new(),
        n => format!(
            " (its sacctmgr had {n} jobs, {} not stored)",
            ran.not_stored
        ),
    };
    let why = match (&ran.timed_out, ran.code) {
        (Some(line), _) => format!("{line} before it answered for this job"),
        (None, Some(0)) => "Slurm's accounting has no such job (sacctmgr: nothing modified)".into(),
        (None, code) => {
            let status = code.map_or("was killed by a signal".into(), |c| format!("exited {c}"));
            let errors = ran.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
            match errors.is_empty() {
                true => format!("sacctmgr {status} and printed no error"),
                false => format!("sacctmgr {status}; its errors: {}", cap(&errors, PIECE_MAX)),
            }
        }
    };
    Err(Error::new(format!(
        "sacctmgr modify job {job_id}: not stored{batch}: {why}; the next pass tries again"
    )))
}

/// Most jobs one `sacctmgr` process stores: one process and one SlurmDBD
/// connection per batch, each bounded by `[slurm] scontrol_timeout`.
pub const JOBS_PER_SACCTMGR: usize = 500;
/// Longest command fed on stdin. A sacctmgr built without readline reads
/// lines with a 4,096-byte buffer and takes a longer line as the end of its
/// input (`_getline`), which would silently drop every command after it; a
/// longer summary is stored by a sacctmgr of its own, on its command line.
pub const STDIN_LINE_MAX: usize = 4000;

/// The command that stores `text` for `job_id`, as one stdin line; None
/// when it cannot go on stdin (too long, or text sacctmgr would split).
fn modify_line(job_id: u32, text: &str) -> Option<String> {
    let line = format!("modify job where jobid={job_id} set AdminComment={text}\n");
    let plain = text
        .bytes()
        .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'#' | b'!'));
    (plain && !text.is_empty() && line.len() <= STDIN_LINE_MAX).then_some(line)
}

/// The job id a line of sacctmgr's `modify job` answer names as modified
/// (`  4242 submitted at 2026-11-27T12:00:00`).
fn modified_job(line: &str) -> Option<u32> {
    let rest = line.strip_prefix("  ")?;
    let (id, tail) = rest.split_once(' ').unwrap_or((rest.trim_end(), ""));
    let id = id.parse().ok()?;
    (tail.is_empty() || tail.starts_with("submitted")).then_some(id)
}

/// Store each `(job, text)` as the job's AdminComment, `JOBS_PER_SACCTMGR`
/// jobs per `sacctmgr -i` process, and say for each whether it was stored.
/// A job sacctmgr refused, or did not report modified, fails alone; a
/// batch whose sacctmgr could not run or timed out fails each of its jobs
/// not reported stored, with that reason.
pub fn store_admin_comments(cfg: &Config, jobs: &[(u32, String)]) -> Vec<(u32, Result<()>)> {
    let mut results = Vec::with_capacity(jobs.len());
    let mut fed = Vec::new();
    for (job_id, text) in jobs {
        match modify_line(*job_id, text) {
            Some(line) => fed.push((*job_id, line)),
            None => results.push((*job_id, store_admin_comment(cfg, *job_id, text))),
        }
    }
    for batch in fed.chunks(JOBS_PER_SACCTMGR) {
        results.extend(store_batch(cfg, batch));
    }
    results
}

/// Time one `sacctmgr -i` of `commands` may run: `[slurm]
/// scontrol_timeout` for its connection, and [`COMMAND_TIME`] per command
/// (a commit each), so a full batch does not time out by design.
fn batch_limit(cfg: &Config, commands: usize) -> Duration {
    limit(cfg).saturating_add(COMMAND_TIME.saturating_mul(commands.min(u32::MAX as usize) as u32))
}

/// Time allowed per command of a batch (SlurmDBD commits one in ~30 ms).
const COMMAND_TIME: Duration = Duration::from_millis(50);

/// One `sacctmgr -i` for a batch of stdin commands. What it printed back
/// counts even when it was killed past its limit: those jobs are stored.
fn store_batch(cfg: &Config, batch: &[(u32, String)]) -> Vec<(u32, Result<()>)> {
    let input: String = batch.iter().map(|(_, line)| line.as_str()).collect();
    let program = client(cfg, "sacctmgr");
    let ran = run_streamed_fed(
        &program,
        &["-i"],
        Some(input.into_bytes()),
        batch_limit(cfg, batch.len()),
        "sacctmgr",
        modified_job,
    );
    let s = match ran {
        Ok(s) => s,
        Err(e) => {
            let why = format!("not stored ({} jobs in its batch): {e}", batch.len());
            return batch
                .iter()
                .map(|(id, _)| {
                    (
                        *id,
                        Err(Error::new(format!("sacctmgr modify job {id}: {why}"))),
                    )
                })
                .collect();
        }
    };
    let modified: std::collections::HashSet<u32> = s.items.into_iter().collect();
    let ran = Ran {
        code: s.output.code,
        stderr: s.output.stderr,
        timed_out: s.timed_out,
        jobs: batch.len(),
        not_stored: batch
            .iter()
            .filter(|(id, _)| !modified.contains(id))
            .count(),
    };
    batch
        .iter()
        .map(|(id, _)| (*id, stored_or_why(*id, modified.contains(id), &ran)))
        .collect()
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

    /// A private directory holding the stand-in sacctmgr
    /// (`testdata/sacctmgr`), and a config whose scontrol sits beside it.
    fn standin() -> (tempfile::TempDir, Config) {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = d.path().join("sacctmgr");
        std::fs::write(&bin, include_str!("../testdata/sacctmgr")).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cfg = Config::default();
        cfg.slurm.scontrol = d.path().join("scontrol");
        (d, cfg)
    }

    fn read(d: &tempfile::TempDir, name: &str) -> String {
        std::fs::read_to_string(d.path().join(name)).unwrap_or_default()
    }

    #[test]
    fn summaries_are_stored_500_to_a_sacctmgr_and_a_long_one_alone() {
        let (d, cfg) = standin();
        let long = format!("slurm-imex:1:{}", "A".repeat(STDIN_LINE_MAX));
        let mut jobs: Vec<(u32, String)> = (1..=1_200)
            .map(|id| (id, format!("slurm-imex:1:JOB{id}")))
            .collect();
        jobs.insert(700, (5_000, long.clone()));
        let results = store_admin_comments(&cfg, &jobs);
        assert_eq!(results.len(), 1_201);
        assert!(results.iter().all(|(_, r)| r.is_ok()), "{results:?}");
        // 1,200 on stdin (500, 500, 200) and the long one on its command line.
        let calls = read(&d, "calls");
        assert_eq!(calls.lines().count(), 4, "{calls}");
        assert_eq!(calls.lines().filter(|l| l.ends_with(" -i")).count(), 3);
        let stored = read(&d, "stored");
        assert_eq!(stored.lines().count(), 1_201);
        assert!(stored.contains("\n640 slurm-imex:1:JOB640\n"));
        assert!(stored.contains(&format!("5000 {long}\n")));
    }

    #[test]
    fn a_job_sacctmgr_refuses_fails_alone_and_the_others_are_stored() {
        let (d, cfg) = standin();
        std::fs::write(d.path().join("denied"), "3\n").unwrap();
        std::fs::write(d.path().join("unknown"), "7\n").unwrap();
        let jobs: Vec<(u32, String)> = (1..=10)
            .map(|id| (id, format!("slurm-imex:1:JOB{id}")))
            .collect();
        let results = store_admin_comments(&cfg, &jobs);
        let failed: Vec<(u32, String)> = results
            .iter()
            .filter_map(|(id, r)| r.as_ref().err().map(|e| (*id, e.to_string())))
            .collect();
        assert_eq!(failed.iter().map(|f| f.0).collect::<Vec<_>>(), [3, 7]);
        assert!(
            failed[0].1.starts_with(
                "sacctmgr modify job 3: not stored (its sacctmgr had 10 jobs, 2 not stored): \
                 sacctmgr exited 1; its errors: Error with request: Access/permission denied"
            ),
            "{}",
            failed[0].1
        );
        // Real sacctmgr fails an unknown id (exit 1); with the batch's
        // errors, never claimed "no such job".
        assert!(
            failed[1].1.contains("Invalid job id specified"),
            "{}",
            failed[1].1
        );
        assert!(!failed[1].1.contains("no such job"), "{}", failed[1].1);
        assert_eq!(read(&d, "calls").lines().count(), 1);
        let stored: Vec<String> = read(&d, "stored").lines().map(String::from).collect();
        assert_eq!(stored.len(), 8);
        assert!(stored.contains(&"10 slurm-imex:1:JOB10".to_string()));
    }

    #[test]
    fn a_sacctmgr_killed_past_its_limit_keeps_the_jobs_it_printed_back() {
        let (d, mut cfg) = standin();
        cfg.slurm.scontrol_timeout.0 = Duration::from_millis(700);
        std::fs::write(d.path().join("hang"), "5\n").unwrap();
        let jobs: Vec<(u32, String)> = (1..=8)
            .map(|id| (id, format!("slurm-imex:1:JOB{id}")))
            .collect();
        let results = store_admin_comments(&cfg, &jobs);
        let ok: Vec<u32> = results
            .iter()
            .filter(|r| r.1.is_ok())
            .map(|r| r.0)
            .collect();
        assert_eq!(ok, [1, 2, 3, 4]);
        let e = results[4].1.as_ref().unwrap_err().to_string();
        assert!(
            e.starts_with(
                "sacctmgr modify job 5: not stored (its sacctmgr had 8 jobs, 4 not stored)"
            ) && e.contains("did not finish within")
                && e.contains("before it answered for this job"),
            "{e}"
        );
        assert_eq!(read(&d, "stored").lines().count(), 4);
    }

    #[test]
    fn one_rule_for_stored_whatever_the_path_and_a_batch_limit_that_grows() {
        let ran = |code, stderr: &str, jobs| Ran {
            code,
            stderr: stderr.into(),
            timed_out: None,
            jobs,
            not_stored: 1,
        };
        assert!(stored_or_why(4, true, &ran(Some(1), "x", 1)).is_ok());
        let e = stored_or_why(4, false, &ran(Some(0), "", 1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("has no such job") && !e.contains("its sacctmgr had"),
            "{e}"
        );
        let e = stored_or_why(4, false, &ran(None, "", 3))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sacctmgr was killed by a signal and printed no error"),
            "{e}"
        );
        let e = stored_or_why(4, false, &ran(Some(1), &"e ".repeat(1 << 16), 3))
            .unwrap_err()
            .to_string();
        assert!(e.len() < PIECE_MAX + 300, "{}", e.len());
        let cfg = Config::default();
        assert_eq!(
            batch_limit(&cfg, 500),
            limit(&cfg) + Duration::from_secs(25)
        );
        assert!(batch_limit(&cfg, usize::MAX) > limit(&cfg));
    }

    #[test]
    fn a_sacctmgr_that_cannot_run_fails_each_job_of_its_batch() {
        let (d, cfg) = standin();
        std::fs::remove_file(d.path().join("sacctmgr")).unwrap();
        let jobs = [
            (1, "slurm-imex:1:A".to_string()),
            (2, "slurm-imex:1:B".into()),
        ];
        let results = store_admin_comments(&cfg, &jobs);
        assert_eq!(results.len(), 2);
        for (_, r) in results {
            let e = r.unwrap_err().to_string();
            assert!(
                e.starts_with("sacctmgr modify job") && e.contains("does not exist"),
                "{e}"
            );
        }
    }

    #[test]
    fn only_a_plain_short_text_goes_on_stdin() {
        assert!(modify_line(1, "slurm-imex:1:ABC234").is_some());
        for bad in ["", "a b", "a\nb", "a\"b", "a'b", "a#b", "!!", "a\u{e9}"] {
            assert_eq!(modify_line(1, bad), None, "{bad:?}");
        }
        assert_eq!(modify_line(1, &"A".repeat(STDIN_LINE_MAX)), None);
        assert_eq!(
            modified_job("  4242 submitted at 2026-11-27T12:00:00\n"),
            Some(4242)
        );
        assert_eq!(modified_job("  Nothing modified\n"), None);
        assert_eq!(modified_job(" Modified jobs...\n"), None);
        assert_eq!(modified_job("sacctmgr:  42 submitted at x"), None);
    }

    #[test]
    fn a_job_that_never_ran_has_no_nodes() {
        let j = &parse("7|a|1|CANCELLED|None|1790000000|None assigned|\n").unwrap()[0];
        assert!(j.nodes(10).unwrap().is_empty());
    }
}
