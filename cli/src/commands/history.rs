//! `slurm-imex history`: the jobs recorded on this node, newest first (as
//! sacct lists them), filtered by the flags, as a table or JSON.

use crate::args::{Cli, HistoryArgs};
use crate::cells::{gibibytes, kilojoules, or_dash, percent};
use crate::job_db::open_db;
use crate::output::print_rows;
use crate::table::Table;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::timespec::{format_ts, now_s, parse_point};
use slurm_imex_gpu::health::Verdict;
use slurm_imex_jobdb::query::{HistoryFilter, HistoryRow};
use slurm_imex_settings::Config;

/// `slurm-imex history`: the rows the flags select, as a table or JSON.
pub fn history(cli: &Cli, config: &Config, a: &HistoryArgs) -> Result<u8> {
    let filter = history_filter(a, now_s())?;
    let rows = match open_db(cli, config)? {
        Some(db) => db.history(&filter)?,
        None => Vec::new(),
    };
    print_rows(cli, &rows, history_table)?;
    Ok(0)
}

/// The filter the flags ask for; a bad value is named with its flag.
fn history_filter(a: &HistoryArgs, now: i64) -> Result<HistoryFilter> {
    let point = |value: &Option<String>, flag: &str| {
        value
            .as_deref()
            .map(|s| parse_point(s, now, flag))
            .transpose()
    };
    let verdict = |v: &str| {
        Verdict::parse(v)
            .ok_or_else(|| Error::new(format!("--verdict \"{v}\": use pass, warn or drain")))
    };
    let filter = HistoryFilter {
        node: a.node.clone(),
        gpu: a.gpu.clone(),
        user: a.user.clone(),
        job_id: a.job,
        since: point(&a.since, "--since")?,
        until: point(&a.until, "--until")?,
        verdict: a.verdict.as_deref().map(verdict).transpose()?,
        limit: a.limit as usize,
    };
    if let (Some(since), Some(until)) = (filter.since, filter.until) {
        if until < since {
            return Err(Error::new(format!(
                "--until {} is before --since {}: swap them",
                format_ts(until),
                format_ts(since)
            )));
        }
    }
    Ok(filter)
}

fn history_table(rows: &[HistoryRow]) -> Table {
    let mut t = Table::new(&[
        "JOBID",
        "NODE",
        "USER",
        "START",
        "END",
        "GPUS",
        "ENERGY_KJ",
        "GPU_UTIL%",
        "PEAK_MEM_GIB",
        "IDLE_GPUS",
        "XIDS",
        "IMEX",
        "VERDICT",
        "REASON",
    ]);
    for r in rows {
        t.row(vec![
            r.job_id.to_string(),
            r.node.clone(),
            or_dash(r.user.as_deref()),
            format_ts(r.start_ts),
            r.end_ts.map_or("-".into(), format_ts),
            r.gpus.to_string(),
            kilojoules(r.energy_mj),
            percent(r.gpu_util_pct),
            gibibytes(r.peak_memory_bytes.map(|b| b.max(0) as u64)),
            or_dash(r.idle_gpus),
            r.xids.to_string(),
            imex_cell(r.imex, r.imex_interrupted).into(),
            r.verdict.clone(),
            or_dash(r.reason.as_deref()),
        ]);
    }
    t
}

/// The history's IMEX column: `no` (no --imex), `yes`, or `interrupted`
/// (the domain watcher recorded the daemon dying or left down, the domain
/// leaving UP, or a member lost while the job ran; `show JOBID` has when).
fn imex_cell(imex: bool, interrupted: bool) -> &'static str {
    match (imex, interrupted) {
        (_, true) => "interrupted",
        (true, false) => "yes",
        (false, false) => "no",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history_row(imex: bool, interrupted: bool) -> HistoryRow {
        HistoryRow {
            job_id: 7,
            node: "n3".into(),
            user: Some("alice".into()),
            start_ts: 0,
            end_ts: Some(60),
            imex,
            imex_interrupted: interrupted,
            gpus: 4,
            energy_mj: None,
            xids: 0,
            gpu_util_pct: None,
            peak_memory_bytes: None,
            idle_gpus: None,
            verdict: "PASS".into(),
            prolog_verdict: None,
            epilog_verdict: None,
            reason: None,
        }
    }

    #[test]
    fn history_says_whether_the_imex_domain_was_interrupted() {
        let text = history_table(&[
            history_row(true, true),
            history_row(true, false),
            history_row(false, false),
        ])
        .render();
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        let at = lines[0].iter().position(|h| *h == "IMEX").unwrap();
        assert_eq!(lines[0][at + 1], "VERDICT", "{text}");
        let cells: Vec<&str> = lines[1..].iter().map(|l| l[at]).collect();
        assert_eq!(cells, ["interrupted", "yes", "no"], "{text}");
    }
}
