//! Job database behaviour as the CLI and the epilog see it.

use crate::query::HistoryFilter;
use crate::write::{GpuRecord, HookVerdict, JobRow};
use crate::JobDb;
use slurm_imex_gpu::health::Verdict;
use slurm_imex_gpu::stats::{Delta, GpuJobStats};
use std::time::Duration;

pub(crate) fn job(
    job_id: u32,
    node: &str,
    start: i64,
    serials: &[&str],
    verdict: Verdict,
) -> JobRow {
    JobRow {
        job_id,
        node: node.into(),
        user: Some("alice".into()),
        uid: Some(1001),
        start_ts: start,
        end_ts: Some(start + 60),
        imex: false,
        imex_domain: None,
        imex_rack_source: None,
        imex_outcome: None,
        prolog: Some(HookVerdict { verdict: Verdict::Pass, reasons: vec![], ms: 40 }),
        epilog: Some(HookVerdict {
            verdict,
            reasons: if verdict == Verdict::Pass { vec![] } else { vec![format!("imex-health: xid gpu0 {}: XID 79", serials[0])] },
            ms: 30,
        }),
        gpus: serials
            .iter()
            .enumerate()
            .map(|(i, s)| GpuRecord {
                stats: GpuJobStats {
                    index: i as u32,
                    uuid: format!("GPU-{s}"),
                    serial: s.to_string(),
                    pci: format!("0000:{:02x}:00", 0x1a + i),
                    energy_mj: Delta { value: Some(1_000_000), reset: false },
                    xids: if verdict == Verdict::Drain && i == 0 {
                        vec![slurm_imex_gpu::xid::parse_line(&format!("NVRM: Xid (PCI:0000:{:02x}:00): 79, pid=1, name=x, GPU has fallen off the bus.", 0x1a + i), 5).unwrap()]
                    } else {
                        vec![]
                    },
                    ..Default::default()
                },
                verdict: if i == 0 { verdict } else { Verdict::Pass },
                reasons: vec![],
            })
            .collect(),
        imex_events: Vec::new(),
    }
}

fn db() -> (tempfile::TempDir, JobDb) {
    let d = tempfile::tempdir().unwrap();
    let db = JobDb::open(&d.path().join("jobs.db"), Duration::from_secs(5)).unwrap();
    (d, db)
}

fn all() -> HistoryFilter {
    HistoryFilter {
        limit: 100,
        ..Default::default()
    }
}

#[test]
fn an_imex_domain_and_where_its_members_came_from_round_trip() {
    let (_d, mut db) = db();
    let mut j = job(8, "n1", 1_000, &["S1"], Verdict::Pass);
    j.imex = true;
    j.imex_domain = Some("rack1".into());
    j.imex_rack_source = Some("/etc/slurm/imex-racks.toml (sha256 0123456789ab)".into());
    db.record_job(&j).unwrap();
    let shown = db.show(8).unwrap();
    assert_eq!(shown[0].imex_domain, j.imex_domain);
    assert_eq!(shown[0].imex_rack_source, j.imex_rack_source);
    assert_eq!(shown[0].imex_outcome, None, "no record, no outcome");
    let ready = crate::write::ImexOutcome {
        channel: Some(17),
        ready_ms: Some(1250),
        ..Default::default()
    };
    let failed = crate::write::ImexOutcome {
        failure: Some("local nvidia-imex exited".into()),
        node_fault: true,
        ..Default::default()
    };
    for outcome in [ready, failed] {
        j.imex_outcome = Some(outcome.clone());
        db.record_job(&j).unwrap();
        assert_eq!(db.show(8).unwrap()[0].imex_outcome, Some(outcome));
    }
}

