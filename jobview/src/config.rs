//! `[job]`: where `slurm-imex job` queries the nodes' per-job series, and
//! when the controller-host pass stores an ended job's summary. What this
//! crate reads of the config is the core sections (Slurm's clients) and
//! `[job]`; the programs' whole config is one ([`JobViewSections`]).

use slurm_imex_core::config::Config;
pub use slurm_imex_core::config::JobViewConfig;

/// What the job view reads of the config.
pub trait JobViewSections {
    /// `[slurm]`: where sacct and sacctmgr are, and their bound.
    fn core(&self) -> &Config;
    fn job(&self) -> &JobViewConfig;
}

/// The tests' config: core's sections and `[job]`.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct TestConfig {
    pub core: Config,
    pub job: JobViewConfig,
}

#[cfg(test)]
impl TestConfig {
    /// The core sections and `[job]` of `text`, checked as the programs
    /// check them, with the places of the keys naming files.
    pub fn parse(text: &str, origin: &std::path::Path) -> slurm_imex_core::Result<TestConfig> {
        use slurm_imex_core::config::{check_section, parse_document, store_access};
        #[derive(serde::Deserialize)]
        struct JobOnly {
            #[serde(default)]
            job: JobViewConfig,
        }
        let job = parse_document::<JobOnly>(text, origin)?.job;
        check_section(&job, text, origin)?;
        let mut core = Config::parse(text, origin)?;
        core.note_places(text, origin, &store_access::KEYS);
        Ok(TestConfig { core, job })
    }
}

#[cfg(test)]
impl JobViewSections for TestConfig {
    fn core(&self) -> &Config {
        &self.core
    }
    fn job(&self) -> &JobViewConfig {
        &self.job
    }
}
