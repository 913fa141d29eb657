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
//! - `imex_event`: what happened to the job's IMEX domain on a node while it
//!   ran (the domain watcher's events, their kinds and their one line), which
//!   a node's report carries as one line
//!
//! Loaded by the epilog (to write its series), by the domain watcher and the
//! engine that decides its events (`slurm-imex-domain`), and by the CLI on
//! login and controller hosts (to read them back and store the summary);
//! never by the SPANK plugin.

pub mod comment;
pub mod field;
pub mod imex_event;
pub mod report;
pub mod rollup;
pub mod series;
