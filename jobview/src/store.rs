//! The controller-host pass (`slurm-imex job --store`, run by the shipped
//! systemd timer): every job that ended within `[job] store_backfill` and
//! has no summary yet gets one in its AdminComment, once every node of it
//! has reported to Prometheus, or `store_wait` after it ended with what
//! reported by then. A missed run is caught up by the next (the backfill).
//! One sacct listing, one Prometheus query per series family and 100 jobs, one sacctmgr per
//! job stored: SlurmDBD and Prometheus only, never slurmctld.

use crate::accounting::{self, AccountedJob};
use crate::lookup;
use crate::prometheus::{self, Server, JOBS_PER_QUERY};
use slurm_imex_core::config::Config;
use slurm_imex_core::error::Result;
use slurm_imex_jobsummary::comment;
use slurm_imex_jobsummary::report::JobSummary;

/// What one pass did, counted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StoreCounts {
    /// Ended jobs in the window without a summary of ours.
    pub considered: usize,
    pub stored: usize,
    /// Some node has not reported yet; the next pass looks again.
    pub waiting: usize,
    /// No node ever reported (not a GPU job, or no export).
    pub unreported: usize,
    /// Another tool's AdminComment, left as it is.
    pub foreign: usize,
    pub failed: usize,
}

/// What to do with one job now.
#[derive(Debug, PartialEq)]
enum Decision {
    Store(JobSummary),
    Wait,
    Unreported,
}

/// Run one pass; each job stored or failed is one line on `say`.
pub fn store_pending(cfg: &Config, now: i64, say: &mut dyn FnMut(String)) -> Result<StoreCounts> {
    let mut counts = StoreCounts::default();
    let mut todo = Vec::new();
    for job in accounting::ended_since(cfg, cfg.job.store_backfill.0)? {
        if comment::is_ours(&job.admin_comment) {
            continue;
        }
        if !job.admin_comment.is_empty() {
            counts.foreign += 1;
            continue;
        }
        todo.push(job);
    }
    counts.considered = todo.len() + counts.foreign;
    let server = Server {
        url: &cfg.job.prometheus_url,
        timeout: cfg.job.query_timeout.0,
    };
    // A big job is read alone, in aggregate; the others a batch at a time.
    let (big, todo): (Vec<_>, Vec<_>) = todo.into_iter().partition(|j| {
        j.nodes(lookup::VIEW_MAX_NODES)
            .is_ok_and(|n| n.len() > lookup::AGGREGATE_ABOVE_NODES)
    });
    for job in &big {
        let summary = lookup::prometheus_summary(&server, job, now)?;
        match settle(cfg, job, summary, now) {
            Decision::Store(summary) => store_one(cfg, job, &summary, &mut counts, say),
            Decision::Wait => counts.waiting += 1,
            Decision::Unreported => counts.unreported += 1,
        }
    }
    for batch in todo.chunks(JOBS_PER_QUERY) {
        let oldest = batch.iter().filter_map(|j| j.start).min().unwrap_or(now);
        let ids: Vec<u32> = batch.iter().map(|j| j.job_id).collect();
        let mut reports = prometheus::job_reports(&server, &ids, lookup::window(oldest, now))?;
        for job in batch {
            match decide(cfg, job, &mut reports, now)? {
                Decision::Store(summary) => store_one(cfg, job, &summary, &mut counts, say),
                Decision::Wait => counts.waiting += 1,
                Decision::Unreported => counts.unreported += 1,
            }
        }
    }
    Ok(counts)
}

/// Store now, wait for the nodes still missing, or give up on a job no
/// node reported.
fn decide(
    cfg: &Config,
    job: &AccountedJob,
    reports: &mut slurm_imex_jobsummary::series::Reports,
    now: i64,
) -> Result<Decision> {
    Ok(settle(cfg, job, lookup::summary_of(job, reports)?, now))
}

/// What to do with a job whose summary, if any node reported, is `summary`.
fn settle(cfg: &Config, job: &AccountedJob, summary: Option<JobSummary>, now: i64) -> Decision {
    let settled = job
        .end
        .is_some_and(|end| now - end >= cfg.job.store_wait.0.as_secs() as i64);
    match summary {
        Some(s) if s.missing.is_empty() || settled => Decision::Store(s),
        Some(_) => Decision::Wait,
        None if settled => Decision::Unreported,
        None => Decision::Wait,
    }
}

fn store_one(
    cfg: &Config,
    job: &AccountedJob,
    summary: &JobSummary,
    counts: &mut StoreCounts,
    say: &mut dyn FnMut(String),
) {
    let Some(text) = comment::encode(summary) else {
        counts.failed += 1;
        say(format!(
            "job {}: summary too large for AdminComment even with only its FAIL nodes and rack rollup; not stored",
            job.job_id
        ));
        return;
    };
    match accounting::store_admin_comment(cfg, job.job_id, &text) {
        Ok(()) => {
            counts.stored += 1;
            let missing = if summary.missing.is_empty() {
                String::new()
            } else {
                // One line, however many: a hostlist, cut to a piece.
                format!(
                    ", no report from {} nodes: {}",
                    summary.missing.len(),
                    slurm_imex_core::text::cap(
                        &slurm_imex_core::slurm::hostlist::compress(&summary.missing),
                        slurm_imex_core::text::PIECE_MAX
                    )
                )
            };
            say(format!(
                "stored job {}: {} nodes, {} GPUs, {} bytes{missing}",
                job.job_id,
                summary.reported_nodes(),
                summary.totals().gpus,
                text.len()
            ));
        }
        Err(e) => {
            counts.failed += 1;
            say(format!("job {}: {e}", job.job_id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_imex_jobsummary::series::{self, Sample};
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn job(end: i64) -> AccountedJob {
        AccountedJob {
            job_id: 9,
            user: "alice".into(),
            uid: Some(1000),
            state: "COMPLETED".into(),
            start: Some(end - 100),
            end: Some(end),
            node_list: "n[1-2]".into(),
            admin_comment: String::new(),
        }
    }

    fn reported(node: &str) -> Sample {
        let labels: BTreeMap<String, String> = [("jobid", "9"), ("node", node)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Sample {
            name: "slurm_imex_job_node_start_timestamp_seconds".into(),
            labels,
            value: 1.0,
        }
    }

    #[test]
    fn a_job_is_stored_when_every_node_reported_or_its_wait_is_over() {
        let mut cfg = Config::default();
        cfg.job.store_wait.0 = Duration::from_secs(600);
        let now = 10_000;
        let both = [reported("n1"), reported("n2")];
        let r = |samples: &[Sample]| series::reports_from(samples);
        assert!(
            matches!(decide(&cfg, &job(now - 5), &mut r(&both), now).unwrap(), Decision::Store(s) if s.missing.is_empty())
        );
        assert_eq!(
            decide(&cfg, &job(now - 5), &mut r(&both[..1]), now).unwrap(),
            Decision::Wait
        );
        let late = decide(&cfg, &job(now - 601), &mut r(&both[..1]), now).unwrap();
        assert!(matches!(late, Decision::Store(s) if s.missing == vec!["n2".to_string()]));
        assert_eq!(
            decide(&cfg, &job(now - 5), &mut r(&[]), now).unwrap(),
            Decision::Wait
        );
        assert_eq!(
            decide(&cfg, &job(now - 601), &mut r(&[]), now).unwrap(),
            Decision::Unreported
        );
    }
}
