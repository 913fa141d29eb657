// A benchmark harness, never shipped: a failed setup may panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Job database benchmark (issue #3): the epilog's write with fsync, and the
//! admin queries over 1 million job×GPU rows. Prints a report; goals are
//! ≤ 10 ms per write and ≤ 100 ms per query.
//!
//! The epilog's figures (write, both textfile refreshes, the daily prune)
//! are timed on an empty database and on the full one, and their growth
//! printed: they must not grow with the node's history.
//!
//! cargo bench -p slurm-imex-jobdb --bench jobdb [-- ROWS]   (default 1_000_000)

use slurm_imex_gpu::health::Verdict;
use slurm_imex_gpu::stats::{Delta, GpuJobStats};
use slurm_imex_jobdb::query::HistoryFilter;
use slurm_imex_jobdb::write::{GpuRecord, HookVerdict, JobRow};
use slurm_imex_jobdb::JobDb;
use std::time::{Duration, Instant};

const GPUS_PER_JOB: u32 = 8;
const NODES: u32 = 18;
const BOARDS: u32 = NODES * GPUS_PER_JOB;

fn job(id: u32, start: i64) -> JobRow {
    let node = id % NODES;
    // About 1 job in 500 has an XID 79 on one board, 1 in 50 a warning.
    let verdict = match id % 500 {
        0 => Verdict::Drain,
        n if n % 50 == 0 => Verdict::Warn,
        _ => Verdict::Pass,
    };
    JobRow {
        job_id: id,
        node: format!("gb-r1-{:02}", node + 1),
        user: Some(format!("user{}", id % 97)),
        uid: Some(1000 + id % 97),
        start_ts: start,
        end_ts: Some(start + 3600),
        imex: id.is_multiple_of(3),
        imex_domain: None,
        imex_rack_source: None,
        imex_outcome: None,
        prolog: Some(HookVerdict { verdict: Verdict::Pass, reasons: vec![], ms: 40 }),
        epilog: Some(HookVerdict {
            verdict,
            reasons: if verdict == Verdict::Pass { vec![] } else { vec!["imex-health: xid gpu0 x: XID 79".into()] },
            ms: 30,
        }),
        gpus: (0..GPUS_PER_JOB)
            .map(|g| {
                let board = node * GPUS_PER_JOB + g;
                GpuRecord {
                    stats: GpuJobStats {
                        index: g,
                        uuid: format!("GPU-{board:08}"),
                        serial: format!("1650924{board:06}"),
                        pci: format!("0000:{:02x}:00", 0x1a + g),
                        energy_mj: Delta { value: Some(2_500_000_000), reset: false },
                        xids: if verdict == Verdict::Drain && g == 0 {
                            vec![slurm_imex_gpu::xid::parse_line("NVRM: Xid (PCI:0000:1a:00): 79, pid=1, name=x, GPU has fallen off the bus.", id as u64).unwrap()]
                        } else {
                            vec![]
                        },
                        ..Default::default()
                    },
                    verdict: if g == 0 { verdict } else { Verdict::Pass },
                    reasons: vec![],
                }
            })
            .collect(),
        imex_events: Vec::new(),
    }
}

fn stats(mut v: Vec<Duration>) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "median {:.2} ms  p99 {:.2} ms  max {:.2} ms  (n={})",
        ms(v[v.len() / 2]),
        ms(v[(v.len() * 99 / 100).min(v.len() - 1)]),
        ms(v[v.len() - 1]),
        v.len()
    )
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (Vec<Duration>, T) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let t = Instant::now();
        last = Some(f());
        times.push(t.elapsed());
    }
    (times, last.unwrap())
}

