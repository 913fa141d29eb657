//! The driver's GPU recovery action (NVML field 230,
//! `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`): what each value is called, what
//! it asks of the node, and reading it again on its own (the prolog, once a
//! job's IMEX domain is UP). docs/gpu-health.md, "Recovery actions".
//!
//! The values and their names are NVML's (`nvmlDeviceGpuRecoveryAction_t`;
//! 5 since R595, 6 and 7 since R615, NVML change log). A value this release
//! does not know is named by its number and drains, as NVIDIA's DRA driver
//! taints a GPU for every value but NONE and RECOVER_IMEX_DOMAIN.

use crate::nvml::{GpuReader, Reading};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// One recovery action as the driver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecoveryAction(pub u64);

/// What a recovery action asks of slurm-imex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asks {
    /// NONE: nothing.
    Nothing,
    /// RECOVER_IMEX_DOMAIN: the node's IMEX domain must be restored, which
    /// the next `--imex` job's fresh domain does. Never a drain by itself:
    /// the prolog reads the action again once the job's domain is UP.
    RestoreImexDomain,
    /// Anything else: the node takes no job until it is done (`todo`).
    Drain { todo: &'static str },
}

impl RecoveryAction {
    pub const NONE: RecoveryAction = RecoveryAction(0);
    pub const RECOVER_IMEX_DOMAIN: RecoveryAction = RecoveryAction(5);

    /// Every value NVML names, with its name, in order.
    pub fn named() -> impl Iterator<Item = (RecoveryAction, &'static str)> {
        (0u64..)
            .zip(slurm_imex_core::recovery_action::NAMES)
            .map(|(v, name)| (RecoveryAction(v), name))
    }

    /// NVML's name for the value, when this release knows it.
    pub fn name(self) -> Option<&'static str> {
        slurm_imex_core::recovery_action::name(self.0)
    }

    /// `RECOVER_IMEX_DOMAIN (5)`, or `8, unknown to this slurm-imex` for a
    /// value it does not know (the names: `slurm_imex_core::recovery_action`).
    pub fn describe(self) -> String {
        slurm_imex_core::recovery_action::describe(self.0)
    }

    /// What the action asks (docs/gpu-health.md, "Recovery actions"):
    /// NVML's documented meaning, or DCGM's where NVML names only the value.
    pub fn asks(self) -> Asks {
        let todo = match self.0 {
            0 => return Asks::Nothing,
            5 => return Asks::RestoreImexDomain,
            1 => "reset the GPU (nvidia-smi -r -i N)",
            2 => "reboot the node",
            3 => "stop the GPU's peer-to-peer work and disable UVM persistence, then read the action again",
            4 => "drain the GPU's work, then reset it",
            6 => "reset the GPU's PCIe bus (or reboot the node)",
            7 => "reboot the system",
            _ => "see the driver's documentation for this value, or reboot the node",
        };
        Asks::Drain { todo }
    }

    /// The finding's detail for a GPU reading this action (not NONE).
    pub fn finding_detail(self) -> String {
        let what = self.describe();
        match self.asks() {
            Asks::Nothing => format!("driver asks for no recovery action ({what})"),
            Asks::RestoreImexDomain => format!(
                "driver asks for recovery action {what}: the GPU's IMEX domain must be \
                 restored; the next --imex job's fresh IMEX domain does, and its prolog reads \
                 the action again"
            ),
            Asks::Drain { todo } => format!("driver asks for recovery action {what}: {todo}"),
        }
    }

    /// The finding's detail for a GPU that asked for its IMEX domain to be
    /// restored and reads this action once the job's fresh IMEX domain is
    /// UP (`reread`): still RECOVER_IMEX_DOMAIN, which the domain did not
    /// clear, or another action, as a gate's finding says it.
    pub fn still_asks_detail(self) -> String {
        if self == RecoveryAction::RECOVER_IMEX_DOMAIN {
            format!(
                "driver still asks for recovery action {} after the job's fresh IMEX domain came \
                 UP: reset the GPU or reboot the node",
                self.describe()
            )
        } else {
            self.finding_detail()
        }
    }

    /// The finding's detail for a GPU whose action could not be read again
    /// (`reread`), and why when known.
    pub fn unread_detail(why: Option<&str>) -> String {
        match why {
            Some(why) => format!("its recovery action could not be read again: {why}"),
            None => "its recovery action could not be read again".into(),
        }
    }
}

