//! The compact job summary stored once per job in Slurm's accounting, in the
//! job's `AdminComment`: `slurm-imex:1:` then base32 (RFC 4648, no padding)
//! of the deflated JSON of a [`JobSummary`]. AdminComment, not Comment, because only an operator
//! can set it (sacctmgr refuses a user), so a user cannot forge or erase
//! their job's verdicts, while `sacct` still shows it to the job's owner.
//! Base32 passes sacctmgr's argument parsing and SlurmDBD's quoting as is,
//! and is read case-insensitively: Slurm 22.05's sacctmgr stores an
//! AdminComment lowercased (measured in the e2e accounting phase), which
//! would corrupt base64.

pub use crate::field::MAX_LEN;
use crate::report::{count_u32, JobSummary, NodeStatus};
use data_encoding::BASE32_NOPAD;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::text::{cap, PIECE_MAX};
use std::io::{Read as _, Write as _};

pub const PREFIX: &str = "slurm-imex:1:";
/// Nodes that never reported named one by one in a summary that must leave
/// nodes out; more are stored as one hostlist.
const MISSING_NAMED: usize = 64;
/// Largest JSON a stored summary may inflate to (a hostile or corrupt
/// comment must not exhaust memory).
const MAX_JSON: u64 = 16 << 20;

/// Whether `comment` holds a summary of ours (of any version).
pub fn is_ours(comment: &str) -> bool {
    comment.starts_with("slurm-imex:")
}

/// The stored text for `summary`. A summary too large for the field drops,
/// in this order, until it fits: the nodes' IMEX events lines (counted in
/// `trimmed_imex_events`; each node's `slurm-imex show` still has them),
/// healthy GPUs (counted in `trimmed_gpus`), then the nodes that passed
/// (`trimmed_pass_nodes`; more than 64 nodes that never reported become
/// one hostlist then), and last the nodes that warned
/// (`trimmed_other_nodes`, their GPUs in `trimmed_gpus`), failed nodes
/// kept first. Once GPUs go, the
/// job's totals over every GPU are stored (`stored_totals`); once nodes go,
/// the per-rack rollup of every node (`racks`). None if even every FAIL
/// node with the rollup is too large.
///
/// The shape only grew (every new field has a serde default), so the prefix
/// stays `slurm-imex:1:`: summaries stored before decode as they did, and
/// an older reader of a trimmed one shows the nodes it holds.
pub fn encode(summary: &JobSummary) -> Option<String> {
    if let Some(text) = fitting(summary) {
        return Some(text);
    }
    let mut trimmed = summary.clone();
    if leave_out_imex_events(&mut trimmed) > 0 {
        if let Some(text) = fitting(&trimmed) {
            return Some(text);
        }
    }
    // Totals as the whole job has them, before anything goes.
    trimmed.stored_totals = Some(summary.totals());
    leave_out_healthy_gpus(&mut trimmed);
    if let Some(text) = fitting(&trimmed) {
        return Some(text);
    }
    // The rollup as the whole job has it, then the PASS nodes go
    // (crate::rollup owns how they are left out and counted).
    trimmed.racks = summary.rollup();
    name_missing_as_hostlist(&mut trimmed);
    trimmed.leave_out_pass_nodes();
    if let Some(text) = fitting(&trimmed) {
        return Some(text);
    }
    most_nodes_that_fit(trimmed)
}

/// The stored text for `summary` when it fits Slurm's field.
fn fitting(summary: &JobSummary) -> Option<String> {
    encode_exactly(summary).filter(|t| t.len() <= MAX_LEN)
}

/// Every node's IMEX events line dropped; how many nodes had one.
fn leave_out_imex_events(s: &mut JobSummary) -> u32 {
    for node in &mut s.nodes {
        if node.imex_events.take().is_some() {
            s.trimmed_imex_events = s.trimmed_imex_events.saturating_add(1);
        }
    }
    s.trimmed_imex_events
}

/// Every healthy GPU dropped (PASS, no XID, used, no recovery action
/// asked), counted.
fn leave_out_healthy_gpus(s: &mut JobSummary) {
    for node in &mut s.nodes {
        let before = node.gpus.len();
        node.gpus.retain(|g| {
            g.verdict != "PASS"
                || !g.xids.is_empty()
                || g.processes == Some(0)
                || g.recovery_action.is_some()
        });
        s.trimmed_gpus = s
            .trimmed_gpus
            .saturating_add(count_u32(before - node.gpus.len()));
    }
}

