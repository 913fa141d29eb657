//! Kernel-log lines beyond XIDs: the driver's lines that tell of a fault no
//! XID names (docs/gpu-health.md, "Kernel-log lines beyond XIDs"). One
//! table, [`SIGNATURES`], holds them all: the check each is judged under
//! (the tag of its findings and drain reasons), the forms of line that show
//! it (each with its source), its severity and what to do.
//!
//! They are read in the same pass over the kernel log as the XIDs
//! (`log`), record by record, so the same rules apply: numbered by the
//! kernel's sequence numbers or by line, judged against the checkpoint, in
//! this boot. The lines of one signature on one GPU (or the node) are
//! gathered into one [`Sighting`] holding the number of every record that
//! shows it: a flood of 10,000 identical lines is one finding with its
//! count, never 10,000 findings.
//!
//! Hand-rolled matching: each form is fixed text with a few fields (a
//! function-name suffix, a peer number, a PCI address) that a [`Cursor`]
//! walks. The GPU crate has no regex engine, and one would be a new
//! dependency for five shapes; gpud's and NVSentinel's regexes are quoted
//! beside the forms they mirror, and the tests run every published sample.

use super::normalise_pci;
use crate::health::Severity;
use slurm_imex_core::text::{cap, printable};

/// One kind of kernel-log line, judged under one check.
pub struct Signature {
    /// The check's name: the tag of its findings (`imex-health: <check>…`).
    pub check: &'static str,
    pub severity: Severity,
    /// What the lines mean, as the finding says it.
    pub means: &'static str,
    /// What to do, as the finding says it.
    pub action: &'static str,
    /// A line about a GPU whose XID of this number is in the same read is
    /// no finding of its own: the XID's finding names the fault already.
    pub unless_xid: Option<u32>,
    pub forms: &'static [Form],
}

/// One published form of a signature's line.
pub struct Form {
    pub matcher: Matcher,
    /// Where the form comes from.
    pub source: &'static str,
}

/// How a form is recognised, from an `NVRM:` in a record's message on.
#[derive(Clone, Copy)]
pub enum Matcher {
    /// One line that names no GPU.
    NodeLine(fn(&str) -> bool),
    /// One line naming a GPU: its PCI id, normalised (`0000:1b:00`).
    GpuLine(fn(&str) -> Option<String>),
    /// A message the driver prints in one `printk` with newlines in it:
    /// one `/dev/kmsg` record (the newlines escaped as `\x0a`), but several
    /// lines in dmesg or journald output. `open` matches the first line and
    /// names the GPU; `close` is text of the last, at most `within` records
    /// on.
    GpuRecords {
        open: fn(&str) -> Option<String>,
        close: &'static str,
        within: u64,
    },
}

/// The check of lines that say a GPU fell off the bus without an XID.
pub const FALLEN_OFF_BUS: &str = "fallen_off_bus";

/// Every signature, in the order their findings are reported.
pub static SIGNATURES: [Signature; 3] = [
    Signature {
        check: "nvlink_post_rx_detect",
        severity: Severity::Drain,
        means: "the driver failed to update an NVLink post-RX-detection link mask",
        action: "reboot the node (gpud recommends a system reboot)",
        unless_xid: None,
        forms: &[
            Form {
                matcher: Matcher::NodeLine(post_rx_update),
                source: "leptonai/gpud components/accelerator/nvidia/nvlink/kmsg.go \
                         (nvlink_post_rx_detect_failure, PR #1271/#1272)",
            },
            Form {
                matcher: Matcher::NodeLine(post_rx_discover),
                source: "leptonai/gpud components/accelerator/nvidia/nvlink/kmsg.go \
                         (nvlink_post_rx_detect_failure, PR #1271/#1272)",
            },
        ],
    },
    Signature {
        check: FALLEN_OFF_BUS,
        severity: Severity::Drain,
        means: "a GPU has fallen off the bus and no XID 79 names it",
        action: "reboot the node; reseat or RMA the GPU if it recurs",
        unless_xid: Some(79),
        forms: &[
            Form {
                matcher: Matcher::GpuLine(fallen_off_bus_line),
                source: "leptonai/gpud components/accelerator/nvidia/xid/kmsg.go \
                         (RegexNVRMFallenOffBusSingleLine)",
            },
            Form {
                matcher: Matcher::GpuRecords {
                    open: fallen_off_bus_opening,
                    close: "fallen off the bus and is not responding to commands",
                    within: 4,
                },
                source: "NVIDIA/open-gpu-kernel-modules src/nvidia/arch/nvalloc/unix/src/osapi.c \
                         (rm_is_supported_device); NVIDIA/NVSentinel syslog-health-monitor \
                         pkg/gpufallen; gpud RegexNVRMFallenOffBusMultiline",
            },
        ],
    },
    Signature {
        check: "imex_notify",
        severity: Severity::Warn,
        means: "the driver dropped IMEX fabric events: no IMEX daemon had registered for them",
        action: "expected while no nvidia-imex runs (an idle node of per-job domains); \
                 during an --imex job or with a rack-wide daemon, look at the node's nvidia-imex",
        unless_xid: None,
        forms: &[Form {
            matcher: Matcher::NodeLine(imex_notify),
            source: "NVIDIA/open-gpu-kernel-modules src/nvidia/src/kernel/compute/fabric.c \
                     (_fabricNotifyEvent); NVIDIA/NVSentinel #1748 (13,332 lines on a \
                     degrading GB200 node)",
        }],
    },
];

