//! NVIDIA XID events in the kernel log: parsing `NVRM: Xid (PCI:…): N, …`
//! lines in every published format (raw /dev/kmsg records, dmesg, dmesg -T,
//! dmesg --time-format iso, journald with any locale), and classifying each
//! XID by NVIDIA's catalog resolution bucket (docs/gpu-health.md, "XID
//! classes"). Reading the kernel log as records is `log`; what has been
//! judged already is `checkpoint`; the driver's lines beyond XIDs (an NVLink
//! post-RX-detect failure, a GPU off the bus without an XID, dropped IMEX
//! fabric events), read in the same pass, are `signature`.
//!
//! The line parser is hand-rolled: the formats are free text that no crate
//! parses, and a regex engine would be a new dependency for one pattern.

pub mod checkpoint;
pub mod log;
pub mod signature;

use serde::{Deserialize, Serialize};
use slurm_imex_core::text::printable;

/// What NVIDIA's catalog says to do about an XID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Bucket {
    /// The application's fault (restart the app): a warning for the node.
    RestartApp,
    /// Informational.
    Ignore,
    /// The GPU needs a reset: drain.
    ResetGpu,
    /// The node needs a reboot: drain.
    Reboot,
    /// A multi-step workflow (48, 74, 144–150, 154, …): drain-class when listed.
    Workflow,
    /// Secondary or not in the catalog: recorded as a warning.
    Unknown,
}

impl Bucket {
    pub fn as_str(self) -> &'static str {
        match self {
            Bucket::RestartApp => "RESTART_APP",
            Bucket::Ignore => "IGNORE",
            Bucket::ResetGpu => "RESET_GPU",
            Bucket::Reboot => "REBOOT",
            Bucket::Workflow => "WORKFLOW",
            Bucket::Unknown => "UNKNOWN",
        }
    }
}

/// XIDs that must drain the node (DCGM's "devastating" list plus the
/// catalog's reset/reboot buckets).
pub fn is_drain_class(xid: u32) -> bool {
    matches!(classify(xid), Bucket::ResetGpu | Bucket::Reboot) || matches!(xid, 48 | 64 | 74)
}

/// NVIDIA XID catalog resolution bucket (NVSentinel xiderrorsmapping.csv,
/// mirroring docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html).
pub fn classify(xid: u32) -> Bucket {
    match xid {
        8
        | 11
        | 13
        | 25
        | 31
        | 32
        | 39..=41
        | 60
        | 68..=72
        | 75..=77
        | 80
        | 82..=86
        | 88
        | 89
        | 94
        | 96..=105
        | 126..=135
        | 139 => Bucket::RestartApp,
        14 | 37 | 38 | 43 | 44 | 63 | 66 | 67 | 92 | 93 | 121 | 137 | 141 | 157 | 161 => {
            Bucket::Ignore
        }
        46 | 62 | 64 | 95 | 109 | 110 | 119 | 120 | 136 | 140 | 143 | 155 | 156 | 158 => {
            Bucket::ResetGpu
        }
        79 | 160 => Bucket::Reboot,
        48 | 74 | 144..=150 | 154 => Bucket::Workflow,
        _ => Bucket::Unknown,
    }
}

/// One XID event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidEvent {
    /// kmsg sequence number (or line number in a plain log).
    pub seq: u64,
    /// PCI bus id as the kernel printed it, normalised to `0000:9b:00`.
    pub pci: String,
    pub xid: u32,
    pub pid: Option<u32>,
    pub process: Option<String>,
    /// The text after the XID number (and pid/name), trimmed.
    pub message: String,
    pub bucket: Bucket,
}

/// Parse one log line. `fallback_seq` is used when the line carries no kmsg
/// record header (`prio,seq,usec,flags;`).
pub fn parse_line(line: &str, fallback_seq: u64) -> Option<XidEvent> {
    let (seq, body) = log::split_record_header(line).unwrap_or((fallback_seq, line));
    parse_message(body, seq)
}

