//! `slurm-imex job JOBID` (one job across all its nodes, for its owner or
//! root, from any host with Slurm's clients) and `slurm-imex job --store`
//! (the controller-host timer that stores each ended job's summary).
//! Presenting only: what is read and decided is slurm_imex_jobview's.

use crate::args::Cli;
use crate::cells::or_dash;
use crate::output::{self, print_json};
use crate::table::Table;
use serde::Serialize;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_gpu::health::Verdict;
use slurm_imex_gpu::stats::counts_as_throttled;
use slurm_imex_jobsummary::report::{
    natural_cmp, thousands, GpuReport, JobSummary, NodeReport, NodeStatus, RackCount,
};
use slurm_imex_jobview::lookup::{self, JobView, Unanswered};
use slurm_imex_jobview::{accounting, store};
use slurm_imex_settings::Config;

/// The exit status of `slurm-imex job` beyond 0 (the summary is shown; for
/// `--store`, every pending job stored or waiting), as its help and
/// docs/guide.md give them.
pub mod exit {
    /// The job is known, but no summary yet: none stored, and no node has
    /// reported it to Prometheus (or no `[job] prometheus_url` here); for
    /// `--store`, a job could not be stored.
    pub const NO_SUMMARY: u8 = 1;
    /// No such job for the caller (not in Slurm's accounting, or another
    /// user's), or the command line is wrong.
    pub const NOT_FOUND: u8 = 2;
    /// The config: imex.toml refused when loaded (file:line:key), or a key
    /// this needs is unset.
    pub const BAD_CONFIG: u8 = 3;
    /// A service could not be asked or gave no usable answer: `sacct`
    /// (SlurmDBD) or Prometheus.
    pub const NO_SERVICE: u8 = 4;
}

/// `slurm-imex job JOBID` or `job --store`: it loads its own config, so a
/// refused one has its own exit status.
pub fn job(cli: &Cli, job_id: Option<u32>, store: bool) -> Result<u8> {
    let config = match (job_id, store) {
        (Some(_), true) => {
            return Err(Error::new(
                "--store stores every pending job: give no JOBID with it",
            ))
        }
        (None, false) => {
            return Err(Error::new(
                "give a JOBID (slurm-imex job 4242), or --store on the controller host",
            ))
        }
        _ => match Config::load(cli.config.as_deref()) {
            Ok((config, _)) => config,
            Err(e) => return failed(exit::BAD_CONFIG, &e),
        },
    };
    accounting::times_as_epoch_seconds();
    let now = slurm_imex_core::timespec::now_s();
    match job_id {
        None => store_pass(cli, &config, now),
        Some(id) => show(cli, &config, id, now),
    }
}

/// Say why in one line, as every failure is said, and exit with `code`.
fn failed(code: u8, why: &dyn std::fmt::Display) -> Result<u8> {
    err!("slurm-imex: {why}");
    Ok(code)
}

#[derive(Serialize)]
struct JobJson<'a> {
    job_id: u32,
    user: &'a str,
    state: &'a str,
    node_list: &'a str,
    source: &'a str,
    problems: &'a [String],
    summary: Option<&'a JobSummary>,
    /// Each rack's nodes by status (the summary's rollup).
    racks: Vec<RackCount>,
    notes: Vec<String>,
}

/// Jobs with more nodes than this are shown rack by rack first, then only
/// their nodes that did not pass; smaller ones node by node, whole.
pub const PER_NODE_MAX: u32 = 64;
/// Racks listed one by one in a big job's rollup before the racks whose
/// every node passed are folded into one line.
const RACKS_LISTED: usize = 64;

fn show(cli: &Cli, config: &Config, job_id: u32, now: i64) -> Result<u8> {
    let view = match lookup::job(config, job_id, nix::unistd::getuid().as_raw(), now) {
        Ok(view) => view,
        Err(f) => return failed(exit_status(f.why), &f),
    };
    for p in &view.problems {
        err!("slurm-imex: note: {p}");
    }
    if cli.json {
        let json = JobJson {
            job_id,
            user: &view.job.user,
            state: &view.job.state,
            node_list: &view.job.node_list,
            source: view.source.as_str(),
            problems: &view.problems,
            summary: view.summary.as_ref(),
            racks: view
                .summary
                .as_ref()
                .map(JobSummary::rollup)
                .unwrap_or_default(),
            notes: view
                .summary
                .as_ref()
                .map(JobSummary::notes)
                .unwrap_or_default(),
        };
        print_json(&json)?;
    } else {
        print_view(&view)?;
    }
    Ok(match (&view.summary, view.unanswered) {
        (Some(_), _) => 0,
        (None, Some(why)) => exit_status(why),
        (None, None) => exit::NO_SUMMARY,
    })
}

