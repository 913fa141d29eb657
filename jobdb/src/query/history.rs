//! `history`: job rows filtered like sacct, newest first, with the job's
//! totals or, with `--gpu`, that board's numbers, and whether its IMEX
//! domain was interrupted there (crate::imex_events).

use super::node_set;
use crate::JobDb;
use rusqlite::types::Value;
use serde::Serialize;
use slurm_imex_core::error::Result;
use slurm_imex_gpu::health::Verdict;

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
    /// The job's IMEX domain was interrupted here while it ran: the IMEX
    /// domain watcher recorded an event of a kind that interrupts
    /// (daemon-died, daemon-left-down, domain-degraded, member-lost).
    pub imex_interrupted: bool,
    pub gpus: i64,
    pub energy_mj: Option<i64>,
    pub xids: i64,
    /// Mean GPU utilization over the job's GPUs whose use is known (an
    /// idle GPU counts 0), %; None when accounting knew none of them.
    pub gpu_util_pct: Option<f64>,
    /// Peak memory of the job's processes on any one GPU, bytes.
    pub peak_memory_bytes: Option<i64>,
    /// GPUs the job held but no process of it used (known use only).
    pub idle_gpus: Option<i64>,
    pub verdict: String,
    pub prolog_verdict: Option<String>,
    pub epilog_verdict: Option<String>,
    /// First reason of the worse phase.
    pub reason: Option<String>,
}

/// The WHERE clause and its numbered arguments.
#[derive(Default)]
struct Conditions {
    clauses: Vec<String>,
    args: Vec<Value>,
}

impl Conditions {
    /// Add a clause whose one `?` takes `value`.
    fn add(&mut self, clause: &str, value: Value) {
        self.args.push(value);
        let n = self.args.len();
        self.clauses.push(clause.replace('?', &format!("?{n}")));
    }

    fn of(f: &HistoryFilter) -> Result<Conditions> {
        let mut c = Conditions::default();
        if let Some(n) = &f.node {
            c.add("j.node IN (SELECT value FROM json_each(?))", node_set(n)?);
        }
        if let Some(u) = &f.user {
            c.add("j.user = ?", Value::Text(u.clone()));
        }
        if let Some(id) = f.job_id {
            c.add("j.job_id = ?", Value::Integer(id.into()));
        }
        if let Some(s) = f.since {
            c.add("j.start_ts >= ?", Value::Integer(s));
        }
        if let Some(u) = f.until {
            c.add("j.start_ts <= ?", Value::Integer(u));
        }
        if let Some(v) = f.verdict {
            c.add("j.verdict = ?", Value::Text(v.as_str().into()));
        }
        Ok(c)
    }

    fn where_clause(&self) -> String {
        if self.clauses.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", self.clauses.join(" AND "))
        }
    }
}

impl JobDb {
    pub fn history(&self, f: &HistoryFilter) -> Result<Vec<HistoryRow>> {
        let mut c = Conditions::of(f)?;
        let gpu_join = match &f.gpu {
            Some(g) => {
                c.args.push(Value::Text(g.clone()));
                let n = c.args.len();
                format!(
                    "JOIN job_gpus g ON g.job_row = j.id AND (g.serial = ?{n} OR g.uuid = ?{n})"
                )
            }
            None => String::new(),
        };
        let sql = format!(
            "SELECT j.job_id AS job_id, j.node AS node, j.user AS user, j.start_ts AS start_ts,
                    j.end_ts AS end_ts, j.imex AS imex, {}, {},
                    j.prolog_verdict AS prolog_verdict, j.epilog_verdict AS epilog_verdict,
                    CASE WHEN j.epilog_verdict = j.verdict THEN j.epilog_reasons ELSE j.prolog_reasons END
                        AS reasons,
                    EXISTS (SELECT 1 FROM imex_events e WHERE e.job_id = j.job_id AND e.node = j.node
                            AND e.kind IN ({})) AS imex_interrupted
             FROM jobs j {gpu_join}
             {}
             ORDER BY j.start_ts DESC, j.id DESC LIMIT {}",
            figure_columns(f.gpu.is_some()),
            usage_columns(f.gpu.is_some()),
            crate::imex_events::interrupting_kinds_sql(),
            c.where_clause(),
            f.limit.max(1)
        );
        self.rows("history query failed", &sql, &c.args, history_row)
    }
}

/// GPUs, energy, XIDs and verdict: with `--gpu` that board's, otherwise
/// the job's totals (named as `history_row` reads them).
fn figure_columns(per_gpu: bool) -> &'static str {
    if per_gpu {
        "1 AS gpus, g.energy_mj AS energy_mj, g.xid_count AS xids, g.verdict AS verdict"
    } else {
        "(SELECT COUNT(*) FROM job_gpus x WHERE x.job_row = j.id) AS gpus,
         (SELECT SUM(x.energy_mj) FROM job_gpus x WHERE x.job_row = j.id) AS energy_mj,
         (SELECT COALESCE(SUM(x.xid_count), 0) FROM job_gpus x WHERE x.job_row = j.id) AS xids,
         j.verdict AS verdict"
    }
}

/// Utilization, peak memory and idle GPUs: with `--gpu` that board's,
/// otherwise over the job's GPUs (schema v5; NULL for older rows); named
/// as `history_row` reads them.
fn usage_columns(per_gpu: bool) -> &'static str {
    if per_gpu {
        "CASE WHEN g.usage_processes = 0 THEN 0 ELSE g.gpu_util_pct END AS gpu_util_pct,
         g.max_memory_bytes AS peak_memory_bytes,
         CASE WHEN g.usage_processes IS NULL THEN NULL ELSE g.usage_processes = 0 END AS idle_gpus"
    } else {
        "(SELECT AVG(CASE WHEN x.usage_processes = 0 THEN 0 ELSE x.gpu_util_pct END)
            FROM job_gpus x WHERE x.job_row = j.id AND x.usage_processes IS NOT NULL) AS gpu_util_pct,
         (SELECT MAX(x.max_memory_bytes) FROM job_gpus x WHERE x.job_row = j.id) AS peak_memory_bytes,
         (SELECT SUM(x.usage_processes = 0) FROM job_gpus x
            WHERE x.job_row = j.id AND x.usage_processes IS NOT NULL) AS idle_gpus"
    }
}

fn history_row(r: &rusqlite::Row) -> rusqlite::Result<HistoryRow> {
    let reasons: Option<String> = r.get("reasons")?;
    Ok(HistoryRow {
        job_id: r.get("job_id")?,
        node: r.get("node")?,
        user: r.get("user")?,
        start_ts: r.get("start_ts")?,
        end_ts: r.get("end_ts")?,
        imex: r.get("imex")?,
        imex_interrupted: r.get("imex_interrupted")?,
        gpus: r.get("gpus")?,
        energy_mj: r.get("energy_mj")?,
        xids: r.get("xids")?,
        verdict: r.get("verdict")?,
        gpu_util_pct: r.get("gpu_util_pct")?,
        peak_memory_bytes: r.get("peak_memory_bytes")?,
        idle_gpus: r.get("idle_gpus")?,
        prolog_verdict: r.get("prolog_verdict")?,
        epilog_verdict: r.get("epilog_verdict")?,
        reason: reasons.and_then(|s| s.lines().next().map(str::to_string)),
    })
}
