//! What every slurm-imex program reads from Slurm: a hook's environment
//! (`env`), the slurm.conf this node reads (`conf`), its hostlist syntax
//! (`hostlist`), and its controller (`controller`: the one handle, [`Scontrol`], that owns
//! the scontrol program and its time bound; `node` and `job` are what it is
//! asked). What the prolog and epilog may ask the controller, and when, is
//! docs/controller-calls.md. Slurm's topology/block files, and the policy
//! built on top (racks, cliques), are `slurm_imex_domain::rack`: only the
//! prolog, epilog and CLI read them.

pub mod conf;
pub mod controller;
pub mod env;
pub mod hostlist;
pub mod job;
pub mod node;
pub mod number;

pub use controller::Scontrol;
