//! Everything slurm-imex reads from Slurm, in one place: a hook's
//! environment (`env`), the slurm.conf this node reads (`conf`), Slurm's
//! topology/block files (`topology`), its hostlist syntax (`hostlist`), and
//! its controller (`controller`: the one handle, [`Scontrol`], that owns
//! the scontrol program and its time bound; `node` and `job` are what it is
//! asked). What the prolog and epilog may ask the controller, and when, is
//! docs/controller-calls.md; the policy built on top (`crate::racks`,
//! `crate::clique`) lives outside this module.

pub mod conf;
pub mod controller;
pub mod env;
pub mod hostlist;
pub mod job;
pub mod node;
pub mod number;
pub mod topology;

pub use controller::Scontrol;
