//! `slurm-imex job JOBID` on hostile answers from outside: a fake `sacct`
//! beside `[slurm] scontrol` plays Slurm's accounting, and the tests' fake
//! Prometheus (tests/fake-prometheus) plays Prometheus. A stored summary is shown only for
//! the job it names, every piece of outside text is cut to 1 KiB (and,
//! in every field at once, shown printable, forging no line), and the
//! exit status tells "not found" and "not reported yet" from a bad config
//! and a service that could not be asked.

mod common;
use common::hostile::{assert_same_shape, fill_strings, maps_of, unreplaceable, Fill};
use common::*;
use fake_prometheus::{refused_url, ErrorType, FakePrometheus, Reply, Sample};
use slurm_imex_jobsummary::comment;
use slurm_imex_jobsummary::report::{Blame, GpuReport, JobSummary, NodeReport};
use std::path::PathBuf;

/// The job every case asks for.
const JOB: u32 = 4242;
/// One piece of outside text may come out this long: 1 KiB, and the few
/// bytes saying how much was left out.
const PIECE_OUT: usize = 1024 + 40;

/// A scratch site: imex.toml, a fake sacct printing `sacct.out` (and
/// `sacct.err`, exiting `sacct.rc`), and Prometheus's URL when one runs.
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let site = Site { dir: scratch() };
        let bin = site.path("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let d = site.dir.path().display();
        let script = format!(
            "#!/bin/sh\ncat {d}/sacct.out\ncat {d}/sacct.err >&2\nexit $(cat {d}/sacct.rc)\n"
        );
        write_mode(&bin.join("sacct"), script.as_bytes(), 0o755);
        site.sacct(0, "", "");
        site
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// What the fake sacct prints and exits with.
    fn sacct(&self, rc: i32, out: &str, err: &str) {
        write_mode(&self.path("sacct.out"), out.as_bytes(), 0o644);
        write_mode(&self.path("sacct.err"), err.as_bytes(), 0o644);
        write_mode(&self.path("sacct.rc"), rc.to_string().as_bytes(), 0o644);
    }

    /// sacct's line for job 4242 of root, ended, on n[1-2].
    fn accounted(&self, user: &str, admin_comment: &str) {
        let line =
            format!("{JOB}|{user}|0|COMPLETED|1790000000|1790000600|n[1-2]|{admin_comment}\n");
        self.sacct(0, &line, "");
    }

    /// imex.toml naming the fake sacct's directory and `[job]` `job_keys`.
    fn config(&self, job_keys: &str) -> PathBuf {
        let p = self.path("imex.toml");
        let text = format!(
            "[slurm]\nscontrol = \"{}\"\n[job]\n{job_keys}",
            self.path("bin/scontrol").display()
        );
        write_mode(&p, text.as_bytes(), 0o644);
        p
    }

    /// `slurm-imex job 4242` with Prometheus at `url`.
    fn job(&self, url: &str) -> Ran {
        let cfg = self.config(&format!("prometheus_url = \"{url}\"\n"));
        self.job_with(&cfg)
    }

    fn job_with(&self, config: &std::path::Path) -> Ran {
        run(
            &bin("slurm-imex"),
            &[
                "--config",
                config.to_str().unwrap(),
                "job",
                &JOB.to_string(),
            ],
            &[],
        )
    }
}

/// Prometheus played on 127.0.0.1, answering every query with `reply`,
/// for as long as it is kept.
fn prometheus(reply: Reply) -> FakePrometheus {
    FakePrometheus::answering(reply)
}

/// Prometheus with nothing to say: no node reported the job.
fn nothing() -> FakePrometheus {
    prometheus(Reply::empty())
}

/// A URL where nothing listens.
fn nobody() -> String {
    refused_url("http")
}

