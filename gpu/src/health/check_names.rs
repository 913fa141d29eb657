//! The names of the checks outside the tables (`checks::GPU_CHECKS`, the
//! reading stages, the kernel-log signatures): one constant each and
//! [`NAMED_CHECKS`], from one list. The checks and the gate make their
//! findings under them; `reasons` lists every class of drain reason from
//! them and the tables.

/// The checks outside the tables: each a `pub const` and in
/// [`NAMED_CHECKS`], from one list.
macro_rules! named_checks {
    ($($(#[doc = $doc:literal])* $name:ident = $value:literal;)*) => {
        $($(#[doc = $doc])* pub const $name: &str = $value;)*
        /// Every check named by a constant here, in order.
        pub const NAMED_CHECKS: &[&str] = &[$($name),*];
    };
}

named_checks! {
    /// A GPU NVML reports lost (`NVML_ERROR_GPU_IS_LOST`): no other check
    /// of it runs (`checks::check_gpu`).
    GPU_LOST = "gpu_lost";
    /// NVML would not load or start in time (`gate`).
    NVML_INIT = "nvml_init";
    /// GPUs missing against `expected_gpus` or the PCI bus (`checks::node`),
    /// or no device count (`gate`).
    GPU_COUNT = "gpu_count";
    /// `SLURM_JOB_GPUS` names a GPU the node does not have (`gate`).
    GPU_SET = "gpu_set";
    /// The driver is not `expected_driver` (`checks::node`).
    DRIVER = "driver";
    /// The node's GPUs in more than one NVLink clique (`checks::node`).
    FABRIC_CLIQUE = "fabric_clique";
    /// A new XID in the kernel log, or the log unreadable (`checks::xids`,
    /// `gate`).
    XID = "xid";
    /// The node's IMEX daemon or channel (`slurm_imex_hooks`: the check's
    /// `imex_check`, a prolog's or epilog's IMEX fault, [`imex_reason`]).
    IMEX = "imex";
    /// The health gate itself failed (`gate::crashed`).
    GATE = "gate";
    /// imex.toml cannot be loaded by the node's programs (a bad key, value
    /// or syntax, or a file root must not trust): `slurm_imex_hooks`'s
    /// `config_fault`, [`config_reason`].
    CONFIG = "config";
}
