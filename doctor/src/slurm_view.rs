//! The running Slurm as the doctor sees it: `scontrol version` and the
//! controller's `scontrol show config` (the values slurmctld and slurmd run
//! with, defaults and includes resolved), and the files those values name.
//! When the controller does not answer, the same values are read from the
//! slurm.conf this node reads (`$SLURM_CONF`, the configless cache under
//! /run/slurm/conf, else /etc/slurm), so every Slurm-side check still runs;
//! [`SlurmView::from_file`] says which file.
//!
//! `show config` prints `Key = value` lines; they are split by hand (no
//! crate reads this format, and only the first `=` matters).

use slurm_imex_core::error::Result;
use slurm_imex_core::slurm::conf::SlurmConf;
use slurm_imex_core::slurm::Scontrol;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Most files one `Prolog=`/`Epilog=` pattern is taken to name.
const MAX_PROGRAMS: usize = 256;

/// Largest `show config` answer read (real ones are about 10 KB).
const MAX_ANSWER_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Default)]
pub struct SlurmView {
    /// "24.11.5"
    pub version: String,
    values: BTreeMap<String, String>,
    /// The slurm.conf read when the controller did not answer.
    pub from_file: Option<PathBuf>,
}

impl SlurmView {
    /// Ask the controller (`[slurm] scontrol`).
    pub fn query(scontrol: &Scontrol) -> Result<SlurmView> {
        let version = scontrol.version()?;
        let mut view = SlurmView::parse(&scontrol.show_config()?);
        view.version = version;
        Ok(view)
    }

    /// The same values from `conf`, the slurm.conf this node reads, for
    /// when slurmctld does not answer. `scontrol` gives the version (it
    /// needs no controller for that) and, when slurm.conf sets no
    /// PluginDir, the prefix Slurm was installed in.
    pub fn from_file(conf: &SlurmConf, scontrol: &Scontrol) -> SlurmView {
        let version = scontrol.version().unwrap_or_default();
        let program = slurm_imex_core::trust::resolve_program(scontrol.program());
        let dir = conf.path.parent().unwrap_or(Path::new("/"));
        let mut values = BTreeMap::new();
        for key in [
            "PrologFlags",
            "HealthCheckProgram",
            "HealthCheckInterval",
            "SwitchType",
            "PlugStackConfig",
            "PluginDir",
            "TopologyPlugin",
            "PrivateData",
            "NamespaceType",
            "JobContainerType",
        ] {
            if let Some(v) = conf.get(key) {
                values.insert(key.to_ascii_lowercase(), v.to_string());
            }
        }
        for key in ["Prolog", "Epilog"] {
            let programs = conf
                .get_all(key)
                .into_iter()
                .flat_map(|v| v.split(','))
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .flat_map(|v| crate::pattern::expand(dir, v, MAX_PROGRAMS));
            for (i, path) in programs.enumerate() {
                values.insert(
                    format!("{}[{i}]", key.to_ascii_lowercase()),
                    path.display().to_string(),
                );
            }
        }
        if !values.contains_key("plugindir") {
            if let Some(guess) = program.and_then(|p| default_plugin_dir(&p)) {
                values.insert("plugindir".into(), guess.display().to_string());
            }
        }
        values.insert("slurm_conf".into(), conf.path.display().to_string());
        SlurmView {
            version,
            values,
            from_file: Some(conf.path.clone()),
        }
    }

    /// The `Key = value` lines of a `show config` answer.
    pub fn parse(text: &str) -> SlurmView {
        let text = text.get(..MAX_ANSWER_BYTES.min(text.len())).unwrap_or(text);
        let values = text
            .lines()
            .filter_map(|line| {
                let (key, value) = line.split_once('=')?;
                let key = key.trim();
                (!key.is_empty() && !key.contains(' '))
                    .then(|| (key.to_ascii_lowercase(), value.trim().to_string()))
            })
            .collect();
        SlurmView {
            version: String::new(),
            values,
            from_file: None,
        }
    }

