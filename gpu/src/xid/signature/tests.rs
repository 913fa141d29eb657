//! The signatures against every published sample line, the forms one
//! `/dev/kmsg` record takes, near misses, floods, and the docs' tables.

use super::*;
use crate::xid::log::parse_log;

const SAMPLES: &str = include_str!("../../../../tests/data/samples/kmsg-signatures.txt");

/// Each sighting of a log as (check, GPU, lines).
fn seen(log: &str) -> Vec<(&'static str, Option<String>, usize)> {
    parse_log(log)
        .signatures
        .into_iter()
        .map(|s| (s.check, s.pci, s.seqs.len()))
        .collect()
}

fn node(check: &'static str, lines: usize) -> (&'static str, Option<String>, usize) {
    (check, None, lines)
}

fn gpu(pci: &str, lines: usize) -> (&'static str, Option<String>, usize) {
    (FALLEN_OFF_BUS, Some(pci.to_string()), lines)
}

#[test]
fn every_published_sample_is_read_as_its_signature() {
    let blocks: Vec<&str> = SAMPLES.split("----\n").collect();
    let post_rx = "nvlink_post_rx_detect";
    let want = [
        vec![node("imex_notify", 1)],
        vec![node(post_rx, 3)], // the fourth line is gpud's non-match
        vec![node(post_rx, 6)],
        vec![node(post_rx, 1)],
        vec![gpu("0000:29:00", 1), gpu("0000:18:00", 1)],
        vec![gpu("0000:18:00", 1)],
        vec![gpu("0000:b3:00", 1)],
        vec![gpu("0000:b3:00", 1)],
        vec![gpu("0000:01:00", 1)],
        vec![gpu("0000:01:00", 1)],
    ];
    assert_eq!(blocks.len(), want.len());
    for (i, (block, want)) in blocks.iter().zip(want).enumerate() {
        assert_eq!(seen(block), want, "block {i}:\n{block}");
    }
    // The XID 79 beside its fallen-off-the-bus line is read as an XID.
    let read = parse_log(blocks[8]);
    assert_eq!(
        (read.events[0].xid, read.events[0].pci.as_str()),
        (79, "0000:01:00")
    );
}

#[test]
fn the_newest_line_is_kept_from_its_nvrm_on() {
    let read = parse_log(SAMPLES);
    let newest = |check: &str| {
        read.signatures
            .iter()
            .rfind(|s| s.check == check)
            .map(|s| s.newest.clone())
            .unwrap()
    };
    assert_eq!(
        newest("nvlink_post_rx_detect"),
        "NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's postRxDetLinkMask failed!"
    );
    assert_eq!(
        newest("imex_notify"),
        "NVRM: _fabricNotifyEvent: Unable to notify ImexSessionApi"
    );
    let b3 = read
        .signatures
        .iter()
        .find(|s| s.pci.as_deref() == Some("0000:b3:00"));
    assert_eq!(
        b3.map(|s| (s.newest.as_str(), s.seqs.len())),
        Some((
            "NVRM: The NVIDIA GPU 0000:b3:00.0 … fallen off the bus and is not responding to commands",
            2
        ))
    );
}

#[test]
fn a_flood_is_one_sighting_holding_every_record() {
    let mut log = String::new();
    for seq in 1..=10_000u64 {
        log.push_str(&format!(
            "3,{seq},{seq}000,-;NVRM: _fabricNotifyEvent: Unable to notify ImexSessionApi\n"
        ));
    }
    let read = parse_log(&log);
    assert_eq!(read.signatures.len(), 1);
    let flood = &read.signatures[0];
    assert_eq!((flood.check, flood.pci.as_ref()), ("imex_notify", None));
    assert_eq!(flood.seqs.len(), 10_000);
    assert_eq!(flood.lines_after(0), 10_000);
    assert_eq!(flood.lines_after(9_000), 1_000);
    assert_eq!(flood.lines_after(10_000), 0);
}

#[test]
fn a_multi_line_message_is_one_kmsg_record_or_several_log_lines() {
    // One printk with newlines: /dev/kmsg escapes them as \x0a in one record
    // (Documentation/ABI/testing/dev-kmsg), dmesg prints three lines.
    let record = "4,1520,1843308145,-;NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: (PCI ID: \
                  10de:26b5) installed in this system has\\x0aNVRM: fallen off the bus and is \
                  not responding to commands.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:b3:00.0\n";
    let read = parse_log(record);
    assert_eq!(read.signatures.len(), 1);
    let s = &read.signatures[0];
    assert_eq!(
        (s.pci.as_deref(), s.seqs.as_slice()),
        (Some("0000:b3:00"), &[1520][..])
    );
    assert_eq!(
        s.newest,
        "NVRM: The NVIDIA GPU 0000:b3:00.0 … fallen off the bus and is not responding to commands"
    );
    // Over lines, the message counts at its last line: a read that ended
    // after its first line judges it when the last arrives.
    let lines = "NVRM: The NVIDIA GPU 0000:18:00.0\nother\n";
    assert!(seen(lines).is_empty());
    let read = parse_log(&format!(
        "{lines}NVRM: fallen off the bus and is not responding to commands.\n"
    ));
    assert_eq!(read.signatures[0].seqs, [3]);
}