#[test]
fn the_per_job_export_keeps_the_latest_jobs_only() {
    let (_d, mut db) = db();
    for id in 1..=5 {
        db.record_job(&job(
            id,
            "n1",
            1_000 + id as i64 * 10,
            &["S1"],
            Verdict::Pass,
        ))
        .unwrap();
    }
    let ids = |limit, since| {
        db.recently_ended(limit, since)
            .unwrap()
            .iter()
            .map(|j| j.job_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(2, 0), vec![5, 4]);
    let end_of_3 = db.show(3).unwrap()[0].end_ts.unwrap();
    assert_eq!(ids(16, end_of_3), vec![5, 4, 3]);
    assert_eq!(
        db.recently_ended(1, 0).unwrap()[0].gpus.len(),
        1,
        "whole records"
    );
}

#[test]
fn records_round_trip_through_show() {
    let (_d, mut db) = db();
    let j = job(7, "n1", 1_000, &["S1", "S2"], Verdict::Drain);
    db.record_job(&j).unwrap();
    let shown = db.show(7).unwrap();
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].gpus.len(), 2);
    assert_eq!(shown[0].gpus[0].stats.xids.len(), 1);
    assert_eq!(shown[0].gpus[0].stats.xids[0].xid, 79);
    assert_eq!(shown[0].epilog, j.epilog);
    assert_eq!(shown[0].gpus[1].stats.energy_mj.value, Some(1_000_000));
    assert!(db.show(8).unwrap().is_empty());
}

#[test]
fn history_filters_like_sacct() {
    let (_d, mut db) = db();
    db.record_job(&job(1, "n1", 100, &["A", "B"], Verdict::Pass))
        .unwrap();
    db.record_job(&job(2, "n2", 200, &["C"], Verdict::Drain))
        .unwrap();
    let mut bob = job(3, "n1", 300, &["A"], Verdict::Warn);
    bob.user = Some("bob".into());
    db.record_job(&bob).unwrap();
    let ids = |f: HistoryFilter| {
        db.history(&f)
            .unwrap()
            .iter()
            .map(|r| r.job_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(all()), [3, 2, 1]);
    assert_eq!(
        ids(HistoryFilter {
            node: Some("n1".into()),
            ..all()
        }),
        [3, 1]
    );
    assert_eq!(
        ids(HistoryFilter {
            gpu: Some("A".into()),
            ..all()
        }),
        [3, 1]
    );
    assert_eq!(
        ids(HistoryFilter {
            gpu: Some("GPU-C".into()),
            ..all()
        }),
        [2]
    );
    assert_eq!(
        ids(HistoryFilter {
            user: Some("bob".into()),
            ..all()
        }),
        [3]
    );
    assert_eq!(
        ids(HistoryFilter {
            job_id: Some(2),
            ..all()
        }),
        [2]
    );
    assert_eq!(
        ids(HistoryFilter {
            since: Some(150),
            until: Some(250),
            ..all()
        }),
        [2]
    );
    assert_eq!(
        ids(HistoryFilter {
            verdict: Some(Verdict::Drain),
            ..all()
        }),
        [2]
    );
    assert_eq!(ids(HistoryFilter { limit: 1, ..all() }), [3]);
    let rows = db.history(&all()).unwrap();
    assert_eq!(
        (rows[1].gpus, rows[1].xids, rows[1].energy_mj),
        (1, 1, Some(1_000_000))
    );
    assert!(rows[1]
        .reason
        .as_deref()
        .unwrap()
        .starts_with("imex-health: xid"));
    assert_eq!(rows[2].gpus, 2);
}

#[test]
fn gpus_ranks_flaky_boards_first_and_rerun_epilogs_do_not_double_count() {
    let (_d, mut db) = db();
    db.record_job(&job(1, "n1", 100, &["GOOD"], Verdict::Pass))
        .unwrap();
    db.record_job(&job(2, "n1", 200, &["FLAKY"], Verdict::Drain))
        .unwrap();
    db.record_job(&job(3, "n1", 300, &["FLAKY"], Verdict::Pass))
        .unwrap();
    db.record_job(&job(3, "n1", 300, &["FLAKY"], Verdict::Pass))
        .unwrap(); // epilog ran twice
    let t = db.gpu_totals(None, None, 10).unwrap();
    assert_eq!(t[0].serial, "FLAKY");
    assert_eq!(
        (t[0].jobs, t[0].drains, t[0].xids, t[0].xids_drain_class),
        (2, 1, 1, 1)
    );
    assert_eq!(t[0].energy_mj, 2_000_000);
    assert_eq!(t[1].serial, "GOOD");
    let w = db.gpu_totals(Some(250), None, 10).unwrap();
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].serial.as_str(), w[0].jobs, w[0].drains),
        ("FLAKY", 1, 0)
    );
    let w = db.gpu_totals(Some(0), None, 10).unwrap();
    assert_eq!(
        (w[0].serial.as_str(), w[0].drains, w[0].xids_drain_class),
        ("FLAKY", 1, 1)
    );
    assert_eq!(db.history(&all()).unwrap().len(), 3);
}