/// A one-node summary of job `job_id` on `node`, one GPU `serial`; the node
/// blamed the job with `cause` when one is given.
fn summary(job_id: u32, node: &str, serial: &str, cause: Option<String>) -> String {
    let s = JobSummary {
        job_id,
        nodes: vec![NodeReport {
            node: node.into(),
            blame: if cause.is_some() {
                Blame::Job
            } else {
                Blame::None
            },
            cause,
            gpus: vec![GpuReport {
                index: 0,
                serial: serial.into(),
                verdict: "DRAIN".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    comment::encode(&s).unwrap()
}

/// Every line of the run, stdout and stderr.
fn lines(r: &Ran) -> Vec<&str> {
    r.stdout.lines().chain(r.stderr.lines()).collect()
}

#[test]
fn a_stored_summary_is_shown_only_for_the_job_it_names() {
    if !is_root() {
        eprintln!("skipped: the fake sacct must pass the trust check (CI runs as root)");
        return;
    }
    let site = Site::new();
    let prom = nothing();
    let url = prom.url();
    // Its own summary is shown.
    site.accounted("root", &summary(JOB, "n1", "SERIAL-OF-4242", None));
    let own = site.job(url);
    own.ended_without_panic("own summary");
    assert_eq!(own.code, Some(0), "own summary: {}", own.stderr);
    assert!(
        own.stdout.contains("source: stored summary (AdminComment)"),
        "{}",
        own.stdout
    );
    assert!(own.stdout.contains("SERIAL-OF-4242"), "{}", own.stdout);
    // Another job's (an operator's edit, a restored database, ids that
    // started again): never shown as this job's; one line says whose it
    // is, and the answer is Prometheus's (here: nothing yet).
    site.accounted("root", &summary(17, "other-node", "SERIAL-OF-17", None));
    let other = site.job(url);
    other.ended_without_panic("another job's summary");
    for shown in [
        "SERIAL-OF-17",
        "other-node",
        "stored summary (AdminComment)",
    ] {
        assert!(
            !other.stdout.contains(shown),
            "job 17's summary shown as job {JOB}'s ({shown}): {}",
            other.stdout
        );
    }
    other.one_line_error(
        1,
        &[
            &format!("job {JOB}'s AdminComment"),
            "belongs to job 17",
            "Prometheus",
        ],
        "another job's summary",
    );
    assert!(other.stdout.contains("source: none"), "{}", other.stdout);
}

#[test]
fn outside_text_is_cut_to_one_kib_a_piece() {
    if !is_root() {
        eprintln!("skipped: the fake sacct must pass the trust check (CI runs as root)");
        return;
    }
    let site = Site::new();
    let mib = "x".repeat(1 << 20);
    let mut cases: Vec<(&str, Ran)> = Vec::new();
    // Prometheus's own error, 1 MiB of it.
    site.accounted("root", "");
    let error = prometheus(Reply::error(ErrorType::BadData, &mib));
    cases.push(("a 1 MiB Prometheus error", site.job(error.url())));
    // A series whose cause label is 1 MiB: its note and its table cell.
    let job = JOB.to_string();
    let info = [
        ("__name__", "slurm_imex_job_node_info"),
        ("jobid", job.as_str()),
        ("node", "n1"),
    ];
    let cause = [("blame", "job"), ("cause", mib.as_str())];
    let label = prometheus(Reply::vector(vec![Sample::new(
        info.into_iter().chain(cause),
        1.0,
    )]));
    cases.push(("a 1 MiB label", site.job(label.url())));
    // A node's IMEX events line of 1 MiB with escapes and a newline: one
    // line for the node, cut, printable.
    let line = format!("IMEX daemon died\u{1b}[2J\nforged {mib}");
    let events = prometheus(Reply::vector(vec![Sample::new(
        info.into_iter().chain([("imex_events", line.as_str())]),
        1.0,
    )]));
    let events = site.job(events.url());
    assert!(
        events
            .stdout
            .contains("\n  n1: IMEX daemon died\\x1b[2J\\x0aforged xxx"),
        "{}{}",
        events.stdout,
        events.stderr
    );
    assert!(!events.stdout.chars().any(|c| c.is_control() && c != '\n'));
    cases.push(("a 1 MiB IMEX events label", events));
    // A stored summary whose cause is 1 MiB (it deflates to little).
    site.accounted("root", &summary(JOB, "n1", "S", Some(mib.clone())));
    cases.push(("a 1 MiB stored cause", site.job(&nobody())));
    // sacct: a 1 MiB user name, and a 1 MiB error.
    site.accounted(&"u".repeat(1 << 20), "");
    cases.push(("a 1 MiB user", site.job(nothing().url())));
    site.sacct(1, "", &mib);
    cases.push(("a 1 MiB sacct error", site.job(&nobody())));
    for (case, r) in &cases {
        r.ended_without_panic(case);
        for l in lines(r) {
            assert!(
                l.len() <= PIECE_OUT + 200,
                "{case}: a line of {} bytes: {}…",
                l.len(),
                l.chars().take(200).collect::<String>()
            );
        }
        assert!(
            r.stdout.len() + r.stderr.len() < 8 * PIECE_OUT,
            "{case}: {} bytes printed",
            r.stdout.len() + r.stderr.len()
        );
    }
    eprintln!("bad-input: {} outside-text cases", cases.len());
}

#[test]
fn job_exit_status_tells_not_found_from_bad_config_and_unreachable_services() {
    if !is_root() {
        eprintln!("skipped: the fake sacct must pass the trust check (CI runs as root)");
        return;
    }
    let site = Site::new();
    // 1: the job is known, no node has reported it yet.
    site.accounted("root", "");
    let r = site.job(nothing().url());
    r.ended_without_panic("not reported yet");
    assert_eq!(
        r.code,
        Some(1),
        "not reported yet: {}{}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stdout.contains("no node has reported this job (yet)"),
        "{}",
        r.stdout
    );
    // 2: accounting has no such job (or it is another user's).
    site.sacct(0, "", "");
    site.job(&nobody()).one_line_error(
        2,
        &[&format!("job {JOB}: not in Slurm's accounting")],
        "not found",
    );
    // 3: the config cannot be used, refused at load naming file:line:key.
    let cfg = site.config("prometheus_url = \"host:9090\"\n");
    site.job_with(&cfg).one_line_error(
        3,
        &[
            &format!("{}:4", cfg.display()),
            "[job] prometheus_url",
            "http://",
        ],
        "a URL without a scheme",
    );
    // 4: a service could not be asked, or answered what is not an answer.
    site.accounted("root", "");
    site.job(&nobody()).one_line_error(
        4,
        &["Prometheus at", "connection refused: is it running"],
        "Prometheus down",
    );
    let bad = prometheus(Reply::error(ErrorType::BadData, "parse error"));
    site.job(bad.url())
        .one_line_error(4, &["Prometheus at", "parse error"], "Prometheus refuses");
    let proxy = prometheus(Reply::raw(200, "text/html", "<html>proxy login</html>"));
    site.job(proxy.url()).one_line_error(
        4,
        &["Prometheus at", "not its API's JSON"],
        "not Prometheus",
    );
    site.sacct(
        1,
        "",
        "sacct: error: Problem talking to the database: Connection refused",
    );
    site.job(&nobody())
        .one_line_error(4, &["sacct failed", "Connection refused"], "SlurmDBD down");
}

#[test]
fn a_stored_summary_with_huge_counters_is_shown_without_overflow() {
    if !is_root() {
        eprintln!("skipped: the fake sacct must pass the trust check (CI runs as root)");
        return;
    }
    // A corrupt or edited comment: every counter at u32::MAX, a rack
    // counting more than it could.
    let max = u32::MAX;
    let s = JobSummary {
        job_id: JOB,
        nodes: vec![NodeReport {
            node: "n1".into(),
            blame: Blame::Node,
            ..Default::default()
        }],
        missing_hostlist: "n[2-3]".into(),
        missing_count: max,
        trimmed_gpus: max,
        trimmed_imex_events: max,
        trimmed_pass_nodes: max,
        trimmed_other_nodes: max,
        racks: vec![slurm_imex_jobsummary::report::RackCount {
            rack: "n".into(),
            nodes: max,
            pass: max,
            warn: max,
            fail: max,
        }],
        ..Default::default()
    };
    let site = Site::new();
    let prom = nothing();
    site.accounted("root", &comment::encode(&s).unwrap());
    let r = site.job(prom.url());
    r.ended_without_panic("huge counters");
    assert_eq!(r.code, Some(0), "huge counters: {}", r.stderr);
    assert!(r.stdout.contains("4,294,967,295"), "{}", r.stdout);
}

// Every string of the job view hostile: what Prometheus answers with (each
// text label), what an operator may have stored in AdminComment (each
// string of the summary), what sacct says (the user, the state). The same
// run with the same strings made benign prints the same lines.

/// A node of a job as its epilog reports it, every field set (a field
/// left unset would not be made hostile; `every_field_of_the_example_is_set`
/// keeps it so).
fn full_node(i: usize) -> NodeReport {
    use slurm_imex_jobsummary::report::XidCount;
    let gpu = |g: u32| GpuReport {
        index: g,
        serial: format!("S{i}-{g}"),
        name: "NVIDIA GB200".into(),
        verdict: if g == 0 { "WARN" } else { "DRAIN" }.into(),
        energy_j: Some(123_000.0),
        processes: Some(g),
        gpu_util_pct: Some(17.0),
        mem_util_pct: Some(9.0),
        peak_memory_bytes: Some(7 << 30),
        busy_s: Some(30.0),
        xids: vec![
            XidCount {
                xid: 13,
                class: "RESTART_APP".into(),
                count: 2,
            },
            XidCount {
                xid: 79,
                class: "REBOOT".into(),
                count: 1,
            },
        ],
        ecc_sbe: Some(1),
        ecc_dbe: Some(2),
        remapped_rows: Some(3),
        remap_pending: true,
        recovery_action: Some(5),
        throttle_s: [("hw_slowdown".to_string(), 2.5)].into(),
        nvlink_errors: [("replay".to_string(), 4)].into(),
    };
    NodeReport {
        node: format!("n{i}"),
        user: Some("alice".into()),
        start_ts: 1_790_000_000,
        end_ts: Some(1_790_000_600),
        imex: true,
        domain: Some(format!("block{}", i / 18)),
        channel: Some(5),
        imex_ready_ms: Some(1_200),
        prolog: Some("PASS".into()),
        epilog: Some("DRAIN".into()),
        blame: Blame::Node,
        cause: Some(format!("GPU fell off the bus on n{i}")),
        prolog_ms: Some(900),
        epilog_ms: Some(1_100),
        gpus: vec![gpu(0), gpu(1)],
        imex_events: Some(format!("IMEX daemon died at 12:03:04 on n{i}")),
    }
}

/// A summary of `nodes` nodes, every field set.
fn full_summary(nodes: usize) -> JobSummary {
    use slurm_imex_jobsummary::report::{RackCount, Totals};
    JobSummary {
        job_id: JOB,
        nodes: (1..=nodes).map(full_node).collect(),
        missing: vec!["m1".into(), "m2".into()],
        missing_hostlist: "m[3-9]".into(),
        missing_count: 7,
        trimmed_gpus: 1,
        trimmed_imex_events: 1,
        trimmed_pass_nodes: 1,
        trimmed_other_nodes: 1,
        racks: vec![RackCount {
            rack: "block0".into(),
            nodes: 18,
            pass: 1,
            warn: 2,
            fail: 15,
        }],
        stored_totals: Some(Totals {
            gpus: 4,
            gpu_util_pct: Some(12.0),
            peak_memory_bytes: Some(7 << 30),
            energy_j: Some(4.0e5),
            idle_gpus: 1,
        }),
        pass_nodes_aggregated: true,
    }
}

#[test]
fn every_field_of_the_example_is_set() {
    use common::hostile::assert_every_field_set;
    use slurm_imex_jobsummary::report::{RackCount, Totals, XidCount};
    let v = serde_json::to_value(full_summary(1)).unwrap();
    assert_every_field_set::<JobSummary>(&v);
    assert_every_field_set::<NodeReport>(&v["nodes"][0]);
    assert_every_field_set::<GpuReport>(&v["nodes"][0]["gpus"][0]);
    assert_every_field_set::<XidCount>(&v["nodes"][0]["gpus"][0]["xids"][0]);
    assert_every_field_set::<RackCount>(&v["racks"][0]);
    assert_every_field_set::<Totals>(&v["stored_totals"]);
}

/// `summary` with every string `fill`ed, stored as an operator could have
/// (base32 of deflated JSON, whatever `comment::encode` would keep).
fn stored(summary: &JobSummary, fill: Fill) -> String {
    use std::io::Write as _;
    let mut v = serde_json::to_value(summary).unwrap();
    let keep = unreplaceable::<JobSummary>(&v);
    let maps = maps_of::<JobSummary>(&v);
    fill_strings(&mut v, &keep, &maps, fill);
    let filled: JobSummary = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(filled.job_id, JOB);
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(v.to_string().as_bytes()).unwrap();
    let packed = z.finish().unwrap();
    format!(
        "{}{}",
        comment::PREFIX,
        data_encoding::BASE32_NOPAD.encode(&packed)
    )
}

/// Prometheus's answer holding every series of `summary`'s nodes, each
/// text label `fill`ed (a number a label must parse as stays).
fn prometheus_answer(summary: &JobSummary, fill: Fill) -> String {
    let reports: Vec<(u32, NodeReport)> = summary.nodes.iter().map(|n| (JOB, n.clone())).collect();
    let scraped = fake_prometheus::scrape(&slurm_imex_jobsummary::series::render(&reports));
    let samples: Vec<serde_json::Value> = scraped
        .unwrap()
        .iter()
        .map(|s| serde_json::json!({"metric": s.labels, "value": [1790000600.0, s.value]}))
        .collect();
    let mut answer = serde_json::json!({
        "status": "success",
        "data": {"resultType": "vector", "result": samples}
    });
    let keep: Vec<String> = [
        "status",
        "resultType",
        "value",
        "__name__",
        "jobid",
        "gpu",
        "xid",
        "type",
        "imex",
        "channel",
        "blame",
    ]
    .map(String::from)
    .to_vec();
    fill_strings(&mut answer, &keep, &[], fill);
    answer.to_string()
}

/// sacct's line for the job on `node_list`, its user and state `fill`ed,
/// with `comment`.
fn sacct_line(node_list: &str, fill: Fill, comment: &str) -> String {
    let mut who = serde_json::json!({"user": "alice", "state": "COMPLETED"});
    fill_strings(&mut who, &[], &[], fill);
    // sacct's lines are lines: a newline there is the next job, not text.
    let field = |k: &str| who[k].as_str().unwrap().replace(['\n', '|'], " ");
    format!(
        "{JOB}|{}|0|{}|1790000000|1790000600|{node_list}|{comment}\n",
        field("user"),
        field("state")
    )
}

#[test]
fn outside_text_in_every_field_shows_no_control_byte_and_forges_no_line() {
    if !is_root() {
        eprintln!("skipped: the fake sacct must pass the trust check (CI runs as root)");
        return;
    }
    let site = Site::new();
    let small = full_summary(3);
    // More nodes than `slurm-imex job` lists one by one (64), of a job
    // read from Prometheus in aggregate (more than 2,048 nodes).
    let big = full_summary(70);
    let hostile_and_benign =
        |case: &str, node_list: &str, answer: &dyn Fn(Fill) -> (String, Reply)| {
            let mut runs = Vec::new();
            for fill in [Fill::hostile(6), Fill::benign(6)] {
                let (comment, prometheus_reply) = answer(fill);
                site.sacct(0, &sacct_line(node_list, fill, &comment), "");
                // Its megabyte label is read 20 times by a debug build:
                // time enough on a loaded machine, within the 20 s bound.
                let prom = prometheus(prometheus_reply);
                let cfg = site.config(&format!(
                    "prometheus_url = \"{}\"\nquery_timeout = \"19s\"\n",
                    prom.url()
                ));
                runs.push(site.job_with(&cfg));
            }
            let (hostile, benign) = (&runs[0], &runs[1]);
            assert_eq!(hostile.code, Some(0), "{case}: {}", hostile.stderr);
            assert_same_shape(case, hostile, benign);
            assert!(
                hostile
                    .stdout
                    .contains("\\x1b[2J\\x1b]0;pwned\\x07\\x07\\x00\\x0d\\x0aFORGED"),
                "{case}: the hostile text is shown, escaped: {}",
                hostile.stdout
            );
            eprintln!(
                "{case}: {} lines, {} bytes, none forged",
                hostile.stdout.lines().count(),
                hostile.stdout.len()
            );
            runs.swap_remove(0)
        };
    let prometheus_only = |s: &JobSummary| {
        let s = s.clone();
        move |fill: Fill| {
            let fill = Fill {
                megabytes: 1,
                ..fill
            };
            (
                String::new(),
                Reply::json(200, &prometheus_answer(&s, fill)),
            )
        }
    };
    let stored_only = |s: &JobSummary| {
        let s = s.clone();
        move |fill: Fill| (stored(&s, fill), Reply::empty())
    };
    let r = hostile_and_benign(
        "a small job from Prometheus",
        "n[1-4]",
        &prometheus_only(&small),
    );
    assert!(r.stdout.contains("source: Prometheus"), "{}", r.stdout);
    let r = hostile_and_benign(
        "a big job from Prometheus, in aggregate",
        "n[1-3000]",
        &prometheus_only(&big),
    );
    assert!(
        r.stdout.contains("nodes that did not pass (70 of 70;"),
        "{}",
        r.stdout
    );
    let r = hostile_and_benign(
        "a small job's stored summary",
        "n[1-4]",
        &stored_only(&small),
    );
    assert!(
        r.stdout.contains("source: stored summary (AdminComment)"),
        "{}",
        r.stdout
    );
    hostile_and_benign(
        "a big job's stored summary",
        "n[1-3000]",
        &stored_only(&big),
    );
    // --json carries the text as it is, escaped by JSON.
    site.sacct(
        0,
        &sacct_line(
            "n[1-4]",
            Fill::hostile(0),
            &stored(&small, Fill::hostile(0)),
        ),
        "",
    );
    let cfg = site.config(&format!("prometheus_url = \"{}\"\n", nobody()));
    let json = run(
        &bin("slurm-imex"),
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--json",
            "job",
            &JOB.to_string(),
        ],
        &[],
    );
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    // (JSON escapes the C0 controls; DEL, C1 and the bidi overrides it
    // carries as they are, as every JSON encoder does.)
    assert!(
        !json.stdout.chars().any(|c| c < ' ' && c != '\n'),
        "--json: a raw control character"
    );
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let node = v["summary"]["nodes"][0]["node"].as_str().unwrap();
    assert!(
        node.contains("\u{1b}[2J") && node.contains("\r\nFORGED"),
        "{node:?}"
    );
}