fn main() {
    let rows: u32 = std::env::args()
        .skip(1)
        .find_map(|a| a.replace('_', "").parse().ok())
        .unwrap_or(1_000_000);
    let jobs = rows / GPUS_PER_JOB;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let mut db = JobDb::open(&path, Duration::from_secs(10)).unwrap();
    println!("slurm-imex job database benchmark: {} job x GPU rows ({jobs} jobs x {GPUS_PER_JOB} GPUs, {BOARDS} boards on {NODES} nodes)", jobs * GPUS_PER_JOB);
    // What the epilog does at every job (write, both textfile refreshes)
    // and once a day (prune), first on a database holding only the 200
    // writes timed here (every board already in it), then on the full one.
    let empty = epilog_figures(&mut db, "empty db", 10_000_000, 1_700_000_000);
    let empty_pages = pages_per_write(&mut db, &path, 11_000_000, 1_700_000_000);
    fill(&mut db, jobs, &path);
    let full = epilog_figures(&mut db, "full db", 20_000_000, 1_800_000_000);
    let full_pages = pages_per_write(&mut db, &path, 21_000_000, 1_800_000_000);
    bench_history(&db, jobs);
    bench_gpu_totals(&db);
    println!(
        "growth of the epilog's figures (medians), empty db -> {} rows:",
        jobs * GPUS_PER_JOB
    );
    for ((name, e), (_, f)) in empty.iter().zip(&full) {
        let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
        println!(
            "  {name:<42} {:>8.2} ms -> {:>8.2} ms  x{:.2}",
            ms(e),
            ms(f),
            ms(f) / ms(e).max(1e-6)
        );
    }
    println!(
        "  {:<42} {empty_pages:>8} pages -> {full_pages:>5} pages  x{:.2}",
        "pages one epilog write puts in the WAL",
        full_pages as f64 / empty_pages.max(1) as f64
    );
}

/// The pages (WAL frames) one epilog write commits: the WAL emptied by a
/// checkpoint, one job written, the frames counted.
fn pages_per_write(db: &mut JobDb, path: &std::path::Path, id: u32, start: i64) -> i64 {
    let c = rusqlite::Connection::open(path).unwrap();
    let frames = |mode: &str| -> i64 {
        c.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| r.get(1))
            .unwrap()
    };
    frames("TRUNCATE");
    db.record_job(&job(id, start)).unwrap();
    frames("PASSIVE")
}

