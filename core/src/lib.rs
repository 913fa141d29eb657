//! slurm-imex core: what the SPANK plugin and every node program share, and
//! nothing that loads NVML or SQLite (those live in `slurm-imex-gpu` and
//! `slurm-imex-jobdb`, which the plugin never links). One module per noun.
//!
//! - configuration and its trust rule: `config`, `trust`
//! - Slurm interop: `slurm_env` (a hook's environment), `slurm_conf`,
//!   `slurm_job` (has a job ended), `slurm_node` (node state, drain, resume),
//!   `topology` (NVLink blocks), `racks` (where a job's racks come from),
//!   `hostlist`
//! - IMEX: `imex` (domain, daemon, ctl), `channel`, `addresses`, `clique`
//!   (NVLink cliques published in Slurm)
//! - the node's own files: `state` (the state directory), `fsutil`
//! - plumbing: `process` (bounded helpers), `text`, `timespec`, `logging`,
//!   `error`, `hook` (prolog, epilog or check)

pub mod addresses;
pub mod channel;
pub mod clique;
pub mod config;
pub mod error;
pub mod fsutil;
pub mod hook;
pub mod hostlist;
pub mod imex;
pub mod logging;
pub mod process;
pub mod rack_map;
pub mod racks;
pub mod slurm_conf;
pub mod slurm_env;
pub mod slurm_job;
pub mod slurm_node;
pub mod state;
pub mod text;
pub mod timespec;
pub mod topology;
pub mod trust;

pub use error::{Error, Result};
