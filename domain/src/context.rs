//! What one hook run (prolog, epilog, check) reads of the cluster, read at
//! most once and shared by every step: this node's slurm.conf (whether
//! Slurm's `switch/nvidia_imex` hands out channels, the job id range), the
//! channel mode it implies, and the rack files (`crate::rack::sources`).
//! Each is read on first use, so a hook that never needs one never reads
//! it, and a rack-mode prolog reads slurm.conf once, not once per question.
//! The readers are injectable so a test can count them.

use crate::config::Config;
use crate::rack::sources::RackSources;
use slurm_imex_core::config::ChannelMode;
use slurm_imex_core::error::Result;
use slurm_imex_core::slurm::conf::{self as slurm_conf, SlurmConf};
use std::path::Path;
use std::sync::OnceLock;

/// How the context reads each file: [`Readers::FILES`] in production.
#[derive(Clone, Copy)]
pub struct Readers {
    /// Parse one slurm.conf (with its includes).
    pub slurm_conf: fn(&Path) -> Result<SlurmConf>,
    /// Read the topology file and the rack map the config names, for the
    /// job's nodes (`RackSources::read_for`).
    pub racks: fn(&Config, &[String]) -> Result<RackSources>,
}

impl Readers {
    /// The files on this node.
    pub const FILES: Readers = Readers {
        slurm_conf: SlurmConf::read,
        racks: RackSources::read_for,
    };
}

/// The config and the cluster's files, as one hook run sees them.
pub struct HookContext<'a> {
    /// The loaded `imex.toml`.
    pub cfg: &'a Config,
    readers: Readers,
    /// None: `[slurm] config = "none"`.
    slurm_conf: OnceLock<Option<Result<SlurmConf>>>,
    /// The rack files, and the nodes they were read for.
    racks: OnceLock<(Vec<String>, Result<RackSources>)>,
}

impl<'a> HookContext<'a> {
    /// A context that reads this node's files, each on first use.
    pub fn new(cfg: &'a Config) -> HookContext<'a> {
        HookContext::with_readers(cfg, Readers::FILES)
    }

    /// A context that reads through `readers` (tests count the reads).
    pub fn with_readers(cfg: &'a Config, readers: Readers) -> HookContext<'a> {
        HookContext {
            cfg,
            readers,
            slurm_conf: OnceLock::new(),
            racks: OnceLock::new(),
        }
    }

    /// This node's slurm.conf, read once; None when `[slurm] config = "none"`.
    pub fn slurm_conf(&self) -> Option<Result<&SlurmConf>> {
        self.slurm_conf
            .get_or_init(|| {
                slurm_conf::locate(&self.cfg.slurm).map(|path| (self.readers.slurm_conf)(&path))
            })
            .as_ref()
            .map(|read| read.as_ref().map_err(Clone::clone))
    }

    /// The channel mode in force, and a warning when "auto" had to guess
    /// (`slurm_conf::channel_mode`, from the slurm.conf read here).
    pub fn channel_mode(&self) -> (ChannelMode, Option<String>) {
        slurm_conf::channel_mode_from(self.cfg.imex.channels, || {
            self.slurm_conf()
                .map(|read| read.map(SlurmConf::nvidia_imex_switch))
        })
    }

    /// The rack files, read once, for the job's `nodes`: the first call's
    /// nodes are what every later call is answered from (the prolog asks
    /// first with all of the job's nodes, this node among them). One that
    /// exists but cannot be read or trusted is an error (its blame is the
    /// caller's to decide).
    pub fn racks(&self, nodes: &[String]) -> Result<&RackSources> {
        let (scope, read) = self
            .racks
            .get_or_init(|| (nodes.to_vec(), (self.readers.racks)(self.cfg, nodes)));
        debug_assert!(
            nodes.iter().all(|n| scope.contains(n)),
            "the rack files were read for {scope:?}, then asked about {nodes:?}"
        );
        read.as_ref().map_err(Clone::clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_imex_core::config::AutoPath;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static SLURM_CONF_READS: AtomicUsize = AtomicUsize::new(0);
    static RACK_READS: AtomicUsize = AtomicUsize::new(0);

    fn counting() -> Readers {
        Readers {
            slurm_conf: |p| {
                SLURM_CONF_READS.fetch_add(1, Ordering::SeqCst);
                SlurmConf::read(p)
            },
            racks: |cfg, nodes| {
                RACK_READS.fetch_add(1, Ordering::SeqCst);
                RackSources::read_for(cfg, nodes)
            },
        }
    }

    #[test]
    fn each_file_is_read_once_however_often_it_is_asked_and_only_when_asked() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("slurm.conf");
        std::fs::write(&conf, "SwitchType=switch/nvidia_imex\nMaxJobId=2047\n").unwrap();
        let mut cfg = Config::default();
        cfg.slurm.config = AutoPath::Path(conf);
        cfg.slurm.topology = AutoPath::None;
        cfg.engine.rack_map = AutoPath::None;
        let ctx = HookContext::with_readers(&cfg, counting());
        assert_eq!(SLURM_CONF_READS.load(Ordering::SeqCst), 0);
        assert_eq!(ctx.channel_mode(), (ChannelMode::Slurm, None));
        let range = ctx.slurm_conf().unwrap().unwrap().job_id_range();
        assert_eq!(range, Ok((1, 2047)));
        assert_eq!(ctx.channel_mode(), (ChannelMode::Slurm, None));
        assert_eq!(SLURM_CONF_READS.load(Ordering::SeqCst), 1);
        assert_eq!(RACK_READS.load(Ordering::SeqCst), 0);
        let job = ["n1".to_string()];
        assert!(ctx.racks(&job).unwrap().blocks.is_none());
        assert!(ctx.racks(&job).unwrap().map.is_none());
        assert_eq!(RACK_READS.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_slurm_conf_that_cannot_be_read_gives_the_same_line_every_time() {
        let d = tempfile::tempdir().unwrap();
        let mut cfg = Config::default();
        cfg.slurm.config = AutoPath::Path(d.path().join("absent.conf"));
        let ctx = HookContext::new(&cfg);
        let (mode, warning) = ctx.channel_mode();
        assert_eq!(mode, ChannelMode::Plugin);
        let warning = warning.unwrap();
        assert!(
            warning.starts_with("[imex] channels = \"auto\": ") && warning.contains("absent.conf"),
            "{warning}"
        );
        assert_eq!(ctx.channel_mode().1.as_deref(), Some(warning.as_str()));
        assert_eq!(slurm_conf::channel_mode(&cfg).1, Some(warning));
    }
}