/// More than [`MISSING_NAMED`] nodes that never reported: their names as
/// one hostlist, and their count.
fn name_missing_as_hostlist(s: &mut JobSummary) {
    if s.missing.len() > MISSING_NAMED {
        s.missing_count = count_u32(s.missing.len());
        s.missing_hostlist =
            slurm_imex_core::slurm::hostlist::compress(&std::mem::take(&mut s.missing));
    }
}

/// Even the nodes that did not pass are too many: keep FAIL before WARN
/// (stable, so in their order), as many as fit, found by bisection (the
/// size grows with them); the nodes left out and their GPUs are counted.
/// None if every FAIL node alone is too large.
fn most_nodes_that_fit(mut trimmed: JobSummary) -> Option<String> {
    trimmed.nodes.sort_by_key(|n| std::cmp::Reverse(n.status()));
    let all = std::mem::take(&mut trimmed.nodes);
    let fails = all
        .iter()
        .filter(|n| n.status() == NodeStatus::Fail)
        .count();
    let fits = |keep: usize| {
        let mut t = trimmed.clone();
        t.nodes = all[..keep].to_vec();
        let out = &all[keep..];
        t.trimmed_other_nodes = count_u32(out.len());
        let gpus = out.iter().map(|n| n.gpus.len()).sum::<usize>();
        t.trimmed_gpus = t.trimmed_gpus.saturating_add(count_u32(gpus));
        fitting(&t)
    };
    let (mut lo, mut hi) = (fails, all.len());
    let mut best = fits(fails)?;
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        match fits(mid) {
            Some(text) => {
                best = text;
                lo = mid;
            }
            None => hi = mid - 1,
        }
    }
    Some(best)
}

fn encode_exactly(summary: &JobSummary) -> Option<String> {
    let json = serde_json::to_vec(summary).ok()?;
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(&json).ok()?;
    let packed = z.finish().ok()?;
    Some(format!("{PREFIX}{}", BASE32_NOPAD.encode(&packed)))
}

/// The summary in a stored comment; an error names what is wrong with it.
pub fn decode(comment: &str) -> Result<JobSummary> {
    let bad = |why: String| {
        Error::new(format!(
            "the job's AdminComment is not a slurm-imex summary this version reads: {}",
            cap(&why, PIECE_MAX)
        ))
    };
    let Some(body) = comment.trim().strip_prefix(PREFIX) else {
        return Err(bad(format!("it does not start with {PREFIX}")));
    };
    let packed = BASE32_NOPAD
        .decode(body.to_ascii_uppercase().as_bytes())
        .map_err(|e| bad(format!("base32: {e}")))?;
    let mut json = Vec::new();
    flate2::read::DeflateDecoder::new(packed.as_slice())
        .take(MAX_JSON + 1)
        .read_to_end(&mut json)
        .map_err(|e| bad(format!("deflate: {e}")))?;
    if json.len() as u64 > MAX_JSON {
        return Err(bad(format!("it inflates past {} MiB", MAX_JSON >> 20)));
    }
    let mut value: serde_json::Value =
        serde_json::from_slice(&json).map_err(|e| bad(format!("JSON: {e}")))?;
    // The hostlist of the nodes that never reported is read whole (a
    // piece of it would not expand); where it is shown it is cut there.
    let hostlist = value
        .as_object_mut()
        .and_then(|o| o.remove("missing_hostlist"));
    cap_strings(&mut value);
    if let (Some(o), Some(h @ serde_json::Value::String(_))) = (value.as_object_mut(), hostlist) {
        o.insert("missing_hostlist".into(), h);
    }
    serde_json::from_value(value).map_err(|e| bad(format!("JSON: {e}")))
}

