//! Every class of drain reason slurm-imex writes, each with its reasons as
//! the code writes them: what a site's rules match (NVSentinel's
//! slurm-drain-monitor, `conf-examples/nvsentinel/slurm-drain-monitor.toml`,
//! whose test holds every class against it).
//!
//! A reason is `imex-health: <check> gpu<i> <serial>: <detail>`,
//! `imex-health: <check>: <detail>` ([`Finding::reason`]), for the node's
//! IMEX daemon `imex-health: imex <node>: <line>` ([`imex_reason`]), or for
//! an imex.toml the node's programs cannot load `imex-health: config:
//! <line>` ([`config_reason`]); the hooks add ` (job N)` to a prolog's or
//! epilog's finding. Its class is its check,
//! but for `recovery_action`, which is one class per action the driver asks
//! for (what to do differs), and one for an action that could not be read.
//!
//! [`reason_classes`] is built from the code's own tables: the steps of a
//! GPU's checks (`checks::GPU_CHECKS`), the reading stages whose overrun is
//! a finding (`Stage::check_name`), the kernel-log signatures
//! (`xid::signature::SIGNATURES`), NVML's recovery actions
//! (`recovery::RecoveryAction::named`) and the checks named below
//! ([`NAMED_CHECKS`], in `check_names`), which every other finding is
//! made under. A test finds any check named anywhere else.

use super::checks::{gpu_check_names, RECOVERY_ACTION};
use super::gate::{self, Overrun};
use super::{Finding, GpuRef, Severity, DRAIN_PREFIX};
use crate::nvml::Stage;
use crate::recovery::RecoveryAction;
use crate::xid::signature::{Matcher, Sighting, SIGNATURES};
use std::time::Duration;

pub use super::check_names::*;

/// `imex-health: imex <node>: <line>`: a fault of the node's own IMEX
/// daemon or channel, as a prolog or epilog drains for it.
pub fn imex_reason(node: &str, line: &str) -> String {
    format!("{DRAIN_PREFIX} {IMEX} {node}: {line}")
}

/// `imex-health: config: <line>`: the node's imex.toml does not load (the
/// line says where and why); lifted by `slurm-imex check --undrain` once it
/// loads.
pub fn config_reason(line: &str) -> String {
    format!("{DRAIN_PREFIX} {CONFIG}: {line}")
}

/// The check a reason of ours names (`xid` of `imex-health: xid gpu0 …`),
/// None for a reason that is not ours.
pub fn reason_check(reason: &str) -> Option<&str> {
    let rest = reason.strip_prefix(DRAIN_PREFIX)?.strip_prefix(' ')?;
    let end = rest.find([' ', ':']).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// One class of drain reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasonClass {
    /// The check, or `recovery_action.<ACTION>` (`recovery_action.unknown`
    /// for a value this release does not name, `recovery_action.unread`
    /// for one that could not be read).
    pub name: String,
    /// The check its reasons carry.
    pub check: &'static str,
    /// Its reasons as the code writes them, one per form (about a GPU or
    /// the node, a check's finding or its read overrunning), without the
    /// hooks' ` (job N)`.
    pub examples: Vec<String>,
}

/// The GPU an example is about.
fn example_gpu() -> GpuRef {
    GpuRef {
        index: 3,
        serial: "1650924060001".into(),
        uuid: "GPU-00000000-0000-0000-0000-000000000003".into(),
    }
}

/// What a check found, where an example needs no particular detail.
const EXAMPLE_DETAIL: &str = "what the check found";

fn finding(check: &str, gpu: Option<GpuRef>, detail: String) -> Finding {
    Finding {
        check: check.into(),
        severity: Severity::Drain,
        gpu,
        detail,
    }
}