#[test]
fn an_opening_that_never_closes_is_no_line() {
    let mut log = String::from("NVRM: The NVIDIA GPU 0000:18:00.0\n");
    for i in 0..5 {
        log.push_str(&format!("usb 1-1: line {i}\n"));
    }
    log.push_str("NVRM: fallen off the bus and is not responding to commands.\n");
    assert!(seen(&log).is_empty());
    // Another message of the driver's about the same GPU.
    let unsupported = "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1e07)\n\
                       NVRM: installed in this system is not supported by the\n";
    assert!(seen(unsupported).is_empty());
}

#[test]
fn xid_lines_are_never_read_as_signatures() {
    for line in [
        "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        // NVSentinel's gpufallen tests: a message with an XID is the XID's.
        "NVRM: Xid (PCI:0000:b3:00.0): 79, GPU has fallen off the bus and is not responding to commands.",
    ] {
        let read = parse_log(line);
        assert!(read.signatures.is_empty(), "{line}");
        assert_eq!(read.events[0].xid, 79);
    }
}

#[test]
fn near_misses_are_not_lines() {
    for line in [
        "NVRM: NVLink link training completed",
        "NVRM: _fabricNotifyEvent: Unable to notify",
        "NVRM:_fabricNotifyEvent: Unable to notify ImexSessionApi",
        "NVRM: knvlinkDiscoverPostRxDetLinks_: Getting peer0's postRxDetLinkMask failed!",
        "NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting peer's postRxDetLinkMask failed!",
        "NVRM: knvlinkUpdatePostRxDetectLinkMask_IMPL: Failed to update Rx Detect Link",
        "NVRM: GPU 0000:29:00.0 GPU has fallen off the bus.",
        "NVRM: GPU 0000:29:00: GPU has fallen off the bus.",
        "NVRM: GPU zz:00.0: GPU has fallen off the bus.",
        "NVRM: GPU 0000:29:00.0: GPU serial number is 0.",
        // gpud: fallen-off-bus text without a valid address is ignored.
        "NVRM: The NVIDIA GPU invalid-bdf.0\nNVRM: fallen off the bus and is not responding to commands.",
        "knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's postRxDetLinkMask failed!",
    ] {
        assert!(seen(line).is_empty(), "{line}");
    }
}

#[test]
fn each_record_is_one_line_of_a_signature_at_most() {
    let twice = "NVRM: _fabricNotifyEvent: Unable to notify ImexSessionApi \
                 NVRM: _fabricNotifyEvent: Unable to notify ImexSessionApi";
    assert_eq!(seen(twice), [node("imex_notify", 1)]);
}

#[test]
fn the_table_names_each_check_once_with_its_forms_and_sources() {
    let mut checks: Vec<&str> = SIGNATURES.iter().map(|s| s.check).collect();
    checks.sort_unstable();
    checks.dedup();
    assert_eq!(checks.len(), SIGNATURES.len(), "a check named twice");
    for s in &SIGNATURES {
        assert!(!s.forms.is_empty() && !s.means.is_empty() && !s.action.is_empty());
        assert!(s.forms.iter().all(|f| !f.source.is_empty()), "{}", s.check);
        assert_eq!(named(s.check).map(|n| n.check), Some(s.check));
        assert!(s.check.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    }
}

/// The rows of the first markdown table after `heading` in `doc`, by their
/// first cell.
fn table_after<'a>(doc: &'a str, heading: &str) -> Vec<&'a str> {
    let Some(at) = doc.find(heading) else {
        panic!("{heading} not found");
    };
    doc[at..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .filter_map(|l| l.split('|').nth(1))
        .map(str::trim)
        .collect()
}

#[test]
fn the_docs_list_every_signature_and_only_those() {
    let health = include_str!("../../../../docs/gpu-health.md");
    let rows = table_after(health, "## Kernel-log lines beyond XIDs");
    let mut documented: Vec<&str> = rows.iter().map(|r| r.trim_matches('`')).collect();
    documented.dedup();
    let code: Vec<&str> = SIGNATURES.iter().map(|s| s.check).collect();
    assert_eq!(
        documented, code,
        "docs/gpu-health.md's table, in the table's order"
    );
    // Every check's row in the checks table, and every drain in the runbook.
    for s in &SIGNATURES {
        assert!(
            health.contains(&format!("| `{}` |", s.check)),
            "{}",
            s.check
        );
    }
    let guide = include_str!("../../../../docs/guide.md");
    let runbook = table_after(guide, "## Runbook: every drain slurm-imex causes");
    for s in SIGNATURES.iter().filter(|s| s.severity == Severity::Drain) {
        let reason = format!("`imex-health: {}", s.check);
        assert!(
            runbook.iter().any(|r| r.starts_with(&reason)),
            "docs/guide.md's runbook has no row for {}",
            s.check
        );
    }
}

#[test]
fn every_cut_and_splice_of_the_samples_reads_without_panic() {
    // The cursor slices lines at the fields it finds: every prefix of every
    // sample, and each with bytes that break naive parsers spliced in.
    let junk = [
        "", "\u{0}", "é", "\\x0a", ":", "NVRM:", ".0:", "\n", "'s", "\u{202e}",
    ];
    let cuts: Vec<usize> = (0..=SAMPLES.len())
        .filter(|i| SAMPLES.is_char_boundary(*i))
        .collect();
    for (n, at) in cuts.iter().enumerate() {
        let cut = &SAMPLES[..*at];
        let spliced = format!("{cut}{}{}", junk[n % junk.len()], &SAMPLES[*at..]);
        for log in [cut, spliced.as_str()] {
            let read = parse_log(log);
            assert!(read.signatures.iter().all(|s| !s.seqs.is_empty()));
        }
    }
}
