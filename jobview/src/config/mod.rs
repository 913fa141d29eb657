//! `[job]`: where `slurm-imex job` queries the nodes' per-job series, and
//! when the controller-host pass stores an ended job's summary. What this
//! crate reads of the config is the core sections (Slurm's clients) and
//! `[job]`; the programs' whole config is one ([`JobViewSections`]). The
//! URL's check is `http_url`, the TLS and credential keys' `store_access`.

use serde::{Deserialize, Serialize};
use slurm_imex_core::config::{bounds, Config, Documented, HumanDuration, Key, Section};
use slurm_imex_core::text;
use std::path::PathBuf;
use std::time::Duration;

pub mod http_url;
pub mod store_access;

/// `slurm-imex job` and the summary store on the controller host
/// (slurm_imex_jobsummary): where the nodes' per-job series are queried, and
/// when an ended job's summary is written to Slurm's accounting.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct JobViewConfig {
    /// The Prometheus server that scrapes the nodes' node_exporter, or a
    /// store with its query API (`http://host:9090`, `https://...`); empty:
    /// none, `slurm-imex job` reads only the stored summaries.
    pub prometheus_url: String,
    /// `https://` only: the PEM file of the CA that signed the store's
    /// certificate; None: the system's CA store.
    pub prometheus_ca_file: Option<PathBuf>,
    /// Basic auth's user name; its password is in `prometheus_password_file`.
    pub prometheus_user: String,
    /// A root-only file holding basic auth's password (one line).
    pub prometheus_password_file: Option<PathBuf>,
    /// A root-only file holding a bearer token (one line), instead of basic auth.
    pub prometheus_bearer_token_file: Option<PathBuf>,
    /// Longest wait for one Prometheus query.
    pub query_timeout: HumanDuration,
    /// `slurm-imex job --store`: a job is stored once every node of it has
    /// reported, or this long after it ended with what reported by then.
    pub store_wait: HumanDuration,
    /// `slurm-imex job --store` looks this far back for ended jobs without
    /// a summary (the backfill).
    pub store_backfill: HumanDuration,
}

impl Documented for JobViewConfig {
    const TABLE: &'static str = "job";
    const READ_BY: &'static str = "`slurm-imex job` and `job --store` (on the controller host)";
    const KEYS: &'static [Key] = &[
        Key::new("prometheus_url", r#""""#, "The Prometheus (or VictoriaMetrics, Thanos, Mimir) that scrapes the nodes, http:// or https://; \"\": read only the summaries in AdminComment."),
        Key::unset("prometheus_ca_file", "https:// only: the PEM file of the CA that signed the store's certificate (unset: the system's CA store)."),
        Key::new("prometheus_user", r#""""#, "https:// only: basic auth's user name, with prometheus_password_file."),
        Key::unset("prometheus_password_file", "https:// only: a root-only file holding basic auth's password on one line."),
        Key::unset("prometheus_bearer_token_file", "https:// only: a root-only file holding a bearer token on one line, instead of basic auth."),
        Key::new("query_timeout", r#""10s""#, "Longest wait for one Prometheus query (1s to 5m)."),
        Key::new("store_wait", r#""15m""#, "`job --store` stores a job once every node reported, or this long after it ended (0s to 1d)."),
        Key::new("store_backfill", r#""2d""#, "How far back `job --store` looks for ended jobs without a summary (1h to 366d)."),
    ];
}

impl Default for JobViewConfig {
    fn default() -> Self {
        JobViewConfig {
            prometheus_url: String::new(),
            prometheus_ca_file: None,
            prometheus_user: String::new(),
            prometheus_password_file: None,
            prometheus_bearer_token_file: None,
            query_timeout: HumanDuration(Duration::from_secs(10)),
            store_wait: HumanDuration(Duration::from_secs(15 * 60)),
            store_backfill: HumanDuration(Duration::from_secs(2 * 86400)),
        }
    }
}

impl Section for JobViewConfig {
    fn first_problem(&self) -> Option<(&'static str, String)> {
        use bounds::{DurationBound as D, DAY, HOUR, MIN, S};
        let durations = vec![
            D::of("job.query_timeout", S, 5 * MIN, self.query_timeout.0),
            D::of("job.store_wait", Duration::ZERO, DAY, self.store_wait.0),
            D::of("job.store_backfill", HOUR, 366 * DAY, self.store_backfill.0),
        ];
        bounds::first_violation(durations, vec![])
            .or_else(|| {
                let why = http_url::problem(&self.prometheus_url)?;
                let shown = http_url::without_credentials(&self.prometheus_url);
                let url = text::cap(&shown, text::PIECE_MAX);
                Some(("job.prometheus_url", format!("{url:?} {why}")))
            })
            .or_else(|| {
                let (key, value, why) = store_access::problem(self)?;
                Some((key, format!("{value} {why}")))
            })
    }
}

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
        use slurm_imex_core::config::Document;
        #[derive(serde::Deserialize)]
        struct JobOnly {
            #[serde(default)]
            job: JobViewConfig,
        }
        let doc = Document::parse(text, origin)?;
        let job = doc.read::<JobOnly>()?.job;
        doc.check(&job)?;
        let mut core = Config::read(&doc)?;
        core.note_places(text, origin, &store_access::keys_set(&job));
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