/// Every class of drain reason: a GPU's steps (the recovery action split by
/// action), each reading stage's overrun (in its step's class where it
/// has one), the named checks, then the kernel log's signatures.
pub fn reason_classes() -> Vec<ReasonClass> {
    let mut classes = Classes::default();
    for check in gpu_check_names() {
        if check == RECOVERY_ACTION {
            recovery_classes(&mut classes);
        } else {
            classes.add(check, check, gpu_finding(check));
        }
    }
    for stage in Stage::ALL {
        let overrun = Overrun {
            gpu: example_gpu().index,
            stage,
            limit: stage.budget(Duration::ZERO, crate::nvml::BUDGET_GATE),
        };
        let check = stage.check_name();
        let name = if check == RECOVERY_ACTION {
            recovery_class(UNREAD)
        } else {
            check.to_string()
        };
        classes.add(&name, check, overrun.finding().reason());
    }
    for &check in NAMED_CHECKS {
        let reasons = match check {
            GPU_LOST => vec![gpu_finding(check)],
            // An XID names a GPU, but one NVML no longer lists; the kernel
            // log unreadable names none.
            XID => vec![gpu_finding(check), node_finding(check)],
            IMEX => vec![
                imex_reason("gb-r1-01", "nvidia-imex could not start"),
                node_finding(check),
            ],
            GATE => vec![gate::crashed().reason()],
            CONFIG => vec![config_reason(
                "bad config /etc/slurm/imex.toml:12: [imex.watch] interval = 0ns is out of \
                 range: use 100ms to 10m",
            )],
            _ => vec![node_finding(check)],
        };
        for reason in reasons {
            classes.add(check, check, reason);
        }
    }
    for signature in &SIGNATURES {
        let sighting = Sighting {
            check: signature.check,
            pci: None,
            seqs: vec![1],
            newest: "NVRM: the newest line".into(),
        };
        let detail = super::checks::signature_detail(signature, &sighting, 1);
        // A line about a GPU NVML no longer lists names no GPU.
        let names_gpu = signature
            .forms
            .iter()
            .any(|f| !matches!(f.matcher, Matcher::NodeLine(_)));
        let gpus = if names_gpu {
            vec![Some(example_gpu()), None]
        } else {
            vec![None]
        };
        for gpu in gpus {
            let reason = finding(signature.check, gpu, detail.clone()).reason();
            classes.add(signature.check, signature.check, reason);
        }
    }
    classes.0
}

/// `recovery_action.unread`'s suffix.
const UNREAD: &str = "unread";

fn recovery_class(suffix: &str) -> String {
    format!("{RECOVERY_ACTION}.{suffix}")
}

/// One class per action NVML names but NONE, one for a value it does not
/// (the first past them), and one for an action that could not be read
/// again (the reading stage's overrun is added with the stages).
fn recovery_classes(classes: &mut Classes) {
    let reason = |detail: String| finding(RECOVERY_ACTION, Some(example_gpu()), detail).reason();
    let mut unknown = 0;
    for (action, name) in RecoveryAction::named() {
        unknown = unknown.max(action.0 + 1);
        if action == RecoveryAction::NONE {
            continue;
        }
        let class = recovery_class(name);
        classes.add(&class, RECOVERY_ACTION, reason(action.finding_detail()));
        if action == RecoveryAction::RECOVER_IMEX_DOMAIN {
            classes.add(&class, RECOVERY_ACTION, reason(action.still_asks_detail()));
        }
    }
    let class = recovery_class("unknown");
    let detail = RecoveryAction(unknown).finding_detail();
    classes.add(&class, RECOVERY_ACTION, reason(detail));
    let detail = RecoveryAction::unread_detail(Some("NVML did not answer"));
    classes.add(&recovery_class(UNREAD), RECOVERY_ACTION, reason(detail));
}

fn gpu_finding(check: &str) -> String {
    finding(check, Some(example_gpu()), EXAMPLE_DETAIL.into()).reason()
}

fn node_finding(check: &str) -> String {
    finding(check, None, EXAMPLE_DETAIL.into()).reason()
}

/// The classes in the order first added; a class added again gains the
/// example, unless it has it.
#[derive(Default)]
struct Classes(Vec<ReasonClass>);

