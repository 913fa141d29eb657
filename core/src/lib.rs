//! slurm-imex core: what the SPANK plugin and every node program share, and
//! nothing that loads NVML or SQLite (those live in `slurm-imex-gpu` and
//! `slurm-imex-jobdb`, which the plugin never links). One module per noun.
//!
//! - configuration and its trust rule: `config`, `trust`
//! - Slurm: `slurm` (everything read from Slurm: a hook's environment,
//!   slurm.conf, topology/block files, hostlists, and the controller behind
//!   one `Scontrol` handle); above it, as policy, `racks` (where a job's racks
//!   come from), `rack_map` and `clique` (NVLink cliques published in Slurm)
//! - IMEX: `imex` (domain, daemon, ctl), `channel`, `addresses`
//! - who is to blame for a failure: `blame` (docs/blame.md)
//! - the node's own files: `state` (the state directory), `fsutil`
//! - plumbing: `process` (bounded helpers), `poll` (waiting with a
//!   deadline), `text`, `timespec`, `logging`,
//!   `error`, `hook` (prolog, epilog or check)

pub mod addresses;
pub mod blame;
pub mod channel;
pub mod clique;
pub mod config;
pub mod error;
pub mod fsutil;
pub mod hook;
pub mod imex;
pub mod logging;
pub mod poll;
pub mod process;
pub mod rack_map;
pub mod racks;
pub mod slurm;
pub mod state;
pub mod text;
pub mod timespec;
pub mod trust;

pub use error::{Error, Result};
