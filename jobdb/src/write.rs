//! Writing a finished job (prolog verdict, per-GPU stats, XIDs, processes,
//! post-job verdict) in one immediate transaction, keeping per-board lifetime
//! totals, and pruning by retention.

use crate::db::{err, JobDb};
use rusqlite::{params, TransactionBehavior};
use serde::{Deserialize, Serialize};
use slurm_imex_core::error::Result;
use slurm_imex_gpu::health::Verdict;
use slurm_imex_gpu::stats::GpuJobStats;
use slurm_imex_gpu::xid::Bucket;
use slurm_imex_jobsummary::imex_event::ImexEvent;

/// One hook's verdict (the prolog's or the epilog's), as the job's row keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookVerdict {
    pub verdict: Verdict,
    pub reasons: Vec<String>,
    pub ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuRecord {
    pub stats: GpuJobStats,
    pub verdict: Verdict,
    pub reasons: Vec<String>,
}

/// Everything recorded for one job on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    pub job_id: u32,
    pub node: String,
    pub user: Option<String>,
    pub uid: Option<u32>,
    /// Unix seconds.
    pub start_ts: i64,
    pub end_ts: Option<i64>,
    pub imex: bool,
    /// The NVLink block of the job's IMEX domain on this node; None when the
    /// domain was the whole job (no rack source), or without --imex.
    #[serde(default)]
    pub imex_domain: Option<String>,
    /// The file that domain's members came from: the topology file, or the
    /// rack map with its sha256 (`<path> (sha256 <12 hex>)`).
    #[serde(default)]
    pub imex_rack_source: Option<String>,
    /// What the prolog concluded of the job's IMEX domain here (None
    /// without --imex, or when its record was gone).
    #[serde(default)]
    pub imex_outcome: Option<ImexOutcome>,
    pub prolog: Option<HookVerdict>,
    pub epilog: Option<HookVerdict>,
    pub gpus: Vec<GpuRecord>,
    /// What the IMEX domain watcher saw happen to the job's domain on this
    /// node while it ran, by time (crate::imex_events). Filled when rows
    /// are read (`show`, the per-job export); never written from the row:
    /// the watcher writes each event as it happens.
    #[serde(default)]
    pub imex_events: Vec<ImexEvent>,
}

/// The job's IMEX domain on this node, as the prolog left it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImexOutcome {
    /// The channel slurm-imex handed out; None when Slurm's switch did.
    pub channel: Option<u32>,
    /// How long the domain took to be UP with every node READY.
    pub ready_ms: Option<u64>,
    /// Why the job could not use IMEX here; None when it was ready.
    pub failure: Option<String>,
    /// Whether that failure was blamed on this node (drained) rather than
    /// on the job (failed, node kept).
    pub node_fault: bool,
}

/// How the job used this node's GPUs, over those whose use is known.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageSummary {
    /// Mean of the GPUs' utilization, an idle GPU counting 0 (as jobstats).
    pub gpu_util_pct: Option<f64>,
    pub peak_memory_bytes: Option<u64>,
    pub idle_gpus: Option<u32>,
}

impl JobRow {
    /// The job's use of its GPUs here; `history` computes the same in SQL
    /// (query/history.rs, `usage_columns`).
    pub fn usage_summary(&self) -> UsageSummary {
        let known: Vec<_> = self.gpus.iter().filter_map(|g| g.stats.usage).collect();
        let utils: Vec<f64> = known
            .iter()
            .filter_map(|u| match u.processes {
                0 => Some(0.0),
                _ => u.gpu_util_pct,
            })
            .collect();
        UsageSummary {
            gpu_util_pct: (!utils.is_empty())
                .then(|| utils.iter().sum::<f64>() / utils.len() as f64),
            peak_memory_bytes: self
                .gpus
                .iter()
                .filter_map(|g| g.stats.max_memory_bytes)
                .max(),
            idle_gpus: (!known.is_empty())
                .then(|| known.iter().filter(|u| u.processes == 0).count() as u32),
        }
    }