fn exit_status(why: Unanswered) -> u8 {
    match why {
        Unanswered::NotFound => exit::NOT_FOUND,
        Unanswered::Config => exit::BAD_CONFIG,
        Unanswered::Service => exit::NO_SERVICE,
    }
}

fn print_view(view: &JobView) -> Result<()> {
    let j = &view.job;
    out!(
        "job {}  user {}  {}  nodes {}  source: {}",
        j.job_id,
        j.user,
        j.state,
        if j.node_list.is_empty() {
            "-".into()
        } else {
            // sacct's hostlist, outside text: cut as every piece is.
            short_hostlist(&j.node_list, view.summary.as_ref())
        },
        view.source.as_str()
    );
    let Some(s) = &view.summary else {
        if view.unanswered.is_some() {
            out!("no GPU summary: it could not be read (the line on stderr says why)");
        } else {
            out!("no node has reported this job (yet): its GPU summary appears after its epilogs");
        }
        return Ok(());
    };
    let big = s.reported_nodes() > PER_NODE_MAX;
    if big {
        if let Some(line) = domains_line(s) {
            out!("{line}");
        }
    }
    for (domain, channel, ready) in s.domains().into_iter().filter(|_| !big) {
        out!(
            "IMEX domain {domain}  channel {}  ready in {}",
            channel.map_or("- (Slurm's switch)".into(), |c| c.to_string()),
            ready.map_or("- (not ready)".into(), |ms| format!(
                "{:.2} s",
                ms as f64 / 1000.0
            ))
        );
    }
    if big {
        print_big(s)?;
    } else {
        output::table(&node_table(s.nodes.iter()))?;
        print_imex_events(&s.nodes)?;
        output::table(&gpu_table(s.gpus()))?;
    }
    let notes = s.notes();
    if !notes.is_empty() {
        out!("notes:");
        for n in notes {
            out!("  - {n}");
        }
    }
    out!("{}", summary_line(s));
    Ok(())
}

/// A big job: its racks' rollup, then only the nodes that did not pass,
/// with their GPUs.
fn print_big(s: &JobSummary) -> Result<()> {
    for line in rollup_lines(&s.rollup()) {
        out!("{line}");
    }
    let mut flagged: Vec<&NodeReport> = s
        .nodes
        .iter()
        .filter(|n| n.status() != NodeStatus::Pass)
        .collect();
    flagged.sort_by(|a, b| natural_cmp(&a.node, &b.node));
    // The counters come from a stored comment: a corrupt one must not wrap.
    let passed = (s.reported_nodes() as usize)
        .saturating_sub(flagged.len())
        .saturating_sub(s.trimmed_other_nodes as usize);
    if flagged.is_empty() {
        out!(
            "every node that reported passed ({} nodes): none listed",
            thousands(passed as u64)
        );
        return Ok(());
    }
    out!(
        "nodes that did not pass ({} of {}; the {} PASS nodes are not listed):",
        thousands(flagged.len() as u64),
        thousands(s.reported_nodes() as u64),
        thousands(passed as u64)
    );
    output::table(&node_table(flagged.iter().copied()))?;
    for line in imex_events_lines(flagged.iter().copied()) {
        out!("{line}");
    }
    output::table(&gpu_table(
        flagged
            .iter()
            .flat_map(|n| n.gpus.iter().map(move |g| (*n, g))),
    ))?;
    Ok(())
}

/// A hostlist for the heading line: whole up to 120 bytes, else cut at a
/// comma outside brackets before byte 100 (a cut inside `gpu[001-010,012]`
/// would name other nodes), saying how many more pieces were left out and
/// the job's node count.
fn short_hostlist(list: &str, summary: Option<&JobSummary>) -> String {
    const WHOLE: usize = 120;
    if list.len() <= WHOLE {
        return list.to_string();
    }
    let (head, more) = hostlist_head(list, 100);
    // The list is longer than the cut, so at least one piece is left out.
    let shown = match head {
        "" => "…".to_string(),
        head => format!("{head},…"),
    };
    let more = thousands(more as u64);
    match summary {
        Some(s) => format!(
            "{shown} {more} more ({} nodes)",
            thousands(s.reported_nodes() as u64 + s.missing_nodes() as u64)
        ),
        None => format!("{shown} {more} more"),
    }
}

