//! job_script context (`slurmstepd spank prolog|epilog`, forked for every
//! job on every node). All IMEX work is done by slurm-imex-prolog/-epilog, so
//! these hooks return at once.

use std::error::Error;

pub(crate) fn job_prolog() -> Result<(), Box<dyn Error>> {
    Ok(())
}

pub(crate) fn job_epilog() -> Result<(), Box<dyn Error>> {
    Ok(())
}
