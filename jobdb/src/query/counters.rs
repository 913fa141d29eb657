//! Every board's lifetime counters for the Prometheus export: one query
//! over gpu_totals and one over gpu_counters (a few ms for thousands of
//! boards).

use crate::JobDb;
use slurm_imex_core::error::Result;
use std::collections::BTreeMap;

/// One board's lifetime counters, as the database keeps them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BoardCounters {
    pub serial: String,
    pub uuid: String,
    pub pci: String,
    pub jobs: i64,
    pub drains: i64,
    pub warns: i64,
    pub energy_mj: i64,
    pub energy_resets: i64,
    pub remapped_rows: i64,
    pub ecc_dbe: i64,
    pub retired_pages: i64,
    pub remap_pending: bool,
    /// The recovery action the driver asked for after the board's last
    /// job (0, NONE, when it was not read).
    pub recovery_action: i64,
    pub last_verdict: String,
    /// XID count per catalog class (lowercase bucket name).
    pub xids: BTreeMap<String, i64>,
    /// Throttle nanoseconds per reason.
    pub throttle_ns: BTreeMap<String, i64>,
    /// How jobs used the board: busy_ms, held_ms, accounted_jobs,
    /// idle_jobs (write.rs, `add_board_usage`).
    pub usage: BTreeMap<String, i64>,
}

const FAILED: &str = "metrics query failed";

impl JobDb {
    pub fn board_counters(&self) -> Result<Vec<BoardCounters>> {
        let mut boards = self.rows(
            FAILED,
            "SELECT serial, uuid, pci, jobs, drains, warns, energy_mj, energy_resets,
                    remapped_rows, ecc_dbe, retired_pages, remap_pending, recovery_action,
                    last_verdict
             FROM gpu_totals ORDER BY serial",
            &[],
            board_from_row,
        )?;
        let counters = self.rows(
            FAILED,
            "SELECT serial, kind, key, value FROM gpu_counters ORDER BY serial",
            &[],
            counter_from_row,
        )?;
        for (serial, kind, key, value) in counters {
            let Ok(i) = boards.binary_search_by(|b| b.serial.as_str().cmp(serial.as_str())) else {
                continue;
            };
            let map = match kind.as_str() {
                "xid" => &mut boards[i].xids,
                "throttle_ns" => &mut boards[i].throttle_ns,
                "usage" => &mut boards[i].usage,
                _ => continue,
            };
            *map.entry(key).or_insert(0) += value;
        }
        Ok(boards)
    }
}

fn board_from_row(r: &rusqlite::Row) -> rusqlite::Result<BoardCounters> {
    Ok(BoardCounters {
        serial: r.get("serial")?,
        uuid: r.get("uuid")?,
        pci: r.get("pci")?,
        jobs: r.get("jobs")?,
        drains: r.get("drains")?,
        warns: r.get("warns")?,
        energy_mj: r.get("energy_mj")?,
        energy_resets: r.get("energy_resets")?,
        remapped_rows: r.get("remapped_rows")?,
        ecc_dbe: r.get("ecc_dbe")?,
        retired_pages: r.get("retired_pages")?,
        remap_pending: r.get::<_, i64>("remap_pending")? != 0,
        recovery_action: r.get("recovery_action")?,
        last_verdict: r.get("last_verdict")?,
        ..Default::default()
    })
}

/// (serial, kind, key, value) of one lifetime counter.
fn counter_from_row(r: &rusqlite::Row) -> rusqlite::Result<(String, String, String, i64)> {
    Ok((
        r.get("serial")?,
        r.get("kind")?,
        r.get("key")?,
        r.get("value")?,
    ))
}
