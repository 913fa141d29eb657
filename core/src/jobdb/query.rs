//! Reading the history back: job rows filtered like sacct (`history`),
//! everything about one job (`show`), and per-board totals ranked to surface
//! flaky GPUs (`gpus`).

use super::write::{GpuRecord, JobRow, PhaseOutcome};
use super::{err, JobDb};
use crate::error::Result;
use crate::health::Verdict;
use crate::stats::{Delta, GpuJobStats};
use crate::xid::XidEvent;
use rusqlite::types::Value;
use serde::Serialize;

#[derive(Debug, Clone, Default)]
pub struct HistoryFilter {
    pub node: Option<String>,
    /// Board serial (or UUID).
    pub gpu: Option<String>,
    pub user: Option<String>,
    pub job_id: Option<u32>,
    /// Unix seconds, inclusive.
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub verdict: Option<Verdict>,
    pub limit: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryRow {
    pub job_id: u32,
    pub node: String,
    pub user: Option<String>,
    pub start_ts: i64,
    pub end_ts: Option<i64>,
    pub imex: bool,
    pub gpus: i64,
    pub energy_mj: Option<i64>,
    pub xids: i64,
    pub verdict: String,
    pub prolog_verdict: Option<String>,
    pub epilog_verdict: Option<String>,
    /// First reason of the worse phase.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuTotals {
    pub serial: String,
    pub uuid: String,
    pub last_node: String,
    pub last_seen: i64,
    pub jobs: i64,
    pub drains: i64,
    pub warns: i64,
    pub energy_mj: i64,
    pub xids: i64,
    pub xids_drain_class: i64,
    pub xids_restart_app: i64,
    pub xids_other: i64,
}

/// A `--node` value as sacct -N takes it: a Slurm hostlist
/// (`gb-r1-[01-18]`), as a JSON array for `json_each`.
fn node_set(expr: &str) -> Result<Value> {
    let nodes = crate::hostlist::expand(expr, crate::config::MAX_NODES_LIMIT as usize)
        .map_err(|e| e.context("--node"))?;
    Ok(Value::Text(
        serde_json::to_string(&nodes).unwrap_or_default(),
    ))
}

impl JobDb {
    pub fn history(&self, f: &HistoryFilter) -> Result<Vec<HistoryRow>> {
        let mut wheres: Vec<String> = Vec::new();
        let mut args: Vec<Value> = Vec::new();
        let mut add = |clause: &str, v: Value| {
            args.push(v);
            wheres.push(clause.replace('?', &format!("?{}", args.len())));
        };
        if let Some(n) = &f.node {
            add("j.node IN (SELECT value FROM json_each(?))", node_set(n)?);
        }
        if let Some(u) = &f.user {
            add("j.user = ?", Value::Text(u.clone()));
        }
        if let Some(id) = f.job_id {
            add("j.job_id = ?", Value::Integer(id as i64));
        }
        if let Some(s) = f.since {
            add("j.start_ts >= ?", Value::Integer(s));
        }
        if let Some(u) = f.until {
            add("j.start_ts <= ?", Value::Integer(u));
        }
        if let Some(v) = f.verdict {
            add("j.verdict = ?", Value::Text(v.as_str().into()));
        }
        let gpu_join = match &f.gpu {
            Some(g) => {
                args.push(Value::Text(g.clone()));
                let n = args.len();
                format!(
                    "JOIN job_gpus g ON g.job_row = j.id AND (g.serial = ?{n} OR g.uuid = ?{n})"
                )
            }
            None => String::new(),
        };
        // With --gpu, the numbers are that board's; otherwise the job's totals.
        let per_gpu = f.gpu.is_some();
        let (gpus, energy, xids) = if per_gpu {
            ("1", "g.energy_mj", "g.xid_count")
        } else {
            (
                "(SELECT COUNT(*) FROM job_gpus x WHERE x.job_row = j.id)",
                "(SELECT SUM(x.energy_mj) FROM job_gpus x WHERE x.job_row = j.id)",
                "(SELECT COALESCE(SUM(x.xid_count), 0) FROM job_gpus x WHERE x.job_row = j.id)",
            )
        };
        let verdict = if per_gpu { "g.verdict" } else { "j.verdict" };
        let sql = format!(
            "SELECT j.job_id, j.node, j.user, j.start_ts, j.end_ts, j.imex, {gpus}, {energy}, {xids},
                    {verdict}, j.prolog_verdict, j.epilog_verdict,
                    CASE WHEN j.epilog_verdict = j.verdict THEN j.epilog_reasons ELSE j.prolog_reasons END
             FROM jobs j {gpu_join}
             {}
             ORDER BY j.start_ts DESC, j.id DESC LIMIT {}",
            if wheres.is_empty() { String::new() } else { format!("WHERE {}", wheres.join(" AND ")) },
            f.limit.max(1)
        );
        let q = |e: rusqlite::Error| err(self.path(), "history query failed", e);
        let mut stmt = self.conn.prepare(&sql).map_err(q)?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args.iter()), |r| {
                let reasons: Option<String> = r.get(12)?;
                Ok(HistoryRow {
                    job_id: r.get(0)?,
                    node: r.get(1)?,
                    user: r.get(2)?,
                    start_ts: r.get(3)?,
                    end_ts: r.get(4)?,
                    imex: r.get(5)?,
                    gpus: r.get(6)?,
                    energy_mj: r.get(7)?,
                    xids: r.get(8)?,
                    verdict: r.get(9)?,
                    prolog_verdict: r.get(10)?,
                    epilog_verdict: r.get(11)?,
                    reason: reasons.and_then(|s| s.lines().next().map(str::to_string)),
                })
            })
            .map_err(q)?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(q)
    }

    /// Every record of a job (one per node, and per start if requeued).
    pub fn show(&self, job_id: u32) -> Result<Vec<JobRow>> {
        let q = |e: rusqlite::Error| err(self.path(), "show query failed", e);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, job_id, node, user, uid, start_ts, end_ts, imex, prolog_verdict, prolog_reasons,
                        prolog_ms, epilog_verdict, epilog_reasons, epilog_ms
                 FROM jobs WHERE job_id = ?1 ORDER BY start_ts, node",
            )
            .map_err(q)?;
        let phase = |v: Option<String>, r: Option<String>, ms: Option<i64>| {
            v.and_then(|v| Verdict::parse(&v))
                .map(|verdict| PhaseOutcome {
                    verdict,
                    reasons: r
                        .map(|r| r.lines().map(str::to_string).collect())
                        .unwrap_or_default(),
                    ms: ms.unwrap_or(0) as u64,
                })
        };
        let jobs: Vec<(i64, JobRow)> = stmt
            .query_map([job_id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    JobRow {
                        job_id: r.get(1)?,
                        node: r.get(2)?,
                        user: r.get(3)?,
                        uid: r.get(4)?,
                        start_ts: r.get(5)?,
                        end_ts: r.get(6)?,
                        imex: r.get(7)?,
                        prolog: phase(r.get(8)?, r.get(9)?, r.get(10)?),
                        epilog: phase(r.get(11)?, r.get(12)?, r.get(13)?),
                        gpus: Vec::new(),
                    },
                ))
            })
            .map_err(q)?
            .collect::<std::result::Result<_, _>>()
            .map_err(q)?;
        let mut out = Vec::new();
        for (row_id, mut job) in jobs {
            job.gpus = self.gpus_of(row_id)?;
            out.push(job);
        }
        Ok(out)
    }

    fn gpus_of(&self, job_row: i64) -> Result<Vec<GpuRecord>> {
        let q = |e: rusqlite::Error| err(self.path(), "show query failed", e);
        let delta = |v: Option<i64>| Delta {
            value: v.map(|x| x as u64),
            reset: false,
        };
        let mut stmt = self
            .conn
            .prepare(
                "SELECT gpu_index, uuid, serial, pci, name, energy_mj, energy_reset, ecc_sbe, ecc_dbe, retired_pages,
                        remapped_correctable, remapped_uncorrectable, remap_pending_end, remap_failure_end,
                        pcie_replays, throttle_ns, nvlink_errors, max_memory_bytes, verdict, reasons
                 FROM job_gpus WHERE job_row = ?1 ORDER BY gpu_index",
            )
            .map_err(q)?;
        let mut gpus: Vec<GpuRecord> = stmt
            .query_map([job_row], |r| {
                let json = |i: usize| -> rusqlite::Result<std::collections::BTreeMap<String, u64>> {
                    Ok(r.get::<_, Option<String>>(i)?
                        .and_then(|s| serde_json::from_str(&s).ok())
                        .unwrap_or_default())
                };
                Ok(GpuRecord {
                    stats: GpuJobStats {
                        index: r.get(0)?,
                        uuid: r.get(1)?,
                        serial: r.get(2)?,
                        pci: r.get(3)?,
                        name: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
                        energy_mj: Delta {
                            value: r.get::<_, Option<i64>>(5)?.map(|x| x as u64),
                            reset: r.get(6)?,
                        },
                        ecc_sbe: delta(r.get(7)?),
                        ecc_dbe: delta(r.get(8)?),
                        retired_pages: delta(r.get(9)?),
                        remapped_correctable: delta(r.get(10)?),
                        remapped_uncorrectable: delta(r.get(11)?),
                        remap_pending_end: r.get(12)?,
                        remap_failure_end: r.get(13)?,
                        pcie_replays: delta(r.get(14)?),
                        throttle_ns: json(15)?,
                        nvlink_errors: json(16)?,
                        max_memory_bytes: r.get::<_, Option<i64>>(17)?.map(|x| x as u64),
                        processes: Vec::new(),
                        xids: Vec::new(),
                    },
                    verdict: Verdict::parse(&r.get::<_, String>(18)?).unwrap_or(Verdict::Pass),
                    reasons: r
                        .get::<_, Option<String>>(19)?
                        .map(|s| s.lines().map(str::to_string).collect())
                        .unwrap_or_default(),
                })
            })
            .map_err(q)?
            .collect::<std::result::Result<_, _>>()
            .map_err(q)?;
        let mut xs = self
            .conn
            .prepare("SELECT seq, pci, xid, pid, process, message FROM xid_events WHERE job_row = ?1 ORDER BY seq")
            .map_err(q)?;
        let xids: Vec<XidEvent> = xs
            .query_map([job_row], |r| {
                let xid: u32 = r.get(2)?;
                Ok(XidEvent {
                    seq: r.get::<_, i64>(0)? as u64,
                    pci: r.get(1)?,
                    xid,
                    pid: r.get(3)?,
                    process: r.get(4)?,
                    message: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
                    bucket: crate::xid::classify(xid),
                })
            })
            .map_err(q)?
            .collect::<std::result::Result<_, _>>()
            .map_err(q)?;
        let mut ps = self
            .conn
            .prepare("SELECT serial, pid, gpu_util, mem_util, max_memory_bytes, time_ms FROM processes WHERE job_row = ?1 ORDER BY pid")
            .map_err(q)?;
        let procs: Vec<(String, crate::gpu::snapshot::ProcessAccounting)> = ps
            .query_map([job_row], |r| {
                Ok((
                    r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                    crate::gpu::snapshot::ProcessAccounting {
                        pid: r.get(1)?,
                        gpu_util: r.get(2)?,
                        mem_util: r.get(3)?,
                        max_memory_bytes: r.get::<_, Option<i64>>(4)?.map(|x| x as u64),
                        time_ms: r.get::<_, Option<i64>>(5)?.unwrap_or(0) as u64,
                    },
                ))
            })
            .map_err(q)?
            .collect::<std::result::Result<_, _>>()
            .map_err(q)?;
        for g in &mut gpus {
            g.stats.xids = xids
                .iter()
                .filter(|x| x.pci == g.stats.pci)
                .cloned()
                .collect();
            g.stats.processes = procs
                .iter()
                .filter(|(s, _)| *s == g.stats.serial)
                .map(|(_, p)| *p)
                .collect();
        }
        Ok(gpus)
    }

    /// Per-board totals, worst first (drains, then drain-class XIDs, then
    /// all XIDs, then warnings). Lifetime totals unless `since` is given:
    /// then whole UTC days come from the daily sums and the partial first
    /// day from the job rows, so the window is exact and the query cheap.
    pub fn gpu_totals(
        &self,
        since: Option<i64>,
        node: Option<&str>,
        limit: usize,
    ) -> Result<Vec<GpuTotals>> {
        let q = |e: rusqlite::Error| err(self.path(), "gpus query failed", e);
        const COLS: &str = "serial, uuid, last_node, last_seen, jobs, drains, warns, energy_mj, xids, xids_drain_class, xids_restart_app";
        let read = |r: &rusqlite::Row| -> rusqlite::Result<GpuTotals> {
            let xids: i64 = r.get(8)?;
            let (dc, ra): (i64, i64) = (r.get(9)?, r.get(10)?);
            Ok(GpuTotals {
                serial: r.get(0)?,
                uuid: r.get(1)?,
                last_node: r.get(2)?,
                last_seen: r.get(3)?,
                jobs: r.get(4)?,
                drains: r.get(5)?,
                warns: r.get(6)?,
                energy_mj: r.get(7)?,
                xids,
                xids_drain_class: dc,
                xids_restart_app: ra,
                xids_other: (xids - dc - ra).max(0),
            })
        };
        let run = |sql: &str, args: Vec<Value>| -> Result<Vec<GpuTotals>> {
            let mut stmt = self.conn.prepare(sql).map_err(q)?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args.iter()), read)
                .map_err(q)?;
            rows.collect::<std::result::Result<Vec<_>, _>>().map_err(q)
        };
        let raw = |from: i64, to: Option<i64>| -> Result<Vec<GpuTotals>> {
            let mut args = vec![Value::Integer(from)];
            let mut clause = String::new();
            if let Some(t) = to {
                args.push(Value::Integer(t));
                clause.push_str(&format!(" AND j.start_ts < ?{}", args.len()));
            }
            if let Some(n) = node {
                args.push(node_set(n)?);
                clause.push_str(&format!(
                    " AND j.node IN (SELECT value FROM json_each(?{}))",
                    args.len()
                ));
            }
            run(
                &format!(
                    "SELECT CASE WHEN g.serial = '' THEN g.uuid ELSE g.serial END, MAX(g.uuid), MAX(j.node),
                            MAX(COALESCE(j.end_ts, j.start_ts)), COUNT(*), SUM(g.verdict = 'DRAIN'),
                            SUM(g.verdict = 'WARN'), COALESCE(SUM(g.energy_mj), 0), SUM(g.xid_count),
                            SUM(g.xids_drain_class), SUM(g.xids_restart_app)
                     FROM job_gpus g JOIN jobs j ON j.id = g.job_row
                     WHERE j.start_ts >= ?1{clause} GROUP BY 1"
                ),
                args,
            )
        };
        let mut rows = match (since, node) {
            (None, None) => run(&format!("SELECT {COLS} FROM gpu_totals"), vec![])?,
            (None, Some(n)) => run(
                &format!(
                    "SELECT {COLS} FROM gpu_totals WHERE last_node IN (SELECT value FROM json_each(?1))"
                ),
                vec![node_set(n)?],
            )?,
            // Per node: the job rows of one node are few enough to sum directly.
            (Some(s), Some(_)) => raw(s, None)?,
            (Some(s), None) => {
                let first_full_day = (s + 86_399).div_euclid(86_400);
                let mut sums: std::collections::BTreeMap<String, GpuTotals> =
                    std::collections::BTreeMap::new();
                let days = run(
                    &format!("SELECT {COLS} FROM gpu_daily WHERE day >= ?1"),
                    vec![Value::Integer(first_full_day)],
                )?;
                for t in days
                    .into_iter()
                    .chain(raw(s, Some(first_full_day * 86_400))?)
                {
                    match sums.get_mut(&t.serial) {
                        None => {
                            sums.insert(t.serial.clone(), t);
                        }
                        Some(acc) => {
                            if t.last_seen > acc.last_seen {
                                acc.last_seen = t.last_seen;
                                acc.last_node = t.last_node;
                                acc.uuid = t.uuid;
                            }
                            acc.jobs += t.jobs;
                            acc.drains += t.drains;
                            acc.warns += t.warns;
                            acc.energy_mj += t.energy_mj;
                            acc.xids += t.xids;
                            acc.xids_drain_class += t.xids_drain_class;
                            acc.xids_restart_app += t.xids_restart_app;
                            acc.xids_other += t.xids_other;
                        }
                    }
                }
                sums.into_values().collect()
            }
        };
        rows.sort_by(|a, b| {
            (b.drains, b.xids_drain_class, b.xids, b.warns)
                .cmp(&(a.drains, a.xids_drain_class, a.xids, a.warns))
                .then_with(|| a.serial.cmp(&b.serial))
        });
        rows.truncate(limit.max(1));
        Ok(rows)
    }
}

