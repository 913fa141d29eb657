//! `slurm-imex gpus`: per-GPU totals from this node's job database,
//! flakiest boards first.

use crate::args::Cli;
use crate::job_db::open_db;
use crate::output::print_rows;
use crate::table::Table;
use slurm_imex_core::error::Result;
use slurm_imex_core::timespec::{format_ts, now_s, parse_point};
use slurm_imex_jobdb::query::GpuTotals;
use slurm_imex_settings::Config;

/// `slurm-imex gpus`: the totals since `since` (lifetime without), of `node`
/// when given, at most `limit` rows, as a table or JSON.
pub fn gpus(
    cli: &Cli,
    config: &Config,
    since: Option<&str>,
    node: Option<&str>,
    limit: usize,
) -> Result<u8> {
    let since = since
        .map(|s| parse_point(s, now_s(), "--since"))
        .transpose()?;
    let rows = match open_db(cli, config)? {
        Some(db) => db.gpu_totals(since, node, limit)?,
        None => Vec::new(),
    };
    print_rows(cli, &rows, gpus_table)?;
    Ok(0)
}

/// One row per board, in the order the database ranks them.
fn gpus_table(rows: &[GpuTotals]) -> Table {
    let mut t = Table::new(&[
        "SERIAL",
        "UUID",
        "LAST_NODE",
        "LAST_SEEN",
        "JOBS",
        "DRAINS",
        "WARNS",
        "XIDS",
        "XID_DRAIN",
        "XID_APP",
        "XID_OTHER",
        "ENERGY_KWH",
    ]);
    for r in rows {
        t.row(vec![
            r.serial.clone(),
            r.uuid.clone(),
            r.last_node.clone(),
            format_ts(r.last_seen),
            r.jobs.to_string(),
            r.drains.to_string(),
            r.warns.to_string(),
            r.xids.to_string(),
            r.xids_drain_class.to_string(),
            r.xids_restart_app.to_string(),
            r.xids_other.to_string(),
            format!("{:.3}", r.energy_mj as f64 / 3.6e9),
        ]);
    }
    t
}
