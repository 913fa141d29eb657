//! slurm-imex-jobview: `slurm-imex job JOBID` and `slurm-imex job --store`,
//! built on what sites already run (as Princeton's jobstats is):
//!
//! - `config`: the `[job]` section of the config
//! - `accounting`: the job as Slurm's accounting knows it (`sacct`), and
//!   its stored summary written back (`sacctmgr`, to SlurmDBD)
//! - `prometheus`: the nodes' per-job series, queried from Prometheus (or a
//!   store with its query API)
//! - `client`: the store's HTTP(S) client: TLS roots, credentials, and the
//!   one-line cause of each failed request
//! - `lookup`: one job for its owner or root: stored summary first, then
//!   Prometheus
//! - `store`: the controller-host pass (a timer) that stores each ended
//!   job's summary once, and backfills the jobs it missed
//!
//! No call reaches slurmctld (docs/controller-calls.md).

pub mod accounting;
pub mod client;
pub mod config;
pub mod lookup;
pub mod prometheus;
pub mod store;