    /// Whether the job's IMEX domain was interrupted here while it ran
    /// (an event of a kind that interrupts: the daemon died or was left
    /// down, the domain left UP, a member was lost); `history` computes the
    /// same in SQL (query/history.rs).
    pub fn imex_interrupted(&self) -> bool {
        self.imex_events.iter().any(|e| e.kind.interrupts())
    }

    /// The worse of the two phases.
    pub fn verdict(&self) -> Verdict {
        [&self.prolog, &self.epilog]
            .iter()
            .filter_map(|p| p.as_ref().map(|p| p.verdict))
            .max()
            .unwrap_or(Verdict::Pass)
    }
}

fn joined(r: &[String]) -> Option<String> {
    (!r.is_empty()).then(|| r.join("\n"))
}

fn i64_of(v: Option<u64>) -> Option<i64> {
    v.map(|x| x.min(i64::MAX as u64) as i64)
}

impl JobDb {
    /// Insert (or replace, for a rerun epilog) one job's record atomically.
    pub fn record_job(&mut self, row: &JobRow) -> Result<()> {
        self.record_jobs(std::slice::from_ref(row))
    }

    /// Insert many jobs in one transaction (all or none).
    pub fn record_jobs(&mut self, rows: &[JobRow]) -> Result<()> {
        let path = self.path().to_path_buf();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| err(&path, "cannot start a write", e))?;
        for row in rows {
            insert_job(&tx, row, &path)?;
        }
        tx.commit().map_err(|e| err(&path, "commit failed", e))
    }
    /// Delete jobs that ended before `cutoff_ts` (or, never ended, started
    /// before it), and IMEX events from
    /// before it, at most once per `min_interval_s`. Returns how many job
    /// rows went.
    pub fn prune(&mut self, cutoff_ts: i64, now_ts: i64, min_interval_s: i64) -> Result<usize> {
        let path = self.path().to_path_buf();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| err(&path, "cannot start pruning", e))?;
        let last: Option<i64> = tx
            .query_row("SELECT value FROM meta WHERE key = 'last_prune'", [], |r| {
                r.get::<_, String>(0)
            })
            .ok()
            .and_then(|v| v.parse().ok());
        if last.is_some_and(|l| (0..min_interval_s).contains(&now_ts.saturating_sub(l))) {
            return Ok(0);
        }
        let n = tx
            .execute(PRUNE_JOBS, [cutoff_ts])
            .map_err(|e| err(&path, "prune failed", e))?;
        crate::imex_events::prune(&tx, cutoff_ts)
            .map_err(|e| err(&path, "pruning IMEX events failed", e))?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('last_prune', ?1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [now_ts.to_string()],
        )
        .map_err(|e| err(&path, "prune bookkeeping failed", e))?;
        tx.commit()
            .map_err(|e| err(&path, "prune commit failed", e))?;
        Ok(n)
    }
}

/// The jobs the daily prune deletes: ended before `?1`, or never ended and
/// started before it. Each side on its own index (jobs_end, jobs_start):
/// `COALESCE(end_ts, start_ts) < ?1` read every job row of the history.
pub(crate) const PRUNE_JOBS: &str =
    "DELETE FROM jobs WHERE end_ts < ?1 OR (end_ts IS NULL AND start_ts < ?1)";

fn insert_job(tx: &rusqlite::Transaction, row: &JobRow, path: &std::path::Path) -> Result<()> {
    let w = |e: rusqlite::Error| err(path, "write failed", e);
    let (job_row, existed) = replace_job_row(tx, row).map_err(w)?;
    let ts = row.end_ts.unwrap_or(row.start_ts);
    for gpu in &row.gpus {
        let xid_classes = XidClasses::of(&gpu.stats);
        insert_job_gpu(tx, job_row, gpu, &xid_classes).map_err(w)?;
        insert_gpu_events(tx, job_row, &row.node, ts, &gpu.stats).map_err(w)?;
        // An epilog that runs twice for the same job start replaces its
        // row; the totals are only counted the first time.
        if !existed {
            add_gpu_totals(tx, row, gpu, &xid_classes).map_err(w)?;
            add_board_counters(tx, &board_key(&gpu.stats), &gpu.stats, gpu.verdict).map_err(w)?;
            add_board_usage(tx, &board_key(&gpu.stats), row, &gpu.stats).map_err(w)?;
        }
    }
    Ok(())
}

