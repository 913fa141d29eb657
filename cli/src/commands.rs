//! One function per subcommand: load what it needs (the check and undrain
//! run in `slurm_imex_hooks`), print a table or JSON, return the exit status.

use crate::table::Table;
use crate::{Cli, Command, HistoryArgs};
use serde::Serialize;
use slurm_imex_core::config::Config;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::slurm::node::{node_name, node_names};
use slurm_imex_core::timespec::{format_ts, now_s, parse_point};
use slurm_imex_domain::imex;
use slurm_imex_gpu::health::Verdict;
use slurm_imex_gpu::stats::{counts_as_throttled, GpuUsage};
use slurm_imex_hooks as hooks;
use slurm_imex_hooks::check::CheckReport;
use slurm_imex_hooks::drain::{CheckFlags, DrainAction};
use slurm_imex_jobdb::imex_events::IMEX_EVENTS_MAX;
use slurm_imex_jobdb::query::{HistoryFilter, HistoryRow};
use slurm_imex_jobdb::write::JobRow;
use slurm_imex_jobdb::JobDb;

pub fn run(cli: &Cli) -> Result<u8> {
    refuse_format_where_it_does_nothing(cli)?;
    if let Command::Man { dir } = &cli.command {
        return crate::man::write_all(dir).map(|_| 0);
    }
    if let Command::Doctor { cluster } = &cli.command {
        return crate::doctor::doctor(cli, *cluster);
    }
    // `job` loads its config itself: a refused one has its own exit status.
    if let Command::Job { job_id, store } = &cli.command {
        return crate::job::job(cli, *job_id, *store);
    }
    let (config, _) = Config::load(cli.config.as_deref())?;
    match &cli.command {
        Command::History(args) => history(cli, &config, args),
        Command::Show { job_id } => show(cli, &config, *job_id),
        Command::Gpus { since, node, limit } => gpus(
            cli,
            &config,
            since.as_deref(),
            node.as_deref(),
            *limit as usize,
        ),
        Command::Check {
            drain,
            undrain,
            node,
        } => check(cli, &config, *drain, *undrain, node.clone()),
        Command::Status => status(cli, &config),
        Command::Topology(args) => crate::topology::topology(cli, &config, args),
        Command::Undrain { node } => undrain_node(cli, &config, node.clone()),
        Command::Man { .. } | Command::Doctor { .. } | Command::Job { .. } => Ok(0),
    }
}

/// `--format` picks the columns of the `history` and `gpus` tables; any
/// other command, or `--json`, would silently ignore it.
fn refuse_format_where_it_does_nothing(cli: &Cli) -> Result<()> {
    if cli.format.is_none() {
        return Ok(());
    }
    let tabled = matches!(cli.command, Command::History(_) | Command::Gpus { .. });
    match (tabled, cli.json) {
        (true, false) => Ok(()),
        (true, true) => Err(Error::new(
            "--format picks table columns and --json prints every field: use one of them",
        )),
        (false, _) => Err(Error::new(
            "--format picks the columns of the history and gpus tables only: drop it for this command",
        )),
    }
}

fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::new(format!("cannot encode JSON: {e}")))?;
    out!("{text}");
    Ok(())
}

/// Reading commands never create a database. None (with a note on
/// stderr) when this node has none yet: the answer is then empty, as
/// sacct's is for a cluster with no jobs.
fn open_db(cli: &Cli, config: &Config) -> Result<Option<JobDb>> {
    let path = cli
        .db
        .clone()
        .unwrap_or_else(|| config.database.path.clone());
    let problem = slurm_imex_jobdb::storage_problem(&path);
    if let Some(p) = &problem {
        eprintln!("slurm-imex: warning: {p}");
    }
    if !path.exists() {
        if problem.is_none() {
            eprintln!(
                "slurm-imex: note: no job database at {} yet: no GPU job has finished on this node \
                 (or set --db / [database] path)",
                path.display()
            );
        }
        return Ok(None);
    }
    JobDb::open_to_read(&path, config.database.busy_timeout.0).map(Some)
}

/// Apply --format to a table and print it.
fn print_table(cli: &Cli, mut t: Table) -> Result<()> {
    t.select(cli.format.as_deref())?;
    out_raw!("{}", t.render());
    Ok(())
}

/// A value, or "-" for none (as sacct prints an empty field).
fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or("-".into(), |x| x.to_string())
}

/// Millijoules (NVML's energy unit) as kilojoules with one decimal.
fn kilojoules(mj: Option<i64>) -> String {
    mj.map_or("-".into(), |m| format!("{:.1}", m as f64 / 1e6))
}

/// A percentage with no decimals ("-" when not known).
fn percent(p: Option<f64>) -> String {
    p.map_or("-".into(), |p| format!("{p:.0}"))
}

/// Bytes as GiB with one decimal ("-" when not known).
fn gibibytes(b: Option<u64>) -> String {
    b.map_or("-".into(), |b| {
        format!("{:.1}", b as f64 / (1u64 << 30) as f64)
    })
}

