//! One node's NVLink domain among a job's nodes (`NvlinkDomain`): the
//! answer every rack source gives (the rack map, Slurm's topology file,
//! the indexed map) and every IMEX domain is built from. Its own noun so
//! that the sources depend on it, not on each other.

/// The job's nodes that share one node's NVLink domain, in the job's
/// (Slurm's) order, and the domain's name: the block, or None when nothing
/// says where the racks are (then every node of the job is in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvlinkDomain {
    pub name: Option<String>,
    pub nodes: Vec<String>,
    /// The file the membership was cut by (the rack map with its digest),
    /// as failure lines name it; None for the whole job.
    pub source: Option<String>,
}

impl NvlinkDomain {
    /// All the job's nodes, when no rack source knows them.
    pub fn whole_job(nodes: Vec<String>) -> NvlinkDomain {
        NvlinkDomain {
            name: None,
            nodes,
            source: None,
        }
    }
}