/// The job's XIDs by class, as the totals count them.
struct XidClasses {
    all: i64,
    drain_class: i64,
    restart_app: i64,
}

impl XidClasses {
    fn of(s: &GpuJobStats) -> XidClasses {
        let count = |keep: &dyn Fn(&slurm_imex_gpu::xid::XidEvent) -> bool| {
            s.xids.iter().filter(|x| keep(x)).count() as i64
        };
        XidClasses {
            all: s.xids.len() as i64,
            drain_class: count(&|x| slurm_imex_gpu::xid::is_drain_class(x.xid)),
            restart_app: count(&|x| x.bucket == Bucket::RestartApp),
        }
    }
}

/// Insert the job's row on this node, replacing the one an earlier run of
/// the same epilog wrote. Returns the new row id and whether one existed.
fn replace_job_row(tx: &rusqlite::Transaction, row: &JobRow) -> rusqlite::Result<(i64, bool)> {
    let key = params![row.job_id, row.node, row.start_ts];
    let existed = tx.query_row(
        "SELECT COUNT(*) FROM jobs WHERE job_id = ?1 AND node = ?2 AND start_ts = ?3",
        key,
        |r| r.get::<_, i64>(0),
    )? > 0;
    tx.execute(
        "DELETE FROM jobs WHERE job_id = ?1 AND node = ?2 AND start_ts = ?3",
        key,
    )?;
    let phase = |p: &Option<HookVerdict>| {
        (
            p.as_ref().map(|p| p.verdict.as_str()),
            p.as_ref().and_then(|p| joined(&p.reasons)),
            p.as_ref().map(|p| p.ms as i64),
        )
    };
    let (pv, pr, pm) = phase(&row.prolog);
    let (ev, er, em) = phase(&row.epilog);
    let imex = row.imex_outcome.as_ref();
    tx.execute(
        "INSERT INTO jobs (job_id, node, user, uid, start_ts, end_ts, imex, verdict,
            prolog_verdict, prolog_reasons, prolog_ms, epilog_verdict, epilog_reasons, epilog_ms,
            imex_domain, imex_rack_source, imex_channel, imex_ready_ms, imex_failure, imex_node_fault)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
        params![
            row.job_id,
            row.node,
            row.user,
            row.uid,
            row.start_ts,
            row.end_ts,
            row.imex,
            row.verdict().as_str(),
            pv,
            pr,
            pm,
            ev,
            er,
            em,
            row.imex_domain,
            row.imex_rack_source,
            imex.and_then(|o| o.channel),
            i64_of(imex.and_then(|o| o.ready_ms)),
            imex.and_then(|o| o.failure.as_deref()),
            imex.map(|o| o.node_fault)
        ],
    )?;
    Ok((tx.last_insert_rowid(), existed))
}

