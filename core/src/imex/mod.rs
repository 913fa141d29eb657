//! The IMEX domain, per job or rack-wide (`rack_domain`, and `rack_channels`:
//! why its jobs never share a channel): daemon config and node list rendering, the
//! daemon's port, the daemon manager, the control-tool client, what the
//! prolog concluded for a job (`job_record`; where records are kept is
//! `crate::state`), the setup/teardown flows run by the prolog and epilog,
//! and the node's IMEX status as an admin asks for it.

pub mod ctl;
pub mod daemon_config;
pub mod daemon_proc;
pub mod domain;
pub mod job_record;
pub mod manager;
pub mod port;
pub mod rack_channels;
pub mod rack_domain;
pub mod status;
