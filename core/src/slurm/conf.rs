//! Slurm's own configuration, as far as slurm-imex needs it: where this
//! node's slurm.conf is, whether Slurm's `switch/nvidia_imex` hands out IMEX
//! channels, and so which [`ChannelMode`] is in force.
//!
//! slurm.conf is read with a small hand-rolled parser: no Rust crate parses
//! it, and we need only a few `Key=value` lines (keys are case-insensitive,
//! `#` starts a comment, `Include` pulls in another file).

use crate::config::{AutoPath, ChannelMode, Config, SlurmConfig};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where configless slurmd keeps the slurm.conf it fetched (Slurm >= 20.11).
pub const CONFIGLESS_CACHE: &str = "/run/slurm/conf/slurm.conf";
/// Debian's compiled-in location.
pub const DEFAULT_SLURM_CONF: &str = "/etc/slurm/slurm.conf";
/// Largest slurm.conf (and included file) read; real ones are kilobytes.
const MAX_FILE_BYTES: u64 = 4 << 20;
/// Deepest `Include` nesting followed.
const MAX_INCLUDE_DEPTH: usize = 8;
/// Values kept per key (a file with a million `NodeName=` lines keeps
/// this many of them; none is ever read).
const MAX_VALUES_PER_KEY: usize = 64;

/// The slurm.conf this node runs with, or None when `[slurm] config = "none"`.
pub fn locate(cfg: &SlurmConfig) -> Option<PathBuf> {
    match &cfg.config {
        AutoPath::None => None,
        AutoPath::Path(p) => Some(p.clone()),
        AutoPath::Auto => {
            if let Some(p) = std::env::var_os("SLURM_CONF").filter(|p| !p.is_empty()) {
                return Some(PathBuf::from(p));
            }
            let cache = Path::new(CONFIGLESS_CACHE);
            Some(if cache.exists() {
                cache.to_path_buf()
            } else {
                PathBuf::from(DEFAULT_SLURM_CONF)
            })
        }
    }
}

/// slurm.conf as this node reads it: every global `Key=value` line (keys
/// case-insensitive; a key given twice keeps each value, in order, as Slurm
/// does for `Prolog`/`Epilog`, and the last one wins for the rest), with
/// `Include`d files read in place. Lines that define a node, partition or
/// the like (`NodeName=n1 CPUs=2 ...`) are kept under their first key too,
/// and never consulted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmConf {
    /// The file read first.
    pub path: PathBuf,
    values: BTreeMap<String, Vec<String>>,
}

/// Slurm's defaults for the job id range (`src/common/read_config.h`).
pub const DEFAULT_FIRST_JOB_ID: u32 = 1;
pub const DEFAULT_MAX_JOB_ID: u32 = 0x03ff_0000;

impl SlurmConf {
    /// Read `path` and the files it includes.
    pub fn read(path: &Path) -> Result<SlurmConf> {
        let mut conf = SlurmConf {
            path: path.to_path_buf(),
            values: BTreeMap::new(),
        };
        conf.read_file(path, 0)?;
        Ok(conf)
    }

    /// The last value of `key`, None when unset or empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .get(&key.to_ascii_lowercase())
            .and_then(|v| v.last())
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// Every value of `key`, in file order (`Prolog` may be given many times).
    pub fn get_all(&self, key: &str) -> Vec<&str> {
        self.values
            .get(&key.to_ascii_lowercase())
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// True when Slurm's own IMEX channel plugin is configured.
    pub fn nvidia_imex_switch(&self) -> bool {
        self.get("SwitchType")
            .is_some_and(|t| t.eq_ignore_ascii_case("switch/nvidia_imex"))
    }

    /// `FirstJobId` and `MaxJobId`, Slurm's defaults when unset; an Err
    /// names the key whose value is not a number.
    pub fn job_id_range(&self) -> std::result::Result<(u32, u32), String> {
        let number = |key: &str, default: u32| match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse::<u32>().map_err(|_| {
                format!(
                    "{}: {key}={} is not a job id",
                    self.path.display(),
                    crate::text::cap(v, 40)
                )
            }),
        };
        Ok((
            number("FirstJobId", DEFAULT_FIRST_JOB_ID)?,
            number("MaxJobId", DEFAULT_MAX_JOB_ID)?,
        ))
    }

