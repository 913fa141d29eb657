//! The per-job textfile (`<textfile_dir>/slurm_imex_jobs.prom`): this node's
//! latest jobs as reports (slurm_imex_jobsummary::series), rebuilt from the
//! database with the node-wide export and replaced atomically. It keeps at
//! most `[metrics] job_series` jobs, each for `job_series_for` after its
//! epilog: long enough for Prometheus to scrape it, bounded whatever the
//! job rate. Also where a database row becomes a report, and where the
//! node's blame for a job is read back from what the hooks recorded.

use crate::config::MetricsConfig;
use crate::write::{GpuRecord, JobRow};
use crate::JobDb;
use slurm_imex_core::error::Result;
use slurm_imex_gpu::health::Verdict;
use slurm_imex_jobsummary::imex_event::ImexEvent;
use slurm_imex_jobsummary::report::{Blame, GpuReport, NodeReport, XidCount};
use slurm_imex_jobsummary::series;
use std::collections::BTreeMap;
use std::path::Path;

/// Rewrite the per-job textfile in `dir` from `db` (the database the
/// node-wide export just opened; None when there is none yet): the latest
/// jobs, or an empty file (HELP and TYPE only) when there are none, so a
/// job leaves Prometheus's view once its time is up.
pub fn refresh(metrics: &MetricsConfig, db: Option<&JobDb>, dir: &Path, now_ts: i64) -> Result<()> {
    let jobs = match db.filter(|_| metrics.job_series > 0) {
        Some(db) => {
            let since = now_ts.saturating_sub(metrics.job_series_for.0.as_secs() as i64);
            db.recently_ended(metrics.job_series, since)?
        }
        None => Vec::new(),
    };
    let reports: Vec<(u32, NodeReport)> = jobs.iter().map(|j| (j.job_id, node_report(j))).collect();
    slurm_imex_core::fsutil::write_atomic_in(
        dir,
        series::FILE_NAME,
        series::render(&reports).as_bytes(),
        0o644,
    )?;
    Ok(())
}

/// One job row as the node's report of it.
pub fn node_report(j: &JobRow) -> NodeReport {
    let (blame, cause) = blame_of(j);
    let imex = j.imex_outcome.as_ref();
    NodeReport {
        node: j.node.clone(),
        user: j.user.clone(),
        start_ts: j.start_ts,
        end_ts: j.end_ts,
        imex: j.imex,
        domain: j.imex_domain.clone(),
        channel: imex.and_then(|o| o.channel),
        imex_ready_ms: imex.and_then(|o| o.ready_ms),
        prolog: j.prolog.as_ref().map(|p| p.verdict.as_str().to_string()),
        epilog: j.epilog.as_ref().map(|p| p.verdict.as_str().to_string()),
        blame,
        cause,
        prolog_ms: j.prolog.as_ref().map(|p| p.ms),
        epilog_ms: j.epilog.as_ref().map(|p| p.ms),
        gpus: j.gpus.iter().map(gpu_report).collect(),
        imex_events: imex_events_line(&j.imex_events),
    }
}

/// Longest line of a node's IMEX events in its report (the series label,
/// the stored summary): the events that fit, then how many more.
pub const IMEX_EVENTS_LINE_MAX: usize = 300;

/// The node's IMEX events as one line for its report
/// (`imex_event::summary_line`, at most [`IMEX_EVENTS_LINE_MAX`]).
fn imex_events_line(events: &[ImexEvent]) -> Option<String> {
    slurm_imex_jobsummary::imex_event::summary_line(events, IMEX_EVENTS_LINE_MAX)
}

/// Who this node's record blames, and why: an IMEX failure as the prolog
/// decided it (node fault drains, job fault fails the job), else a drain
/// verdict of either hook (a node fault), else nobody.
pub fn blame_of(j: &JobRow) -> (Blame, Option<String>) {
    if let Some(o) = &j.imex_outcome {
        if let Some(failure) = &o.failure {
            let blame = if o.node_fault {
                Blame::Node
            } else {
                Blame::Job
            };
            return (blame, Some(failure.clone()));
        }
    }
    for phase in [&j.prolog, &j.epilog].into_iter().flatten() {
        if phase.verdict == Verdict::Drain {
            return (Blame::Node, phase.reasons.first().cloned());
        }
    }
    (Blame::None, None)
}

fn gpu_report(g: &GpuRecord) -> GpuReport {
    let s = &g.stats;
    let usage = s.usage;
    let remapped = match (s.remapped_correctable.value, s.remapped_uncorrectable.value) {
        (None, None) => None,
        (c, u) => Some(c.unwrap_or(0) + u.unwrap_or(0)),
    };
    GpuReport {
        index: s.index,
        serial: if s.serial.is_empty() {
            s.uuid.clone()
        } else {
            s.serial.clone()
        },
        name: s.name.clone(),
        verdict: g.verdict.as_str().to_string(),
        energy_j: s.energy_mj.value.map(|mj| mj as f64 / 1000.0),
        processes: usage.map(|u| u.processes),
        gpu_util_pct: usage.and_then(|u| u.gpu_util_pct),
        mem_util_pct: usage.and_then(|u| u.mem_util_pct),
        peak_memory_bytes: s.max_memory_bytes,
        busy_s: usage.map(|u| u.busy_ms as f64 / 1000.0),
        xids: xid_counts(g),
        ecc_sbe: s.ecc_sbe.value,
        ecc_dbe: s.ecc_dbe.value,
        remapped_rows: remapped,
        remap_pending: s.remap_pending_end == Some(true),
        recovery_action: s.recovery_action_end.filter(|a| *a != 0),
        throttle_s: s
            .throttle_ns
            .iter()
            .filter(|(_, ns)| **ns > 0)
            .map(|(k, ns)| (k.clone(), *ns as f64 / 1e9))
            .collect(),
        nvlink_errors: s
            .nvlink_errors
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect(),
    }
}

