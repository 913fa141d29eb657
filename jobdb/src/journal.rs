//! The per-job journal summary: one structured event per job per node,
//! emitted by the epilog. With journald present (logging.rs) its fields
//! reach the journal under their own names (`JOB_ID`, `NODE`, `USER`,
//! `VERDICT`, `REASON`, `GPU_SERIALS`, `XIDS`, `ENERGY_J`, `GPU_UTIL_PCT`,
//! `PEAK_MEMORY_MIB`, `IDLE_GPUS`, `GATE_MS`, `PROLOG_MS`, `EPILOG_MS`,
//! `IMEX`, `IMEX_DOMAIN`; usage fields are empty when not known), so a site
//! that ships its journal to Loki or Elasticsearch gets a fleet-wide per-job
//! GPU health log.

use crate::write::JobRow;
use slurm_imex_core::slurm::env::JobEnv;
use slurm_imex_core::text::{cap, summarize_list, PIECE_MAX};

/// Emit the summary of `job` on this node. `row` is what the epilog
/// recorded (None for a job that was not a GPU job here); `imex_domain` the
/// NVLink block of its IMEX domain here (None: the whole job, or no IMEX);
/// `prolog_ms` the
/// job's whole prolog (its IMEX record, else its gate).
pub fn job_summary(
    job: &JobEnv,
    row: Option<&JobRow>,
    imex_domain: Option<&str>,
    prolog_ms: Option<u64>,
    epilog_ms: u64,
) {
    let verdict = row.map_or("NONE", |r| r.verdict().as_str());
    let reasons: Vec<String> = row
        .map(|r| {
            r.prolog
                .iter()
                .chain(r.epilog.iter())
                .flat_map(|p| p.reasons.iter().cloned())
                .collect()
        })
        .unwrap_or_default();
    let serials: Vec<&str> = row
        .map(|r| r.gpus.iter().map(|g| g.stats.serial.as_str()).collect())
        .unwrap_or_default();
    let xids: Vec<String> = row
        .map(|r| {
            r.gpus
                .iter()
                .flat_map(|g| {
                    g.stats
                        .xids
                        .iter()
                        .map(move |x| format!("{}:{}:{}", x.xid, x.bucket.as_str(), g.stats.serial))
                })
                .collect()
        })
        .unwrap_or_default();
    let energy_j: f64 = row
        .map(|r| {
            r.gpus
                .iter()
                .filter_map(|g| g.stats.energy_mj.value)
                .map(|mj| mj as f64 / 1000.0)
                .sum()
        })
        .unwrap_or(0.0);
    let gate_ms = row.and_then(|r| r.prolog.as_ref()).map(|p| p.ms);
    let usage = row.map(JobRow::usage_summary).unwrap_or_default();
    let text = |v: Option<String>| v.unwrap_or_default();
    tracing::info!(
        target: "slurm_imex::job",
        user = job.user.as_deref().unwrap_or(""),
        verdict,
        reason = cap(&reasons.join("; "), PIECE_MAX).as_str(),
        gpu_serials = summarize_list(&serials, PIECE_MAX).as_str(),
        xids = summarize_list(&xids, PIECE_MAX).as_str(),
        energy_j = format!("{energy_j:.3}").as_str(),
        gpu_util_pct = text(usage.gpu_util_pct.map(|p| format!("{p:.1}"))).as_str(),
        peak_memory_mib = text(usage.peak_memory_bytes.map(|b| (b >> 20).to_string())).as_str(),
        idle_gpus = text(usage.idle_gpus.map(|n| n.to_string())).as_str(),
        gate_ms = gate_ms.map(|m| m.to_string()).unwrap_or_default().as_str(),
        prolog_ms = prolog_ms.map(|m| m.to_string()).unwrap_or_default().as_str(),
        epilog_ms,
        imex = job.imex_requested,
        imex_domain = imex_domain.unwrap_or_default(),
        "job {} on {}: {verdict}",
        job.job_id,
        job.node_name
    );
}