    fn read_file(&mut self, path: &Path, depth: usize) -> Result<()> {
        let text = crate::fsutil::read_bounded_text(path, MAX_FILE_BYTES)?;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if let Some(rest) = strip_prefix_ci(line, "include ") {
                if depth >= MAX_INCLUDE_DEPTH {
                    return Err(Error::new(format!(
                        "{}: Include nested deeper than {MAX_INCLUDE_DEPTH} levels",
                        path.display()
                    )));
                }
                let included = Path::new(rest.trim());
                let included = match (included.is_absolute(), path.parent()) {
                    (false, Some(dir)) => dir.join(included),
                    _ => included.to_path_buf(),
                };
                self.read_file(&included, depth + 1)?;
                continue;
            }
            if let Some((key, value)) = line.split_once('=') {
                let key = key.trim().to_ascii_lowercase();
                if key.is_empty() || key.contains(char::is_whitespace) {
                    continue;
                }
                let values = self.values.entry(key).or_default();
                if values.len() < MAX_VALUES_PER_KEY {
                    values.push(value.trim().to_string());
                }
            }
        }
        Ok(())
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// The channel mode in force, and a warning when "auto" had to guess.
pub fn channel_mode(cfg: &Config) -> (ChannelMode, Option<String>) {
    match cfg.imex.channels {
        ChannelMode::Auto => {}
        fixed => return (fixed, None),
    }
    let Some(path) = locate(&cfg.slurm) else {
        return (ChannelMode::Plugin, None);
    };
    match SlurmConf::read(&path) {
        Ok(conf) if conf.nvidia_imex_switch() => (ChannelMode::Slurm, None),
        Ok(_) => (ChannelMode::Plugin, None),
        Err(e) => (
            ChannelMode::Plugin,
            Some(format!(
                "[imex] channels = \"auto\": {e}; assuming slurm-imex hands out channels \
                 (set [slurm] config, or channels = \"plugin\" or \"slurm\")"
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn finds_switch_type_case_insensitively_past_comments() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "slurm.conf",
            "# SwitchType=switch/none\nClusterName=x\nswitchtype = switch/nvidia_imex # ours\n\
             SwitchParameters=imex_dev_major=507\n",
        );
        let c = SlurmConf::read(&p).unwrap();
        assert_eq!(c.get("switchtype"), Some("switch/nvidia_imex"));
        assert!(c.nvidia_imex_switch());
        let p = write(d.path(), "none.conf", "SwitchType=switch/none\n");
        assert!(!SlurmConf::read(&p).unwrap().nvidia_imex_switch());
        let p = write(d.path(), "empty.conf", "");
        assert_eq!(SlurmConf::read(&p).unwrap().get("SwitchType"), None);
    }

    #[test]
    fn repeated_keys_keep_every_value_and_the_job_id_range_has_defaults() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "slurm.conf",
            "Prolog=/a\nprolog=/b\nNodeName=n1 CPUs=2\nMaxJobId=2047\nPrologFlags=Contain\nPrologFlags=Alloc\n",
        );
        let c = SlurmConf::read(&p).unwrap();
        assert_eq!(c.get_all("Prolog"), ["/a", "/b"]);
        assert_eq!(c.get("PrologFlags"), Some("Alloc"));
        assert_eq!(c.job_id_range(), Ok((1, 2047)));
        let p = write(d.path(), "bad.conf", "FirstJobId=lots\n");
        let e = SlurmConf::read(&p).unwrap().job_id_range().unwrap_err();
        assert!(
            e.contains("bad.conf: FirstJobId=lots is not a job id"),
            "{e}"
        );
        let p = write(d.path(), "none.conf", "");
        assert_eq!(
            SlurmConf::read(&p).unwrap().job_id_range(),
            Ok((1, 0x03ff_0000))
        );
    }

    #[test]
    fn follows_includes_relative_to_the_file_and_bounds_depth() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "net.conf", "SwitchType=switch/nvidia_imex\n");
        let p = write(d.path(), "slurm.conf", "Include net.conf\n");
        assert!(SlurmConf::read(&p).unwrap().nvidia_imex_switch());
        let p = write(d.path(), "loop.conf", "include loop.conf\n");
        let e = SlurmConf::read(&p).unwrap_err().to_string();
        assert!(e.contains("nested deeper"), "{e}");
        let p = write(d.path(), "missing.conf", "Include nowhere.conf\n");
        let e = SlurmConf::read(&p).unwrap_err().to_string();
        assert!(e.contains("nowhere.conf"), "{e}");
    }

    #[test]
    fn auto_mode_follows_slurm_conf_and_fixed_modes_do_not_read_it() {
        let d = tempfile::tempdir().unwrap();
        let with = write(d.path(), "a.conf", "SwitchType=switch/nvidia_imex\n");
        let without = write(d.path(), "b.conf", "SwitchType=switch/none\n");
        let mut cfg = Config::default();
        cfg.slurm.config = AutoPath::Path(with.clone());
        assert_eq!(channel_mode(&cfg), (ChannelMode::Slurm, None));
        cfg.slurm.config = AutoPath::Path(without);
        assert_eq!(channel_mode(&cfg), (ChannelMode::Plugin, None));
        cfg.imex.channels = ChannelMode::Plugin;
        cfg.slurm.config = AutoPath::Path(with);
        assert_eq!(channel_mode(&cfg), (ChannelMode::Plugin, None));
        cfg.imex.channels = ChannelMode::Auto;
        cfg.slurm.config = AutoPath::Path(d.path().join("absent.conf"));
        let (mode, warning) = channel_mode(&cfg);
        assert_eq!(mode, ChannelMode::Plugin);
        assert!(warning.unwrap().contains("absent.conf"));
    }
}