    /// A value, None when unset ("(null)", "none" or empty).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .get(&key.to_ascii_lowercase())
            .map(String::as_str)
            .filter(|v| !v.is_empty() && *v != "(null)" && !v.eq_ignore_ascii_case("none"))
    }

    /// Every value of a key that may be a list: `Prolog` (22.05) or
    /// `Prolog[0]`, `Prolog[1]`, ... (Slurm >= 23.02 prints one per program).
    pub fn get_all(&self, key: &str) -> Vec<&str> {
        let key = key.to_ascii_lowercase();
        let indexed = format!("{key}[");
        self.values
            .iter()
            .filter(|(k, _)| **k == key || k.starts_with(&indexed))
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty() && *v != "(null)")
            .collect()
    }

    /// "24.11" of the running Slurm.
    pub fn major_minor(&self) -> &str {
        major_minor(&self.version)
    }

    /// The slurm.conf the controller read.
    pub fn slurm_conf(&self) -> Option<PathBuf> {
        self.get("SLURM_CONF").map(PathBuf::from)
    }

    /// The plugstack.conf slurmd and the clients read: PlugStackConfig, else
    /// plugstack.conf beside slurm.conf (Slurm's default).
    pub fn plugstack(&self) -> Option<PathBuf> {
        if let Some(p) = self.get("PlugStackConfig") {
            return Some(PathBuf::from(p));
        }
        Some(self.slurm_conf()?.parent()?.join("plugstack.conf"))
    }

    /// PluginDir's directories, in Slurm's search order.
    pub fn plugin_dirs(&self) -> Vec<PathBuf> {
        self.get("PluginDir")
            .map(|d| {
                d.split(':')
                    .filter(|s| !s.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Slurm's compiled-in PluginDir, for a slurm.conf that sets none (when the
/// controller answers, its PluginDir is used instead): `lib/slurm` or
/// `lib64/slurm` of the prefix scontrol runs from (a source build, or
/// SchedMD's RPMs in /usr), else Debian's places in this machine's multiarch
/// directory, whichever exists.
fn default_plugin_dir(scontrol: &Path) -> Option<PathBuf> {
    let prefix = scontrol.parent()?.parent()?;
    let multiarch = Path::new("/usr/lib").join(multiarch_tuple());
    [
        prefix.join("lib/slurm"),
        prefix.join("lib64/slurm"),
        multiarch.join("slurm-wlm"),
        multiarch.join("slurm"),
        PathBuf::from("/usr/lib64/slurm"),
    ]
    .into_iter()
    .find(|d| d.is_dir())
}

/// Debian's multiarch tuple for the architecture this program runs on
/// (`x86_64-linux-gnu`, `aarch64-linux-gnu`): the GNU triplet of the CPU,
/// as `dpkg-architecture -qDEB_HOST_MULTIARCH` prints on both.
fn multiarch_tuple() -> String {
    format!("{}-linux-gnu", std::env::consts::ARCH)
}

/// "24.11" of "24.11.5".
pub fn major_minor(version: &str) -> &str {
    match version.match_indices('.').nth(1) {
        Some((i, _)) => &version[..i],
        None => version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_multiarch_tuple_is_this_machines() {
        let t = multiarch_tuple();
        #[cfg(target_arch = "x86_64")]
        assert_eq!(t, "x86_64-linux-gnu");
        #[cfg(target_arch = "aarch64")]
        assert_eq!(t, "aarch64-linux-gnu");
        // On a Debian-family machine, the directory its libc is in.
        if Path::new("/etc/debian_version").exists() {
            let libc = Path::new("/usr/lib").join(&t).join("libc.so.6");
            assert!(libc.exists(), "{} missing", libc.display());
        }
    }

    #[test]
    fn show_config_values_and_unset_ones() {
        let v = SlurmView::parse(
            "Configuration data as of 2026-11-22T20:06:51\nAccountingStorageBackupHost = (null)\n\
             PrologFlags             = Alloc,Contain\nPluginDir               = /opt/slurm/lib/slurm:/x\n\
             SLURM_CONF              = /opt/slurm/etc/slurm.conf\nHealthCheckProgram      = (null)\n",
        );
        assert_eq!(v.get("prologflags"), Some("Alloc,Contain"));
        assert_eq!(v.get("HealthCheckProgram"), None);
        let list =
            SlurmView::parse("Prolog[0]               = /a\nProlog[1] = /b\nPrologFlags = Alloc\n");
        assert_eq!(list.get_all("Prolog"), vec!["/a", "/b"]);
        assert_eq!(
            SlurmView::parse("Prolog = /a,/c\n").get_all("Prolog"),
            vec!["/a,/c"]
        );
        assert_eq!(
            v.plugin_dirs(),
            vec![PathBuf::from("/opt/slurm/lib/slurm"), PathBuf::from("/x")]
        );
        assert_eq!(
            v.plugstack(),
            Some(PathBuf::from("/opt/slurm/etc/plugstack.conf"))
        );
    }

    #[test]
    fn a_slurm_conf_gives_the_same_keys_when_the_controller_is_away() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("slurm.conf");
        std::fs::create_dir(d.path().join("prolog.d")).unwrap();
        std::fs::write(d.path().join("prolog.d/10-site.sh"), "").unwrap();
        std::fs::write(d.path().join("prolog.d/20-imex.sh"), "").unwrap();
        std::fs::write(
            &conf,
            "PrologFlags=Contain\nProlog=/usr/sbin/slurm-imex-prolog,prolog.d/*\nEpilog=/e\nPluginDir=/p\n\
             PrivateData=jobs,usage\nJobContainerType=job_container/tmpfs\n",
        )
        .unwrap();
        let scontrol = Scontrol::new(Path::new("/nonexistent"), std::time::Duration::from_secs(1));
        let v = SlurmView::from_file(&SlurmConf::read(&conf).unwrap(), &scontrol);
        assert_eq!(v.from_file.as_deref(), Some(conf.as_path()));
        assert_eq!(v.get("PrologFlags"), Some("Contain"));
        assert_eq!(v.get("PrivateData"), Some("jobs,usage"));
        assert_eq!(v.get("JobContainerType"), Some("job_container/tmpfs"));
        let prologs = v.get_all("Prolog");
        assert_eq!(prologs.len(), 3, "{prologs:?}");
        assert_eq!(prologs[0], "/usr/sbin/slurm-imex-prolog");
        assert!(prologs[2].ends_with("prolog.d/20-imex.sh"), "{prologs:?}");
        assert_eq!(v.get_all("Epilog"), ["/e"]);
        assert_eq!(v.plugin_dirs(), [PathBuf::from("/p")]);
        assert_eq!(v.slurm_conf(), Some(conf.clone()));
        assert_eq!(v.plugstack(), Some(d.path().join("plugstack.conf")));
    }

    // parse_version's assertions moved with it to slurm_imex_core::slurm::controller.
    #[test]
    fn versions() {
        assert_eq!(major_minor("26.05.5"), "26.05");
    }
}
