//! The kernel log as records, not lines: reading `[gpu] kmsg` (the real
//! `/dev/kmsg`, one record per read and non-blocking, or a plain file such
//! as `dmesg` output), splitting it into records, and numbering them.
//!
//! A `/dev/kmsg` record is `prio,seq,usec,flags[,…];message` followed by
//! zero or more continuation lines that start with a space (` SUBSYSTEM=pci`,
//! ` DEVICE=+pci:0000:00:06.0`: Documentation/ABI/testing/dev-kmsg, and
//! `kmsg-h100-records.txt` in tests/data/samples). A continuation line
//! belongs to the record above it: it is never a record of its own and never
//! moves the position. A log with kernel records is numbered by the kernel's
//! sequence numbers (`Numbering::Kernel`); a plain log without them is
//! numbered by line (`Numbering::Lines`). The two are never compared
//! (`checkpoint`). One pass over the records keeps their XIDs and the lines
//! of every other signature (`signature`).
//!
//! Hand-rolled: the record header is four comma-separated fields before a
//! `;`, which no crate parses for us.

use super::signature::{Scanner, Sighting};
use super::{parse_message, XidEvent};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::Path;

/// How a log numbers its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Numbering {
    /// The kernel's record sequence numbers (`/dev/kmsg`).
    Kernel,
    /// Line numbers, from 1 (a plain log: `dmesg` output, a test file).
    Lines,
}

impl Numbering {
    pub fn as_str(self) -> &'static str {
        match self {
            Numbering::Kernel => "kernel sequence numbers",
            Numbering::Lines => "line numbers",
        }
    }
}

/// Where a reader got to: the numbering and the last record's number, in
/// the boot it read (the kernel's boot id; None when it cannot be read, or
/// for a position written before positions had one), and how often the
/// record numbers restarted inside the log read (`restarts`: a plain file
/// that holds several boots' records; the numbers count from the last
/// restart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogPosition {
    pub numbering: Numbering,
    pub last: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<BootId>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restarts: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The kernel's boot id (`/proc/sys/kernel/random/boot_id`, a UUID that
/// every boot draws anew): what ties a log position to the boot whose
/// numbering it counts in.
/// Kept as its 32 hex digits (JSON numbers stop at 64 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootId(pub u128);

impl Serialize for BootId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{:032x}", self.0))
    }
}

impl<'de> Deserialize<'de> for BootId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<BootId, D::Error> {
        let text = String::deserialize(d)?;
        BootId::parse(&text).ok_or_else(|| serde::de::Error::custom("not a boot id"))
    }
}

impl BootId {
    /// Read and parse the boot id at `path`; None when it cannot be read
    /// or is not a UUID.
    pub fn read(path: &Path) -> Option<BootId> {
        let bytes = slurm_imex_core::fsutil::read_bounded(path, 128).ok()?;
        BootId::parse(&String::from_utf8_lossy(&bytes))
    }

    fn parse(text: &str) -> Option<BootId> {
        let hex: String = text.trim().chars().filter(|c| *c != '-').collect();
        if hex.len() != 32 {
            return None;
        }
        u128::from_str_radix(&hex, 16).ok().map(BootId)
    }
}

/// Every XID of one read of the log, every line of the other signatures,
/// and where the read ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRead {
    pub events: Vec<XidEvent>,
    /// Per signature and GPU (or node), its lines (`signature`).
    pub signatures: Vec<Sighting>,
    pub position: LogPosition,
    /// The oldest part of a log larger than the read keeps, left unjudged.
    pub skipped: Option<Skipped>,
}

/// What a read of a log past [`MAX_LOG_BYTES`] left out: its oldest bytes
/// and the lines they held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skipped {
    pub bytes: u64,
    pub lines: u64,
}

/// How much of the kernel log one read keeps: its newest 16 MiB (well over
/// 100,000 records), the ones that matter most. A larger log (a large
/// `log_buf_len`, a plain file) is read to its end and its oldest records
/// are left out, said once (`Skipped`); the newest are always judged.
pub const MAX_LOG_BYTES: usize = 16 << 20;

/// `4,1234,5678901,-;msg` (also with extra comma fields after the flags,
/// before `;`): the record's sequence number and its message. All four
/// header fields must be there and well formed: priority, sequence number
/// and timestamp in digits, and a flag (`-`, `c` or `+`, dev-kmsg's).
pub(super) fn split_record_header(line: &str) -> Option<(u64, &str)> {
    let semi = line.find(';')?;
    let mut fields = line[..semi].split(',');
    let digits = |f: &str| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit());
    let (prio, seq, usec, flags) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    if !(digits(prio) && digits(seq) && digits(usec) && matches!(flags, "-" | "c" | "+")) {
        return None;
    }
    Some((seq.parse().ok()?, &line[semi + 1..]))
}

