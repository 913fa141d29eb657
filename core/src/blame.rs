//! Who is to blame for a failure: the product's central rule (docs/blame.md)
//! as a type. A prolog fails, so Slurm drains the node and requeues the job,
//! only for a fault of its own node ([`Fault::Node`]); anything else is the
//! job's ([`Fault::Job`]): recorded, the SPANK plugin fails the job's tasks
//! with it, and the node stays up.
//!
//! Inside, `?` on a [`crate::Error`] keeps it a node fault (a file, the
//! config, the daemon of this node); a step that finds the job at fault
//! says so with [`Fault::job`]. The hooks flatten a fault to one line only
//! at the edge.

use crate::error::Error;
use std::fmt;

/// A failure, and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// This node is at fault: the prolog fails (Slurm drains it).
    Node(Error),
    /// The job is (a peer, its node list, the cluster's rack files or
    /// configuration): recorded for the plugin; the node stays up.
    Job(String),
}

/// What a step that can fail either way returns.
pub type Blamed<T> = std::result::Result<T, Fault>;

impl Fault {
    /// The job's failure, with the line its tasks fail with.
    pub fn job(cause: impl Into<String>) -> Fault {
        Fault::Job(cause.into())
    }

    /// Whether the node is at fault.
    pub fn is_node_fault(&self) -> bool {
        matches!(self, Fault::Node(_))
    }
}

impl From<Error> for Fault {
    fn from(e: Error) -> Fault {
        Fault::Node(e)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Node(e) => write!(f, "{e}"),
            Fault::Job(cause) => f.write_str(cause),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_step() -> crate::Result<()> {
        Err(Error::new("nvidia-imex could not start on n1"))
    }

    fn setup_like(job_at_fault: bool) -> Blamed<u32> {
        if job_at_fault {
            return Err(Fault::job("peer n3 never became ready"));
        }
        node_step()?;
        Ok(7)
    }

    #[test]
    fn question_mark_keeps_an_error_a_node_fault() {
        let node = setup_like(false).unwrap_err();
        assert!(node.is_node_fault());
        assert_eq!(node.to_string(), "nvidia-imex could not start on n1");
        let job = setup_like(true).unwrap_err();
        assert!(!job.is_node_fault());
        assert_eq!(job, Fault::Job("peer n3 never became ready".into()));
    }
}
