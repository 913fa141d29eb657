//! A synthetic big job for benches/job-view-bench.sh: NODES nodes in NVL72
//! racks of 18 (`gb-r<R>-<NN>`, the job's IMEX domain split by rack), 4
//! GPUs each, every node PASS but a few that warned (an application XID)
//! and a few that failed (a GPU off the bus), written through the product's
//! own code: the AdminComment `slurm-imex job --store` would store
//! (`comment`), or the series every node's epilog would export, as
//! OpenMetrics with a timestamp for `promtool tsdb create-blocks-from
//! openmetrics` (`openmetrics`, rendered whole: a bench tool), or the job's hostlist as sacct prints it
//! (`nodelist`).
//!
//! synth-job comment|openmetrics|nodelist JOBID NODES [TIMESTAMP_S]

use slurm_imex_jobsummary::report::{Blame, GpuReport, JobSummary, NodeReport, XidCount};
use slurm_imex_jobsummary::{comment, series};
use std::io::Write as _;

fn node_name(n: usize) -> String {
    format!("gb-r{}-{:02}", n / 18 + 1, n % 18 + 1)
}

fn job(job_id: u32, nodes: usize, end: i64) -> JobSummary {
    // One node in 347 warned, one in 1,500 failed: 53 and 12 of 18,432.
    JobSummary {
        job_id,
        nodes: (0..nodes)
            .map(|n| {
                let warn = n % 347 == 5;
                let fail = n % 1500 == 11;
                NodeReport {
                    node: node_name(n),
                    user: Some("alice".into()),
                    start_ts: end - 600,
                    end_ts: Some(end),
                    imex: true,
                    domain: Some(format!("gb-r{}", n / 18 + 1)),
                    channel: Some(5),
                    imex_ready_ms: Some(900 + (n % 97) as u64),
                    prolog: Some("PASS".into()),
                    epilog: Some(if fail { "DRAIN" } else { "PASS" }.into()),
                    blame: if fail { Blame::Node } else { Blame::None },
                    cause: fail.then(|| "gpu2 fell off the bus (XID 79)".to_string()),
                    prolog_ms: Some(1200 + (n % 89) as u64),
                    epilog_ms: Some(300 + (n % 41) as u64),
                    gpus: (0..4u32)
                        .map(|i| GpuReport {
                            index: i,
                            serial: format!("{}", 1_650_924_000_000u64 + n as u64 * 4 + i as u64),
                            name: "NVIDIA GB200".into(),
                            verdict: match (fail && i == 2, warn && i == 1) {
                                (true, _) => "DRAIN",
                                (_, true) => "WARN",
                                _ => "PASS",
                            }
                            .into(),
                            energy_j: Some(400_000.0 + ((n * 4 + i as usize) % 1000) as f64),
                            processes: Some(1),
                            gpu_util_pct: Some(80.0 + ((n + i as usize) % 20) as f64),
                            mem_util_pct: Some(40.0 + (n % 30) as f64),
                            peak_memory_bytes: Some(150 << 30),
                            busy_s: Some(590.0),
                            xids: if warn && i == 1 {
                                vec![XidCount {
                                    xid: 13,
                                    class: "RESTART_APP".into(),
                                    count: 1,
                                }]
                            } else if fail && i == 2 {
                                vec![XidCount {
                                    xid: 79,
                                    class: "REBOOT".into(),
                                    count: 1,
                                }]
                            } else {
                                Vec::new()
                            },
                            ecc_sbe: Some(0),
                            ecc_dbe: Some(0),
                            remapped_rows: Some(0),
                            ..Default::default()
                        })
                        .collect(),
                    imex_events: None,
                }
            })
            .collect(),
        ..Default::default()
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: synth-job comment|openmetrics|nodelist JOBID NODES [TIMESTAMP_S]";
    let (Some(what), Some(id), Some(nodes)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let (Ok(id), Ok(nodes)) = (id.parse::<u32>(), nodes.parse::<usize>()) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let ts: i64 = args
        .get(4)
        .and_then(|t| t.parse().ok())
        .unwrap_or(1_790_000_000);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match what.as_str() {
        "comment" => {
            let Some(text) = comment::encode(&job(id, nodes, ts)) else {
                eprintln!("synth-job: the summary does not fit an AdminComment");
                std::process::exit(1);
            };
            writeln!(out, "{text}")?;
        }
        "nodelist" => {
            let racks = nodes.div_ceil(18);
            let list: Vec<String> = (0..racks)
                .map(|r| {
                    let last = (nodes - r * 18).min(18);
                    format!("gb-r{}-[01-{last:02}]", r + 1)
                })
                .collect();
            writeln!(out, "{}", list.join(","))?;
        }
        "openmetrics" => {
            // Each family's samples together, as OpenMetrics wants them.
            let s = job(id, nodes, ts);
            let reports: Vec<(u32, NodeReport)> = s.nodes.into_iter().map(|n| (id, n)).collect();
            for line in series::render(&reports).lines() {
                if line.starts_with('#') {
                    writeln!(out, "{line}")?;
                } else {
                    writeln!(out, "{line} {ts}")?;
                }
            }
            writeln!(out, "# EOF")?;
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
    out.flush()
}