/// The pieces of `list` (its commas at bracket depth 0) that fit in `max`
/// bytes, and how many pieces follow them. At least nothing: a first piece
/// longer than `max` is left out whole.
fn hostlist_head(list: &str, max: usize) -> (&str, usize) {
    let mut depth = 0usize;
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth = depth.saturating_add(1),
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                pieces.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push((start, list.len()));
    let kept = pieces.iter().take_while(|(_, end)| *end <= max).count();
    let end = kept.checked_sub(1).map_or(0, |k| pieces[k].1);
    (&list[..end], pieces.len() - kept)
}

/// A big job's IMEX domains in one line: how many among the nodes listed,
/// their channels and the slowest readiness; None without `--imex`.
fn domains_line(s: &JobSummary) -> Option<String> {
    let domains = s.domains();
    if domains.is_empty() {
        return None;
    }
    let mut channels: Vec<String> = domains
        .iter()
        .map(|(_, c, _)| c.map_or("- (Slurm's switch)".into(), |c| c.to_string()))
        .collect();
    channels.sort();
    channels.dedup();
    let slowest = domains
        .iter()
        .filter_map(|(d, _, r)| r.map(|r| (r, d)))
        .max();
    Some(format!(
        "IMEX domains: {} among the nodes here (a domain per rack when the job spans racks)  channel {}  slowest ready in {}",
        thousands(domains.len() as u64),
        channels.join(","),
        slowest.map_or("- (not ready)".into(), |(ms, d)| format!(
            "{:.2} s ({d})",
            ms as f64 / 1000.0
        ))
    ))
}

/// The rack rollup as lines: a table of the racks (all of them up to
/// [`RACKS_LISTED`]; beyond, those with a node that did not pass), and one
/// line for the racks left out, whose every node passed.
fn rollup_lines(racks: &[RackCount]) -> Vec<String> {
    let all = racks.len() <= RACKS_LISTED;
    let mut t = Table::new(&["RACK", "NODES", "PASS", "WARN", "FAIL"]);
    let (mut quiet, mut quiet_nodes) = (0u64, 0u64);
    for r in racks {
        if !all && r.pass == r.nodes {
            quiet += 1;
            quiet_nodes += r.nodes as u64;
            continue;
        }
        t.row(vec![
            r.rack.clone(),
            r.nodes.to_string(),
            r.pass.to_string(),
            r.warn.to_string(),
            r.fail.to_string(),
        ]);
    }
    let mut lines = vec![format!(
        "racks: {} ({} nodes)",
        thousands(racks.len() as u64),
        thousands(racks.iter().map(|r| r.nodes as u64).sum())
    )];
    if quiet < racks.len() as u64 {
        lines.extend(t.render().lines().map(str::to_string));
    }
    if quiet > 0 {
        lines.push(format!(
            "  and {} more racks, every node PASS ({} nodes)",
            thousands(quiet),
            thousands(quiet_nodes)
        ));
    }
    lines
}

/// What happened to the job's IMEX domain on each node where something
/// did, one line per node: "  n3: IMEX daemon died at 12:03:04 (killed by
/// signal 9); IMEX daemon restarted at 12:03:04".
fn print_imex_events<'a>(nodes: impl IntoIterator<Item = &'a NodeReport>) -> Result<()> {
    for line in imex_events_lines(nodes) {
        out!("{line}");
    }
    Ok(())
}

/// The lines of [`print_imex_events`]: a heading, then one per node with
/// events (outside text, which `out!` keeps on its one line); none when no
/// node had any.
fn imex_events_lines<'a>(nodes: impl IntoIterator<Item = &'a NodeReport>) -> Vec<String> {
    let per_node: Vec<String> = nodes
        .into_iter()
        .filter_map(|n| {
            let events = n.imex_events.as_deref()?;
            Some(format!("  {}: {events}", n.node))
        })
        .collect();
    if per_node.is_empty() {
        return per_node;
    }
    std::iter::once("IMEX events:".to_string())
        .chain(per_node)
        .collect()
}

fn node_table<'a>(nodes: impl Iterator<Item = &'a NodeReport>) -> Table {
    let mut t = Table::new(&[
        "NODE", "PROLOG", "EPILOG", "BLAME", "PROLOG_S", "EPILOG_S", "DOMAIN", "CAUSE",
    ]);
    let secs = |ms: Option<u64>| ms.map_or("-".into(), |ms| format!("{:.2}", ms as f64 / 1000.0));
    for n in nodes {
        t.row(vec![
            n.node.clone(),
            or_dash(n.prolog.as_deref()),
            or_dash(n.epilog.as_deref()),
            n.blame.as_str().to_string(),
            secs(n.prolog_ms),
            secs(n.epilog_ms),
            or_dash(n.domain_name()),
            or_dash(n.cause.as_deref()),
        ]);
    }
    t
}

