//! Who is to blame for a failure: the product's central rule (docs/blame.md)
//! as a type. A prolog fails, so Slurm drains the node and requeues the job,
//! only for a fault of its own node ([`Fault::Node`]); anything else is the
//! job's ([`Fault::Job`]): recorded, the SPANK plugin fails the job's tasks
//! with it, and the node stays up.
//!
//! There is no blanket conversion: every fallible step of a hook says
//! whose fault its error is where it is called, `.node()?` or `.job()?`
//! ([`Blame`]), by the rule of docs/blame.md: this node's own files,
//! daemon and devices are the node's; the cluster's shared files (the rack
//! map, the topology file, slurm.conf, the address map), the job's peers
//! and its node list are the job's. The hooks flatten a fault to one line
//! only at the edge.

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

/// Whose fault a step's error is, said where the step is called.
pub trait Blame<T> {
    /// A fault of this node: its own files, daemon, devices.
    fn node(self) -> Blamed<T>;
    /// The job's: a file the whole cluster shares, a peer, its node list.
    fn job(self) -> Blamed<T>;
}

impl<T> Blame<T> for crate::Result<T> {
    fn node(self) -> Blamed<T> {
        self.map_err(Fault::Node)
    }

    fn job(self) -> Blamed<T> {
        self.map_err(|e| Fault::Job(e.to_string()))
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
        node_step().node()?;
        Ok(7)
    }

    #[test]
    fn each_call_says_whose_fault_its_error_is() {
        let shared = || -> crate::Result<()> { Err(Error::new("imex-racks.toml:3: bad rack")) };
        assert_eq!(
            shared().job(),
            Err(Fault::Job("imex-racks.toml:3: bad rack".into()))
        );
        assert!(shared().node().unwrap_err().is_node_fault());
    }

    #[test]
    fn node_steps_stay_node_faults() {
        let node = setup_like(false).unwrap_err();
        assert!(node.is_node_fault());
        assert_eq!(node.to_string(), "nvidia-imex could not start on n1");
        let job = setup_like(true).unwrap_err();
        assert!(!job.is_node_fault());
        assert_eq!(job, Fault::Job("peer n3 never became ready".into()));
    }
}
