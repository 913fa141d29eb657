//! NVIDIA IMEX on this node. What the prolog and epilog do about a job's
//! domain is `domain` (the entry: setup, teardown), which forms a per-job
//! domain (`job_domain`) or joins the rack's (`rack_domain`, and
//! `rack_channels`: why its jobs never share a channel); both run the
//! shared engine `plan` (the daemon's files, start, readiness and blame)
//! and neither knows the other. Beneath: the daemon (`daemon`, its process
//! identity `daemon_proc`, its config files `daemon_config`, its port
//! `port`), the control tool (`ctl`), and the node's IMEX status as an
//! admin asks for it (`status`). While the job runs, `domain_watch` decides
//! what a look at the daemon and domain means (events, restart or leave
//! down), `watch_state` keeps what the watch saw of the daemon for the job
//! (`watch.json`), and `watcher_pid` says who the watching process is
//! (`watch.pid`); the watcher's settings are `[imex.watch]`
//! (`crate::config::WatchConfig`).
//! What the prolog concluded for a job is
//! `slurm_imex_core::state::job_record`: the plugin reads it too.

pub mod ctl;
pub mod daemon;
pub mod daemon_config;
pub mod daemon_proc;
pub mod domain;
pub mod domain_watch;
pub mod job_domain;
pub mod plan;
pub mod port;
pub mod rack_channels;
pub mod rack_domain;
pub mod status;
pub mod watch_state;
pub mod watcher_pid;
