//! Racks (NVLink domains) and NVLink cliques, owned here and nowhere else:
//! one node's NVLink domain among a job's nodes (`nvlink_domain`),
//! Slurm's topology/block files as racks (`topology`), the rack map every
//! node keeps (`map`) and its indexed form a prolog reads in pieces
//! (`index`), which of the two the config names and reading it
//! (`configured_map`), the cliques nodes publish in Slurm's Extra field
//! (`clique`), where an `--imex` job's racks come from (`sources`), and the
//! racks the published cliques draw for `slurm-imex topology` (`survey`).
//! Only the reading of a clique from the GPUs' fabric info stays with NVML
//! (`slurm_imex_gpu::clique`); both sides take a clique's one spelling from
//! `slurm_imex_core::clique`.

pub mod clique;
pub mod configured_map;
pub mod index;
pub mod map;
pub mod nvlink_domain;
pub mod sources;
pub mod survey;
pub mod topology;
