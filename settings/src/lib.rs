//! slurm-imex-settings: the whole config file (`/etc/slurm/imex.toml`) as
//! the programs load it. Each section's schema, defaults and bounds sit in
//! the crate that uses it: `[node]`, `[imex]`'s channel keys and `[slurm]`
//! in core (the SPANK plugin's), the rest of `[imex]` (the engine's, with
//! `[imex.daemon]`, `[imex.addresses]`, `[imex.watch]`) in slurm-imex-domain,
//! `[gpu]` and `[health]` in slurm-imex-gpu, `[database]` and `[metrics]` in
//! slurm-imex-jobdb, `[job]` in slurm-imex-jobview. This crate puts them
//! together and checks them all at load, so a bad key anywhere, a key of
//! `[imex]` that neither of its readers knows, or an unknown section, is
//! refused with `file:line: key` before a program acts. Core finds, trusts
//! and reads the file (parsed once, `Document`) and maps errors to their
//! lines.
//!
//! `reference` renders every key's default and meaning from the table each
//! section keeps beside its struct (docs/settings.md), and its tests hold
//! that page and conf-examples/imex.toml to the code.
//!
//! [`Config`] dereferences to the domain engine's config, which
//! dereferences to core's, so `cfg.imex.channel_count`,
//! `cfg.engine.port_base` and `cfg.gpu` read alike and a `&Config` goes
//! wherever the engine's or core's is asked for.

use serde::de::IgnoredAny;
use serde::Deserialize;
use slurm_imex_core::config::{
    self as core, field_names, ConfigFile, Document, ImexConfig, Section,
};
use slurm_imex_core::Result;
use slurm_imex_domain::config::{self as domain, EngineConfig};
use slurm_imex_gpu::config::{GpuConfig, GpuSections, HealthConfig};
use slurm_imex_jobdb::config::{DatabaseConfig, MetricsConfig};
use slurm_imex_jobview::config::{store_access, JobViewConfig, JobViewSections};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

pub mod reference;

/// Every section of the file, as the programs read it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// The plugin's keys (core's) and `[imex]`'s engine keys (the
    /// domain's), and what loading found.
    pub domain: domain::Config,
    pub gpu: GpuConfig,
    pub health: HealthConfig,
    pub database: DatabaseConfig,
    pub metrics: MetricsConfig,
    pub job: JobViewConfig,
}

/// The file as written: every section known, any other refused. The
/// sections core and the domain read are read by them.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct File {
    node: IgnoredAny,
    imex: IgnoredAny,
    slurm: IgnoredAny,
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
        let doc = Document::parse(text, origin)?;
        let core = core::Config::read(&doc)?;
        let mut f: File = doc.read()?;
        let imex_readers = [field_names::<ImexConfig>(), field_names::<EngineConfig>()];
        doc.refuse_unknown_keys("imex", &imex_readers)?;
        let mut domain = domain::Config::read(&doc, core)?;
        // Their old names' values are in `[slurm]` now (core read them).
        f.health.scontrol = None;
        f.health.scontrol_timeout = None;
        let sections: [&dyn Section; 5] = [&f.gpu, &f.health, &f.database, &f.metrics, &f.job];
        for section in sections {
            doc.check(section)?;
        }
        domain
            .core
            .note_places(text, origin, &store_access::keys_set(&f.job));
        Ok(Config {
            domain,
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
        config.domain.core.loaded_from(absolute);
        Ok((config, file.path))
    }

    /// The load every hook does before it acts (the prolog, the epilog,
    /// the watcher, `slurm-imex check`): the whole file, then the trust of
    /// what it names ([`Config::check_trust`]).
    pub fn load_trusted(explicit: Option<&Path>) -> Result<(Config, PathBuf)> {
        let (config, path) = Config::load(explicit)?;
        config.check_trust()?;
        Ok((config, path))
    }

    /// Hold the programs and files this config names to the trust
    /// boundary, before root runs or reads any of them.
    pub fn check_trust(&self) -> Result<()> {
        self.domain.check_trust()?;
        core::check_file_trust("[gpu] nvml_library", &self.gpu.nvml_library)
    }
}

impl Deref for Config {
    type Target = domain::Config;
    fn deref(&self) -> &domain::Config {
        &self.domain
    }
}

impl DerefMut for Config {
    fn deref_mut(&mut self) -> &mut domain::Config {
        &mut self.domain
    }
}

impl GpuSections for Config {
    fn core(&self) -> &core::Config {
        &self.domain.core
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
        &self.domain.core
    }
    fn job(&self) -> &JobViewConfig {
        &self.job
    }
}

#[cfg(test)]
mod tests;
