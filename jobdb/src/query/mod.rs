//! Reading the history back: job rows filtered like sacct (`history`),
//! everything about one job (`show`), per-board totals ranked to surface
//! flaky GPUs (`totals`), and every board's lifetime counters for the
//! Prometheus export (`counters`).

mod counters;
mod history;
mod show;
mod totals;

pub use counters::BoardCounters;
pub use history::{HistoryFilter, HistoryRow};
pub use totals::GpuTotals;

use crate::db::{err, JobDb};
use rusqlite::types::Value;
use slurm_imex_core::error::Result;

/// A `--node` value as sacct -N takes it: a Slurm hostlist
/// (`gb-r1-[01-18]`), as a JSON array for `json_each`.
fn node_set(expr: &str) -> Result<Value> {
    use slurm_imex_core::slurm::hostlist;
    let nodes =
        hostlist::expand(expr, hostlist::MAX_HOSTS_LIMIT).map_err(|e| e.context("--node"))?;
    Ok(Value::Text(
        serde_json::to_string(&nodes).unwrap_or_default(),
    ))
}

impl JobDb {
    /// Run one query and map every row; `what` names the query in errors.
    fn rows<T>(
        &self,
        what: &str,
        sql: &str,
        args: &[Value],
        map: impl FnMut(&rusqlite::Row) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let q = |e: rusqlite::Error| err(self.path(), what, e);
        let mut stmt = self.conn.prepare(sql).map_err(q)?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args.iter()), map)
            .map_err(q)?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(q)
    }
}

/// Newline-joined reasons as stored, back to a list.
fn reason_lines(stored: Option<String>) -> Vec<String> {
    stored
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}
