//! slurm-imex core: all domain logic behind the SPANK plugin, the prolog and
//! epilog, and the admin CLI. One module per noun; binaries and the plugin
//! are thin adapters over it.

pub mod addresses;
pub mod channel;
pub mod config;
#[cfg(feature = "node")]
pub mod drain;
pub mod error;
pub mod fsutil;
#[cfg(feature = "node")]
pub mod gpu;
#[cfg(feature = "node")]
pub mod gpu_job;
#[cfg(feature = "node")]
pub mod health;
pub mod hostlist;
pub mod imex;
#[cfg(feature = "node")]
pub mod jobdb;
#[cfg(feature = "node")]
pub mod journal;
#[cfg(feature = "node")]
pub mod lifecycle;
pub mod logging;
#[cfg(feature = "node")]
pub mod metrics;
pub mod process;
pub mod slurm_conf;
pub mod slurm_env;
pub mod slurm_job;
#[cfg(feature = "node")]
pub mod stats;
pub mod text;
pub mod timespec;
pub mod topology;
pub mod trust;
pub mod xid;

pub use error::{Error, Result};