#[test]
fn the_daily_prune_finds_what_expired_on_an_index_not_by_reading_the_history() {
    let (_d, db) = db();
    // (IMEX events, a few per incident, are pruned by reading them all.)
    let sql = crate::write::PRUNE_JOBS;
    let mut stmt = db
        .conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap();
    let plan: Vec<String> = stmt
        .query_map([0i64], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert!(
        plan.iter().all(|p| !p.starts_with("SCAN")) && plan.iter().any(|p| p.contains("INDEX")),
        "{sql}: {plan:?}"
    );
}

#[test]
fn a_job_that_never_ended_is_pruned_by_its_start() {
    let (_d, mut db) = db();
    let mut old = job(1, "n1", 100, &["A"], Verdict::Pass);
    old.end_ts = None;
    let mut recent = job(2, "n1", 10_000, &["A"], Verdict::Pass);
    recent.end_ts = None;
    let mut ended_late = job(3, "n1", 100, &["A"], Verdict::Pass);
    ended_late.end_ts = Some(9_000);
    for j in [&old, &recent, &ended_late] {
        db.record_job(j).unwrap();
    }
    assert_eq!(db.prune(5_000, 20_000, 86_400).unwrap(), 1);
    let left: Vec<u32> = db
        .history(&all())
        .unwrap()
        .iter()
        .map(|r| r.job_id)
        .collect();
    assert_eq!(left.len(), 2);
    assert!(!left.contains(&1));
}

#[test]
fn retention_prunes_old_jobs_at_most_once_a_day() {
    let (_d, mut db) = db();
    db.record_job(&job(1, "n1", 100, &["A"], Verdict::Drain))
        .unwrap();
    db.record_job(&job(2, "n1", 10_000, &["A"], Verdict::Pass))
        .unwrap();
    assert_eq!(db.prune(5_000, 20_000, 86_400).unwrap(), 1);
    assert_eq!(db.history(&all()).unwrap().len(), 1);
    // Child rows went with the job.
    let xids: i64 = db
        .conn
        .query_row("SELECT COUNT(*) FROM xid_events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(xids, 0);
    assert_eq!(
        db.prune(50_000, 20_100, 86_400).unwrap(),
        0,
        "pruned again within a day"
    );
    // Lifetime totals survive pruning.
    assert_eq!(db.gpu_totals(None, None, 10).unwrap()[0].jobs, 2);
}

#[test]
fn concurrent_writers_lose_no_rows() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("jobs.db");
    JobDb::open(&path, Duration::from_secs(5)).unwrap();
    let threads: Vec<_> = (0..64)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut db = JobDb::open(&path, Duration::from_secs(30)).unwrap();
                db.record_job(&job(
                    1000 + i,
                    "n1",
                    100 + i as i64,
                    &["A", "B", "C", "D"],
                    Verdict::Pass,
                ))
                .unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let db = JobDb::open(&path, Duration::from_secs(5)).unwrap();
    assert_eq!(
        db.history(&HistoryFilter {
            limit: 1000,
            ..Default::default()
        })
        .unwrap()
        .len(),
        64
    );
    let gpus: i64 = db
        .conn
        .query_row("SELECT COUNT(*) FROM job_gpus", [], |r| r.get(0))
        .unwrap();
    assert_eq!(gpus, 256);
    assert_eq!(db.gpu_totals(None, None, 10).unwrap()[0].jobs, 64);
}

#[test]
fn gpus_since_is_exact_across_day_boundaries() {
    let (_d, mut db) = db();
    let mut all_jobs = Vec::new();
    for i in 0..40u32 {
        // Every 7 hours over ~12 days, alternating boards, some drains.
        let v = if i % 7 == 0 {
            Verdict::Drain
        } else {
            Verdict::Pass
        };
        let j = job(
            500 + i,
            "n1",
            1_000_000 + i as i64 * 7 * 3600,
            &[if i % 2 == 0 { "EVEN" } else { "ODD" }],
            v,
        );
        db.record_job(&j).unwrap();
        all_jobs.push(j);
    }
    for since in [
        0, 1_000_000, 1_050_000, 1_086_400, 1_100_001, 1_200_000, 1_280_000, 2_000_000,
    ] {
        let got = db.gpu_totals(Some(since), None, 10).unwrap();
        for serial in ["EVEN", "ODD"] {
            let mine: Vec<&JobRow> = all_jobs
                .iter()
                .filter(|j| j.start_ts >= since && j.gpus[0].stats.serial == serial)
                .collect();
            let row = got.iter().find(|t| t.serial == serial);
            match row {
                None => assert!(mine.is_empty(), "since {since}: {serial} missing"),
                Some(t) => {
                    assert_eq!(t.jobs, mine.len() as i64, "since {since} {serial} jobs");
                    let drains = mine
                        .iter()
                        .filter(|j| j.gpus[0].verdict == Verdict::Drain)
                        .count() as i64;
                    assert_eq!(
                        (t.drains, t.xids_drain_class),
                        (drains, drains),
                        "since {since} {serial}"
                    );
                    assert_eq!(t.energy_mj, 1_000_000 * mine.len() as i64);
                }
            }
        }
    }
}

#[test]
fn board_counters_sum_per_board_and_keep_the_last_verdict() {
    let (_d, mut db) = db();
    let mut drained = job(1, "n1", 1000, &["S1", "S2"], Verdict::Drain);
    drained.gpus[0].stats.ecc_dbe = Delta {
        value: Some(2),
        reset: false,
    };
    drained.gpus[0].stats.remap_pending_end = Some(true);
    drained.gpus[0].stats.throttle_ns =
        [("power".to_string(), 3_000_000_000)].into_iter().collect();
    db.record_job(&drained).unwrap();
    db.record_job(&job(2, "n1", 2000, &["S1"], Verdict::Pass))
        .unwrap();
    // The same job recorded twice (epilog rerun) counts once.
    db.record_job(&job(2, "n1", 2000, &["S1"], Verdict::Pass))
        .unwrap();
    let boards = db.board_counters().unwrap();
    let s1 = boards.iter().find(|b| b.serial == "S1").unwrap();
    assert_eq!((s1.jobs, s1.drains, s1.ecc_dbe), (2, 1, 2));
    assert_eq!(s1.energy_mj, 2_000_000);
    assert_eq!(s1.xids.get("reboot"), Some(&1));
    assert_eq!(s1.throttle_ns.get("power"), Some(&3_000_000_000));
    assert_eq!(s1.last_verdict, "PASS", "the last job's verdict");
    assert!(
        !s1.remap_pending,
        "the last job ended without a pending remap"
    );
    assert_eq!(s1.recovery_action, 0, "not read: NONE, as remap_pending");
    assert_eq!(s1.pci, "0000:1a:00");
    let s2 = boards.iter().find(|b| b.serial == "S2").unwrap();
    assert_eq!((s2.jobs, s2.drains), (1, 0));
}

#[test]
fn the_recovery_action_each_gpu_ended_with_round_trips_and_the_boards_last_is_kept() {
    let (_d, mut db) = db();
    let mut j = job(11, "n1", 1_000, &["S1", "S2", "S3"], Verdict::Warn);
    j.gpus[0].stats.recovery_action_end = Some(5);
    j.gpus[1].stats.recovery_action_end = Some(0);
    // j.gpus[2]: not read (a driver without the field) stays None.
    db.record_job(&j).unwrap();
    let shown = &db.show(11).unwrap()[0];
    let ends: Vec<Option<u64>> = shown
        .gpus
        .iter()
        .map(|g| g.stats.recovery_action_end)
        .collect();
    assert_eq!(ends, [Some(5), Some(0), None]);
    // The job's report (series, stored summary) names only what is not NONE.
    let report = crate::job_export::node_report(shown);
    let actions: Vec<Option<u64>> = report.gpus.iter().map(|g| g.recovery_action).collect();
    assert_eq!(actions, [Some(5), None, None]);
    let board = |db: &JobDb, serial: &str| {
        db.board_counters()
            .unwrap()
            .into_iter()
            .find(|b| b.serial == serial)
            .unwrap()
            .recovery_action
    };
    assert_eq!(
        (board(&db, "S1"), board(&db, "S2"), board(&db, "S3")),
        (5, 0, 0)
    );
    // The board's value is its last job's: cleared, then an unknown one.
    let mut next = job(12, "n1", 2_000, &["S1"], Verdict::Pass);
    next.gpus[0].stats.recovery_action_end = Some(0);
    db.record_job(&next).unwrap();
    assert_eq!(board(&db, "S1"), 0);
    next = job(13, "n1", 3_000, &["S1"], Verdict::Drain);
    next.gpus[0].stats.recovery_action_end = Some(8);
    db.record_job(&next).unwrap();
    assert_eq!(board(&db, "S1"), 8);
    let text = crate::metrics::render(&db.board_counters().unwrap(), &Default::default());
    assert!(
        text.contains(
            "slurm_imex_gpu_recovery_action{serial=\"S1\",uuid=\"GPU-S1\",pci=\"0000:1a:00\"} 8\n"
        ),
        "{text}"
    );
}

#[test]
fn a_v7_database_is_migrated_and_its_rows_read_no_recovery_action() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("jobs.db");
    {
        // What slurm-imex with schema v7 left: a job with a GPU, its board.
        let c = rusqlite::Connection::open(&path).unwrap();
        for sql in &crate::db::MIGRATIONS[..7] {
            c.execute_batch(sql).unwrap();
        }
        c.execute_batch(
            "INSERT INTO jobs (id, job_id, node, start_ts, end_ts, verdict) VALUES (1, 7, 'n1', 100, 160, 'PASS');
             INSERT INTO job_gpus (job_row, gpu_index, uuid, serial, pci, remap_pending_end, verdict)
                 VALUES (1, 0, 'GPU-A', 'A', '0000:1a:00', 0, 'PASS');
             INSERT INTO gpu_totals (serial, uuid, last_node, last_seen, jobs) VALUES ('A', 'GPU-A', 'n1', 160, 1);",
        )
        .unwrap();
        c.pragma_update(None, "user_version", 7).unwrap();
    }
    let mut db = JobDb::open(&path, Duration::from_secs(5)).unwrap();
    let v: i64 = db
        .conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, crate::db::SCHEMA_VERSION);
    let g = &db.show(7).unwrap()[0].gpus[0];
    assert_eq!(
        (g.stats.remap_pending_end, g.stats.recovery_action_end),
        (Some(false), None)
    );
    assert_eq!(db.board_counters().unwrap()[0].recovery_action, 0);
    // New rows after the migration keep it.
    let mut j = job(8, "n1", 1_000, &["A"], Verdict::Warn);
    j.gpus[0].stats.recovery_action_end = Some(5);
    db.record_job(&j).unwrap();
    assert_eq!(
        db.show(8).unwrap()[0].gpus[0].stats.recovery_action_end,
        Some(5)
    );
    assert_eq!(db.board_counters().unwrap()[0].recovery_action, 5);
}