/// The actions a set of snapshots read, as `(gpu index, action)`; a GPU
/// whose action could not be read is left out (NOT_SUPPORTED: an older
/// driver, where no action is ever pending).
pub fn actions_read<'a>(
    readings: impl Iterator<Item = (u32, &'a Reading<u64>)>,
) -> Vec<(u32, RecoveryAction)> {
    readings
        .filter_map(|(index, r)| r.value().map(|v| (index, RecoveryAction(*v))))
        .collect()
}

/// How long a second read of the action may take, NVML's load and init
/// included (the gate's own budgets: 2 s to init, 250 ms for the field).
pub const REREAD_BUDGET: Duration = Duration::from_millis(2500);

/// Read the recovery action of `gpus` again, in a fresh NVML session,
/// within [`REREAD_BUDGET`]. `Err` says why it could not be read (NVML
/// would not load, or hung): the caller decides what that means.
pub fn reread(library: &Path, gpus: &[u32]) -> Result<Vec<(u32, Reading<u64>)>, String> {
    let (tx, rx) = mpsc::channel();
    let library = library.to_path_buf();
    let gpus = gpus.to_vec();
    std::thread::spawn(move || {
        let read = GpuReader::open(&library).map(|reader| {
            gpus.iter()
                .map(|i| (*i, reader.recovery_action(*i)))
                .collect::<Vec<_>>()
        });
        let _ = tx.send(read.map_err(|e| e.to_string()));
    });
    match rx.recv_timeout(REREAD_BUDGET) {
        Ok(read) => read,
        Err(_) => Err(format!(
            "NVML did not answer within {REREAD_BUDGET:?} (a hung driver call)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_nvml_defines_is_named_and_newer_ones_by_their_number() {
        let named: Vec<String> = (0..8).map(|v| RecoveryAction(v).describe()).collect();
        assert_eq!(
            named,
            [
                "NONE (0)",
                "GPU_RESET (1)",
                "NODE_REBOOT (2)",
                "DRAIN_P2P (3)",
                "DRAIN_AND_RESET (4)",
                "RECOVER_IMEX_DOMAIN (5)",
                "BUS_RESET (6)",
                "SYSTEM_REBOOT (7)",
            ]
        );
        assert_eq!(
            RecoveryAction(8).describe(),
            "8, unknown to this slurm-imex"
        );
        assert_eq!(RecoveryAction(u64::MAX).name(), None);
    }

    #[test]
    fn only_none_and_recover_imex_domain_let_a_node_take_jobs() {
        assert_eq!(RecoveryAction(0).asks(), Asks::Nothing);
        assert_eq!(RecoveryAction(5).asks(), Asks::RestoreImexDomain);
        for v in [1, 2, 3, 4, 6, 7, 8, 255] {
            assert!(
                matches!(RecoveryAction(v).asks(), Asks::Drain { .. }),
                "{v}"
            );
        }
        let reboot = RecoveryAction(7).finding_detail();
        assert_eq!(
            reboot,
            "driver asks for recovery action SYSTEM_REBOOT (7): reboot the system"
        );
        assert!(RecoveryAction(8)
            .finding_detail()
            .starts_with("driver asks for recovery action 8, unknown to this slurm-imex: "));
        assert!(RecoveryAction(5)
            .finding_detail()
            .contains("RECOVER_IMEX_DOMAIN (5): the GPU's IMEX domain must be restored"));
    }

    #[test]
    fn a_reread_of_a_library_that_does_not_load_says_why() {
        let e = reread(Path::new("/nonexistent/libnvidia-ml.so.1"), &[0]).unwrap_err();
        assert!(e.contains("NVML init failed"), "{e}");
    }
}
