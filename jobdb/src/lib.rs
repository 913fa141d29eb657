//! slurm-imex-jobdb: the node's local job database (SQLite) and what is
//! built from it, so the only crate that links SQLite. The SPANK plugin
//! never links it.
//!
//! - `config`: the `[database]` and `[metrics]` sections of the config
//! - `db`: opening the database safely, its schema and migrations
//! - `write`: one job's row per node (the epilog), and pruning
//! - `query`: history, one job, per-board totals and lifetime counters
//! - `imex_events`: what the IMEX domain watcher saw happen to a running
//!   job's domain (written while the job runs, read by `show`, `history`
//!   and the per-job export)
//! - `metrics`: the Prometheus textfile export
//! - `job_export`: the per-job textfile (this node's latest jobs as reports)
//! - `journal`: the per-job structured journal event

pub mod config;
mod db;
pub mod imex_events;
pub mod job_export;
pub mod journal;
pub mod metrics;
pub mod query;
pub mod write;

#[cfg(test)]
mod roundtrip_tests;

pub use db::{storage_problem, JobDb};