#[test]
fn a_v1_database_is_migrated_and_backfilled() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("jobs.db");
    {
        // What slurm-imex 0.1 (schema v1) left: a board with a drain XID.
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(crate::db::MIGRATIONS[0]).unwrap();
        c.execute_batch(
            "INSERT INTO jobs (id, job_id, node, start_ts, verdict) VALUES (1, 7, 'n1', 100, 'DRAIN');
             INSERT INTO job_gpus (job_row, gpu_index, uuid, serial, pci, ecc_dbe, retired_pages, verdict)
                 VALUES (1, 0, 'GPU-A', 'A', '0000:1a:00', 4, 1, 'DRAIN');
             INSERT INTO xid_events (job_row, node, ts, seq, pci, serial, xid, bucket, drain_class)
                 VALUES (1, 'n1', 100, 5, '0000:1a:00', 'A', 79, 'REBOOT', 1);
             INSERT INTO gpu_totals (serial, uuid, last_node, last_seen, jobs, drains, xids, xids_drain_class)
                 VALUES ('A', 'GPU-A', 'n1', 100, 1, 1, 1, 1);",
        )
        .unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
    }
    let db = JobDb::open(&path, Duration::from_secs(5)).unwrap();
    let a = &db.board_counters().unwrap()[0];
    assert_eq!((a.jobs, a.drains, a.ecc_dbe, a.retired_pages), (1, 1, 4, 1));
    assert_eq!(a.pci, "0000:1a:00");
    assert_eq!(a.xids.get("reboot"), Some(&1));
}

