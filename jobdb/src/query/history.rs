//! `history`: job rows filtered like sacct, newest first, with the job's
//! totals or, with `--gpu`, that board's numbers.

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
    pub gpus: i64,
    pub energy_mj: Option<i64>,
    pub xids: i64,
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
            "SELECT j.job_id, j.node, j.user, j.start_ts, j.end_ts, j.imex, {},
                    j.prolog_verdict, j.epilog_verdict,
                    CASE WHEN j.epilog_verdict = j.verdict THEN j.epilog_reasons ELSE j.prolog_reasons END
             FROM jobs j {gpu_join}
             {}
             ORDER BY j.start_ts DESC, j.id DESC LIMIT {}",
            figure_columns(f.gpu.is_some()),
            c.where_clause(),
            f.limit.max(1)
        );
        self.rows("history query failed", &sql, &c.args, history_row)
    }
}

/// GPUs, energy, XIDs and verdict: with `--gpu` that board's, otherwise
/// the job's totals.
fn figure_columns(per_gpu: bool) -> &'static str {
    if per_gpu {
        "1, g.energy_mj, g.xid_count, g.verdict"
    } else {
        "(SELECT COUNT(*) FROM job_gpus x WHERE x.job_row = j.id),
         (SELECT SUM(x.energy_mj) FROM job_gpus x WHERE x.job_row = j.id),
         (SELECT COALESCE(SUM(x.xid_count), 0) FROM job_gpus x WHERE x.job_row = j.id),
         j.verdict"
    }
}

fn history_row(r: &rusqlite::Row) -> rusqlite::Result<HistoryRow> {
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
}
