//! What Slurm says about another job (`scontrol show job -o <id>`): used
//! only when a node's IMEX domain is still owned by a different job, to
//! tell a running owner (never disturbed) from one that has ended and left
//! its daemon behind (reclaimed).

use super::Scontrol;
use crate::error::Result;

impl Scontrol {
    /// Has Slurm finished with `job_id`? `Ok(None)` when Slurm could not say.
    pub fn job_has_ended(&self, job_id: u32) -> Result<Option<bool>> {
        let id = job_id.to_string();
        let out = self.run_any(&["show", "job", "-o", &id])?;
        judge_job_answer(&out)
    }
}

/// What `scontrol show job -o <id>` said about whether the job ended.
fn judge_job_answer(out: &crate::process::Output) -> Result<Option<bool>> {
    let text = format!("{}{}", out.stdout, out.stderr);
    if text.contains("Invalid job id") {
        // Purged from slurmctld (MinJobAge): long over.
        return Ok(Some(true));
    }
    if !out.success() {
        return Ok(None);
    }
    Ok(job_state(&out.stdout).map(ended))
}

/// `JobState=` of a one-line `scontrol show job -o` record.
fn job_state(line: &str) -> Option<&str> {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("JobState="))
}

/// Terminal states (squeue(1) "JOB STATE CODES"). COMPLETING is not: the
/// owner's epilog may be tearing its domain down right now.
fn ended(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED"
            | "CANCELLED"
            | "FAILED"
            | "TIMEOUT"
            | "NODE_FAIL"
            | "PREEMPTED"
            | "BOOT_FAIL"
            | "DEADLINE"
            | "OUT_OF_MEMORY"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_state_field() {
        let l = "JobId=12 JobName=x UserId=a(1) JobState=COMPLETED Reason=None";
        assert_eq!(job_state(l), Some("COMPLETED"));
        assert!(ended("CANCELLED") && ended("NODE_FAIL"));
        assert!(!ended("RUNNING") && !ended("COMPLETING") && !ended("PENDING"));
        assert_eq!(job_state("garbage"), None);
    }
}