/// One GPU's stats for the job.
fn insert_job_gpu(
    tx: &rusqlite::Transaction,
    job_row: i64,
    g: &GpuRecord,
    xids: &XidClasses,
) -> rusqlite::Result<()> {
    let s = &g.stats;
    tx.execute(
        "INSERT INTO job_gpus (job_row, gpu_index, uuid, serial, pci, name, energy_mj, energy_reset,
            ecc_sbe, ecc_dbe, retired_pages, remapped_correctable, remapped_uncorrectable,
            remap_pending_end, remap_failure_end, pcie_replays, throttle_ns, nvlink_errors,
            max_memory_bytes, xid_count, xids_drain_class, xids_restart_app, verdict, reasons,
            usage_processes, gpu_util_pct, mem_util_pct, gpu_busy_ms, gpu_process_ms,
            recovery_action_end)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24,
                 ?25, ?26, ?27, ?28, ?29, ?30)",
        params![
            job_row, s.index, s.uuid, s.serial, s.pci, s.name,
            i64_of(s.energy_mj.value), s.energy_mj.reset,
            i64_of(s.ecc_sbe.value), i64_of(s.ecc_dbe.value), i64_of(s.retired_pages.value),
            i64_of(s.remapped_correctable.value), i64_of(s.remapped_uncorrectable.value),
            s.remap_pending_end, s.remap_failure_end, i64_of(s.pcie_replays.value),
            serde_json::to_string(&s.throttle_ns).ok(),
            serde_json::to_string(&s.nvlink_errors).ok(),
            i64_of(s.max_memory_bytes), xids.all,
            xids.drain_class, xids.restart_app,
            g.verdict.as_str(), joined(&g.reasons),
            s.usage.map(|u| u.processes), s.usage.and_then(|u| u.gpu_util_pct),
            s.usage.and_then(|u| u.mem_util_pct), i64_of(s.usage.map(|u| u.busy_ms)),
            i64_of(s.usage.map(|u| u.process_ms)),
            i64_of(s.recovery_action_end)
        ],
    )?;
    Ok(())
}

/// The GPU's XID events and the job's processes on it.
fn insert_gpu_events(
    tx: &rusqlite::Transaction,
    job_row: i64,
    node: &str,
    ts: i64,
    s: &GpuJobStats,
) -> rusqlite::Result<()> {
    for x in &s.xids {
        tx.execute(
            "INSERT INTO xid_events (job_row, node, ts, seq, pci, serial, xid, bucket, drain_class, pid, process, message)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![job_row, node, ts, x.seq as i64, x.pci, s.serial, x.xid, x.bucket.as_str(),
                    slurm_imex_gpu::xid::is_drain_class(x.xid), x.pid, x.process, x.message],
        )?;
    }
    for p in &s.processes {
        tx.execute(
            "INSERT INTO processes (job_row, serial, pid, gpu_util, mem_util, max_memory_bytes, time_ms, start_us, running)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![job_row, s.serial, p.pid, p.gpu_util, p.mem_util, i64_of(p.max_memory_bytes),
                    i64_of(Some(p.time_ms)), i64_of(Some(p.start_us)), p.running],
        )?;
    }
    Ok(())
}

/// The same sums go to the board's lifetime totals and to its day.
fn add_gpu_totals(
    tx: &rusqlite::Transaction,
    row: &JobRow,
    g: &GpuRecord,
    xids: &XidClasses,
) -> rusqlite::Result<()> {
    const ADD: &str = "jobs = jobs + 1, uuid = excluded.uuid, last_node = excluded.last_node,
        last_seen = MAX(last_seen, excluded.last_seen),
        drains = drains + excluded.drains, warns = warns + excluded.warns,
        energy_mj = energy_mj + excluded.energy_mj, xids = xids + excluded.xids,
        xids_drain_class = xids_drain_class + excluded.xids_drain_class,
        xids_restart_app = xids_restart_app + excluded.xids_restart_app";
    let s = &g.stats;
    let ts = row.end_ts.unwrap_or(row.start_ts);
    let key = board_key(s);
    let drains = (g.verdict == Verdict::Drain) as i64;
    let warns = (g.verdict == Verdict::Warn) as i64;
    let energy = i64_of(s.energy_mj.value).unwrap_or(0);
    let other = xids.all - xids.drain_class - xids.restart_app;
    tx.execute(
        &format!(
            "INSERT INTO gpu_totals (serial, uuid, last_node, last_seen, jobs, drains, warns, energy_mj,
                xids, xids_drain_class, xids_restart_app, xids_other)
             VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT (serial) DO UPDATE SET {ADD}, xids_other = xids_other + excluded.xids_other"
        ),
        params![key, s.uuid, row.node, ts, drains, warns, energy, xids.all, xids.drain_class,
                xids.restart_app, other],
    )?;
    tx.execute(
        &format!(
            "INSERT INTO gpu_daily (serial, day, uuid, last_node, last_seen, jobs, drains, warns, energy_mj,
                xids, xids_drain_class, xids_restart_app)
             VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT (serial, day) DO UPDATE SET {ADD}"
        ),
        params![key, row.start_ts.div_euclid(86_400), s.uuid, row.node, ts, drains, warns, energy,
                xids.all, xids.drain_class, xids.restart_app],
    )?;
    Ok(())
}

