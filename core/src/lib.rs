//! slurm-imex core: what the SPANK plugin and every node program share, and
//! nothing else: no NVML or SQLite (`slurm-imex-gpu`, `slurm-imex-jobdb`)
//! and no IMEX domain engine, racks or published cliques
//! (`slurm-imex-domain`), none of which the plugin links. One module per
//! noun.
//!
//! - configuration and its trust rule: `config`, `trust`
//! - Slurm: `slurm` (what slurm-imex reads from Slurm: a hook's environment,
//!   slurm.conf, hostlists, and the controller behind one `Scontrol` handle)
//! - IMEX channels: `channel` (the plugin gives a job its channel)
//! - an NVLink clique's one spelling: `clique` (the GPU side writes it, the
//!   rack side reads it)
//! - a GPU recovery action's one spelling: `recovery_action` (the GPU side
//!   reads the action, the job's records name it)
//! - who is to blame for a failure: `blame` (docs/blame.md)
//! - the node's own files: `state` (the state directory and the job records
//!   kept there), `fsutil`
//! - plumbing: `process` (bounded helpers), `poll` (waiting with a
//!   deadline), `text`, `hex` (the one hex spelling of bytes), `timespec`,
//!   `logging`,
//!   `error`, `hook` (prolog, epilog or check)

pub mod blame;
pub mod channel;
pub mod clique;
pub mod config;
pub mod error;
pub mod fsutil;
pub mod hex;
pub mod hook;
pub mod logging;
pub mod poll;
pub mod process;
pub mod recovery_action;
pub mod slurm;
pub mod state;
pub mod text;
pub mod timespec;
pub mod trust;

pub use error::{Error, Result};
