//! slurm-imex domain: the engine that runs only in the prolog, epilog, CLI
//! and doctor, never in the SPANK plugin (whose crate, `slurm-imex-core`,
//! keeps what every program shares). Split out so the plugin's `.so` does
//! not link it, nor its YAML parser and SHA-256.
//!
//! - IMEX on this node: `imex` (a job's domain, the daemon, its control tool,
//!   and the decisions of the domain watcher while the job runs)
//! - racks and NVLink cliques, in one place: `rack`
//! - node names to the addresses in nodes_config.cfg: `addresses`
//! - what one hook run reads of the cluster, once: `context`
//! - SHA-256, the one digest (the rack map's, its pieces' seals): `digest`
//! - what the engine reads of the config, and `[imex]`'s engine keys with
//!   their defaults and bounds: `config`

pub mod addresses;
pub mod config;
pub mod context;
pub mod digest;
pub mod imex;
pub mod rack;