/// Every string in `v` (keys too) cut to [`PIECE_MAX`]: a stored summary is
/// outside text (an operator may have edited it), and its node names,
/// causes and verdicts go into lines and tables as they are.
fn cap_strings(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) if s.len() > PIECE_MAX => *s = cap(s, PIECE_MAX),
        Value::Array(items) => items.iter_mut().for_each(cap_strings),
        Value::Object(map) => {
            let fields = std::mem::take(map);
            for (k, mut item) in fields {
                cap_strings(&mut item);
                map.insert(cap(&k, PIECE_MAX), item);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{GpuReport, NodeReport};

    fn summary(nodes: usize, gpus: u32) -> JobSummary {
        JobSummary {
            job_id: 99,
            nodes: (0..nodes)
                .map(|n| NodeReport {
                    node: format!("gb-r{}-{:02}", n / 18 + 1, n % 18 + 1),
                    user: Some("alice".into()),
                    gpus: (0..gpus)
                        .map(|i| GpuReport {
                            index: i,
                            serial: format!("{}", 1_650_924_000_000u64 + (n as u64) * 8 + i as u64),
                            name: "NVIDIA GB200".into(),
                            verdict: if n == 3 && i == 1 {
                                "DRAIN".into()
                            } else {
                                "PASS".into()
                            },
                            energy_j: Some(123_456.789 + n as f64),
                            processes: Some(1),
                            gpu_util_pct: Some(97.25),
                            peak_memory_bytes: Some(180 << 30),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_rack_sized_summary_round_trips_whole() {
        let s = summary(18, 4);
        let text = encode(&s).unwrap();
        assert!(text.len() <= MAX_LEN);
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+/=:-".contains(&b)),
            "no quoting needed"
        );
        assert_eq!(decode(&text).unwrap(), s);
    }

    /// An 18,432-node job (1,024 NVL72 racks of 18, 4 GPUs a node), its IMEX
    /// domain split by rack; `warn` nodes warned and `fail` nodes failed,
    /// spread over the racks.
    fn big(warn: usize, fail: usize) -> JobSummary {
        let mut s = summary(18_432, 4);
        for (i, n) in s.nodes.iter_mut().enumerate() {
            n.imex = true;
            n.domain = Some(format!("rack{}", i / 18 + 1));
            n.prolog = Some("PASS".into());
            n.epilog = Some("PASS".into());
            for g in &mut n.gpus {
                g.verdict = "PASS".into();
            }
        }
        for k in 0..warn {
            let n = &mut s.nodes[k * 347 % 18_432];
            n.epilog = Some("WARN".into());
            n.gpus[1].xids = vec![crate::report::XidCount {
                xid: 13,
                class: "RESTART_APP".into(),
                count: 1,
            }];
            n.gpus[1].verdict = "WARN".into();
        }
        for k in 0..fail {
            let n = &mut s.nodes[(k * 7919 + 5) % 18_432];
            n.blame = crate::report::Blame::Node;
            n.cause = Some(format!("gpu{} fell off the bus (XID 79)", k % 4));
            n.gpus[k % 4].verdict = "DRAIN".into();
        }
        s
    }

    #[test]
    fn an_18432_node_job_keeps_its_rollup_and_every_node_that_did_not_pass() {
        let s = big(40, 12);
        let nodes_not_pass = s
            .nodes
            .iter()
            .filter(|n| n.status() != NodeStatus::Pass)
            .count();
        assert_eq!(nodes_not_pass, 52);
        let text = encode(&s).unwrap();
        assert!(text.len() <= MAX_LEN, "{}", text.len());
        let back = decode(&text).unwrap();
        assert_eq!(back.trimmed_pass_nodes, 18_380);
        assert_eq!(back.trimmed_other_nodes, 0);
        assert_eq!(back.nodes.len(), 52);
        assert_eq!(back.reported_nodes(), 18_432);
        let racks = back.rollup();
        assert_eq!(racks.len(), 1024);
        assert_eq!(racks, s.rollup(), "the stored rollup is the whole job's");
        assert_eq!(racks.iter().map(|r| r.nodes).sum::<u32>(), 18_432);
        assert_eq!(racks.iter().map(|r| r.fail).sum::<u32>(), 12);
        assert_eq!(racks.iter().map(|r| r.warn).sum::<u32>(), 40);
        assert_eq!(racks[1].rack, "rack2", "racks in natural order");
        let (t, whole) = (back.totals(), s.totals());
        assert_eq!(
            (t.gpus, t.idle_gpus, t.peak_memory_bytes, t.gpu_util_pct),
            (
                whole.gpus,
                whole.idle_gpus,
                whole.peak_memory_bytes,
                whole.gpu_util_pct
            ),
            "totals over every GPU, stored"
        );
        let (e, we) = (t.energy_j.unwrap(), whole.energy_j.unwrap());
        assert!((e - we).abs() < we * 1e-12, "{e} {we}");
        assert_eq!(t.gpus, 73_728);
        assert_eq!(back.trimmed_gpus + back.gpus().count() as u32, 73_728);
        let notes = back.notes().join("\n");
        assert!(
            notes.contains("18,380 PASS nodes not stored (Slurm's field holds 60000 characters); their rack rollup is"),
            "{notes}"
        );
        assert!(
            notes.contains("the summary line's totals count them"),
            "{notes}"
        );
    }

    #[test]
    fn when_even_the_nodes_that_did_not_pass_are_too_many_fail_nodes_come_first() {
        // Every node warned (each its own XID, so deflate cannot fold them),
        // 30 failed.
        let mut s = big(0, 30);
        for (i, n) in s.nodes.iter_mut().enumerate() {
            if n.status() == NodeStatus::Pass {
                n.epilog = Some("WARN".into());
                n.cause = Some(format!("slow epilog {:x}", i.wrapping_mul(2_654_435_761)));
                // A GPU that stays once healthy GPUs go: a WARN node left
                // out takes it with it, and it must be counted.
                n.gpus[0].verdict = "WARN".into();
            }
        }
        let text = encode(&s).unwrap();
        assert!(text.len() <= MAX_LEN, "{}", text.len());
        let back = decode(&text).unwrap();
        assert_eq!(back.trimmed_pass_nodes, 0);
        assert!(
            back.trimmed_other_nodes > 10_000,
            "{}",
            back.trimmed_other_nodes
        );
        assert_eq!(back.reported_nodes(), 18_432);
        let fails = back
            .nodes
            .iter()
            .filter(|n| n.status() == NodeStatus::Fail)
            .count();
        assert_eq!(fails, 30, "every FAIL node is kept");
        assert!(back.nodes.len() > 30, "and as many WARN nodes as fit");
        assert_eq!(back.rollup().iter().map(|r| r.warn).sum::<u32>(), 18_402);
        assert_eq!(
            back.trimmed_gpus + back.gpus().count() as u32,
            73_728,
            "the GPUs of the WARN nodes left out are counted"
        );
        assert!(back
            .notes()
            .join("\n")
            .contains("WARN nodes not stored either"));
    }

    #[test]
    fn many_nodes_that_never_reported_are_stored_as_one_hostlist() {
        let mut s = big(0, 3);
        let gone: Vec<NodeReport> = s.nodes.split_off(9_216);
        s.missing = gone.into_iter().map(|n| n.node).collect();
        let text = encode(&s).unwrap();
        assert!(text.len() <= MAX_LEN, "{}", text.len());
        let back = decode(&text).unwrap();
        assert!(back.missing.is_empty());
        assert_eq!(back.missing_count, 9_216);
        assert_eq!(back.missing_nodes(), 9_216);
        assert!(
            back.missing_hostlist
                .starts_with("gb-r513-[01-18],gb-r514-[01-18],"),
            "{}",
            &back.missing_hostlist[..40]
        );
        assert_eq!(
            slurm_imex_core::slurm::hostlist::expand(&back.missing_hostlist, 20_000).unwrap(),
            s.missing
        );
        let notes = back.notes().join("\n");
        assert!(
            notes.contains("no report from 9,216 nodes: gb-r513-[01-18],"),
            "{notes}"
        );
    }

    #[test]
    fn a_summary_stored_before_the_rollup_still_decodes() {
        // The JSON an earlier release stored: no racks, totals or node counts.
        let old = r#"{"job_id":7,"nodes":[{"node":"n1","start_ts":1,"imex":false,"blame":"none",
            "gpus":[{"index":0,"serial":"S0","verdict":"PASS","processes":0}]}],"trimmed_gpus":3}"#;
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(old.as_bytes()).unwrap();
        let text = format!("{PREFIX}{}", BASE32_NOPAD.encode(&z.finish().unwrap()));
        let back = decode(&text).unwrap();
        assert_eq!(
            (back.job_id, back.nodes.len(), back.trimmed_gpus),
            (7, 1, 3)
        );
        assert_eq!((back.trimmed_pass_nodes, back.trimmed_other_nodes), (0, 0));
        assert!(back.racks.is_empty() && back.stored_totals.is_none());
        assert_eq!(back.totals().gpus, 4, "computed, as before");
        assert_eq!(back.rollup()[0].rack, "n", "computed from its nodes");
        assert_eq!(
            back.nodes[0].gpus[0].recovery_action, None,
            "stored before recovery actions were kept"
        );
    }

    #[test]
    fn a_gpu_that_ends_asking_for_a_recovery_action_is_never_left_out() {
        // 2000 nodes: healthy GPUs are left out to fit; one PASS GPU whose
        // driver asks for RECOVER_IMEX_DOMAIN is a finding, and stays.
        let mut s = summary(2000, 4);
        s.nodes[7].gpus[2].recovery_action = Some(5);
        let back = decode(&encode(&s).unwrap()).unwrap();
        assert_eq!(back.trimmed_gpus, 7998);
        let kept = &back.nodes[7].gpus;
        assert_eq!(
            (kept.len(), kept[0].index, kept[0].recovery_action),
            (1, 2, Some(5))
        );
        assert!(back
            .notes()
            .iter()
            .any(|n| n.contains("RECOVER_IMEX_DOMAIN (5) on gb-r1-08/gpu2")));
    }

    #[test]
    fn a_huge_job_keeps_every_node_and_every_finding() {
        let s = summary(2000, 4);
        let text = encode(&s).unwrap();
        assert!(text.len() <= MAX_LEN, "{}", text.len());
        let back = decode(&text).unwrap();
        assert_eq!(back.nodes.len(), 2000);
        assert_eq!(back.trimmed_gpus, 7999);
        assert_eq!(back.nodes[3].gpus[0].verdict, "DRAIN");
        assert_eq!(back.totals().gpus, 8000);
    }

    /// A line of IMEX events as the watcher's would read, different on
    /// every node (times, peers), so deflate cannot fold them together.
    fn events_line(n: usize) -> String {
        (0..6)
            .map(|i| {
                format!(
                    "IMEX peer lost at {:02}:{:02}:{:02} (gb-r{}-{:02} UNAVAILABLE {:x})",
                    (n * 7 + i) % 24,
                    (n * 13 + i) % 60,
                    (n * 31 + i) % 60,
                    n % 97,
                    (n + i) % 18,
                    n.wrapping_mul(2_654_435_761) ^ i
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    #[test]
    fn imex_events_are_kept_when_they_fit() {
        let mut s = summary(18, 4);
        for (i, n) in s.nodes.iter_mut().enumerate() {
            n.imex_events = Some(events_line(i));
        }
        let back = decode(&encode(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.trimmed_imex_events, 0);
    }

    #[test]
    fn imex_events_are_the_first_thing_left_out_and_the_notes_say_so() {
        // Fits without its events lines, not with them.
        let mut s = summary(400, 4);
        assert!(encode_exactly(&s).unwrap().len() <= MAX_LEN);
        for (i, n) in s.nodes.iter_mut().enumerate() {
            n.imex_events = Some(events_line(i));
        }
        assert!(
            encode_exactly(&s).unwrap().len() > MAX_LEN,
            "the test needs a summary over the budget"
        );
        let text = encode(&s).unwrap();
        assert!(text.len() <= MAX_LEN, "{}", text.len());
        let back = decode(&text).unwrap();
        assert_eq!(back.trimmed_imex_events, 400);
        assert_eq!(
            back.trimmed_gpus, 0,
            "no GPU left out while dropping the events was enough"
        );
        assert!(back.nodes.iter().all(|n| n.imex_events.is_none()));
        let notes = back.notes().join("\n");
        assert!(
            notes.contains("the IMEX events of 400 nodes were left out of the stored summary")
                && notes.contains("slurm-imex show 99 on each node"),
            "{notes}"
        );
        // Too large even so: the healthy GPUs go too, every node kept.
        let mut huge = summary(2000, 4);
        for (i, n) in huge.nodes.iter_mut().enumerate() {
            n.imex_events = Some(events_line(i));
        }
        let back = decode(&encode(&huge).unwrap()).unwrap();
        assert_eq!((back.nodes.len(), back.trimmed_imex_events), (2000, 2000));
        assert_eq!(back.trimmed_gpus, 7999);
    }

    #[test]
    fn foreign_or_corrupt_comments_are_one_line_errors() {
        for bad in [
            "JS1:H4sIAAAA",
            "slurm-imex:1:!!!",
            "slurm-imex:1:AAAAAAAA",
            "",
        ] {
            let e = decode(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("the job's AdminComment is not a slurm-imex summary"),
                "{e}"
            );
            assert!(!e.contains('\n'));
        }
        assert!(!is_ours("JS1:abc"));
    }

    #[test]
    fn every_text_of_a_stored_summary_is_cut_to_a_piece() {
        let mib = "c".repeat(1 << 20);
        let mut s = summary(1, 1);
        s.nodes[0].cause = Some(mib.clone());
        s.nodes[0].gpus[0].throttle_s.insert(mib.clone(), 1.0);
        let back = decode(&encode(&s).unwrap()).unwrap();
        let cause = back.nodes[0].cause.as_deref().unwrap();
        assert!(cause.len() < PIECE_MAX + 32 && cause.ends_with("more bytes)"));
        let reason = back.nodes[0].gpus[0].throttle_s.keys().next().unwrap();
        assert!(reason.len() < PIECE_MAX + 32, "map keys too");
        assert_eq!(back.nodes[0].node, s.nodes[0].node, "short text is kept");
    }

    #[test]
    fn a_deflate_bomb_is_refused() {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&vec![b' '; (MAX_JSON + 10) as usize]).unwrap();
        let text = format!("{PREFIX}{}", BASE32_NOPAD.encode(&z.finish().unwrap()));
        assert!(decode(&text)
            .unwrap_err()
            .to_string()
            .contains("inflates past"));
    }
}
