//! slurm-imex-jobsummary: what `slurm-imex job JOBID` shows, as data.
//!
//! - `report`: one node's report of one job (verdicts, blame, IMEX domain,
//!   per-GPU use and health), and the whole job's summary with its notes
//! - `series`: those reports as Prometheus series (the epilog's per-job
//!   textfile) and back from a Prometheus query's samples
//! - `rollup`: the per-rack rollup, and how a big job's PASS nodes are left
//!   out of its summary and counted
//! - `comment`: the compact summary stored in the job's AdminComment
//! - `field`: how much text that AdminComment holds
//!
//! Loaded by the epilog (to write its series) and by the CLI on login and
//! controller hosts (to read them back and store the summary); never by the
//! SPANK plugin.

pub mod comment;
pub mod field;
pub mod report;
pub mod rollup;
pub mod series;