fn xid_counts(g: &GpuRecord) -> Vec<XidCount> {
    let mut by: BTreeMap<u32, XidCount> = BTreeMap::new();
    for x in &g.stats.xids {
        by.entry(x.xid)
            .or_insert_with(|| XidCount {
                xid: x.xid,
                class: x.bucket.as_str().to_string(),
                count: 0,
            })
            .count += 1;
    }
    by.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write::{HookVerdict, ImexOutcome};

    fn row() -> JobRow {
        JobRow {
            job_id: 5,
            node: "n1".into(),
            user: Some("alice".into()),
            uid: Some(1000),
            start_ts: 100,
            end_ts: Some(200),
            imex: true,
            imex_domain: None,
            imex_rack_source: None,
            imex_outcome: None,
            prolog: Some(HookVerdict {
                verdict: Verdict::Pass,
                reasons: vec![],
                ms: 10,
            }),
            epilog: None,
            gpus: vec![],
            imex_events: vec![],
        }
    }

    #[test]
    fn a_nodes_imex_events_become_one_bounded_line() {
        use slurm_imex_jobsummary::imex_event::ImexEventKind;
        let mut j = row();
        assert_eq!(node_report(&j).imex_events, None);
        j.imex_events = vec![
            ImexEvent::new(
                5,
                "n1",
                43_384_000,
                ImexEventKind::DaemonDied,
                "killed by signal 9",
            ),
            ImexEvent::new(5, "n1", 43_384_500, ImexEventKind::DaemonRestarted, ""),
            ImexEvent::new(5, "n1", 43_401_000, ImexEventKind::DomainUp, ""),
        ];
        assert_eq!(
            node_report(&j).imex_events.as_deref(),
            Some(
                "IMEX daemon died at 12:03:04 (killed by signal 9); IMEX daemon restarted at \
                 12:03:04; IMEX domain UP again at 12:03:21"
            )
        );
        j.imex_events = (0..200)
            .map(|i| {
                ImexEvent::new(
                    5,
                    "n1",
                    i * 1000,
                    ImexEventKind::MemberLost,
                    "n2 UNAVAILABLE",
                )
            })
            .collect();
        let line = node_report(&j).imex_events.unwrap();
        assert!(line.len() <= IMEX_EVENTS_LINE_MAX + 20, "{}", line.len());
        assert!(
            line.starts_with(
                "IMEX peer lost at 00:00:00 (n2 UNAVAILABLE); IMEX peer lost at 00:00:01"
            ),
            "{line}"
        );
        assert!(line.ends_with("; … (194 more)"), "{line}");
        // A detail's own commas stay commas.
        j.imex_events = vec![ImexEvent::new(
            5,
            "n1",
            0,
            ImexEventKind::DomainDegraded,
            "n2, n3 not READY",
        )];
        assert_eq!(
            node_report(&j).imex_events.as_deref(),
            Some("IMEX domain left UP at 00:00:00 (n2, n3 not READY)")
        );
        // One event longer than the line is cut, with how many follow.
        let long = ImexEvent::new(5, "n1", 0, ImexEventKind::DomainDegraded, &"x".repeat(390));
        j.imex_events = vec![long.clone(), long];
        let line = node_report(&j).imex_events.unwrap();
        assert!(line.ends_with("more bytes); … (1 more)"), "{line}");
    }

    #[test]
    fn blame_follows_what_the_hooks_decided() {
        let mut j = row();
        assert_eq!(blame_of(&j), (Blame::None, None));
        j.epilog = Some(HookVerdict {
            verdict: Verdict::Drain,
            reasons: vec!["gpu1: XID 79".into()],
            ms: 5,
        });
        assert_eq!(blame_of(&j), (Blame::Node, Some("gpu1: XID 79".into())));
        j.imex_outcome = Some(ImexOutcome {
            failure: Some("peer n2 never connected".into()),
            node_fault: false,
            ..Default::default()
        });
        assert_eq!(
            blame_of(&j),
            (Blame::Job, Some("peer n2 never connected".into())),
            "the IMEX decision is the prolog's"
        );
        j.imex_outcome = Some(ImexOutcome {
            failure: Some("local daemon exited".into()),
            node_fault: true,
            ..Default::default()
        });
        assert_eq!(blame_of(&j).0, Blame::Node);
        j.imex_outcome = Some(ImexOutcome {
            channel: Some(3),
            ready_ms: Some(900),
            ..Default::default()
        });
        let r = node_report(&j);
        assert_eq!(
            (r.channel, r.imex_ready_ms, r.blame),
            (Some(3), Some(900), Blame::Node)
        );
    }
}