/// The v2 lifetime counters of one board for one job (see metrics.rs).
fn add_board_counters(
    tx: &rusqlite::Transaction,
    key: &str,
    s: &GpuJobStats,
    verdict: Verdict,
) -> rusqlite::Result<()> {
    let delta = |d: &slurm_imex_gpu::stats::Delta| i64_of(d.value).unwrap_or(0);
    tx.execute(
        "UPDATE gpu_totals SET pci = ?2,
            remapped_rows = remapped_rows + ?3, ecc_dbe = ecc_dbe + ?4,
            retired_pages = retired_pages + ?5, energy_resets = energy_resets + ?6,
            last_verdict = ?7, remap_pending = ?8, recovery_action = ?9
         WHERE serial = ?1",
        params![
            key,
            s.pci,
            delta(&s.remapped_correctable).saturating_add(delta(&s.remapped_uncorrectable)),
            delta(&s.ecc_dbe),
            delta(&s.retired_pages),
            s.energy_mj.reset as i64,
            verdict.as_str(),
            s.remap_pending_end.unwrap_or(false) as i64,
            i64_of(s.recovery_action_end).unwrap_or(0)
        ],
    )?;
    let mut add = tx.prepare_cached(
        "INSERT INTO gpu_counters (serial, kind, key, value) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (serial, kind, key) DO UPDATE SET value = value + excluded.value",
    )?;
    for x in &s.xids {
        add.execute(params![
            key,
            "xid",
            x.bucket.as_str().to_ascii_lowercase(),
            1
        ])?;
    }
    for (reason, ns) in &s.throttle_ns {
        add.execute(params![
            key,
            "throttle_ns",
            reason,
            i64::try_from(*ns).unwrap_or(i64::MAX)
        ])?;
    }
    Ok(())
}

/// How jobs used the board, for the metrics (kind 'usage'): time a kernel
/// of theirs ran (`busy_ms`) over the time they held it (`held_ms`), the
/// jobs whose use is known, and those that never used it. Only jobs whose
/// use is known count, so busy / held is a true utilization.
fn add_board_usage(
    tx: &rusqlite::Transaction,
    key: &str,
    row: &JobRow,
    s: &GpuJobStats,
) -> rusqlite::Result<()> {
    let Some(usage) = s.usage else {
        return Ok(());
    };
    let held_s = row
        .end_ts
        .unwrap_or(row.start_ts)
        .saturating_sub(row.start_ts)
        .max(0);
    let mut add = tx.prepare_cached(
        "INSERT INTO gpu_counters (serial, kind, key, value) VALUES (?1, 'usage', ?2, ?3)
         ON CONFLICT (serial, kind, key) DO UPDATE SET value = value + excluded.value",
    )?;
    for (name, value) in [
        ("busy_ms", i64_of(Some(usage.busy_ms)).unwrap_or(0)),
        ("held_ms", held_s.saturating_mul(1000)),
        ("accounted_jobs", 1),
        ("idle_jobs", (usage.processes == 0) as i64),
    ] {
        add.execute(params![key, name, value])?;
    }
    Ok(())
}

/// A board is keyed by serial; GPUs without one (some SKUs) by UUID.
pub fn board_key(s: &GpuJobStats) -> String {
    if s.serial.is_empty() {
        s.uuid.clone()
    } else {
        s.serial.clone()
    }
}
