//! The slurm-imex configuration (`/etc/slurm/imex.toml`) as a file: where it
//! is found, its trust, reading it (parsed once, `document`), the one-line
//! `file:line: key` errors for bad files, renamed keys, and the keys the
//! SPANK plugin reads: `[node]`, `[imex]`'s channel keys (`imex`) and
//! `[slurm]`. Every other key's schema, defaults and bounds sit in the
//! crate that uses it, as a [`Section`] (the rest of `[imex]` in
//! `slurm-imex-domain`); the programs assemble the whole file from them
//! (`slurm-imex-settings`), so a bad key anywhere is still refused when they
//! load it, while the plugin parses only its own keys. What each key says
//! of itself (its default and one line, beside its struct) is `key_doc`,
//! and the keys a section's struct reads, as serde knows them,
//! `field_names`. Every key has a default, and the file may be absent at
//! its default path.

use crate::error::Result;
use serde::Deserialize;
use std::path::{Path, PathBuf};

pub mod bounds;
mod document;
mod field_names;
mod file;
mod imex;
mod key_doc;
mod locate;
mod node;
mod renamed;
mod slurm;
mod values;
pub use document::{key_label, Document};
pub use field_names::field_names;
pub use file::ConfigFile;
pub use imex::*;
pub use key_doc::{check_keys, Documented, Key};
pub use node::NodeConfig;
use renamed::{move_renamed, Renamed};
pub use slurm::SlurmConfig;
pub use values::{AutoPath, HumanDuration};

/// Where the config lives when nobody says otherwise.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/slurm/imex.toml";
/// Environment variable that overrides the default config path.
pub const CONFIG_ENV: &str = "SLURM_IMEX_CONFIG";

/// Where the config is read when nobody names it: `imex.toml` beside the
/// slurm.conf in `$SLURM_CONF` when one is there (slurmd gives a prolog its
/// SLURM_CONF; a Slurm built into a prefix keeps both in `<prefix>/etc`),
/// else [`DEFAULT_CONFIG_PATH`].
pub fn default_config_path() -> PathBuf {
    let slurm_conf = std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    if let Some(dir) = slurm_conf.as_deref().and_then(Path::parent) {
        let beside = dir.join("imex.toml");
        if std::fs::symlink_metadata(&beside).is_ok() {
            return beside;
        }
    }
    PathBuf::from(DEFAULT_CONFIG_PATH)
}

/// One `[section]` of the file, defined by the crate that uses it: its
/// schema and defaults (serde), and its bounds.
pub trait Section {
    /// The first value out of its documented bounds: its dotted key
    /// (`database.retention`) and what follows `key = ` on the error line.
    fn first_problem(&self) -> Option<(&'static str, String)>;
}

/// The keys core reads (the SPANK plugin's: `[node]`, `[imex]`'s channel
/// keys, `[slurm]`), and what loading the file found out about it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    pub node: NodeConfig,
    pub imex: ImexConfig,
    pub slurm: SlurmConfig,
    /// One line per deprecated key the file used, naming `file:line` and the
    /// new key. The hooks send them to the journal (never to stderr, where a
    /// failing hook says one line); `slurm-imex status` prints them.
    pub deprecations: Vec<String>,
    /// The file this config was read from (None: defaults, no file). Paths
    /// that default to "beside imex.toml" are found from it.
    pub source: Option<PathBuf>,
    /// Keys the file gave under an old name, so lines about them name what
    /// the admin wrote.
    renamed: Renamed,
    /// `file:line` of the keys whose files are read later
    /// ([`Config::note_places`]), for the lines about those files.
    places: Vec<(&'static str, String)>,
}

/// `[health] scontrol` and `scontrol_timeout`, the old names of `[slurm]`'s
/// keys: read wherever `[health]` is, and moved into `[slurm]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct OldHealthKeys {
    pub scontrol: Option<PathBuf>,
    pub scontrol_timeout: Option<HumanDuration>,
}

/// What the SPANK plugin reads of the file: its own keys, and the old
/// names of its keys. Other sections, and the rest of `[imex]`, are the
/// programs' and are not read here (the programs refuse a bad one when they
/// load the file).
#[derive(Default, Deserialize)]
#[serde(default)]
struct PluginFile {
    node: NodeConfig,
    imex: ImexConfig,
    slurm: SlurmConfig,
    health: OldHealthKeys,
}

impl Config {
    /// Parse the plugin's keys of config text; `origin` names the file in
    /// error messages. Other sections, and the rest of `[imex]`, are not
    /// read.
    pub fn parse(text: &str, origin: &Path) -> Result<Config> {
        Config::read(&Document::parse(text, origin)?)
    }