#[test]
fn each_gpus_usage_and_processes_round_trip_and_unknown_stays_unknown() {
    use slurm_imex_gpu::nvml::snapshot::ProcessAccounting;
    use slurm_imex_gpu::stats::GpuUsage;
    let (_d, mut db) = db();
    let mut j = job(9, "n1", 1_000, &["S1", "S2", "S3"], Verdict::Pass);
    let p = ProcessAccounting {
        pid: 420,
        gpu_util: Some(78),
        mem_util: Some(4),
        max_memory_bytes: Some(746 << 20),
        time_ms: 6882,
        start_us: 1_000_000_123,
        running: false,
    };
    j.gpus[0].stats.processes = vec![p];
    j.gpus[0].stats.max_memory_bytes = p.max_memory_bytes;
    j.gpus[0].stats.usage = Some(GpuUsage::of(&[p], 0));
    // Held, never used.
    j.gpus[1].stats.usage = Some(GpuUsage::of(&[], 0));
    // Not known (accounting off): j.gpus[2] keeps None.
    db.record_job(&j).unwrap();
    let shown = &db.show(9).unwrap()[0];
    assert_eq!(shown.gpus[0].stats.processes, vec![p]);
    assert_eq!(shown.gpus[0].stats.usage, j.gpus[0].stats.usage);
    let u = shown.gpus[0].stats.usage.unwrap();
    assert_eq!(
        (u.processes, u.gpu_util_pct, u.busy_ms),
        (1, Some(78.0), 5367)
    );
    assert_eq!(shown.gpus[1].stats.usage.unwrap().processes, 0);
    assert_eq!(shown.gpus[2].stats.usage, None);
    // The metrics: per board, never per job.
    let text = crate::metrics::render(&db.board_counters().unwrap(), &Default::default());
    let sample = |name: &str, serial: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{serial=\"{serial}\"")))
            .and_then(|l| l.rsplit(' ').next())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(sample("slurm_imex_gpu_busy_seconds_total", "S1"), "5.367");
    assert_eq!(sample("slurm_imex_gpu_held_seconds_total", "S1"), "60.000");
    assert_eq!(sample("slurm_imex_gpu_idle_jobs_total", "S2"), "1");
    assert_eq!(sample("slurm_imex_gpu_accounted_jobs_total", "S3"), "0");
    // Per job: the known GPUs' mean (the idle one counts 0), the peak, the idle.
    let h = &db.history(&all()).unwrap()[0];
    assert_eq!(h.gpu_util_pct, Some(39.0));
    assert_eq!(h.peak_memory_bytes, Some(746 << 20));
    assert_eq!(h.idle_gpus, Some(1));
    // Rows without accounting say nothing, not zero.
    db.record_job(&job(10, "n1", 2_000, &["S1"], Verdict::Pass))
        .unwrap();
    let h = &db.history(&all()).unwrap()[0];
    assert_eq!((h.job_id, h.gpu_util_pct, h.idle_gpus), (10, None, None));
}

