//! `slurm-imex show JOBID`: everything this node recorded of one job: its
//! line and phases, the events of its IMEX domain, each GPU's stats, XIDs
//! and processes.

use crate::args::Cli;
use crate::cells::{gibibytes, kilojoules, or_dash, percent};
use crate::job_db::open_db;
use crate::output::print_json;
use crate::table::Table;
use slurm_imex_core::error::Result;
use slurm_imex_core::timespec::format_ts;
use slurm_imex_gpu::recovery::RecoveryAction;
use slurm_imex_gpu::stats::{counts_as_throttled, GpuUsage};
use slurm_imex_jobdb::imex_events::IMEX_EVENTS_MAX;
use slurm_imex_jobdb::write::JobRow;
use slurm_imex_settings::Config;

/// `slurm-imex show JOBID`: each of the job's rows on this node, or JSON.
pub fn show(cli: &Cli, config: &Config, job_id: u32) -> Result<u8> {
    let jobs = match open_db(cli, config)? {
        Some(db) => db.show(job_id)?,
        None => Vec::new(),
    };
    if jobs.is_empty() {
        err!("slurm-imex: note: no record of job {job_id} in this node's database");
    }
    if cli.json {
        print_json(&jobs)?;
        return Ok(0);
    }
    for job in &jobs {
        print_job_phases(job)?;
        for line in job_gpu_table(job).render().lines() {
            out!("  {line}");
        }
        for line in recovery_lines(job) {
            out!("{line}");
        }
        print_job_gpu_events(job)?;
    }
    Ok(0)
}

/// The job's line, then each phase's verdict, time and reasons.
fn print_job_phases(j: &JobRow) -> Result<()> {
    out!(
        "job {} on {}  user {}  {} .. {}  imex {}  verdict {}",
        j.job_id,
        j.node,
        or_dash(j.user.as_deref()),
        format_ts(j.start_ts),
        j.end_ts.map_or("-".into(), format_ts),
        match (j.imex, &j.imex_domain) {
            (true, Some(block)) => format!("yes (domain {block})"),
            (true, None) => "yes".to_string(),
            (false, _) => "no".to_string(),
        },
        j.verdict().as_str()
    );
    if let Some(source) = &j.imex_rack_source {
        out!("  imex domain members from {source}");
    }
    for line in imex_event_lines(j) {
        out!("{line}");
    }
    for (name, phase) in [("prolog", &j.prolog), ("epilog", &j.epilog)] {
        if let Some(p) = phase {
            out!("  {name}: {} in {} ms", p.verdict.as_str(), p.ms);
            for r in &p.reasons {
                out!("    {r}");
            }
        }
    }
    Ok(())
}

/// One line per event of the job's IMEX domain on this node, by time:
/// "  imex event: IMEX daemon died at 12:03:04 (killed by signal 9)"; and
/// a last line when the database held more than are read.
fn imex_event_lines(j: &JobRow) -> Vec<String> {
    let mut lines: Vec<String> = j
        .imex_events
        .iter()
        .map(|e| format!("  imex event: {}", e.line()))
        .collect();
    if j.imex_events.len() >= IMEX_EVENTS_MAX {
        lines.push(format!(
            "  imex events: only the first {IMEX_EVENTS_MAX} are shown"
        ));
    }
    lines
}

fn job_gpu_table(j: &JobRow) -> Table {
    let mut t = Table::new(&[
        "GPU",
        "SERIAL",
        "PCI",
        "ENERGY_KJ",
        "PROCS",
        "GPU_UTIL%",
        "MEM_UTIL%",
        "PEAK_MEM_GIB",
        "BUSY_S",
        "ECC_SBE",
        "ECC_DBE",
        "RETIRED",
        "REMAP_UNC",
        "PCIE_REPLAYS",
        "THROTTLE_MS",
        "XIDS",
        "VERDICT",
    ]);
    for g in &j.gpus {
        let s = &g.stats;
        let throttle_ns = s
            .throttle_ns
            .iter()
            .filter(|(reason, _)| counts_as_throttled(reason))
            .fold(0u64, |a, (_, v)| a.saturating_add(*v));
        let reset = if s.energy_mj.reset { " (reset)" } else { "" };
        t.row(vec![
            s.index.to_string(),
            s.serial.clone(),
            s.pci.clone(),
            kilojoules(s.energy_mj.value.map(|v| v as i64)) + reset,
            or_dash(s.usage.map(|u| u.processes)),
            percent(s.usage.and_then(idle_as_zero(|u| u.gpu_util_pct))),
            percent(s.usage.and_then(idle_as_zero(|u| u.mem_util_pct))),
            gibibytes(s.max_memory_bytes),
            s.usage
                .map_or("-".into(), |u| format!("{:.1}", u.busy_ms as f64 / 1000.0)),
            or_dash(s.ecc_sbe.value),
            or_dash(s.ecc_dbe.value),
            or_dash(s.retired_pages.value),
            or_dash(s.remapped_uncorrectable.value),
            or_dash(s.pcie_replays.value),
            (throttle_ns / 1_000_000).to_string(),
            s.xids.len().to_string(),
            g.verdict.as_str().into(),
        ]);
    }
    t
}

