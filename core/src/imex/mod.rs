//! The per-job IMEX domain: daemon config and node list rendering, the
//! daemon's port, the daemon manager, the control-tool client, the per-node
//! job records, and the setup/teardown flows run by the prolog and epilog.

pub mod ctl;
pub mod daemon_config;
pub mod daemon_proc;
pub mod domain;
pub mod job_record;
pub mod manager;
pub mod port;
#[cfg(feature = "node")]
pub mod status;
