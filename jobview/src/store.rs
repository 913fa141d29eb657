//! The controller-host pass (`slurm-imex job --store`, run by the shipped
//! systemd timer): every job that ended within `[job] store_backfill` and
//! has no summary yet gets one in its AdminComment, once every node of it
//! has reported to Prometheus, or `store_wait` after it ended with what
//! reported by then. A missed run is caught up by the next (the backfill).
//! One sacct listing, one Prometheus query per series family and batch of
//! at most 100 jobs and 4,096 nodes (a job of more than 2,048 nodes read
//! alone, in aggregate; one Prometheus cannot answer for fails alone), one
//! `sacctmgr -i`
//! per 500 jobs stored (each reading its 500 commands on stdin; a summary
//! too long for a stdin line gets a sacctmgr of its own): SlurmDBD and
//! Prometheus only, never slurmctld.
//!
//! Built for the timer's 5-minute period at 10,000 ended jobs, some of
//! them 1,000-node jobs: jobs are summarized 100 at a time, and only their
//! encoded texts are kept until a batch of 500 is stored, so memory holds
//! one query's samples and one batch's texts, not the whole backlog.

use crate::accounting::{self, AccountedJob, JOBS_PER_SACCTMGR};
use crate::client::Client;
use crate::config::JobViewSections;
use crate::lookup;
use crate::prometheus::{self, Server, JOBS_PER_QUERY, NODES_PER_JOBS_QUERY};
use slurm_imex_core::error::Result;
use slurm_imex_jobsummary::comment;
use slurm_imex_jobsummary::report::JobSummary;
use std::collections::HashMap;

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
pub fn store_pending(
    cfg: &dyn JobViewSections,
    now: i64,
    say: &mut dyn FnMut(String),
) -> Result<StoreCounts> {
    let mut counts = StoreCounts::default();
    let mut todo = Vec::new();
    for job in accounting::ended_since(cfg.core(), cfg.job().store_backfill.0)? {
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
    let client = Client::from_config(cfg)?;
    let server = Server {
        url: &cfg.job().prometheus_url,
        timeout: cfg.job().query_timeout.0,
        client: &client,
    };
    // The texts waiting for their sacctmgr, each with its line for `say`.
    let mut pending: Vec<Pending> = Vec::new();
    let read = read_and_encode(cfg, &server, todo, now, &mut pending, &mut counts, say);
    // What is already summarized is stored, even before a Prometheus error.
    flush(cfg, &mut pending, &mut counts, say);
    read.map(|()| counts)
}

/// Summarize every job of `todo` from Prometheus (a big job alone, in
/// aggregate; the others [`JOBS_PER_QUERY`] at a time), encode what is to
/// be stored into `pending`, and store it whenever a sacctmgr batch is full.
fn read_and_encode(
    cfg: &dyn JobViewSections,
    server: &Server,
    todo: Vec<AccountedJob>,
    now: i64,
    pending: &mut Vec<Pending>,
    counts: &mut StoreCounts,
    say: &mut dyn FnMut(String),
) -> Result<()> {
    let (big, todo): (Vec<_>, Vec<_>) = todo.into_iter().partition(|j| {
        j.nodes(lookup::VIEW_MAX_NODES)
            .is_ok_and(|n| n.len() > lookup::AGGREGATE_ABOVE_NODES)
    });
    for job in &big {
        // One big job Prometheus cannot answer for (its read too slow, its
        // answer too big) fails alone: the small jobs after it still go.
        match lookup::prometheus_summary(server, job, now) {
            Ok(summary) => take(settle(cfg, job, summary, now), job, pending, counts, say),
            Err(e) => {
                counts.failed += 1;
                say(format!(
                    "job {}: {e}; the next pass tries again",
                    job.job_id
                ));
            }
        }
    }
    for batch in query_batches(&todo) {
        let oldest = batch.iter().filter_map(|j| j.start).min().unwrap_or(now);
        let ids: Vec<u32> = batch.iter().map(|j| j.job_id).collect();
        let mut reports = prometheus::job_reports(server, &ids, lookup::window(oldest, now))?;
        for job in batch {
            match decide(cfg, job, &mut reports, now) {
                Ok(decision) => take(decision, job, pending, counts, say),
                // One job's bad record (its NodeList) fails that job alone.
                Err(e) => {
                    counts.failed += 1;
                    say(format!("job {}: {e}", job.job_id));
                }
            }
        }
        if pending.len() >= JOBS_PER_SACCTMGR {
            flush(cfg, pending, counts, say);
        }
    }
    Ok(())
}

/// `todo` in runs of at most [`JOBS_PER_QUERY`] jobs and
/// [`NODES_PER_JOBS_QUERY`] nodes (a job is never split; one of more nodes is
/// a run alone), so one family's answer stays far below the answer cap.
fn query_batches(todo: &[AccountedJob]) -> Vec<&[AccountedJob]> {
    let mut batches = Vec::new();
    let (mut first, mut nodes) = (0, 0usize);
    for (i, job) in todo.iter().enumerate() {
        let n = job
            .nodes(lookup::VIEW_MAX_NODES)
            .map_or(1, |n| n.len().max(1));
        let full = i - first >= JOBS_PER_QUERY || nodes.saturating_add(n) > NODES_PER_JOBS_QUERY;
        if i > first && full {
            batches.push(&todo[first..i]);
            (first, nodes) = (i, 0);
        }
        nodes = nodes.saturating_add(n);
    }
    if first < todo.len() {
        batches.push(&todo[first..]);
    }
    batches
}

/// Count a job's decision; one to store is encoded into `pending`.
fn take(
    decision: Decision,
    job: &AccountedJob,
    pending: &mut Vec<Pending>,
    counts: &mut StoreCounts,
    say: &mut dyn FnMut(String),
) {
    match decision {
        Decision::Store(summary) => pending.extend(encode_one(job, &summary, counts, say)),
        Decision::Wait => counts.waiting += 1,
        Decision::Unreported => counts.unreported += 1,
    }
}

/// A job's encoded summary, and what to say once it is stored.
struct Pending {
    job_id: u32,
    text: String,
    stored_line: String,
}

/// Store now, wait for the nodes still missing, or give up on a job no
/// node reported.
fn decide(
    cfg: &dyn JobViewSections,
    job: &AccountedJob,
    reports: &mut slurm_imex_jobsummary::series::Reports,
    now: i64,
) -> Result<Decision> {
    Ok(settle(cfg, job, lookup::summary_of(job, reports)?, now))
}

/// What to do with a job whose summary, if any node reported, is `summary`.
fn settle(
    cfg: &dyn JobViewSections,
    job: &AccountedJob,
    summary: Option<JobSummary>,
    now: i64,
) -> Decision {
    let settled = job
        .end
        .is_some_and(|end| now - end >= cfg.job().store_wait.0.as_secs() as i64);
    match summary {
        Some(s) if s.missing.is_empty() || settled => Decision::Store(s),
        Some(_) => Decision::Wait,
        None if settled => Decision::Unreported,
        None => Decision::Wait,
    }
}

fn encode_one(
    job: &AccountedJob,
    summary: &JobSummary,
    counts: &mut StoreCounts,
    say: &mut dyn FnMut(String),
) -> Option<Pending> {
    let Some(text) = comment::encode(summary) else {
        counts.failed += 1;
        say(format!(
            "job {}: summary too large for AdminComment even with only its FAIL nodes and rack rollup; not stored",
            job.job_id
        ));
        return None;
    };
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
    let stored_line = format!(
        "stored job {}: {} nodes, {} GPUs, {} bytes{missing}",
        job.job_id,
        summary.reported_nodes(),
        summary.totals().gpus,
        text.len()
    );
    Some(Pending {
        job_id: job.job_id,
        text,
        stored_line,
    })
}

/// Store every pending text (sacctmgr, a batch per process), each job's
/// outcome its own line and count.
fn flush(
    cfg: &dyn JobViewSections,
    pending: &mut Vec<Pending>,
    counts: &mut StoreCounts,
    say: &mut dyn FnMut(String),
) {
    if pending.is_empty() {
        return;
    }
    let jobs: Vec<(u32, String)> = pending
        .iter_mut()
        .map(|p| (p.job_id, std::mem::take(&mut p.text)))
        .collect();
    let results = accounting::store_admin_comments(cfg.core(), &jobs);
    drop(jobs);
    let mut lines: HashMap<u32, String> = pending
        .drain(..)
        .map(|p| (p.job_id, p.stored_line))
        .collect();
    for (job_id, result) in results {
        match result {
            Ok(()) => {
                counts.stored += 1;
                say(lines.remove(&job_id).unwrap_or_default());
            }
            Err(e) => {
                counts.failed += 1;
                say(format!("job {job_id}: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TestConfig;
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
        let mut cfg = TestConfig::default();
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

    fn on(job_id: u32, node_list: &str) -> AccountedJob {
        AccountedJob {
            job_id,
            node_list: node_list.into(),
            ..job(10_000)
        }
    }

    #[test]
    fn a_big_job_prometheus_fails_for_fails_alone_and_the_pass_goes_on() {
        let cfg = TestConfig::default();
        // Nothing listens on port 1: each big job's read fails at once.
        let server = Server {
            url: "http://127.0.0.1:1",
            timeout: Duration::from_secs(2),
            client: &Client::default(),
        };
        let todo = vec![on(1, "n[1-3000]"), on(2, "m[1-2500]")];
        let (mut pending, mut counts, mut lines) = (Vec::new(), StoreCounts::default(), Vec::new());
        let mut say = |l: String| lines.push(l);
        read_and_encode(
            &cfg,
            &server,
            todo,
            10_000,
            &mut pending,
            &mut counts,
            &mut say,
        )
        .unwrap();
        assert_eq!(counts.failed, 2);
        assert!(
            lines[0].starts_with("job 1: ") && lines[1].starts_with("job 2: "),
            "{lines:?}"
        );
    }

    #[test]
    fn a_query_holds_at_most_100_jobs_and_4096_nodes_and_never_splits_a_job() {
        let mut todo: Vec<AccountedJob> = (0..250).map(|i| on(i, "n[1-2]")).collect();
        let sizes = |b: Vec<&[AccountedJob]>| b.iter().map(|b| b.len()).collect::<Vec<_>>();
        assert_eq!(sizes(query_batches(&todo)), [100, 100, 50]);
        todo.truncate(3);
        todo.insert(1, on(7, "g[1-2000]"));
        todo.insert(2, on(8, "h[1-2000]"));
        todo.insert(3, on(9, "k[1-2000]"));
        // 2 + 2,000 + 2,000 nodes, then 2,000 + 2 + 2.
        assert_eq!(sizes(query_batches(&todo)), [3, 3]);
        assert!(query_batches(&[]).is_empty());
    }
}