/// One line per GPU whose driver asked for a recovery action (not NONE)
/// at the job's end, by name and with what it asks: "  recovery gpu1
/// 1650924060001: at the job's end the driver asks for recovery action
/// SYSTEM_REBOOT (7): reboot the system".
fn recovery_lines(j: &JobRow) -> Vec<String> {
    j.gpus
        .iter()
        .filter_map(|g| {
            let action = RecoveryAction(g.stats.recovery_action_end.filter(|a| *a != 0)?);
            Some(format!(
                "  recovery gpu{} {}: at the job's end the {}",
                g.stats.index,
                g.stats.serial,
                action.finding_detail()
            ))
        })
        .collect()
}

/// A GPU the job held and never used shows 0 %, as jobstats does.
fn idle_as_zero(util: fn(&GpuUsage) -> Option<f64>) -> impl Fn(GpuUsage) -> Option<f64> {
    move |u| {
        if u.processes == 0 {
            Some(0.0)
        } else {
            util(&u)
        }
    }
}

/// Each GPU's use (idle, or not known), its XIDs during the job, then the
/// job's processes on it.
fn print_job_gpu_events(j: &JobRow) -> Result<()> {
    for g in &j.gpus {
        let s = &g.stats;
        match s.usage {
            Some(u) if u.processes == 0 => out!(
                "  idle gpu{} {}: the job held this GPU but no process of it ran there (0% utilization)",
                s.index,
                s.serial
            ),
            None => out!(
                "  usage gpu{} {}: not known (NVML accounting mode was off during the job, or the record predates slurm-imex 0.4; see [gpu] accounting)",
                s.index,
                s.serial
            ),
            Some(_) => {}
        }
        for x in &s.xids {
            out!(
                "  xid gpu{} {}: XID {} ({}) pid {} {}: {}",
                s.index,
                s.serial,
                x.xid,
                x.bucket.as_str(),
                or_dash(x.pid),
                or_dash(x.process.as_deref()),
                x.message
            );
        }
        for p in &s.processes {
            out!(
                "  process gpu{} pid {}: util {}% mem util {}% max memory {} MiB, {} ms{}",
                s.index,
                p.pid,
                or_dash(p.gpu_util),
                or_dash(p.mem_util),
                or_dash(p.max_memory_bytes.map(|b| b >> 20)),
                p.time_ms,
                if p.running { " (still running)" } else { "" }
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_imex_jobsummary::imex_event::{ImexEvent, ImexEventKind};

    fn row(events: Vec<ImexEvent>) -> JobRow {
        JobRow {
            job_id: 7,
            node: "n3".into(),
            user: None,
            uid: None,
            start_ts: 0,
            end_ts: None,
            imex: true,
            imex_domain: None,
            imex_rack_source: None,
            imex_outcome: None,
            prolog: None,
            epilog: None,
            gpus: vec![],
            imex_events: events,
        }
    }

    #[test]
    fn show_names_the_recovery_action_each_gpu_ended_with() {
        use slurm_imex_gpu::health::Verdict;
        use slurm_imex_gpu::stats::GpuJobStats;
        use slurm_imex_jobdb::write::GpuRecord;
        let gpu = |index, action| GpuRecord {
            stats: GpuJobStats {
                index,
                serial: format!("S{index}"),
                recovery_action_end: action,
                ..Default::default()
            },
            verdict: Verdict::Pass,
            reasons: vec![],
        };
        let mut j = row(vec![]);
        j.gpus = vec![
            gpu(0, Some(0)),
            gpu(1, None),
            gpu(2, Some(7)),
            gpu(3, Some(8)),
        ];
        assert_eq!(
            recovery_lines(&j),
            [
                "  recovery gpu2 S2: at the job's end the driver asks for recovery action \
                 SYSTEM_REBOOT (7): reboot the system",
                "  recovery gpu3 S3: at the job's end the driver asks for recovery action 8, \
                 unknown to this slurm-imex: see the driver's documentation for this value, or \
                 reboot the node",
            ]
        );
        j.gpus = vec![gpu(0, Some(5))];
        assert!(recovery_lines(&j)[0].starts_with(
            "  recovery gpu0 S0: at the job's end the driver asks for recovery action \
             RECOVER_IMEX_DOMAIN (5): the GPU's IMEX domain must be restored"
        ));
        // JSON carries the field as it is (null: not read).
        let json = serde_json::to_value(&j).unwrap();
        assert_eq!(json["gpus"][0]["stats"]["recovery_action_end"], 5);
    }

    #[test]
    fn show_prints_one_line_per_imex_event() {
        let e = |ts_ms, kind, detail| ImexEvent::new(7, "n3", ts_ms, kind, detail);
        let j = row(vec![
            e(43_384_000, ImexEventKind::DaemonDied, "killed by signal 9"),
            e(43_384_200, ImexEventKind::DaemonRestarted, ""),
            e(43_401_000, ImexEventKind::DomainUp, ""),
        ]);
        assert_eq!(
            imex_event_lines(&j),
            [
                "  imex event: IMEX daemon died at 12:03:04 (killed by signal 9)",
                "  imex event: IMEX daemon restarted at 12:03:04",
                "  imex event: IMEX domain UP again at 12:03:21",
            ]
        );
        assert!(imex_event_lines(&row(vec![])).is_empty());
        let many = row((0..IMEX_EVENTS_MAX as i64)
            .map(|i| e(i, ImexEventKind::MemberLost, "n1"))
            .collect());
        let lines = imex_event_lines(&many);
        assert_eq!(lines.len(), IMEX_EVENTS_MAX + 1);
        assert_eq!(
            lines.last().unwrap(),
            "  imex events: only the first 1000 are shown"
        );
    }
}