/// The epilog's per-job work and its daily prune, timed; their medians.
fn epilog_figures(
    db: &mut JobDb,
    label: &str,
    first_id: u32,
    start: i64,
) -> Vec<(&'static str, Duration)> {
    vec![
        (
            "epilog write (8 GPUs, fsync)",
            bench_epilog_write(db, label, first_id, start),
        ),
        ("metrics textfile refresh", bench_metrics_refresh(db)),
        ("per-job textfile refresh", bench_job_export_refresh(db)),
        ("daily prune (nothing expired)", bench_prune(db)),
    ]
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

/// The epilog's daily prune when nothing has expired (the common case
/// between two days' expiries): what it costs to find nothing.
fn bench_prune(db: &mut JobDb) -> Duration {
    let (t, n) = time(20, || db.prune(1_000_000_000, 2_000_000_000, 0).unwrap());
    println!(
        "{:<44} {}  -> {n} rows",
        "prune (nothing expired)",
        stats(t.clone())
    );
    median(&t)
}

/// The epilog's write: one job with 8 GPUs, one fsynced transaction.
fn bench_epilog_write(db: &mut JobDb, label: &str, first_id: u32, start: i64) -> Duration {
    let mut id = first_id;
    let (w, _) = time(200, || {
        id += 1;
        db.record_job(&job(id, start)).unwrap()
    });
    println!(
        "epilog write (8 GPUs, synchronous=FULL, WAL, {label}): {}{}",
        if label.len() < 8 { " " } else { "" },
        stats(w.clone())
    );
    median(&w)
}

/// 180 days of jobs, newest last.
fn fill(db: &mut JobDb, jobs: u32, path: &std::path::Path) {
    let t = Instant::now();
    let start0 = 1_800_000_000 - 180 * 86_400;
    let step = (180 * 86_400) / jobs.max(1) as i64;
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(5_000) {
        let batch: Vec<JobRow> = chunk
            .iter()
            .map(|i| job(*i, start0 + *i as i64 * step))
            .collect();
        db.record_jobs(&batch).unwrap();
    }
    println!(
        "fill: {:.1} s, file {:.0} MiB",
        t.elapsed().as_secs_f64(),
        std::fs::metadata(path).unwrap().len() as f64 / 1048576.0
    );
}

fn bench_history(db: &JobDb, jobs: u32) {
    let f = HistoryFilter {
        limit: 100,
        ..Default::default()
    };
    let cases = [
        ("history (newest 100)", f.clone()),
        (
            "history --gpu <serial>",
            HistoryFilter {
                gpu: Some("1650924000042".into()),
                ..f.clone()
            },
        ),
        (
            "history --node gb-r1-07",
            HistoryFilter {
                node: Some("gb-r1-07".into()),
                ..f.clone()
            },
        ),
        (
            "history --user user13",
            HistoryFilter {
                user: Some("user13".into()),
                ..f.clone()
            },
        ),
        (
            "history --verdict drain",
            HistoryFilter {
                verdict: Some(Verdict::Drain),
                ..f.clone()
            },
        ),
        (
            "history --since 7d",
            HistoryFilter {
                since: Some(1_800_000_000 - 7 * 86_400),
                limit: 1000,
                ..f.clone()
            },
        ),
        (
            "history --job <id>",
            HistoryFilter {
                job_id: Some(jobs / 2),
                ..f.clone()
            },
        ),
    ];
    for (name, filter) in cases {
        let (t, rows) = time(20, || db.history(&filter).unwrap());
        println!("{name:<44} {}  -> {} rows", stats(t), rows.len());
    }
}

fn bench_gpu_totals(db: &JobDb) {
    for (name, since, runs) in [
        ("gpus (lifetime totals)", None, 20),
        ("gpus --since 7d", Some(1_800_000_000 - 7 * 86_400), 5),
        ("gpus --since 30d", Some(1_800_000_000 - 30 * 86_400), 3),
    ] {
        let (t, rows) = time(runs, || db.gpu_totals(since, None, 100).unwrap());
        println!("{name:<44} {}  -> {} boards", stats(t), rows.len());
    }
}

/// The Prometheus export the epilog and `check` refresh: read every board's
/// lifetime counters, render, write atomically.
fn bench_metrics_refresh(db: &JobDb) -> Duration {
    let out = tempfile::tempdir().unwrap();
    let node = slurm_imex_core::state::NodeState::default();
    let (t, bytes) = time(50, || {
        let boards = db.board_counters().unwrap();
        let text = slurm_imex_jobdb::metrics::render(&boards, &node);
        slurm_imex_core::fsutil::write_atomic(
            &out.path().join("slurm_imex.prom"),
            text.as_bytes(),
            0o644,
        )
        .unwrap();
        text.len()
    });
    println!(
        "{:<44} {}  -> {} bytes",
        format!("metrics textfile refresh ({BOARDS} boards)"),
        stats(t.clone()),
        bytes
    );
    median(&t)
}

/// The per-job export the epilog refreshes beside it: the node's 16 latest
/// jobs (the default `[metrics] job_series`), whole, as reports, rendered
/// and written atomically.
fn bench_job_export_refresh(db: &JobDb) -> Duration {
    let out = tempfile::tempdir().unwrap();
    let (t, (bytes, series)) = time(50, || {
        let jobs = db.recently_ended(16, 0).unwrap();
        let reports: Vec<_> = jobs
            .iter()
            .map(|j| (j.job_id, slurm_imex_jobdb::job_export::node_report(j)))
            .collect();
        let text = slurm_imex_jobsummary::series::render(&reports);
        slurm_imex_core::fsutil::write_atomic(
            &out.path().join(slurm_imex_jobsummary::series::FILE_NAME),
            text.as_bytes(),
            0o644,
        )
        .unwrap();
        (
            text.len(),
            text.lines().filter(|l| !l.starts_with('#')).count(),
        )
    });
    println!(
        "{:<44} {}  -> {} bytes, {} series",
        "per-job textfile refresh (16 latest jobs)",
        stats(t.clone()),
        bytes,
        series
    );
    median(&t)
}
