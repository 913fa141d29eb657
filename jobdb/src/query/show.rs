//! `show`: everything recorded about one job: its row per node (and per
//! start, if requeued), each GPU's stats, XIDs and processes, and its IMEX
//! domain's events there.

use super::reason_lines;
use crate::write::{GpuRecord, HookVerdict, ImexOutcome, JobRow};
use crate::JobDb;
use rusqlite::types::Value;
use slurm_imex_core::error::Result;
use slurm_imex_gpu::health::Verdict;
use slurm_imex_gpu::nvml::snapshot::ProcessAccounting;
use slurm_imex_gpu::stats::{Delta, GpuJobStats, GpuUsage};
use slurm_imex_gpu::xid::XidEvent;
use std::collections::BTreeMap;

const FAILED: &str = "show query failed";

impl JobDb {
    /// Every record of a job (one per node, and per start if requeued).
    pub fn show(&self, job_id: u32) -> Result<Vec<JobRow>> {
        self.jobs_where(
            "job_id = ?1 ORDER BY start_ts, node",
            &[Value::Integer(job_id.into())],
        )
    }

    /// The `limit` jobs whose epilog ran last, at or after `ended_since`
    /// (Unix seconds), newest first: what the per-job export keeps.
    pub fn recently_ended(&self, limit: u32, ended_since: i64) -> Result<Vec<JobRow>> {
        self.jobs_where(
            "end_ts >= ?1 ORDER BY end_ts DESC, id DESC LIMIT ?2",
            &[Value::Integer(ended_since), Value::Integer(limit.into())],
        )
    }

    /// Whole records (with their GPUs and IMEX events) of the job rows
    /// `filter` selects.
    fn jobs_where(&self, filter: &str, args: &[Value]) -> Result<Vec<JobRow>> {
        let sql = format!(
            "SELECT id, job_id, node, user, uid, start_ts, end_ts, imex, prolog_verdict, prolog_reasons,
                    prolog_ms, epilog_verdict, epilog_reasons, epilog_ms, imex_domain,
                    imex_rack_source, imex_channel, imex_ready_ms, imex_failure, imex_node_fault
             FROM jobs WHERE {filter}"
        );
        let jobs = self.rows(FAILED, &sql, args, |r| {
            Ok((r.get::<_, i64>("id")?, job_from_row(r)?))
        })?;
        let mut out = Vec::new();
        for (row_id, mut job) in jobs {
            job.gpus = self.gpus_of(row_id)?;
            job.imex_events = self.imex_events(job.job_id, &job.node)?;
            out.push(job);
        }
        Ok(out)
    }

    /// The GPUs of one job row, each with its own XIDs (by PCI id) and
    /// processes (by serial).
    fn gpus_of(&self, job_row: i64) -> Result<Vec<GpuRecord>> {
        let row = [Value::Integer(job_row)];
        let mut gpus = self.rows(
            FAILED,
            "SELECT gpu_index, uuid, serial, pci, name, energy_mj, energy_reset, ecc_sbe, ecc_dbe, retired_pages,
                    remapped_correctable, remapped_uncorrectable, remap_pending_end, remap_failure_end,
                    pcie_replays, throttle_ns, nvlink_errors, max_memory_bytes, verdict, reasons,
                    usage_processes, gpu_util_pct, mem_util_pct, gpu_busy_ms, gpu_process_ms,
                    recovery_action_end
             FROM job_gpus WHERE job_row = ?1 ORDER BY gpu_index",
            &row,
            gpu_record_from_row,
        )?;
        let xids = self.rows(
            FAILED,
            "SELECT seq, pci, xid, pid, process, message FROM xid_events WHERE job_row = ?1 ORDER BY seq",
            &row,
            xid_from_row,
        )?;
        let processes = self.rows(
            FAILED,
            "SELECT serial, pid, gpu_util, mem_util, max_memory_bytes, time_ms, start_us, running FROM processes
             WHERE job_row = ?1 ORDER BY pid",
            &row,
            process_from_row,
        )?;
        for g in &mut gpus {
            let stats = &mut g.stats;
            stats.xids = xids
                .iter()
                .filter(|x| x.pci == stats.pci)
                .cloned()
                .collect();
            stats.processes = processes
                .iter()
                .filter(|(serial, _)| *serial == stats.serial)
                .map(|(_, p)| *p)
                .collect();
        }
        Ok(gpus)
    }
}

fn job_from_row(r: &rusqlite::Row) -> rusqlite::Result<JobRow> {
    let phase = |v: Option<String>, reasons: Option<String>, ms: Option<i64>| {
        let verdict = Verdict::parse(&v?)?;
        Some(HookVerdict {
            verdict,
            reasons: reason_lines(reasons),
            ms: ms.unwrap_or(0) as u64,
        })
    };
    Ok(JobRow {
        job_id: r.get("job_id")?,
        node: r.get("node")?,
        user: r.get("user")?,
        uid: r.get("uid")?,
        start_ts: r.get("start_ts")?,
        end_ts: r.get("end_ts")?,
        imex: r.get("imex")?,
        imex_domain: r.get("imex_domain")?,
        imex_rack_source: r.get("imex_rack_source")?,
        imex_outcome: imex_outcome_from_row(r)?,
        prolog: phase(
            r.get("prolog_verdict")?,
            r.get("prolog_reasons")?,
            r.get("prolog_ms")?,
        ),
        epilog: phase(
            r.get("epilog_verdict")?,
            r.get("epilog_reasons")?,
            r.get("epilog_ms")?,
        ),
        gpus: Vec::new(),
        imex_events: Vec::new(),
    })
}

