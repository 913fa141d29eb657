//! What the domain engine reads of the config: the plugin's keys (core's
//! `Config`: `[node]`, `[imex]`'s channel keys, `[slurm]`) and `[imex]`'s
//! engine keys ([`EngineConfig`]), together as [`Config`], which the
//! programs' whole config (`slurm-imex-settings`) dereferences to. The
//! plugin never parses the engine's keys, so none of them, good or bad,
//! stops a submission; the programs read and check them at load. Each
//! table's schema, defaults and bounds:
//!
//! - `engine`: `[imex]`'s own engine keys (span, domain, shared_nodes, the
//!   ports, the ready times, max_nodes, rack_map)
//! - `daemon`: `[imex.daemon]`, the daemon and how it is run
//! - `addresses`: `[imex.addresses]`, node names to nodes_config addresses
//! - `imex_watch`: `[imex.watch]`, the domain watcher's

mod addresses;
mod daemon;
mod engine;
mod imex_watch;

pub use addresses::{AddressSource, AddressesConfig};
pub use daemon::{DaemonConfig, DaemonManager};
pub use engine::{DomainScope, EngineConfig, PortSpan, SharedNodes, Span};
pub use imex_watch::WatchConfig;

use slurm_imex_core::config::{self as core, Document};
use slurm_imex_core::Result;
use std::ops::{Deref, DerefMut};

/// The plugin's keys and `[imex]`'s engine keys: what the engine's
/// functions take. `cfg.node`, `cfg.imex.channel_count` (core's) and
/// `cfg.engine.daemon.ctl` read alike.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// The plugin's keys, and what loading the file found (core's).
    pub core: core::Config,
    /// `[imex]`'s engine keys and its `daemon`, `addresses` and `watch`
    /// tables.
    pub engine: EngineConfig,
}

impl Config {
    /// `[imex]`'s engine keys as `doc` writes them, checked against their
    /// bounds, beside the plugin's (`core`, read from the same document).
    /// A key of `[imex]` that neither reads is the whole file's reader's to
    /// refuse (`slurm-imex-settings`).
    pub fn read(doc: &Document, core: core::Config) -> Result<Config> {
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Imex {
            imex: EngineConfig,
        }
        let engine = doc.read::<Imex>()?.imex;
        doc.check(&engine)?;
        Ok(Config { core, engine })
    }

    /// Hold the programs and files this config names to the trust
    /// boundary, before root runs or reads any of them.
    pub fn check_trust(&self) -> Result<()> {
        self.core.check_trust()?;
        self.engine.daemon.check_trust()
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
