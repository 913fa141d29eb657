//! One job, for its owner or root: Slurm's accounting says whose it is and
//! where it ran; its summary is the one stored in its AdminComment, else it
//! is rebuilt from the nodes' per-job series in Prometheus. Which source was
//! used, and what could not be read, is part of the answer.

use crate::accounting::{self, AccountedJob};
use crate::client::Client;
use crate::config::JobViewSections;
use crate::prometheus::{self, Server};
use slurm_imex_core::error::{Error, Kind, Result};
use slurm_imex_jobsummary::comment;
use slurm_imex_jobsummary::report::JobSummary;
use slurm_imex_jobsummary::series;

/// Where a job's summary came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The job's AdminComment, stored once after it ended.
    Stored,
    /// Prometheus, from the nodes' per-job series.
    Prometheus,
    /// Nowhere: no node has reported it (yet), or nothing could be read.
    Nothing,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Stored => "stored summary (AdminComment)",
            Source::Prometheus => "Prometheus",
            Source::Nothing => "none",
        }
    }
}

/// What `slurm-imex job` shows.
#[derive(Debug, Clone)]
pub struct JobView {
    pub job: AccountedJob,
    pub source: Source,
    pub summary: Option<JobSummary>,
    /// Why a source could not be used, one line each.
    pub problems: Vec<String>,
    /// Why Prometheus, asked for want of a stored summary, gave no answer
    /// (its line is in `problems`); None when it answered, or was not asked.
    pub unanswered: Option<Unanswered>,
}

/// Why a job has no answer: what the exit status of `slurm-imex job` tells
/// apart from "no node has reported it yet" (docs/guide.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// No such job for this caller: not in Slurm's accounting (a wrong id,
    /// purged, another user's under PrivateData=jobs), or another user's.
    NotFound,
    /// The config does not let it be asked (a key this needs is unusable).
    Config,
    /// Slurm's accounting or Prometheus could not be asked, or gave no
    /// usable answer (down, timed out, an error, not its API).
    Service,
}

/// A job with no answer: why, and the one line saying so.
#[derive(Debug, Clone)]
pub struct Failure {
    pub why: Unanswered,
    pub error: Error,
}