/// Number the records of `text` and keep their XIDs and signature lines.
/// The log is kernel numbered when any line carries a record header; then a
/// line without one (a continuation, which starts with a space, or anything
/// else) belongs to the record above. Otherwise every line is a record,
/// numbered from 1.
pub fn parse_log(text: &str) -> LogRead {
    parse_log_from(text, 1)
}

/// [`parse_log`] of a text whose first line is line `first_line` of the log
/// (the lines before it were left out of the read).
fn parse_log_from(text: &str, first_line: u64) -> LogRead {
    let kernel = text.lines().any(|l| split_record_header(l).is_some());
    let mut events = Vec::new();
    let mut scanner = Scanner::default();
    let mut last = 0u64;
    let mut restarts = 0u32;
    let mut previous: Option<u64> = None;
    for (i, line) in text.lines().enumerate() {
        let (seq, message) = if kernel {
            match split_record_header(line) {
                Some(record) => record,
                None => continue, // part of the record above
            }
        } else {
            (first_line.saturating_add(i as u64), line)
        };
        if previous.is_some_and(|p| seq < p) {
            // The numbers restarted (another boot's records follow in one
            // file): only the newest boot's numbers mean anything against a
            // position, so its records alone are kept and numbered, and the
            // restart is counted, so that a checkpoint taken before it
            // cannot hide them (`checkpoint::Checkpoint::cannot_apply`).
            events.clear();
            scanner = Scanner::default();
            last = 0;
            restarts = restarts.saturating_add(1);
        }
        previous = Some(seq);
        last = last.max(seq);
        // Only the driver's lines hold an XID or a signature: the rest of
        // a record is searched once.
        let driver = message.find("NVRM:").map(|at| &message[at..]);
        if let Some(e) = driver.and_then(|text| parse_message(text, seq)) {
            events.push(e);
        }
        scanner.scan(driver, seq);
    }
    let numbering = if kernel {
        Numbering::Kernel
    } else {
        Numbering::Lines
    };
    LogRead {
        events,
        signatures: scanner.finish(),
        position: LogPosition {
            numbering,
            last,
            boot: None,
            restarts,
        },
        skipped: None,
    }
}

/// Read the log at `path` to its end (what the ring buffer still holds,
/// for `/dev/kmsg`) and keep the XIDs and signature lines of its newest
/// [`MAX_LOG_BYTES`].
pub fn read(path: &Path) -> std::io::Result<LogRead> {
    let window = read_newest(path, MAX_LOG_BYTES)?;
    let first_line = window.skipped.lines.saturating_add(1);
    let mut read = parse_log_from(&String::from_utf8_lossy(&window.data), first_line);
    read.skipped = (window.skipped.bytes > 0).then_some(window.skipped);
    Ok(read)
}

/// The newest whole lines of a log, at most `keep` bytes (and one chunk),
/// and what was left out before them.
struct Window {
    data: Vec<u8>,
    skipped: Skipped,
}

impl Window {
    /// Drop the oldest whole lines until at most `keep` bytes remain.
    fn drop_oldest(&mut self, keep: usize) {
        let excess = self.data.len().saturating_sub(keep);
        if excess == 0 {
            return;
        }
        let cut = match self.data[excess..].iter().position(|b| *b == b'\n') {
            Some(at) => excess + at + 1,
            None => self.data.len(), // one line longer than the window
        };
        let lines = self.data[..cut].iter().filter(|b| **b == b'\n').count();
        self.skipped.lines = self.skipped.lines.saturating_add(lines as u64);
        self.skipped.bytes = self.skipped.bytes.saturating_add(cut as u64);
        self.data.drain(..cut);
    }
}

/// At most this much of a log that is not a regular file (`/dev/kmsg`) is
/// read at one gate: its ring buffer is far smaller, so only a flood of
/// new records while it is read reaches it, and what the flood adds past
/// it is judged at the next gate. A regular file is read up to the size it
/// had when it was opened, so a writer appending to it cannot keep the
/// read going either.
const MAX_STREAM_BYTES: u64 = 256 << 20;