    /// The plugin's keys as `doc` writes them: old key names moved to the
    /// new ones (with a deprecation line), then every value checked.
    pub fn read(doc: &Document) -> Result<Config> {
        let file: PluginFile = doc.read()?;
        let mut config = Config {
            node: file.node,
            imex: file.imex,
            slurm: file.slurm,
            ..Config::default()
        };
        let used = config.take_renamed_keys(file.health, doc.text(), doc.origin())?;
        config.validate(doc, &used)?;
        config.renamed = used;
        Ok(config)
    }

    /// Remember where `text` writes each of `keys` (keys naming files that
    /// are read later, such as the job view's `store_access::KEYS`), for [`Config::place_of`].
    /// The text is parsed once for all of them, and not at all for none (a
    /// file that sets none of them costs every prolog nothing here).
    pub fn note_places(&mut self, text: &str, origin: &Path, keys: &[&'static str]) {
        if keys.is_empty() {
            return;
        }
        self.places = locate::lines_of_keys(text, keys)
            .into_iter()
            .map(|(k, line)| (k, format!("{}:{line}", origin.display())))
            .collect();
    }

    /// `file:line` of `key` (one of those noted) as the file read wrote it;
    /// the file alone when it did not write the key.
    pub fn place_of(&self, key: &str) -> String {
        let file = || {
            self.source
                .as_deref()
                .map_or(DEFAULT_CONFIG_PATH.into(), |p| p.display().to_string())
        };
        self.places
            .iter()
            .find(|(k, _)| *k == key)
            .map_or_else(file, |(_, at)| at.clone())
    }

    /// Keys that moved keep working under their old names, with a
    /// deprecation line naming the line to change: `[imex] state_dir` is now
    /// `[node] state_dir`, `[health] scontrol` and `scontrol_timeout` are
    /// now in `[slurm]`. Both names with different values is an error.
    /// Returns the new names whose value came from an old one (for errors).
    fn take_renamed_keys(
        &mut self,
        old: OldHealthKeys,
        text: &str,
        origin: &Path,
    ) -> Result<Renamed> {
        let path = |p: &PathBuf| format!("\"{}\"", p.display());
        let duration = |d: &HumanDuration| format!("\"{}\"", humantime::format_duration(d.0));
        let moved = [
            (
                ("imex.state_dir", "node.state_dir"),
                move_renamed(self.imex.state_dir.take(), &mut self.node.state_dir, path),
            ),
            (
                ("health.scontrol", "slurm.scontrol"),
                move_renamed(old.scontrol, &mut self.slurm.scontrol, path),
            ),
            (
                ("health.scontrol_timeout", "slurm.scontrol_timeout"),
                move_renamed(
                    old.scontrol_timeout,
                    &mut self.slurm.scontrol_timeout,
                    duration,
                ),
            ),
        ];
        let mut used = Renamed::default();
        for (keys, seen) in moved {
            if let Some(seen) = seen {
                used.note(text, origin, keys, seen, &mut self.deprecations)?;
            }
        }
        Ok(used)
    }

    fn validate(&self, doc: &Document, used: &Renamed) -> Result<()> {
        let found = bounds::first_violation(bounds::durations(self), Vec::new())
            .or_else(|| self.relative_path());
        match found {
            Some((key, why)) => Err(doc.bad_value(used.as_written(key), &why)),
            None => Ok(()),
        }
    }

    /// The first path key that must be absolute and is not.
    fn relative_path(&self) -> Option<(&'static str, String)> {
        [
            ("imex.channel_dir", &self.imex.channel_dir),
            ("node.state_dir", &self.node.state_dir),
        ]
        .into_iter()
        .find(|(_, p)| !p.is_absolute())
        .map(|(key, p)| (key, must_be_absolute(p)))
    }

    /// The file [`Config::load`] reads, and whether it must exist: an
    /// explicit path or `$SLURM_IMEX_CONFIG` must, the default may be absent.
    pub fn path_to_load(explicit: Option<&Path>) -> (PathBuf, bool) {
        let from_env = std::env::var_os(CONFIG_ENV).filter(|v| !v.is_empty());
        match (explicit, from_env) {
            (Some(p), _) => (p.to_path_buf(), true),
            (None, Some(p)) => (PathBuf::from(p), true),
            (None, None) => (default_config_path(), false),
        }
    }

    /// Load the plugin's sections from the file [`ConfigFile::read`] finds.
    pub fn load(explicit: Option<&Path>) -> Result<(Config, PathBuf)> {
        let file = ConfigFile::read(explicit)?;
        let Some((absolute, text)) = &file.text else {
            return Ok((Config::default(), file.path));
        };
        let mut config = Config::parse(text, &file.path)?;
        config.loaded_from(absolute);
        Ok((config, file.path))
    }

    /// Note where the config was read from, and send its deprecation lines
    /// to the journal.
    pub fn loaded_from(&mut self, absolute: &Path) {
        self.source = Some(absolute.to_path_buf());
        for line in &self.deprecations {
            crate::logging::warn_to_journal(&format!("slurm-imex: {line}"));
        }
    }

    /// Hold the programs this config names to the trust boundary, before
    /// root runs any of them (`[slurm] scontrol`; the engine's are held by
    /// `slurm-imex-domain`).
    pub fn check_trust(&self) -> Result<()> {
        let key = key_label(self.renamed.as_written("slurm.scontrol"));
        check_program_trust(&key, &self.slurm.scontrol)
    }
}

/// Hold a program the config names (`what`: its key) to the trust
/// boundary. One not installed on this node is skipped here (running it
/// fails with its own line).
pub fn check_program_trust(what: &str, program: &Path) -> Result<()> {
    if let Some(found) = crate::trust::resolve_program(program) {
        if found.exists() {
            crate::trust::check(&found, crate::trust::Expect::Program, what)?;
        }
    }
    Ok(())
}

/// Hold a file the config names to the trust boundary, when it is there.
pub fn check_file_trust(what: &str, file: &Path) -> Result<()> {
    if file.is_absolute() && file.exists() {
        crate::trust::check(file, crate::trust::Expect::File, what)?;
    }
    Ok(())
}

/// Why a path key's value is refused: `"run" must be an absolute path`.
pub fn must_be_absolute(p: &Path) -> String {
    format!("\"{}\" must be an absolute path", p.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<Config> {
        Config::parse(t, Path::new("/etc/slurm/imex.toml"))
    }

    #[test]
    fn the_old_state_dir_key_still_works_with_a_deprecation_line() {
        let c = parse("[imex]\nstate_dir = \"/run/old\"\n").unwrap();
        assert_eq!(c.node.state_dir, Path::new("/run/old"));
        assert_eq!(c.imex.state_dir, None);
        assert_eq!(
            c.deprecations,
            ["/etc/slurm/imex.toml:2: [imex] state_dir is deprecated: rename it to [node] state_dir (same meaning)"]
        );
        let c = parse("[node]\nstate_dir = \"/run/new\"\n").unwrap();
        assert_eq!(c.node.state_dir, Path::new("/run/new"));
        assert!(c.deprecations.is_empty());
        let same = "[node]\nstate_dir = \"/run/x\"\n[imex]\nstate_dir = \"/run/x\"\n";
        assert_eq!(parse(same).unwrap().node.state_dir, Path::new("/run/x"));
        let e = parse("[node]\nstate_dir = \"/run/a\"\n[imex]\nstate_dir = \"/run/b\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("imex.toml:4") && e.contains("disagree"), "{e}");
        let e = parse("[node]\nstate_dir = \"run\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(":2") && e.contains("[node] state_dir") && e.contains("absolute"),
            "{e}"
        );
        let e = parse("[imex]\nstate_dir = \"run\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[imex] state_dir") && e.contains("absolute"),
            "{e}"
        );
    }

    #[test]
    fn the_plugin_reads_its_sections_and_leaves_the_programs_ones() {
        let text = "[gpu]\nno_such_key = 1\n[health]\nscontrol = \"/opt/scontrol\"\nmig = 7\n";
        let c = parse(text).unwrap();
        assert_eq!(c.slurm.scontrol, Path::new("/opt/scontrol"));
        assert_eq!(c.deprecations.len(), 1, "{:?}", c.deprecations);
        let text = include_str!("../../../conf-examples/imex.toml");
        assert_eq!(parse(text).unwrap(), Config::default());
    }

    #[test]
    fn the_plugin_reads_only_imex_channel_keys_and_leaves_the_engines() {
        // The engine's keys, good or bad, and keys no reader knows, are the
        // programs' to judge: the plugin never parses them.
        let text = "[imex]\nchannel_count = 16\nready_timeout = \"soon\"\nchanel_dir = \"/x\"\n\
                    [imex.daemon]\nmanager = \"upstart\"\n[imex.watch]\ninterval = \"0s\"\n";
        let c = parse(text).unwrap();
        assert_eq!(c.imex.channel_count.0, 16);
        assert_eq!(c.imex.channel_dir, ImexConfig::default().channel_dir);
        // Its own keys, bad, refuse it with file:line: key.
        let e = parse("\n[imex]\nchannel_count = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":3") && e.contains("channel_count = 1"), "{e}");
        let e = parse("[imex]\nchannels = \"both\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":2") && e.contains("[imex] channels"), "{e}");
        let e = parse("[imex\n").unwrap_err().to_string();
        assert!(e.contains("imex.toml:1"), "{e}");
        // [node] and [slurm] are the plugin's whole: an unknown key there too.
        let e = parse("[slurm]\nscontol = \"/x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":2") && e.contains("[slurm] scontol"), "{e}");
    }

    #[test]
    fn missing_explicit_file_is_an_error_but_missing_default_is_not() {
        let e = Config::load(Some(Path::new("/nonexistent/imex.toml"))).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/imex.toml"), "{e}");
    }
}
