//! Racks (NVLink domains) and NVLink cliques, owned here and nowhere else.
//! Slurm's topology/block files as racks (`topology`), the rack map every
//! node keeps (`map`), the cliques nodes publish in Slurm's Extra field
//! (`clique`), and where an `--imex` job's racks come from (`sources`). The
//! clique read from the GPUs themselves (NVML) is `slurm_imex_gpu::clique`,
//! which asks `clique` for the one spelling of a clique.

pub mod clique;
pub mod map;
pub mod sources;
pub mod topology;
