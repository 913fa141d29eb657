//! slurm-imex-settings: the whole config file (`/etc/slurm/imex.toml`) as
//! the programs load it. Each section's schema, defaults and bounds sit in
//! the crate that uses it: `[node]`, `[imex]`, `[slurm]` in core (the SPANK
//! plugin's), `[gpu]` and `[health]` in slurm-imex-gpu, `[database]` and
//! `[metrics]` in slurm-imex-jobdb, `[job]` in slurm-imex-jobview. This
//! crate puts them together and checks them all at load, so a bad key
//! anywhere, or an unknown section, is refused with `file:line: key` before
//! a program acts. Core finds, trusts and reads the file and maps errors to
//! their lines.
//!
//! [`Config`] dereferences to core's config, so `cfg.imex` and `cfg.gpu`
//! read alike and a `&Config` goes wherever core's is asked for.

use serde::Deserialize;
use slurm_imex_core::config::OldHealthKeys;
use slurm_imex_core::config::{self as core, check_section, parse_document, Section};
use slurm_imex_core::config::{ConfigFile, ImexConfig, NodeConfig, SlurmConfig};
use slurm_imex_core::Result;
use slurm_imex_gpu::config::{GpuConfig, GpuSections, HealthConfig};
use slurm_imex_jobdb::config::{DatabaseConfig, MetricsConfig};
use slurm_imex_jobview::config::{store_access, JobViewConfig, JobViewSections};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

/// Every section of the file, as the programs read it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// `[node]`, `[imex]`, `[slurm]`, and what loading found (core's).
    pub core: core::Config,
    pub gpu: GpuConfig,
    pub health: HealthConfig,
    pub database: DatabaseConfig,
    pub metrics: MetricsConfig,
    pub job: JobViewConfig,
}

/// The file as written: every section known, any other refused.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct File {
    node: NodeConfig,
    imex: ImexConfig,
    slurm: SlurmConfig,
    gpu: GpuConfig,
    health: HealthConfig,
    database: DatabaseConfig,
    metrics: MetricsConfig,
    job: JobViewConfig,
}

impl Config {
    /// Parse config text; `origin` names the file in error messages. Every
    /// error is one line naming `file:line`, the key and the fix.
    pub fn parse(text: &str, origin: &Path) -> Result<Config> {
        let mut f: File = parse_document(text, origin)?;
        let old = OldHealthKeys {
            scontrol: f.health.scontrol.take(),
            scontrol_timeout: f.health.scontrol_timeout.take(),
        };
        let mut core = core::Config::assemble(text, origin, f.node, f.imex, f.slurm, old)?;
        let sections: [&dyn Section; 5] = [&f.gpu, &f.health, &f.database, &f.metrics, &f.job];
        for section in sections {
            check_section(section, text, origin)?;
        }
        core.note_places(text, origin, &store_access::keys_set(&f.job));
        Ok(Config {
            core,
            gpu: f.gpu,
            health: f.health,
            database: f.database,
            metrics: f.metrics,
            job: f.job,
        })
    }

    /// The file [`Config::load`] reads, and whether it must exist.
    pub fn path_to_load(explicit: Option<&Path>) -> (PathBuf, bool) {
        core::Config::path_to_load(explicit)
    }

    /// Load the whole file core finds ([`ConfigFile::read`]): an explicit
    /// path or `$SLURM_IMEX_CONFIG` must exist, the default may be absent
    /// (defaults).
    pub fn load(explicit: Option<&Path>) -> Result<(Config, PathBuf)> {
        let file = ConfigFile::read(explicit)?;
        let Some((absolute, text)) = &file.text else {
            return Ok((Config::default(), file.path));
        };
        let mut config = Config::parse(text, &file.path)?;
        config.core.loaded_from(absolute);
        Ok((config, file.path))
    }

    /// Hold the programs and files this config names to the trust
    /// boundary, before root runs or reads any of them.
    pub fn check_trust(&self) -> Result<()> {
        self.core.check_trust()?;
        core::check_file_trust("[gpu] nvml_library", &self.gpu.nvml_library)
    }
}

impl Deref for Config {
    type Target = core::Config;
    fn deref(&self) -> &core::Config {
        &self.core
    }
}

impl DerefMut for Config {
    fn deref_mut(&mut self) -> &mut core::Config {
        &mut self.core
    }
}

impl GpuSections for Config {
    fn core(&self) -> &core::Config {
        &self.core
    }
    fn gpu(&self) -> &GpuConfig {
        &self.gpu
    }
    fn health(&self) -> &HealthConfig {
        &self.health
    }
}

impl JobViewSections for Config {
    fn core(&self) -> &core::Config {
        &self.core
    }
    fn job(&self) -> &JobViewConfig {
        &self.job
    }
}

#[cfg(test)]
mod tests;
