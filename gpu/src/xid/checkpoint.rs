//! The XID checkpoint: per GPU (PCI id), the last kernel-log record already
//! judged, with the numbering it counts in (`log::Numbering`), so an XID is
//! reported once, not by every later gate, and none is skipped. Lines that
//! name no GPU (`signature`: an NVLink post-RX-detect failure, dropped IMEX
//! fabric events) count from the position kept under [`NODE`]. It lives in
//! the node state directory (`StateDir::xid_checkpoint_path`), and it holds
//! the boot it counts in (`log::BootId`): a reboot restarts kmsg numbering,
//! and a persistent state directory keeps the checkpoint across it.
//!
//! A checkpoint is only compared with a log of its own numbering and boot.
//! One that cannot apply to the log just read (another boot, another
//! numbering, one written before
//! checkpoints had a numbering, or one ahead of the log's last record: the
//! log was cleared or replaced) is reset with one line in the journal, and
//! the gate judges every XID still in the log: that may report one again,
//! but never misses one. A corrupt file is set aside (`.corrupt`) by
//! `StateDir::read_json`, with the same effect; so is one that fails the
//! config's trust rules (`.untrusted`: another user's, writable by others,
//! or a symlink to such a file), which would otherwise hide XIDs.

use super::log::{BootId, LogPosition, Numbering};
use serde::{Deserialize, Serialize};
use slurm_imex_core::state::StateDir;
use std::collections::BTreeMap;

/// The key of the last record judged for lines that name no GPU. No PCI
/// id is spelled so; a checkpoint written without it (before 0.4) judges
/// them from its oldest GPU position, so none is missed.
pub const NODE: &str = "node";

/// Per GPU (PCI id), the last record already judged, in `numbering`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// None: written before checkpoints said how they count (slurm-imex
    /// 0.3 and older counted continuation lines too): never trusted.
    pub numbering: Option<Numbering>,
    pub judged: BTreeMap<String, u64>,
    /// The boot whose log it counts in (None: unknown, or written before
    /// checkpoints said): it never applies to a log of another known boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<BootId>,
    /// How often the log's record numbers had restarted inside it when the
    /// checkpoint was taken (`LogPosition::restarts`): against a log with
    /// another count its numbers belong to another run of numbers.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restarts: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The file as any slurm-imex wrote it: today's, or 0.3's bare map.
#[derive(Deserialize)]
#[serde(untagged)]
enum OnDisk {
    Current(Checkpoint),
    Unnumbered(BTreeMap<String, u64>),
}

impl Checkpoint {
    /// The last record judged for `pci` (or [`NODE`]); a GPU the checkpoint
    /// does not know yet counts from the oldest GPU position it holds (0
    /// when it holds none).
    pub fn judged_for(&self, pci: &str) -> u64 {
        self.judged.get(pci).copied().unwrap_or_else(|| {
            self.judged
                .iter()
                .filter(|(key, _)| key.as_str() != NODE)
                .map(|(_, last)| *last)
                .min()
                .unwrap_or(0)
        })
    }