/// The IMEX outcome from its four `imex_` columns; None without --imex
/// (or rows from before v6).
fn imex_outcome_from_row(r: &rusqlite::Row) -> rusqlite::Result<Option<ImexOutcome>> {
    let node_fault: Option<bool> = r.get("imex_node_fault")?;
    Ok(node_fault.map(|node_fault| ImexOutcome {
        channel: r.get("imex_channel").ok().flatten(),
        ready_ms: r
            .get::<_, Option<i64>>("imex_ready_ms")
            .ok()
            .flatten()
            .map(|v| v.max(0) as u64),
        failure: r.get("imex_failure").ok().flatten(),
        node_fault,
    }))
}

fn gpu_record_from_row(r: &rusqlite::Row) -> rusqlite::Result<GpuRecord> {
    let delta = |column: &str| -> rusqlite::Result<Delta> {
        Ok(Delta {
            value: r.get::<_, Option<i64>>(column)?.map(|x| x as u64),
            reset: false,
        })
    };
    let json = |column: &str| -> rusqlite::Result<BTreeMap<String, u64>> {
        Ok(r.get::<_, Option<String>>(column)?
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default())
    };
    let stats = GpuJobStats {
        index: r.get("gpu_index")?,
        uuid: r.get("uuid")?,
        serial: r.get("serial")?,
        pci: r.get("pci")?,
        name: r.get::<_, Option<String>>("name")?.unwrap_or_default(),
        energy_mj: Delta {
            reset: r.get("energy_reset")?,
            ..delta("energy_mj")?
        },
        ecc_sbe: delta("ecc_sbe")?,
        ecc_dbe: delta("ecc_dbe")?,
        retired_pages: delta("retired_pages")?,
        remapped_correctable: delta("remapped_correctable")?,
        remapped_uncorrectable: delta("remapped_uncorrectable")?,
        remap_pending_end: r.get("remap_pending_end")?,
        remap_failure_end: r.get("remap_failure_end")?,
        recovery_action_end: r
            .get::<_, Option<i64>>("recovery_action_end")?
            .map(|x| x as u64),
        pcie_replays: delta("pcie_replays")?,
        throttle_ns: json("throttle_ns")?,
        nvlink_errors: json("nvlink_errors")?,
        max_memory_bytes: r
            .get::<_, Option<i64>>("max_memory_bytes")?
            .map(|x| x as u64),
        processes: Vec::new(),
        usage: usage_from_row(r)?,
        xids: Vec::new(),
    };
    Ok(GpuRecord {
        stats,
        verdict: Verdict::parse(&r.get::<_, String>("verdict")?).unwrap_or(Verdict::Pass),
        reasons: reason_lines(r.get("reasons")?),
    })
}

/// The GPU's usage, from its five usage columns; None when not known.
fn usage_from_row(r: &rusqlite::Row) -> rusqlite::Result<Option<GpuUsage>> {
    let Some(processes) = r.get::<_, Option<u32>>("usage_processes")? else {
        return Ok(None);
    };
    let ms = |column: &str| -> rusqlite::Result<u64> {
        Ok(r.get::<_, Option<i64>>(column)?.unwrap_or(0).max(0) as u64)
    };
    Ok(Some(GpuUsage {
        processes,
        gpu_util_pct: r.get("gpu_util_pct")?,
        mem_util_pct: r.get("mem_util_pct")?,
        busy_ms: ms("gpu_busy_ms")?,
        process_ms: ms("gpu_process_ms")?,
    }))
}

fn xid_from_row(r: &rusqlite::Row) -> rusqlite::Result<XidEvent> {
    let xid: u32 = r.get("xid")?;
    Ok(XidEvent {
        seq: r.get::<_, i64>("seq")? as u64,
        pci: r.get("pci")?,
        xid,
        pid: r.get("pid")?,
        process: r.get("process")?,
        message: r.get::<_, Option<String>>("message")?.unwrap_or_default(),
        bucket: slurm_imex_gpu::xid::classify(xid),
    })
}

/// A process with the serial of the board it ran on.
fn process_from_row(r: &rusqlite::Row) -> rusqlite::Result<(String, ProcessAccounting)> {
    let process = ProcessAccounting {
        pid: r.get("pid")?,
        gpu_util: r.get("gpu_util")?,
        mem_util: r.get("mem_util")?,
        max_memory_bytes: r
            .get::<_, Option<i64>>("max_memory_bytes")?
            .map(|x| x as u64),
        time_ms: r.get::<_, Option<i64>>("time_ms")?.unwrap_or(0) as u64,
        start_us: r.get::<_, Option<i64>>("start_us")?.unwrap_or(0) as u64,
        running: r.get::<_, Option<bool>>("running")?.unwrap_or(false),
    };
    Ok((
        r.get::<_, Option<String>>("serial")?.unwrap_or_default(),
        process,
    ))
}