mod imex_events {
    use super::*;
    use slurm_imex_jobsummary::imex_event::{ImexEvent, ImexEventKind};

    fn died(job_id: u32, node: &str, ts_ms: i64) -> ImexEvent {
        ImexEvent::new(
            job_id,
            node,
            ts_ms,
            ImexEventKind::DaemonDied,
            "killed by signal 9",
        )
    }

    fn recovered(job_id: u32, node: &str, ts_ms: i64) -> [ImexEvent; 2] {
        [
            ImexEvent::new(job_id, node, ts_ms, ImexEventKind::DaemonRestarted, ""),
            ImexEvent::new(job_id, node, ts_ms + 17_000, ImexEventKind::DomainUp, ""),
        ]
    }

    #[test]
    fn show_and_the_per_job_export_carry_the_rows_own_events() {
        let (_d, mut db) = db();
        // The watcher writes while the job runs, before the epilog's row.
        let mut events = vec![died(7, "n3", 1_000_500)];
        events.extend(recovered(7, "n3", 1_000_600));
        for e in &events {
            db.record_imex_event(e).unwrap();
        }
        db.record_imex_event(&died(7, "n4", 1_000_700)).unwrap();
        db.record_imex_event(&died(8, "n3", 1_000_800)).unwrap();
        for node in ["n3", "n4", "n5"] {
            db.record_job(&job(7, node, 1_000, &["S1"], Verdict::Pass))
                .unwrap();
        }
        let shown = db.show(7).unwrap();
        let of = |node: &str| shown.iter().find(|j| j.node == node).unwrap();
        assert_eq!(of("n3").imex_events, events);
        assert!(of("n3").imex_interrupted() && of("n4").imex_interrupted());
        assert!(of("n5").imex_events.is_empty() && !of("n5").imex_interrupted());
        let exported = db.recently_ended(16, 0).unwrap();
        let n3 = exported.iter().find(|j| j.node == "n3").unwrap();
        assert_eq!(n3.imex_events, events);
        let report = crate::job_export::node_report(n3);
        let line = report.imex_events.unwrap();
        assert!(line.starts_with("IMEX daemon died at "), "{line}");
        assert!(
            line.contains("(killed by signal 9)") && line.contains("IMEX domain UP again at"),
            "{line}"
        );
        let n5 = exported.iter().find(|j| j.node == "n5").unwrap();
        assert_eq!(crate::job_export::node_report(n5).imex_events, None);
        // The row's events are never written from the row: rewriting it
        // (a rerun epilog) neither duplicates nor drops them.
        db.record_job(of("n3")).unwrap();
        assert_eq!(db.imex_events(7, "n3").unwrap(), events);
    }