fn gpu_table<'a>(gpus: impl Iterator<Item = (&'a NodeReport, &'a GpuReport)>) -> Table {
    let mut t = Table::new(&[
        "NODE",
        "GPU",
        "SERIAL",
        "VERDICT",
        "ENERGY_KJ",
        "PROCS",
        "GPU_UTIL%",
        "MEM_UTIL%",
        "PEAK_MEM_GIB",
        "XIDS",
        "ECC_SBE",
        "ECC_DBE",
        "REMAPS",
        "THROTTLE_S",
        "NVLINK_ERR",
    ]);
    for (n, g) in gpus {
        t.row(gpu_row(n, g));
    }
    t
}

fn gpu_row(n: &NodeReport, g: &GpuReport) -> Vec<String> {
    // A GPU the job held but never used: 0 %, as the summary counts it.
    let idle = g.processes == Some(0);
    let pct = |p: Option<f64>| match (p, idle) {
        (Some(p), _) => format!("{p:.0}"),
        (None, true) => "0".into(),
        (None, false) => "-".into(),
    };
    let xids: Vec<String> = g
        .xids
        .iter()
        .map(|x| format!("{}({})x{}", x.xid, x.class, x.count))
        .collect();
    vec![
        n.node.clone(),
        g.index.to_string(),
        g.serial.clone(),
        g.verdict.clone(),
        g.energy_j
            .map_or("-".into(), |j| format!("{:.1}", j / 1000.0)),
        or_dash(g.processes),
        pct(g.gpu_util_pct),
        pct(g.mem_util_pct),
        g.peak_memory_bytes.map_or("-".into(), |b| {
            format!("{:.1}", b as f64 / (1u64 << 30) as f64)
        }),
        if xids.is_empty() {
            "-".into()
        } else {
            xids.join(",")
        },
        or_dash(g.ecc_sbe),
        or_dash(g.ecc_dbe),
        or_dash(g.remapped_rows),
        // (fold from +0.0: an empty f64 sum is -0.0, printed "-0.0")
        format!(
            "{:.1}",
            g.throttle_s
                .iter()
                .filter(|(reason, _)| counts_as_throttled(reason))
                .fold(0.0, |a, (_, b)| a + b)
        ),
        g.nvlink_errors.values().sum::<u64>().to_string(),
    ]
}

/// One line, as jobstats ends with.
fn summary_line(s: &JobSummary) -> String {
    let t = s.totals();
    let idle = t.idle_gpus;
    let worst = s
        .gpus()
        .filter_map(|(_, g)| Verdict::parse(&g.verdict))
        .max()
        .map(Verdict::as_str);
    format!(
        "summary: {} nodes, {} GPUs, mean GPU utilization {}, peak memory {}, energy {}, {} idle GPUs, worst GPU verdict {}",
        thousands(s.reported_nodes() as u64 + s.missing_nodes() as u64),
        thousands(t.gpus as u64),
        t.gpu_util_pct.map_or("unknown".into(), |u| format!("{u:.0}%")),
        t.peak_memory_bytes.map_or("unknown".into(), |b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)),
        t.energy_j.map_or("unknown".into(), |j| format!("{:.1} kJ", j / 1000.0)),
        thousands(idle as u64),
        worst.unwrap_or("-")
    )
}