/// Parse the message of one record (or one plain line) numbered `seq`. Its
/// text (PCI id, process name, message) is made printable: a plain-file log
/// can hold NUL and control bytes that `/dev/kmsg` would have escaped.
pub(crate) fn parse_message(body: &str, seq: u64) -> Option<XidEvent> {
    let at = body.find("NVRM: Xid (")?;
    let rest = &body[at + "NVRM: Xid (".len()..];
    let close = rest.find(')')?;
    let pci_raw = rest[..close].trim();
    let pci = pci_raw
        .strip_prefix("PCI:")
        .unwrap_or(pci_raw)
        .to_ascii_lowercase();
    let rest = rest[close + 1..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let xid: u32 = digits.parse().ok()?;
    let mut rest = rest[digits.len()..].trim_start();
    rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    let mut pid = None;
    let mut process = None;
    if let Some(p) = rest.strip_prefix("pid=") {
        let end = p.find(',').unwrap_or(p.len());
        pid = p[..end].trim().trim_matches('\'').parse().ok();
        rest = p[end..].trim_start_matches(',').trim_start();
        if let Some(n) = rest.strip_prefix("name=") {
            let end = n.find(", ").unwrap_or(n.len());
            let name = n[..end].trim();
            if name != "<unknown>" {
                process = Some(printable(name));
            }
            rest = n[end..].trim_start_matches(',').trim_start();
        }
    }
    Some(XidEvent {
        seq,
        pci: printable(&normalise_pci(&pci)),
        xid,
        pid,
        process,
        message: printable(&rest.split_whitespace().collect::<Vec<_>>().join(" ")),
        bucket: classify(xid),
    })
}

/// Kernel prints `0000:9b:00` (domain:bus:device); NVML prints
/// `00000000:9B:00.0`. Both normalise to `0000:9b:00`.
pub fn normalise_pci(id: &str) -> String {
    let id = id.trim().to_ascii_lowercase();
    let id = id.split('.').next().unwrap_or(&id).to_string();
    let parts: Vec<&str> = id.split(':').collect();
    match parts.as_slice() {
        [domain, bus, dev] => {
            let domain = domain.trim_start_matches('0');
            format!("{:0>4}:{bus}:{dev}", domain)
        }
        [bus, dev] => format!("0000:{bus}:{dev}"),
        _ => id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_published_xid_line() {
        let text = include_str!("../../../tests/data/samples/xid-lines.txt");
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 35);
        let events: Vec<XidEvent> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| parse_line(l, i as u64).unwrap_or_else(|| panic!("unparsed: {l}")))
            .collect();
        let xids: Vec<u32> = events.iter().map(|e| e.xid).collect();
        assert_eq!(
            xids,
            [
                13, 13, 13, 43, 119, 119, 119, 149, 154, 154, 149, 149, 145, 145, 149, 145, 149,
                79, 32, 31, 44, 45, 45, 38, 109, 45, 13, 109, 119, 79, 119, 79, 14, 79, 79
            ]
        );
        assert_eq!(events[0].pci, "0000:38:00");
        assert_eq!(events[0].pid, None);
        assert_eq!(events[0].process, None);
        assert!(events[0]
            .message
            .starts_with("Graphics SM Global Exception"));
        assert_eq!(events[3].pid, Some(2924364));
        assert_eq!(events[3].process.as_deref(), Some("pt_main_thread"));
        assert_eq!(
            events[9].message,
            "GPU recovery action changed from 0x4 (Drain and Reset) to 0x1 (GPU Reset Required)"
        );
        assert_eq!(events[12].process.as_deref(), Some("ray::WorkerDict"));
        assert_eq!(events[25].process.as_deref(), Some("(udev-worker)"));
        assert_eq!(events[29].pid, Some(1122));
        assert_eq!(events[29].message, "GPU has fallen off the bus.");
        assert_eq!(events[32].pci, "0000:03:00");
        // Raw /dev/kmsg records carry their sequence number.
        assert_eq!(events[33].seq, 1234);
        assert_eq!(events[34].seq, 4471);
        assert_eq!(events[34].pid, Some(1234));
        assert_eq!(events[9].pci, "0019:01:00");
        assert_eq!(events[10].pci, "0009:01:00");
    }

    #[test]
    fn catalog_buckets_and_drain_class() {
        assert_eq!(classify(79), Bucket::Reboot);
        assert_eq!(classify(119), Bucket::ResetGpu);
        assert_eq!(classify(13), Bucket::RestartApp);
        assert_eq!(classify(94), Bucket::RestartApp);
        assert_eq!(classify(63), Bucket::Ignore);
        assert_eq!(classify(48), Bucket::Workflow);
        assert_eq!(classify(45), Bucket::Unknown);
        for x in [48, 64, 74, 79, 95, 119, 120] {
            assert!(is_drain_class(x), "{x}");
        }
        for x in [13, 31, 43, 45, 94, 63, 92, 149, 154] {
            assert!(!is_drain_class(x), "{x}");
        }
    }

    #[test]
    fn pci_ids_normalise_between_kernel_and_nvml() {
        assert_eq!(normalise_pci("00000000:9B:00.0"), "0000:9b:00");
        assert_eq!(normalise_pci("0000:9b:00"), "0000:9b:00");
        assert_eq!(normalise_pci("00000009:01:00.0"), "0009:01:00");
        assert_eq!(normalise_pci("0009:01:00"), "0009:01:00");
        assert_eq!(normalise_pci("03:00"), "0000:03:00");
    }

    #[test]
    fn control_bytes_in_a_line_are_escaped_as_dev_kmsg_does() {
        let e = parse_line(
            "NVRM: Xid (PCI:0000:1a:00): 79, pid=7, name=a\x1bb, GPU has fallen\0 off the bus.\r",
            1,
        )
        .unwrap();
        // NUL is escaped; a carriage return is whitespace, and the message
        // is joined with single spaces.
        assert_eq!(e.message, "GPU has fallen\\x00 off the bus.");
        assert_eq!(e.process.as_deref(), Some("a\\x1bb"));
        assert_eq!(e.xid, 79);
    }

    #[test]
    fn non_xid_and_malformed_lines_are_ignored() {
        for l in [
            "",
            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module",
            "NVRM: Xid (PCI:0000:01:00)",
            "NVRM: Xid (PCI:0000:01:00): abc, text",
            "NVRM: Xid (PCI:0000:01:00 79",
            "6,99,1,-;usb 1-1: new device",
        ] {
            assert_eq!(parse_line(l, 1), None, "{l}");
        }
    }
}