impl JobDb {
    /// Every board's lifetime counters, for the Prometheus export: one
    /// query over gpu_totals and one over gpu_counters (a few ms for
    /// thousands of boards).
    pub fn board_counters(&self) -> Result<Vec<crate::metrics::BoardCounters>> {
        use crate::metrics::BoardCounters;
        let q = |e: rusqlite::Error| err(self.path(), "metrics query failed", e);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT serial, uuid, pci, jobs, drains, warns, energy_mj, energy_resets,
                        remapped_rows, ecc_dbe, retired_pages, remap_pending, last_verdict
                 FROM gpu_totals ORDER BY serial",
            )
            .map_err(q)?;
        let mut boards: Vec<BoardCounters> = stmt
            .query_map([], |r| {
                Ok(BoardCounters {
                    serial: r.get(0)?,
                    uuid: r.get(1)?,
                    pci: r.get(2)?,
                    jobs: r.get(3)?,
                    drains: r.get(4)?,
                    warns: r.get(5)?,
                    energy_mj: r.get(6)?,
                    energy_resets: r.get(7)?,
                    remapped_rows: r.get(8)?,
                    ecc_dbe: r.get(9)?,
                    retired_pages: r.get(10)?,
                    remap_pending: r.get::<_, i64>(11)? != 0,
                    last_verdict: r.get(12)?,
                    ..Default::default()
                })
            })
            .map_err(q)?
            .collect::<std::result::Result<_, _>>()
            .map_err(q)?;
        let mut stmt = self
            .conn
            .prepare("SELECT serial, kind, key, value FROM gpu_counters ORDER BY serial")
            .map_err(q)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .map_err(q)?;
        for row in rows {
            let (serial, kind, key, value) = row.map_err(q)?;
            let Ok(i) = boards.binary_search_by(|b| b.serial.as_str().cmp(serial.as_str())) else {
                continue;
            };
            let map = match kind.as_str() {
                "xid" => &mut boards[i].xids,
                "throttle_ns" => &mut boards[i].throttle_ns,
                _ => continue,
            };
            *map.entry(key).or_insert(0) += value;
        }
        Ok(boards)
    }
}