/// The signature judged under `check`.
pub fn named(check: &str) -> Option<&'static Signature> {
    SIGNATURES.iter().find(|s| s.check == check)
}

/// Every line of one signature about one GPU (or the node) in one read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    pub check: &'static str,
    /// The GPU the lines name (normalised PCI id); None: the node.
    pub pci: Option<String>,
    /// The number of every record that showed it, in the log's order.
    pub seqs: Vec<u64>,
    /// The newest line, printable and capped, from its `NVRM:` on.
    pub newest: String,
}

impl Sighting {
    /// How many of its lines come after record `judged`.
    pub fn lines_after(&self, judged: u64) -> usize {
        self.seqs.iter().filter(|s| **s > judged).count()
    }
}

/// Longest line kept as a sighting's newest (it ends a drain reason, which
/// Slurm shows in `sinfo -R`).
const NEWEST_MAX: usize = 160;

/// A message over several records that has begun and not yet ended.
struct Opening {
    check: &'static str,
    close: &'static str,
    pci: String,
    /// The record it began in (the scanner's count) and how far it may run.
    at: u64,
    within: u64,
    text: String,
}

/// Reads records one after another and gathers every signature's lines.
#[derive(Default)]
pub struct Scanner {
    sightings: Vec<Sighting>,
    opening: Option<Opening>,
    records: u64,
}

impl Scanner {
    /// Judge record `seq`, given its message from its first `NVRM:` on.
    /// None: the record has none, so it is no driver line; it still counts
    /// toward the records a message spread over several may take.
    pub fn scan(&mut self, driver: Option<&str>, seq: u64) {
        self.records = self.records.saturating_add(1);
        let Some(text) = driver else {
            return;
        };
        self.close_opening(text, seq);
        if text.contains("NVRM: Xid (") {
            return; // an XID: judged as one
        }
        for signature in &SIGNATURES {
            self.match_signature(signature, text, seq);
        }
    }

    /// The sightings of every record scanned.
    pub fn finish(self) -> Vec<Sighting> {
        self.sightings
    }

    /// A message begun in an earlier record that `message` ends.
    fn close_opening(&mut self, message: &str, seq: u64) {
        let Some(open) = self.opening.take() else {
            return;
        };
        if self.records.saturating_sub(open.at) > open.within {
            return; // never ended: not this signature
        }
        if message.contains(open.close) {
            let text = format!("{} … {}", open.text, open.close);
            self.add(open.check, Some(open.pci), seq, &text);
        } else {
            self.opening = Some(open);
        }
    }

    /// The first form of `signature` that matches from an `NVRM:` on.
    fn match_signature(&mut self, signature: &'static Signature, text: &str, seq: u64) {
        for (at, _) in text.match_indices("NVRM:") {
            let line = &text[at..];
            for form in signature.forms {
                if self.match_form(signature.check, form.matcher, line, seq) {
                    return; // a record is one line of a signature at most
                }
            }
        }
    }

    fn match_form(&mut self, check: &'static str, matcher: Matcher, line: &str, seq: u64) -> bool {
        match matcher {
            Matcher::NodeLine(matches) => {
                let hit = matches(line);
                if hit {
                    self.add(check, None, seq, first_line(line));
                }
                hit
            }
            Matcher::GpuLine(names) => {
                let Some(pci) = names(line) else {
                    return false;
                };
                self.add(check, Some(pci), seq, first_line(line));
                true
            }
            Matcher::GpuRecords {
                open,
                close,
                within,
            } => {
                let Some(pci) = open(line) else {
                    return false;
                };
                let opening = Opening {
                    check,
                    close,
                    pci,
                    at: self.records,
                    within,
                    text: first_line(line).to_string(),
                };
                self.begin(opening, line, seq);
                true
            }
        }
    }

    /// A message begins: it ends in this record (one `/dev/kmsg` record)
    /// or in one of the next few (dmesg or journald lines).
    fn begin(&mut self, opening: Opening, line: &str, seq: u64) {
        if line.contains(opening.close) {
            let text = format!("{} … {}", opening.text, opening.close);
            self.add(opening.check, Some(opening.pci), seq, &text);
        } else {
            self.opening = Some(opening);
        }
    }

    fn add(&mut self, check: &'static str, pci: Option<String>, seq: u64, text: &str) {
        let newest = cap(&printable(text.trim_end()), NEWEST_MAX);
        match self
            .sightings
            .iter_mut()
            .find(|s| s.check == check && s.pci == pci)
        {
            Some(s) => {
                s.seqs.push(seq);
                s.newest = newest;
            }
            None => self.sightings.push(Sighting {
                check,
                pci,
                seqs: vec![seq],
                newest,
            }),
        }
    }
}