    /// A checkpoint for every GPU in `pcis` at `position` (the prolog's
    /// start of a job, which the epilog counts from).
    pub fn at<'a>(position: LogPosition, pcis: impl Iterator<Item = &'a str>) -> Checkpoint {
        Checkpoint {
            numbering: Some(position.numbering),
            judged: pcis.map(|p| (p.to_string(), position.last)).collect(),
            boot: position.boot,
            restarts: position.restarts,
        }
    }

    /// This checkpoint as it applies to a log read that ended at `log`:
    /// itself, or empty (judge everything) when it cannot apply, with one
    /// journal line saying why.
    pub fn reconciled(&self, log: LogPosition, source: &str) -> Checkpoint {
        match self.cannot_apply(log) {
            None => self.clone(),
            Some(why) => {
                tracing::warn!(
                    "XID checkpoint reset: {why}; every XID still in {source} is judged again \
                     (one may be reported twice, none is missed)"
                );
                Checkpoint {
                    numbering: Some(log.numbering),
                    judged: BTreeMap::new(),
                    boot: log.boot,
                    restarts: log.restarts,
                }
            }
        }
    }

    fn cannot_apply(&self, log: LogPosition) -> Option<String> {
        if self.judged.is_empty() {
            return None;
        }
        let Some(numbering) = self.numbering else {
            return Some("it was written by an older slurm-imex, which counted lines".into());
        };
        // Only two known boots that differ say the numbering restarted. One
        // unknown side (a checkpoint written before checkpoints said their
        // boot, or a node whose boot id cannot be read) is judged by its
        // numbering and position, as before: an upgrade must not judge the
        // boot's handled XIDs again and drain for them twice.
        if let (Some(mine), Some(now)) = (self.boot, log.boot) {
            if mine != now {
                return Some(
                    "it was written in another boot, whose numbering this log does not continue"
                        .into(),
                );
            }
        }
        if self.restarts != log.restarts {
            return Some(format!(
                "the log's record numbers have restarted since ({} restarts in it now, {} then)",
                log.restarts, self.restarts
            ));
        }
        if numbering != log.numbering {
            return Some(format!(
                "it counts {} but the log now has {}",
                numbering.as_str(),
                log.numbering.as_str()
            ));
        }
        let ahead = self.judged.values().copied().max().unwrap_or(0);
        (ahead > log.last).then(|| {
            format!(
                "it is at {ahead} but the log ends at {} (cleared, or replaced)",
                log.last
            )
        })
    }
}

pub fn load(state: &StateDir) -> Checkpoint {
    match state.read_json::<OnDisk>(&state.xid_checkpoint_path(), "XID checkpoint") {
        Some(OnDisk::Current(c)) => c,
        Some(OnDisk::Unnumbered(judged)) => Checkpoint {
            numbering: None,
            judged,
            boot: None,
            restarts: 0,
        },
        None => Checkpoint::default(),
    }
}