    #[test]
    fn history_marks_a_job_whose_domain_was_interrupted() {
        let (_d, mut db) = db();
        for id in 1..=3 {
            let mut j = job(id, "n1", 100 * id as i64, &["S1"], Verdict::Pass);
            j.imex = true;
            db.record_job(&j).unwrap();
        }
        // 1: died and recovered; 2: only recoveries (no interruption
        // recorded); 3: nothing. Another node's events are not this row's.
        db.record_imex_event(&died(1, "n1", 100_000)).unwrap();
        for e in recovered(1, "n1", 100_500) {
            db.record_imex_event(&e).unwrap();
        }
        for e in recovered(2, "n1", 200_500) {
            db.record_imex_event(&e).unwrap();
        }
        db.record_imex_event(&died(3, "n2", 300_000)).unwrap();
        for kind in [
            ImexEventKind::DaemonLeftDown,
            ImexEventKind::DomainDegraded,
            ImexEventKind::MemberLost,
        ] {
            assert!(kind.interrupts());
        }
        let rows = db.history(&all()).unwrap();
        let flags: Vec<(u32, bool)> = rows
            .iter()
            .map(|r| (r.job_id, r.imex_interrupted))
            .collect();
        assert_eq!(flags, [(3, false), (2, false), (1, true)]);
        // The same with --gpu (the per-board query).
        let rows = db
            .history(&HistoryFilter {
                gpu: Some("S1".into()),
                ..all()
            })
            .unwrap();
        assert!(
            rows.iter()
                .find(|r| r.job_id == 1)
                .unwrap()
                .imex_interrupted
        );
        // SQL and JobRow agree.
        for r in db.show(1).unwrap().iter().chain(db.show(2).unwrap().iter()) {
            let h = db
                .history(&HistoryFilter {
                    job_id: Some(r.job_id),
                    ..all()
                })
                .unwrap();
            assert_eq!(
                h[0].imex_interrupted,
                r.imex_interrupted(),
                "job {}",
                r.job_id
            );
        }
    }