impl Classes {
    fn add(&mut self, name: &str, check: &'static str, example: String) {
        match self.0.iter_mut().find(|c| c.name == name) {
            Some(class) if class.examples.contains(&example) => {}
            Some(class) => class.examples.push(example),
            None => self.0.push(ReasonClass {
                name: name.into(),
                check,
                examples: vec![example],
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    #[test]
    fn every_class_is_named_once_and_its_reasons_carry_its_check() {
        let classes = reason_classes();
        let names: BTreeSet<&str> = classes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names.len(), classes.len(), "a class listed twice");
        for class in &classes {
            assert!(!class.examples.is_empty(), "{}", class.name);
            for reason in &class.examples {
                assert_eq!(reason_check(reason), Some(class.check), "{reason}");
                assert!(
                    class.name == class.check || class.name.starts_with(RECOVERY_ACTION),
                    "{}",
                    class.name
                );
            }
        }
        for check in gpu_check_names().chain(NAMED_CHECKS.iter().copied()) {
            assert!(classes.iter().any(|c| c.check == check), "{check}");
        }
        for stage in Stage::ALL {
            assert!(classes.iter().any(|c| c.check == stage.check_name()));
        }
        for signature in &SIGNATURES {
            assert!(names.contains(signature.check), "{}", signature.check);
        }
    }

    #[test]
    fn the_recovery_action_is_a_class_per_action() {
        let classes = reason_classes();
        let recovery: Vec<&str> = classes
            .iter()
            .filter(|c| c.check == RECOVERY_ACTION)
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            recovery,
            [
                "recovery_action.GPU_RESET",
                "recovery_action.NODE_REBOOT",
                "recovery_action.DRAIN_P2P",
                "recovery_action.DRAIN_AND_RESET",
                "recovery_action.RECOVER_IMEX_DOMAIN",
                "recovery_action.BUS_RESET",
                "recovery_action.SYSTEM_REBOOT",
                "recovery_action.unknown",
                "recovery_action.unread",
            ]
        );
        let imex = &classes
            .iter()
            .find(|c| c.name == "recovery_action.RECOVER_IMEX_DOMAIN")
            .unwrap()
            .examples;
        assert!(imex[1].starts_with(
            "imex-health: recovery_action gpu3 1650924060001: driver still asks for recovery \
             action RECOVER_IMEX_DOMAIN (5) after the job's fresh IMEX domain came UP"
        ));
        let unread = &classes
            .iter()
            .find(|c| c.name == "recovery_action.unread")
            .unwrap()
            .examples;
        assert_eq!(
            unread,
            &[
                "imex-health: recovery_action gpu3 1650924060001: its recovery action could not \
                 be read again: NVML did not answer",
                "imex-health: recovery_action gpu3 no-serial: check timed out after 250ms (NVML \
                 call hung)",
            ]
        );
    }

    #[test]
    fn a_reasons_check_is_read_back() {
        assert_eq!(
            reason_check(&imex_reason("n1", "nvidia-imex exited")),
            Some("imex")
        );
        assert_eq!(reason_check("imex-health: xid: XID 79"), Some("xid"));
        assert_eq!(reason_check("imex-health: gate"), Some("gate"));
        assert_eq!(reason_check("imex-health:xid"), None);
        assert_eq!(reason_check("Prolog error"), None);
    }

    /// The source files of the crates that make findings, less their tests.
    fn product_sources() -> Vec<(PathBuf, String)> {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && path.file_name().is_some_and(|n| n != "tests.rs")
                {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let product = text.split("\n#[cfg(test)]\nmod ").next().unwrap_or("");
                    out.push((path, product.to_string()));
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut out = Vec::new();
        walk(&root.join("src"), &mut out);
        walk(&root.join("../hooks/src"), &mut out);
        out
    }

    /// A finding's check, or a reason, is named only through the tables and
    /// [`NAMED_CHECKS`], so no check can be added without being a class:
    /// no `check: "…"` (but the signatures' own table), no
    /// `node_drain("…"`, no `imex-health:` but [`DRAIN_PREFIX`]'s, and no
    /// check written out after `{DRAIN_PREFIX} ` in a format.
    #[test]
    fn no_check_is_named_outside_the_tables() {
        let mut found = Vec::new();
        for (path, text) in product_sources() {
            let file = path.display().to_string();
            let mut flag = |at: usize| {
                let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
                let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
                let line = text[start..end].trim();
                if !line.starts_with("//") {
                    let n = text[..start].matches('\n').count() + 1;
                    found.push(format!("{file}:{n}: {line}"));
                }
            };
            let mut needles = vec!["node_drain(", "imex-health:", "{DRAIN_PREFIX} "];
            if !file.ends_with("xid/signature.rs") {
                needles.push("check:");
            }
            for needle in needles {
                for (at, _) in text.match_indices(needle) {
                    let after = text[at + needle.len()..].trim_start();
                    let named = match needle {
                        "imex-health:" => {
                            !text[..at].ends_with("pub const DRAIN_PREFIX: &str = \"")
                        }
                        "{DRAIN_PREFIX} " => after.starts_with(|c: char| c.is_ascii_lowercase()),
                        _ => after.starts_with('"'),
                    };
                    if named {
                        flag(at);
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "checks named outside the tables (use a constant of health::reasons):\n{}",
            found.join("\n")
        );
    }
}