fn history(cli: &Cli, config: &Config, a: &HistoryArgs) -> Result<u8> {
    let filter = history_filter(a, now_s())?;
    let rows = match open_db(cli, config)? {
        Some(db) => db.history(&filter)?,
        None => Vec::new(),
    };
    if cli.json {
        print_json(&rows)?;
        return Ok(0);
    }
    print_table(cli, history_table(&rows))?;
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

fn show(cli: &Cli, config: &Config, job_id: u32) -> Result<u8> {
    let jobs = match open_db(cli, config)? {
        Some(db) => db.show(job_id)?,
        None => Vec::new(),
    };
    if jobs.is_empty() {
        eprintln!("slurm-imex: note: no record of job {job_id} in this node's database");
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

fn gpus(
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
    if cli.json {
        print_json(&rows)?;
        return Ok(0);
    }
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
    for r in &rows {
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
    print_table(cli, t)?;
    Ok(0)
}

/// --node, else the Slurm node name slurmd exports, else the short hostname.
fn this_node(node: Option<String>) -> String {
    node.or_else(|| {
        std::env::var("SLURMD_NODENAME")
            .ok()
            .filter(|n| !n.is_empty())
    })
    .unwrap_or_else(|| {
        nix::unistd::gethostname()
            .map(|h| {
                h.to_string_lossy()
                    .split('.')
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
            .unwrap_or_default()
    })
}

/// `slurm-imex check`: the hook runs (`slurm_imex_hooks::check`), and its
/// report is printed. Exit 1 on a drain verdict.
fn check(
    cli: &Cli,
    config: &Config,
    drain_node: bool,
    undrain: bool,
    node: Option<String>,
) -> Result<u8> {
    let flags = CheckFlags {
        drain: drain_node,
        undrain,
    };
    if let Some(n) = &node {
        node_name(n).map_err(|e| {
            Error::invalid(format!(
                "--node is not a node name: {e}: give this node's Slurm name, such as n1"
            ))
        })?;
    }
    let report = hooks::check::check(config, this_node(node), flags)?;
    for w in &report.warnings {
        eprintln!("slurm-imex: warning: {w}");
    }
    if cli.json {
        print_json(&report)?;
    } else {
        print_check_report(&report)?;
    }
    Ok(if report.verdict == Verdict::Drain {
        1
    } else {
        0
    })
}

/// The check's report as an admin reads it: the verdict line, the findings
/// table, what was done to the node, the clique it publishes.
fn print_check_report(report: &CheckReport) -> Result<()> {
    out!(
        "{}: {} ({} GPUs checked in {} ms)",
        report.node,
        report.verdict.as_str(),
        report.gpus,
        report.elapsed_ms
    );
    let mut t = Table::new(&["SEVERITY", "CHECK", "GPU", "SERIAL", "DETAIL"]);
    for f in &report.findings {
        t.row(vec![
            format!("{:?}", f.severity).to_uppercase(),
            f.check.clone(),
            f.gpu.as_ref().map_or("-".into(), |g| g.index.to_string()),
            f.gpu.as_ref().map_or("-".into(), |g| g.serial.clone()),
            f.detail.clone(),
        ]);
    }
    if !report.findings.is_empty() {
        out_raw!("{}", t.render());
    }
    if let Some(a) = &report.action {
        out!("{a}");
    }
    if let (Some(c), Some(p)) = (&report.clique, &report.published) {
        out!("NVLink clique {c}: {p}");
    }
    Ok(())
}

fn status(cli: &Cli, config: &Config) -> Result<u8> {
    let s = imex::status::node_status(config);
    if cli.json {
        print_json(&s)?;
        return Ok(0);
    }
    out!("IMEX owner job:   {}", or_dash(s.owner));
    if s.owner.is_none() {
        if let Some(serves) = &s.serves {
            out!("daemon serves:    {serves} ([imex] domain = \"rack\")");
        }
    }
    out!("daemon:           {}", s.daemon);
    out!("local state:      {}", s.local_state);
    if let Some(d) = &s.domain {
        let (ready, total) = s.nodes_ready.unwrap_or((0, 0));
        out!("domain:           {d} ({ready}/{total} nodes READY)");
    }
    if let Some(r) = &s.record {
        match r.channel {
            Some(c) => out!("channel:          {c}"),
            None => out!("channel:          Slurm's (switch/nvidia_imex)"),
        }
        out!("server port:      {}", r.server_port);
        out!("nodes:            {}", r.nodes.join(","));
        if let Some(source) = &r.rack_source {
            out!("members from:     {source}");
        }
        out!("prolog outcome:   {:?}", r.outcome);
    }
    for p in &s.problems {
        out!("problem:          {p}");
    }
    for d in &config.deprecations {
        out!("config:           {d}");
    }
    Ok(0)
}

/// `slurm-imex undrain [--node HOSTLIST]`: each node judged alone, one line
/// each. Exit 0 when every node was resumed or not drained, 1 when one was
/// left drained (not ours), 2 when one could not be read or resumed.
fn undrain_node(cli: &Cli, config: &Config, node: Option<String>) -> Result<u8> {
    let here = this_node(None);
    let hostlist = node.unwrap_or_else(|| here.clone());
    let names = node_names(&hostlist, config.imex.max_nodes).map_err(|e| {
        Error::invalid(format!(
            "--node: {e}: give a Slurm node name or hostlist, such as n1 or gb-r1-[01-18]"
        ))
    })?;
    let (outcomes, warning) = hooks::check::undrain(config, &hostlist, &names, &here)?;
    if let Some(w) = warning {
        eprintln!("slurm-imex: warning: {w}");
    }
    let mut code = 0;
    let mut objects = Vec::new();
    for (name, outcome) in &outcomes {
        match outcome {
            Ok(action) => {
                if matches!(action, DrainAction::LeftDrained { .. }) {
                    code = code.max(1);
                }
                let line = action.describe(name).unwrap_or_default();
                if !cli.json {
                    out!("{line}");
                }
                objects.push(serde_json::json!({"node": name, "result": line}));
            }
            Err(e) => {
                code = 2;
                eprintln!("slurm-imex: {e}");
                objects.push(serde_json::json!({"node": name, "error": e.to_string()}));
            }
        }
    }
    if cli.json {
        match objects.as_slice() {
            [one] => print_json(one)?,
            _ => print_json(&objects)?,
        }
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_imex_core::imex_event::{ImexEvent, ImexEventKind};

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