fn store_pass(cli: &Cli, config: &Config, now: i64) -> Result<u8> {
    if !nix::unistd::getuid().is_root() {
        return Err(Error::new("job --store writes jobs' AdminComment through sacctmgr: run it as root on the controller host"));
    }
    if config.job.prometheus_url.is_empty() {
        return failed(
            exit::BAD_CONFIG,
            &"job --store needs [job] prometheus_url (the Prometheus that scrapes the nodes)",
        );
    }
    let mut lines = Vec::new();
    let counts = match store::store_pending(config, now, &mut |l| lines.push(l)) {
        Ok(counts) => counts,
        Err(e) => return failed(exit::NO_SERVICE, &e),
    };
    if cli.json {
        let json = serde_json::json!({
            "considered": counts.considered, "stored": counts.stored, "waiting": counts.waiting,
            "unreported": counts.unreported, "foreign": counts.foreign, "failed": counts.failed, "lines": lines,
        });
        print_json(&json)?;
    } else {
        for l in &lines {
            out!("{l}");
        }
        out!(
            "job --store: {} ended jobs without a summary, {} stored, {} waiting for nodes, {} never reported, {} with another tool's AdminComment, {} failed",
            counts.considered, counts.stored, counts.waiting, counts.unreported, counts.foreign, counts.failed
        );
    }
    Ok(if counts.failed > 0 {
        exit::NO_SUMMARY
    } else {
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rack(name: &str, nodes: u32, warn: u32, fail: u32) -> RackCount {
        RackCount {
            rack: name.into(),
            nodes,
            pass: nodes - warn - fail,
            warn,
            fail,
        }
    }

    #[test]
    fn a_few_racks_are_all_listed_and_many_fold_the_quiet_ones() {
        let few = vec![rack("rack1", 18, 0, 0), rack("rack2", 18, 1, 0)];
        let lines = rollup_lines(&few);
        assert_eq!(lines[0], "racks: 2 (36 nodes)");
        assert!(
            lines[1].starts_with("RACK") && lines[1].ends_with("FAIL"),
            "{lines:?}"
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["rack1", "18", "18", "0", "0"]
        );
        assert_eq!(lines.len(), 4);

        let mut many: Vec<RackCount> = (1..=1024)
            .map(|r| rack(&format!("rack{r}"), 18, 0, 0))
            .collect();
        many[11] = rack("rack12", 18, 1, 0);
        many[499] = rack("rack500", 18, 0, 2);
        let lines = rollup_lines(&many);
        assert_eq!(lines[0], "racks: 1,024 (18,432 nodes)");
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["rack12", "18", "17", "1", "0"]
        );
        assert!(lines[3].starts_with("rack500"), "{lines:?}");
        assert_eq!(
            lines[4],
            "  and 1,022 more racks, every node PASS (18,396 nodes)"
        );

        let quiet: Vec<RackCount> = (1..=100)
            .map(|r| rack(&format!("r{r}"), 18, 0, 0))
            .collect();
        assert_eq!(
            rollup_lines(&quiet),
            [
                "racks: 100 (1,800 nodes)",
                "  and 100 more racks, every node PASS (1,800 nodes)"
            ]
        );
    }

    #[test]
    fn a_long_hostlist_is_cut_at_a_comma_and_counted() {
        assert_eq!(short_hostlist("n[1-4]", None), "n[1-4]");
        let long: String = (1..=1024)
            .map(|r| format!("gb-r{r}-[01-18]"))
            .collect::<Vec<_>>()
            .join(",");
        let s = JobSummary {
            trimmed_pass_nodes: 18_430,
            nodes: vec![NodeReport::default()],
            missing: vec!["x".into()],
            ..Default::default()
        };
        let short = short_hostlist(&long, Some(&s));
        assert!(short.starts_with("gb-r1-[01-18],gb-r2-[01-18],"), "{short}");
        assert!(
            short.ends_with("gb-r7-[01-18],… 1,017 more (18,432 nodes)"),
            "{short}"
        );
        assert!(short.len() < 140, "{short}");
    }

    #[test]
    fn a_long_hostlist_is_never_cut_inside_its_brackets() {
        let inner: Vec<String> = (1..=60).map(|n| format!("{:03}", n * 2)).collect();
        let long = format!("gpu[{}],cpu[1-4]", inner.join(","));
        // The first piece alone is longer than the cut: left out whole.
        assert_eq!(short_hostlist(&long, None), "… 2 more");
        let long = format!("a1,b[1-2],gpu[{}]", inner.join(","));
        assert_eq!(short_hostlist(&long, None), "a1,b[1-2],… 1 more");
        assert_eq!(hostlist_head("x[1,2]]],y", 100), ("x[1,2]]],y", 0));
    }

    #[test]
    fn each_node_with_imex_events_gets_one_line() {
        let node = |name: &str, events: Option<&str>| NodeReport {
            node: name.into(),
            imex: true,
            imex_events: events.map(str::to_string),
            ..Default::default()
        };
        assert!(imex_events_lines(&[node("n1", None)]).is_empty());
        let lines = imex_events_lines(&[
            node("n1", None),
            node(
                "n3",
                Some("IMEX daemon died at 12:03:04 (killed by signal 9); IMEX daemon restarted at 12:03:04; IMEX domain UP again at 12:03:21"),
            ),
            node("n4", Some("IMEX peer lost at 12:03:05 (n3)\nforged line")),
        ]);
        assert_eq!(
            lines,
            [
                "IMEX events:",
                "  n3: IMEX daemon died at 12:03:04 (killed by signal 9); IMEX daemon restarted at 12:03:04; IMEX domain UP again at 12:03:21",
                "  n4: IMEX peer lost at 12:03:05 (n3)\nforged line",
            ]
        );
        // As it is written: one line.
        assert_eq!(
            crate::output::as_line(&lines[2]),
            "  n4: IMEX peer lost at 12:03:05 (n3)\\x0aforged line"
        );
    }
}