impl Failure {
    fn new(why: Unanswered, error: Error) -> Failure {
        Failure { why, error }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

/// Whether `caller_uid` may see `job`: its owner, or root. The owner is
/// matched by uid or by name: SlurmDBD 22.05 can list a finished job with
/// UID 0 and its owner's name (seen in the e2e accounting phase), the name
/// coming from the job's association.
pub fn may_see(job: &AccountedJob, caller_uid: u32) -> bool {
    if caller_uid == 0 || job.uid == Some(caller_uid) {
        return true;
    }
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(caller_uid))
        .ok()
        .flatten()
        .is_some_and(|u| !job.user.is_empty() && u.name == job.user)
}

/// Job `job_id` as `caller_uid` may see it: its stored summary, else
/// Prometheus's; a job with neither is still an answer (source none).
pub fn job(
    cfg: &dyn JobViewSections,
    job_id: u32,
    caller_uid: u32,
    now: i64,
) -> Result<JobView, Failure> {
    let job =
        accounting::job(cfg.core(), job_id).map_err(|e| Failure::new(Unanswered::Service, e))?;
    let Some(job) = job else {
        return Err(Failure::new(
            Unanswered::NotFound,
            Error::new(format!(
                "job {job_id}: not in Slurm's accounting (sacct -j {job_id} lists nothing: a wrong id, a job too old \
                 for SlurmDBD's purge, or another user's job under PrivateData=jobs)"
            )),
        ));
    };
    if !may_see(&job, caller_uid) {
        return Err(Failure::new(
            Unanswered::NotFound,
            Error::new(format!(
                "job {job_id} belongs to {}: only its owner and root can see its GPU health",
                job.user
            )),
        ));
    }
    let mut problems = Vec::new();
    let mut unanswered = None;
    let summary = match stored_summary(&job, &mut problems) {
        Some(stored) => Some((Source::Stored, stored)),
        None => match from_prometheus(cfg, &job, now, &mut problems) {
            Ok(s) => s.map(|s| (Source::Prometheus, s)),
            Err(f) => {
                problems.push(f.error.to_string());
                unanswered = Some(f.why);
                None
            }
        },
    };
    let (source, summary) = match summary {
        Some((source, s)) => (source, Some(s)),
        None => (Source::Nothing, None),
    };
    Ok(JobView {
        job,
        source,
        summary,
        problems,
        unanswered,
    })
}

/// The summary stored in the job's AdminComment, when there is one of ours
/// and it is this job's. One that cannot be read, or that names another job
/// (an operator's edit, a restored or merged accounting database, job ids
/// that started again), is never shown: one line in `problems` says why,
/// and the answer falls back to Prometheus.
pub fn stored_summary(job: &AccountedJob, problems: &mut Vec<String>) -> Option<JobSummary> {
    if !comment::is_ours(&job.admin_comment) {
        return None;
    }
    match comment::decode(&job.admin_comment) {
        Ok(summary) if summary.job_id == job.job_id => Some(summary),
        Ok(summary) => {
            problems.push(format!(
                "job {}'s AdminComment holds a stored summary that belongs to job {} (an edited, restored or \
                 merged accounting database, or job ids that started again): not shown as this job's; \
                 the answer falls back to Prometheus",
                job.job_id, summary.job_id
            ));
            None
        }
        Err(e) => {
            problems.push(format!("{e}; the answer falls back to Prometheus"));
            None
        }
    }
}

/// The job rebuilt from Prometheus; None when no node has reported it, or
/// when no server is configured (a line in `problems` says so: the job may
/// still be stored later, by the controller host's `job --store`).
pub fn from_prometheus(
    cfg: &dyn JobViewSections,
    job: &AccountedJob,
    now: i64,
    problems: &mut Vec<String>,
) -> Result<Option<JobSummary>, Failure> {
    if cfg.job().prometheus_url.is_empty() {
        problems.push(
            "no stored summary, and [job] prometheus_url is not set, so the nodes' series cannot be read".into(),
        );
        return Ok(None);
    }
    let client = Client::from_config(cfg).map_err(|e| Failure::new(Unanswered::Config, e))?;
    let server = Server {
        url: &cfg.job().prometheus_url,
        timeout: cfg.job().query_timeout.0,
        client: &client,
    };
    prometheus_summary(&server, job, now).map_err(|e| {
        // An unusable URL is the config's; anything else, the server's.
        let why = match e.kind() {
            Kind::Invalid => Unanswered::Config,
            _ => Unanswered::Service,
        };
        Failure::new(why, e)
    })
}

/// Jobs of more nodes than this are read from Prometheus in aggregate
/// ([`prometheus::big_job`]); smaller ones series by series, whole (a
/// 1,152-node job's 57,600 series take about 1 s).
pub const AGGREGATE_ABOVE_NODES: usize = 2048;

/// The job's summary from Prometheus: every series of a job of up to
/// [`AGGREGATE_ABOVE_NODES`] nodes, else read in aggregate (every node's
/// verdicts, the nodes that did not pass whole, the totals summed by
/// Prometheus); None when no node reported it, or it has not started.
pub fn prometheus_summary(
    server: &Server,
    job: &AccountedJob,
    now: i64,
) -> Result<Option<JobSummary>> {
    let Some(start) = job.start else {
        return Ok(None);
    };
    let nodes = job.nodes(VIEW_MAX_NODES)?;
    let range = window(start, now);
    if nodes.len() <= AGGREGATE_ABOVE_NODES {
        let mut reports = prometheus::job_reports(server, &[job.job_id], range)?;
        return summary_of(job, &mut reports);
    }
    let big = prometheus::big_job(server, job.job_id, range)?;
    if big.nodes.is_empty() {
        return Ok(None);
    }
    let missing = nodes
        .into_iter()
        .filter(|n| !big.nodes.contains_key(n))
        .collect();
    Ok(Some(JobSummary::aggregated(
        job.job_id,
        big.nodes.into_values().collect(),
        missing,
        big.totals,
    )))
}

/// Seconds to look back from `now` to cover a job that started at `start`
/// (with a minute to spare for clocks apart).
pub fn window(start: i64, now: i64) -> u64 {
    (now.saturating_sub(start)).max(0) as u64 + 60
}

/// Most nodes of one job read from its NodeList (above `[imex] max_nodes`,
/// which bounds what one IMEX domain may hold: a job without `--imex` may
/// be far larger, and only its names are held here).
pub const VIEW_MAX_NODES: usize = 1 << 18;

/// The job's summary from its nodes' reports (taken out of `reports`);
/// None when no node reported it.
pub fn summary_of(job: &AccountedJob, reports: &mut series::Reports) -> Result<Option<JobSummary>> {
    let Some(reports) = reports.remove(&job.job_id) else {
        return Ok(None);
    };
    let nodes = job.nodes(VIEW_MAX_NODES)?;
    let missing = nodes
        .into_iter()
        .filter(|n| !reports.contains_key(n))
        .collect();
    Ok(Some(JobSummary {
        job_id: job.job_id,
        nodes: reports.into_values().collect(),
        missing,
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TestConfig;
    use slurm_imex_jobsummary::report::NodeReport;

    fn job_with_comment(job_id: u32, summary_of: u32) -> AccountedJob {
        let summary = JobSummary {
            job_id: summary_of,
            nodes: vec![NodeReport {
                node: "n1".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        AccountedJob {
            job_id,
            user: "alice".into(),
            uid: Some(1000),
            state: "COMPLETED".into(),
            start: Some(1_790_000_000),
            end: Some(1_790_000_600),
            node_list: "n1".into(),
            admin_comment: comment::encode(&summary).unwrap(),
        }
    }

    #[test]
    fn a_stored_summary_is_the_jobs_only_when_it_names_the_job() {
        let mut problems = Vec::new();
        let own = stored_summary(&job_with_comment(4242, 4242), &mut problems);
        assert_eq!(own.map(|s| s.job_id), Some(4242));
        assert!(problems.is_empty(), "{problems:?}");

        let other = stored_summary(&job_with_comment(4242, 17), &mut problems);
        assert!(other.is_none(), "job 17's summary must not be job 4242's");
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].starts_with(
                "job 4242's AdminComment holds a stored summary that belongs to job 17"
            ),
            "{}",
            problems[0]
        );
        assert!(
            problems[0].ends_with("falls back to Prometheus"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn prometheus_unset_is_not_yet_and_a_bad_or_dead_one_is_a_failure() {
        let job = job_with_comment(7, 7);
        let mut cfg = TestConfig::default();
        let mut problems = Vec::new();
        assert!(matches!(
            from_prometheus(&cfg, &job, 1_790_001_000, &mut problems),
            Ok(None)
        ));
        assert!(
            problems[0].contains("prometheus_url is not set"),
            "{problems:?}"
        );

        cfg.job.prometheus_url = "prom:9090".into();
        let f = from_prometheus(&cfg, &job, 1_790_001_000, &mut problems).unwrap_err();
        assert_eq!(f.why, Unanswered::Config, "{f}");

        cfg.job.prometheus_url = fake_prometheus::refused_url("http");
        let f = from_prometheus(&cfg, &job, 1_790_001_000, &mut problems).unwrap_err();
        assert_eq!(f.why, Unanswered::Service, "{f}");
        assert!(
            f.to_string()
                .ends_with(": connection refused: is it running, and listening on that port?"),
            "{f}"
        );
    }

    #[test]
    fn another_tools_comment_is_not_a_problem_and_a_corrupt_one_is_one_line() {
        let mut job = job_with_comment(7, 7);
        let mut problems = Vec::new();
        job.admin_comment = "JS1:abc".into();
        assert!(stored_summary(&job, &mut problems).is_none());
        assert!(problems.is_empty());
        job.admin_comment = "slurm-imex:1:!!!".into();
        assert!(stored_summary(&job, &mut problems).is_none());
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].contains("not a slurm-imex summary"),
            "{}",
            problems[0]
        );
    }
}
