//! `gpus`: per-board totals, worst first. Lifetime totals come from
//! gpu_totals; a window (`--since`) sums whole UTC days from gpu_daily and
//! the partial first day from the job rows, so it is exact and cheap.

use super::node_set;
use crate::JobDb;
use rusqlite::types::Value;
use serde::Serialize;
use slurm_imex_core::error::Result;
use std::collections::BTreeMap;

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

const FAILED: &str = "gpus query failed";
const COLUMNS: &str = "serial, uuid, last_node, last_seen, jobs, drains, warns, energy_mj, xids, \
                       xids_drain_class, xids_restart_app";
const DAY: i64 = 86_400;

impl GpuTotals {
    /// Add another period of the same board; the latest sighting wins.
    fn absorb(&mut self, t: GpuTotals) {
        if t.last_seen > self.last_seen {
            self.last_seen = t.last_seen;
            self.last_node = t.last_node;
            self.uuid = t.uuid;
        }
        self.jobs += t.jobs;
        self.drains += t.drains;
        self.warns += t.warns;
        self.energy_mj += t.energy_mj;
        self.xids += t.xids;
        self.xids_drain_class += t.xids_drain_class;
        self.xids_restart_app += t.xids_restart_app;
        self.xids_other += t.xids_other;
    }
}

fn totals_from_row(r: &rusqlite::Row) -> rusqlite::Result<GpuTotals> {
    let xids: i64 = r.get("xids")?;
    let (drain_class, restart_app): (i64, i64) =
        (r.get("xids_drain_class")?, r.get("xids_restart_app")?);
    Ok(GpuTotals {
        serial: r.get("serial")?,
        uuid: r.get("uuid")?,
        last_node: r.get("last_node")?,
        last_seen: r.get("last_seen")?,
        jobs: r.get("jobs")?,
        drains: r.get("drains")?,
        warns: r.get("warns")?,
        energy_mj: r.get("energy_mj")?,
        xids,
        xids_drain_class: drain_class,
        xids_restart_app: restart_app,
        xids_other: (xids - drain_class - restart_app).max(0),
    })
}

impl JobDb {
    /// Per-board totals, worst first (drains, then drain-class XIDs, then
    /// all XIDs, then warnings), at most `limit`.
    pub fn gpu_totals(
        &self,
        since: Option<i64>,
        node: Option<&str>,
        limit: usize,
    ) -> Result<Vec<GpuTotals>> {
        let mut rows = match (since, node) {
            (None, None) => {
                let sql = format!("SELECT {COLUMNS} FROM gpu_totals");
                self.rows(FAILED, &sql, &[], totals_from_row)?
            }
            (None, Some(n)) => {
                let sql = format!(
                    "SELECT {COLUMNS} FROM gpu_totals WHERE last_node IN (SELECT value FROM json_each(?1))"
                );
                self.rows(FAILED, &sql, &[node_set(n)?], totals_from_row)?
            }
            // Per node: the job rows of one node are few enough to sum directly.
            (Some(s), Some(_)) => self.totals_from_jobs(s, None, node)?,
            (Some(s), None) => self.totals_since(s)?,
        };
        rows.sort_by(|a, b| {
            (b.drains, b.xids_drain_class, b.xids, b.warns)
                .cmp(&(a.drains, a.xids_drain_class, a.xids, a.warns))
                .then_with(|| a.serial.cmp(&b.serial))
        });
        rows.truncate(limit.max(1));
        Ok(rows)
    }

    /// Whole days from the daily sums, the partial first day from the jobs.
    fn totals_since(&self, since: i64) -> Result<Vec<GpuTotals>> {
        let first_full_day = (since + DAY - 1).div_euclid(DAY);
        let sql = format!("SELECT {COLUMNS} FROM gpu_daily WHERE day >= ?1");
        let days = self.rows(
            FAILED,
            &sql,
            &[Value::Integer(first_full_day)],
            totals_from_row,
        )?;
        let partial = self.totals_from_jobs(since, Some(first_full_day * DAY), None)?;
        let mut sums: BTreeMap<String, GpuTotals> = BTreeMap::new();
        for t in days.into_iter().chain(partial) {
            match sums.get_mut(&t.serial) {
                Some(acc) => acc.absorb(t),
                None => {
                    sums.insert(t.serial.clone(), t);
                }
            }
        }
        Ok(sums.into_values().collect())
    }

    /// Sums over the job rows that started in `[from, to)`, on `node`.
    fn totals_from_jobs(
        &self,
        from: i64,
        to: Option<i64>,
        node: Option<&str>,
    ) -> Result<Vec<GpuTotals>> {
        let mut args = vec![Value::Integer(from)];
        let mut clause = String::new();
        if let Some(t) = to {
            args.push(Value::Integer(t));
            clause.push_str(&format!(" AND j.start_ts < ?{}", args.len()));
        }
        if let Some(n) = node {
            args.push(node_set(n)?);
            let n = args.len();
            clause.push_str(&format!(
                " AND j.node IN (SELECT value FROM json_each(?{n}))"
            ));
        }
        let sql = format!(
            "SELECT CASE WHEN g.serial = '' THEN g.uuid ELSE g.serial END AS serial,
                    MAX(g.uuid) AS uuid, MAX(j.node) AS last_node,
                    MAX(COALESCE(j.end_ts, j.start_ts)) AS last_seen, COUNT(*) AS jobs,
                    SUM(g.verdict = 'DRAIN') AS drains, SUM(g.verdict = 'WARN') AS warns,
                    COALESCE(SUM(g.energy_mj), 0) AS energy_mj, SUM(g.xid_count) AS xids,
                    SUM(g.xids_drain_class) AS xids_drain_class,
                    SUM(g.xids_restart_app) AS xids_restart_app
             FROM job_gpus g JOIN jobs j ON j.id = g.job_row
             WHERE j.start_ts >= ?1{clause} GROUP BY 1"
        );
        self.rows(FAILED, &sql, &args, totals_from_row)
    }
}
