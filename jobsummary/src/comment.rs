//! The compact job summary stored once per job in Slurm's accounting, in the
//! job's `AdminComment`: `slurm-imex:1:` then base32 (RFC 4648, no padding)
//! of the deflated JSON of a [`JobSummary`]. AdminComment, not Comment, because only an operator
//! can set it (sacctmgr refuses a user), so a user cannot forge or erase
//! their job's verdicts, while `sacct` still shows it to the job's owner.
//! Base32 passes sacctmgr's argument parsing and SlurmDBD's quoting as is,
//! and is read case-insensitively: Slurm 22.05's sacctmgr stores an
//! AdminComment lowercased (measured in the e2e accounting phase), which
//! would corrupt base64.

use crate::report::JobSummary;
use data_encoding::BASE32_NOPAD;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::text::{cap, PIECE_MAX};
use std::io::{Read as _, Write as _};

pub const PREFIX: &str = "slurm-imex:1:";
/// Longest stored text: SlurmDBD keeps AdminComment in a MySQL `text`
/// column (64 KiB); leave room for whatever else shares the job row.
pub const MAX_LEN: usize = 60_000;
/// Largest JSON a stored summary may inflate to (a hostile or corrupt
/// comment must not exhaust memory).
const MAX_JSON: u64 = 16 << 20;

/// Whether `comment` holds a summary of ours (of any version).
pub fn is_ours(comment: &str) -> bool {
    comment.starts_with("slurm-imex:")
}

/// The stored text for `summary`. A summary too large for the field keeps
/// every node and every GPU with a finding: it drops first the nodes' IMEX
/// events lines (counted in `trimmed_imex_events`; each node's `slurm-imex
/// show` still has them), then healthy GPUs (counted in `trimmed_gpus`),
/// until it fits; None if even that is too large.
pub fn encode(summary: &JobSummary) -> Option<String> {
    let text = encode_exactly(summary)?;
    if text.len() <= MAX_LEN {
        return Some(text);
    }
    let mut trimmed = summary.clone();
    for node in &mut trimmed.nodes {
        if node.imex_events.take().is_some() {
            trimmed.trimmed_imex_events += 1;
        }
    }
    if trimmed.trimmed_imex_events > 0 {
        if let Some(text) = encode_exactly(&trimmed).filter(|t| t.len() <= MAX_LEN) {
            return Some(text);
        }
    }
    for node in &mut trimmed.nodes {
        let before = node.gpus.len();
        node.gpus
            .retain(|g| g.verdict != "PASS" || !g.xids.is_empty() || g.processes == Some(0));
        trimmed.trimmed_gpus += (before - node.gpus.len()) as u32;
    }
    encode_exactly(&trimmed).filter(|t| t.len() <= MAX_LEN)
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
    cap_strings(&mut value);
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