    #[test]
    fn retention_prunes_old_events_with_old_jobs() {
        let (_d, mut db) = db();
        db.record_job(&job(1, "n1", 100, &["A"], Verdict::Pass))
            .unwrap();
        db.record_job(&job(2, "n1", 10_000, &["A"], Verdict::Pass))
            .unwrap();
        db.record_imex_event(&died(1, "n1", 150_000)).unwrap();
        db.record_imex_event(&died(2, "n1", 10_050_000)).unwrap();
        // A watcher's event of a job still running, newer than the cutoff.
        db.record_imex_event(&died(3, "n1", 19_000_000)).unwrap();
        assert_eq!(db.prune(5_000, 20_000, 86_400).unwrap(), 1);
        assert!(db.imex_events(1, "n1").unwrap().is_empty());
        assert_eq!(db.imex_events(2, "n1").unwrap().len(), 1);
        assert_eq!(db.imex_events(3, "n1").unwrap().len(), 1);
        // Within the prune's interval nothing goes, events included.
        assert_eq!(db.prune(50_000, 20_100, 86_400).unwrap(), 0);
        assert_eq!(db.imex_events(2, "n1").unwrap().len(), 1);
    }

    #[test]
    fn a_v6_database_is_migrated_past_v7_and_keeps_its_jobs() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("jobs.db");
        {
            // What slurm-imex with schema v6 left: a job and no events table.
            let c = rusqlite::Connection::open(&path).unwrap();
            for sql in &crate::db::MIGRATIONS[..6] {
                c.execute_batch(sql).unwrap();
            }
            c.execute_batch(
                "INSERT INTO jobs (id, job_id, node, start_ts, end_ts, imex, verdict, imex_channel, imex_node_fault)
                     VALUES (1, 7, 'n1', 100, 160, 1, 'PASS', 8, 0);",
            )
            .unwrap();
            c.pragma_update(None, "user_version", 6).unwrap();
        }
        let mut db = JobDb::open(&path, Duration::from_secs(5)).unwrap();
        let v: i64 = db
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, crate::db::SCHEMA_VERSION);
        let shown = db.show(7).unwrap();
        assert_eq!(shown.len(), 1);
        assert!(shown[0].imex_events.is_empty());
        assert_eq!(shown[0].imex_outcome.as_ref().unwrap().channel, Some(8));
        db.record_imex_event(&died(7, "n1", 120_000)).unwrap();
        assert!(db.show(7).unwrap()[0].imex_interrupted());
        assert!(db.history(&all()).unwrap()[0].imex_interrupted);
        drop(db);
        // A database of a newer slurm-imex is still refused.
        let newer = crate::db::SCHEMA_VERSION + 1;
        let c = rusqlite::Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", newer).unwrap();
        drop(c);
        let e = JobDb::open(&path, Duration::from_secs(5))
            .err()
            .unwrap()
            .to_string();
        let said = format!(
            "has schema v{newer}, newer than this slurm-imex (v{})",
            crate::db::SCHEMA_VERSION
        );
        assert!(e.contains(&said), "{e}");
    }

    #[test]
    fn watchers_write_events_beside_epilogs_without_losing_any() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("jobs.db");
        JobDb::open(&path, Duration::from_secs(5)).unwrap();
        let threads: Vec<_> = (0..32u32)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut db = JobDb::open(&path, Duration::from_secs(30)).unwrap();
                    if i % 2 == 0 {
                        for k in 0..10 {
                            db.record_imex_event(&died(7, &format!("n{}", i % 4), k))
                                .unwrap();
                        }
                    } else {
                        db.record_job(&job(
                            1000 + i,
                            "n1",
                            100 + i as i64,
                            &["A", "B"],
                            Verdict::Pass,
                        ))
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let db = JobDb::open(&path, Duration::from_secs(5)).unwrap();
        let events: usize = (0..4)
            .map(|n| db.imex_events(7, &format!("n{n}")).unwrap().len())
            .sum();
        assert_eq!(events, 160);
        assert_eq!(db.history(&all()).unwrap().len(), 16);
    }
}
