//! slurm-imex core: all domain logic behind the SPANK plugin, the prolog and
//! epilog, and the admin CLI. One module per noun; binaries and the plugin
//! are thin adapters over it.

pub mod addresses;
pub mod channel;
pub mod config;
pub mod drain;
pub mod error;
pub mod fsutil;
pub mod gpu;
pub mod gpu_job;
pub mod health;
pub mod hostlist;
pub mod imex;
pub mod jobdb;
pub mod lifecycle;
pub mod logging;
pub mod process;
pub mod slurm_env;
pub mod stats;
pub mod timespec;
pub mod xid;

pub use error::{Error, Result};