/// Mark everything up to `read` judged for each GPU in `pcis`. What is on
/// disk is replaced, not merged, when it cannot apply to that read (as in
/// `reconciled`; a concurrent gate that read further makes this one step
/// back, which may report an XID twice but never skips one). A gate that
/// could not read the kernel log (`None`) advances nothing.
pub fn advance<'a>(
    state: &StateDir,
    read: Option<LogPosition>,
    pcis: impl Iterator<Item = &'a str>,
) {
    let Some(read) = read else {
        return;
    };
    let mut checkpoint = load(state);
    if checkpoint.cannot_apply(read).is_some() {
        checkpoint.judged.clear();
    }
    checkpoint.numbering = Some(read.numbering);
    checkpoint.boot = read.boot;
    checkpoint.restarts = read.restarts;
    for pci in pcis {
        let seen = checkpoint.judged.entry(pci.to_string()).or_insert(0);
        *seen = (*seen).max(read.last);
    }
    if let Err(e) = state.write_json(&state.xid_checkpoint_path(), &checkpoint) {
        tracing::warn!("cannot save the XID checkpoint: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(last: u64) -> LogPosition {
        LogPosition {
            numbering: Numbering::Kernel,
            last,
            boot: Some(BootId(1)),
            restarts: 0,
        }
    }

    #[test]
    fn advances_per_gpu_and_never_goes_back() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir::new(d.path());
        advance(&state, Some(kernel(10)), ["a", "b"].into_iter());
        advance(&state, Some(kernel(14)), ["a"].into_iter());
        advance(&state, None, ["b"].into_iter());
        let cp = load(&state);
        assert_eq!(cp.numbering, Some(Numbering::Kernel));
        assert_eq!(cp.judged.get("a"), Some(&14));
        assert_eq!(cp.judged.get("b"), Some(&10));
        advance(&state, Some(kernel(16)), ["b"].into_iter());
        assert_eq!(load(&state).judged.get("b"), Some(&16));
        // A log that now ends before the checkpoint (cleared): replaced.
        advance(&state, Some(kernel(3)), ["b"].into_iter());
        assert_eq!(load(&state).judged, [("b".to_string(), 3)].into());
    }

    #[test]
    fn a_checkpoint_of_another_numbering_or_ahead_of_the_log_is_reset() {
        let cp = Checkpoint::at(kernel(303), ["0000:1a:00"].into_iter());
        // The log ends at 101: the checkpoint is ahead (issue 24's 303).
        assert!(cp.reconciled(kernel(101), "/dev/kmsg").judged.is_empty());
        // The same numbering, behind the log: kept.
        assert_eq!(cp.reconciled(kernel(400), "k"), cp);
        // Another numbering: never compared.
        let lines = LogPosition {
            numbering: Numbering::Lines,
            last: 500,
            boot: Some(BootId(1)),
            restarts: 0,
        };
        let reset = cp.reconciled(lines, "k");
        assert!(reset.judged.is_empty());
        assert_eq!(reset.numbering, Some(Numbering::Lines));
        // An old, unnumbered checkpoint is never trusted.
        let old = Checkpoint {
            numbering: None,
            judged: [("0000:1a:00".to_string(), 5)].into(),
            boot: None,
            restarts: 0,
        };
        assert!(old.reconciled(kernel(400), "k").judged.is_empty());
    }

    #[test]
    fn a_checkpoint_of_another_boot_is_reset_even_behind_the_log() {
        let cp = Checkpoint::at(kernel(50), ["0000:1a:00"].into_iter());
        assert_eq!(cp.boot, Some(BootId(1)));
        // The new boot's log has passed 50 already: judged from its start.
        let next_boot = LogPosition {
            boot: Some(BootId(2)),
            ..kernel(60)
        };
        let reset = cp.reconciled(next_boot, "k");
        assert!(reset.judged.is_empty());
        assert_eq!(reset.boot, Some(BootId(2)));
        // One written before checkpoints said their boot (an upgrade) is
        // judged by numbering and position alone: behind the log, it holds.
        let unknown = Checkpoint {
            boot: None,
            ..cp.clone()
        };
        assert_eq!(unknown.reconciled(kernel(60), "k").judged, cp.judged);
        assert!(unknown.reconciled(kernel(40), "k").judged.is_empty());
        // Advancing in the new boot replaces the old boot's positions.
        let d = tempfile::tempdir().unwrap();
        let state = StateDir::new(d.path());
        advance(&state, Some(kernel(50)), ["a", "b"].into_iter());
        advance(&state, Some(next_boot), ["a"].into_iter());
        let now = load(&state);
        assert_eq!(
            (now.boot, now.judged),
            (Some(BootId(2)), [("a".to_string(), 60)].into())
        );
    }

    #[test]
    fn the_node_position_counts_only_for_lines_that_name_no_gpu() {
        let cp = Checkpoint {
            numbering: Some(Numbering::Kernel),
            judged: [("0000:1a:00".to_string(), 10), (NODE.to_string(), 50)].into(),
            boot: None,
            restarts: 0,
        };
        assert_eq!(cp.judged_for(NODE), 50);
        // A GPU the checkpoint does not know counts from the oldest GPU's
        // position, never from the node's.
        assert_eq!(cp.judged_for("0000:1b:00"), 10);
        let only_node = Checkpoint {
            judged: [(NODE.to_string(), 50)].into(),
            ..cp.clone()
        };
        assert_eq!(only_node.judged_for("0000:1b:00"), 0);
        // Written before the node had a position: its lines count from the
        // oldest GPU's.
        let gpus_only = Checkpoint {
            judged: [("a".to_string(), 10), ("b".to_string(), 20)].into(),
            ..cp
        };
        assert_eq!(gpus_only.judged_for(NODE), 10);
    }

    #[test]
    fn reads_the_bare_map_older_releases_wrote() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir::new(d.path());
        std::fs::create_dir_all(state.xid_checkpoint_path().parent().unwrap()).unwrap();
        std::fs::write(state.xid_checkpoint_path(), r#"{"0000:1a:00":303}"#).unwrap();
        let cp = load(&state);
        assert_eq!(cp.numbering, None);
        assert_eq!(cp.judged_for("0000:1a:00"), 303);
        // Advancing replaces it.
        advance(&state, Some(kernel(101)), ["0000:1a:00"].into_iter());
        let now = load(&state);
        assert_eq!(now.numbering, Some(Numbering::Kernel));
        assert_eq!(now.judged_for("0000:1a:00"), 101);
    }
}
