//! slurm-imex-gpu: everything that reads or judges the node's GPUs, and so
//! the only crate besides its users that links NVML (loaded at run time from
//! `[gpu] nvml_library`). The SPANK plugin never links it.
//!
//! - `nvml`: loading NVML and reading one snapshot per GPU, each stage
//!   within its own time budget
//! - `health`: findings, verdicts and drain reasons; the checks (one file per
//!   subject) and the time-bounded gate that runs them
//! - `xid`: XID lines of the kernel log, their catalog class, the driver's
//!   other lines that tell of a fault (`xid::signature`), and the
//!   checkpoint of what was judged already
//! - `stats`: a job's per-GPU deltas between two snapshots
//! - `recovery`: the driver's recovery action, its names and what each asks
//! - `clique`: the node's NVLink clique (its rack), from the fabric info
//! - `config`: the `[gpu]` and `[health]` sections of the config
//!
//! It judges; acting on a verdict (draining the node through Slurm) is
//! `slurm_imex_hooks::drain`.

pub mod clique;
pub mod config;
pub mod health;
pub mod nvml;
pub mod recovery;
pub mod stats;
pub mod xid;
