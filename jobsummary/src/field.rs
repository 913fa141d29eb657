//! Slurm's AdminComment field, where a job's summary is stored: how much
//! text it holds. Its own module so that the summary (`report`, which notes
//! what was left out to fit) and the codec that fits it (`comment`) share
//! the number without depending on each other.

/// Longest stored text: SlurmDBD keeps AdminComment in a MySQL `text`
/// column (64 KiB); leave room for whatever else shares the job row.
pub const MAX_LEN: usize = 60_000;