/// /dev/kmsg returns one record per read() and EAGAIN at the end (opened
/// non-blocking); a plain file returns 0 at its end. Everything up to the
/// bound above is read; the window keeps the newest `keep` bytes (trimmed
/// once it holds twice that, so each byte is moved at most once).
fn read_newest(path: &Path, keep: usize) -> std::io::Result<Window> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    let bound = if meta.is_file() {
        meta.len()
    } else {
        MAX_STREAM_BYTES
    };
    let mut file = file.take(bound);
    let mut window = Window {
        data: Vec::new(),
        skipped: Skipped { bytes: 0, lines: 0 },
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                window.data.extend_from_slice(&buf[..n]);
                if window.data.len() > keep.saturating_mul(2) {
                    window.drop_oldest(keep);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            // /dev/kmsg: a record was overwritten while we read; go on.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    window.drop_oldest(keep);
    Ok(window)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: &str = include_str!("../../../tests/data/samples/kmsg-h100-records.txt");

    #[test]
    fn the_real_h100_log_is_numbered_by_its_records() {
        let read = parse_log(H100);
        assert_eq!(read.position.numbering, Numbering::Kernel);
        // The last record is 357, although the capture has 58 lines and
        // continuation lines after most records.
        assert_eq!(read.position.last, 357);
        assert!(read.events.is_empty(), "the capture holds no XID");
        // Records with the `c` (continuation-follows) flag parse as records.
        assert_eq!(
            split_record_header(
                "4,356,1331342,c;NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: x"
            )
            .map(|r| r.0),
            Some(356)
        );
        // Continuation lines are never records.
        assert_eq!(split_record_header(" SUBSYSTEM=pci"), None);
        assert_eq!(split_record_header(" DEVICE=+pci:0000:00:06.0"), None);
    }

    /// The reproduction of issue 24: 100 records, each followed by two
    /// continuation lines; then an XID 79 as record 101.
    fn records_with_continuations(n: u64) -> String {
        let mut log = String::new();
        for seq in 1..=n {
            log.push_str(&format!(
                "6,{seq},{},-;pci 0000:1a:00.0: BAR {seq}\n SUBSYSTEM=pci\n DEVICE=+pci:0000:1a:00.0\n",
                seq * 1000
            ));
        }
        log
    }

    #[test]
    fn continuation_lines_never_move_the_position() {
        let mut log = records_with_continuations(100);
        assert_eq!(parse_log(&log).position.last, 100);
        log.push_str("3,101,101000,-;NVRM: Xid (PCI:0000:1a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:1a:00.0\n");
        let read = parse_log(&log);
        assert_eq!(read.position.last, 101);
        assert_eq!(read.events.len(), 1);
        assert_eq!((read.events[0].seq, read.events[0].xid), (101, 79));
    }

    #[test]
    fn a_header_needs_its_four_fields() {
        assert_eq!(split_record_header("6,12,345,-;msg").map(|r| r.0), Some(12));
        assert_eq!(
            split_record_header("6,12,345,c,extra;msg").map(|r| r.0),
            Some(12)
        );
        for not_a_record in [
            "6,12;NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.",
            "6,12,345;msg",
            "6,12,345,;msg",
            "6,12,345,x;msg",
            "6,12,3a5,-;msg",
            "6,,345,-;msg",
            ",12,345,-;msg",
            "a,12,345,-;msg",
            "6,12,345, -;msg",
            "6 12 345 -;msg",
        ] {
            assert_eq!(split_record_header(not_a_record), None, "{not_a_record}");
        }
    }

    /// Records `from..=to`, an XID 79 as record `xid_at` when it is among them.
    fn records(from: u64, to: u64, xid_at: Option<u64>) -> String {
        (from..=to)
            .map(|seq| {
                let msg = if Some(seq) == xid_at {
                    "NVRM: Xid (PCI:0000:1a:00): 79, pid='<unknown>', name=<unknown>, GPU has \
                     fallen off the bus."
                        .to_string()
                } else {
                    format!("pci 0000:1a:00.0: BAR {seq}")
                };
                format!("6,{seq},{},-;{msg}\n", seq * 1000)
            })
            .collect()
    }

    #[test]
    fn numbers_that_restart_in_one_log_hide_no_xid() {
        use crate::xid::checkpoint::Checkpoint;
        let first_boot = records(1, 500, None);
        let judged = parse_log(&first_boot).position;
        assert_eq!((judged.last, judged.restarts), (500, 0));
        let checkpoint = Checkpoint::at(judged, ["0000:1a:00"].into_iter());
        // The file goes on with another boot's records, past the old
        // position (600 > 500) and short of it (20 < 500): the XID after
        // the restart is judged either way.
        for (to, xid_at) in [(600, 10), (20, 10), (600, 550)] {
            let log = format!("{first_boot}{}", records(1, to, Some(xid_at)));
            let read = parse_log(&log);
            assert_eq!((read.position.last, read.position.restarts), (to, 1));
            let now = checkpoint.reconciled(read.position, "test");
            let shown: Vec<u64> = read
                .events
                .iter()
                .filter(|e| e.seq > now.judged_for(&e.pci))
                .map(|e| e.seq)
                .collect();
            assert_eq!(shown, [xid_at], "to {to}");
        }
        // Only the newest boot's records are kept: an old boot's XID is not
        // taken for one of this boot's.
        let old_xid = format!("{}{}", records(1, 500, Some(400)), records(1, 20, None));
        assert!(parse_log(&old_xid).events.is_empty());
        // Judged once, the new numbering holds: nothing again.
        let log = format!("{first_boot}{}", records(1, 600, Some(10)));
        let read = parse_log(&log);
        let after = Checkpoint::at(read.position, ["0000:1a:00"].into_iter());
        let again = after.reconciled(read.position, "test");
        assert!(read
            .events
            .iter()
            .all(|e| e.seq <= again.judged_for(&e.pci)));
    }

    #[test]
    fn a_plain_log_is_numbered_by_line() {
        let log = "[  1.0] hello\n[ 2.0] NVRM: Xid (PCI:0000:1a:00): 13, pid=5, name=a.out, Graphics Exception\n";
        let read = parse_log(log);
        assert_eq!(read.position.numbering, Numbering::Lines);
        assert_eq!(read.position.last, 2);
        assert_eq!((read.events[0].seq, read.events[0].xid), (2, 13));
        let empty = parse_log("");
        assert_eq!(
            empty.position,
            LogPosition {
                numbering: Numbering::Lines,
                last: 0,
                boot: None,
                restarts: 0,
            }
        );
    }

    #[test]
    fn reads_the_real_kernel_ring_buffer_without_blocking() {
        // /dev/kmsg returns one record per read and EAGAIN at the end; where
        // the machine lets us read it, the reader must stop there, not hang.
        let kmsg = Path::new("/dev/kmsg");
        if std::fs::File::open(kmsg).is_err() {
            eprintln!("/dev/kmsg not readable here; the file-based tests cover the parser");
            return;
        }
        let t = std::time::Instant::now();
        let read = read(kmsg).unwrap();
        assert_eq!(read.position.numbering, Numbering::Kernel);
        assert!(read.position.last > 0, "no kmsg sequence numbers read");
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn boot_ids_are_uuids() {
        let id = BootId::parse("0b2f6c1e-1d7e-4c41-9d3a-6f0c2a9b7a11\n").unwrap();
        assert_eq!(id.0, 0x0b2f6c1e_1d7e_4c41_9d3a_6f0c2a9b7a11);
        for bad in ["", "x", "0b2f6c1e-1d7e-4c41-9d3a-6f0c2a9b7a1", "\0"] {
            assert_eq!(BootId::parse(bad), None, "{bad:?}");
        }
        assert_eq!(BootId::read(Path::new("/nonexistent/boot_id")), None);
        if let Ok(real) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
            assert!(BootId::parse(&real).is_some(), "{real}");
        }
    }

    #[test]
    fn a_log_past_the_window_keeps_its_newest_lines_numbered_as_in_the_log() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("dmesg");
        let mut log = String::new();
        for i in 1..=1000u64 {
            log.push_str(&format!("[ {i}.0] line {i:04}\n"));
        }
        log.push_str("[ 1001.0] NVRM: Xid (PCI:0000:1a:00): 79, pid=1, name=a, GPU has fallen off the bus.\n");
        std::fs::write(&p, &log).unwrap();
        let w = read_newest(&p, 1000).unwrap();
        assert!(
            w.data.len() <= 1000 && w.data.starts_with(b"[ "),
            "{}",
            w.data.len()
        );
        assert_eq!(w.skipped.bytes as usize + w.data.len(), log.len());
        let read = parse_log_from(&String::from_utf8_lossy(&w.data), w.skipped.lines + 1);
        // Line numbers are the log's own, whatever was left out.
        assert_eq!(read.position.last, 1001);
        assert_eq!((read.events[0].seq, read.events[0].xid), (1001, 79));
        // A log within the window: nothing skipped.
        let all = read_newest(&p, 1 << 20).unwrap();
        assert_eq!((all.skipped.bytes, all.data.len()), (0, log.len()));
        assert_eq!(super::read(&p).unwrap().skipped, None);
    }

    #[test]
    fn reads_a_file_and_names_a_missing_one() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("kmsg");
        std::fs::write(&p, H100).unwrap();
        assert_eq!(read(&p).unwrap().position.last, 357);
        assert!(read(&d.path().join("missing")).is_err());
    }
}