/// The first line of a message: up to a newline, or the `\x0a` that
/// `/dev/kmsg` writes for one.
fn first_line(text: &str) -> &str {
    let end = [text.find('\n'), text.find("\\x0a")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(text.len());
    &text[..end]
}

/// Walks one line over the fixed text and fields of a form.
struct Cursor<'a> {
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    /// After `NVRM:` and the spaces that follow (gpud's `NVRM:\s+`).
    fn nvrm(line: &'a str) -> Option<Cursor<'a>> {
        let rest = line.strip_prefix("NVRM:")?;
        let trimmed = rest.trim_start_matches([' ', '\t']);
        (trimmed.len() < rest.len()).then_some(Cursor { rest: trimmed })
    }

    fn text(mut self, text: &str) -> Option<Self> {
        self.rest = self.rest.strip_prefix(text)?;
        Some(self)
    }

    fn optional(self, text: &str) -> Self {
        match self.rest.strip_prefix(text) {
            Some(rest) => Cursor { rest },
            None => self,
        }
    }

    /// One or more characters of `allowed`.
    fn many(mut self, allowed: fn(char) -> bool) -> Option<(Self, &'a str)> {
        let end = self.rest.find(|c| !allowed(c)).unwrap_or(self.rest.len());
        if end == 0 {
            return None;
        }
        let (taken, rest) = self.rest.split_at(end);
        self.rest = rest;
        Some((self, taken))
    }

    /// A PCI address with its function, `0000:b3:00.0` or `18:00.0`
    /// (gpud: `((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.0`;
    /// the domain may be longer, as NVML prints it), normalised.
    fn pci(self) -> Option<(Self, String)> {
        let (cursor, address) = self.many(|c| c.is_ascii_hexdigit() || c == ':')?;
        let groups: Vec<usize> = address.split(':').map(str::len).collect();
        let valid = match groups.as_slice() {
            [domain, 2, 2] => (1..=8).contains(domain),
            [2, 2] => true,
            _ => false,
        };
        let (cursor, _) = cursor.text(".")?.many(|c| c.is_ascii_digit())?;
        valid.then(|| (cursor, normalise_pci(address)))
    }
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `NVRM: _fabricNotifyEvent: Unable to notify ImexSessionApi`: fabric.c's
/// `NV_PRINTF(LEVEL_ERROR, "Unable to notify ImexSessionApi\n")`, which RM
/// prefixes with `NVRM: ` and the function's name.
fn imex_notify(line: &str) -> bool {
    Cursor::nvrm(line)
        .and_then(|c| c.text("_fabricNotifyEvent: Unable to notify ImexSessionApi"))
        .is_some()
}

/// gpud: `NVRM: knvlinkUpdatePostRxDetectLinkMask_[A-Za-z0-9_]+: Failed to
/// update Rx Detect Link mask!`
fn post_rx_update(line: &str) -> bool {
    Cursor::nvrm(line)
        .and_then(|c| c.text("knvlinkUpdatePostRxDetectLinkMask_"))
        .and_then(|c| c.many(is_word))
        .and_then(|(c, _)| c.text(": Failed to update Rx Detect Link mask!"))
        .is_some()
}

/// gpud: `NVRM: knvlinkDiscoverPostRxDetLinks_[A-Za-z0-9_]+: Getting
/// peer[0-9]+(?:'s)? postRxDetLinkMask failed!`
fn post_rx_discover(line: &str) -> bool {
    Cursor::nvrm(line)
        .and_then(|c| c.text("knvlinkDiscoverPostRxDetLinks_"))
        .and_then(|c| c.many(is_word))
        .and_then(|(c, _)| c.text(": Getting peer"))
        .and_then(|c| c.many(|c| c.is_ascii_digit()))
        .and_then(|(c, _)| c.optional("'s").text(" postRxDetLinkMask failed!"))
        .is_some()
}

/// gpud: `NVRM:\s+GPU <pci>\.0:\s+GPU has fallen off the bus\.?`
fn fallen_off_bus_line(line: &str) -> Option<String> {
    let (c, pci) = Cursor::nvrm(line)?.text("GPU ")?.pci()?;
    let c = c.text(":")?;
    let rest = c.rest.trim_start_matches([' ', '\t']);
    rest.starts_with("GPU has fallen off the bus")
        .then_some(pci)
}

/// The first line of osapi.c's `NVRM: The NVIDIA GPU %04x:%02x:%02x.%x\n`
/// `NVRM: (PCI ID: %04x:%04x) installed in this system has\n` `NVRM: fallen
/// off the bus and is not responding to commands.\n` (NVSentinel:
/// `(?s)NVRM: The NVIDIA GPU ([0-9a-fA-F:.]+).*?fallen off the bus and is
/// not responding to commands`).
fn fallen_off_bus_opening(line: &str) -> Option<String> {
    let (_, pci) = Cursor::nvrm(line)?.text("The NVIDIA GPU ")?.pci()?;
    Some(pci)
}

#[cfg(test)]
mod tests;
