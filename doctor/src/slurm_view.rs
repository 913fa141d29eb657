//! The running Slurm as the doctor sees it: `scontrol version` and the
//! controller's `scontrol show config` (the values slurmctld and slurmd run
//! with, defaults and includes resolved), and the files those values name.
//!
//! `show config` prints `Key = value` lines; they are split by hand (no
//! crate reads this format, and only the first `=` matters).

use slurm_imex_core::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest `show config` answer read (real ones are about 10 KB).
const MAX_ANSWER_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Default)]
pub struct SlurmView {
    /// "24.11.5"
    pub version: String,
    values: BTreeMap<String, String>,
}

impl SlurmView {
    /// Ask `scontrol` (the [health] scontrol of the config).
    pub fn query(scontrol: &Path, limit: Duration) -> Result<SlurmView> {
        let program = slurm_imex_core::trust::trusted_program(scontrol, "[health] scontrol")?;
        let version = slurm_imex_core::process::run_checked(
            &program,
            &["version"],
            limit,
            "scontrol version",
        )?;
        let config = slurm_imex_core::process::run_checked(
            &program,
            &["show", "config"],
            limit,
            "scontrol show config",
        )?;
        let mut view = SlurmView::parse(&config.stdout);
        view.version = parse_version(&version.stdout).ok_or_else(|| {
            Error::new(format!(
                "scontrol version printed no version: {}",
                version.one_line()
            ))
        })?;
        Ok(view)
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

/// "24.11" of "24.11.5".
pub fn major_minor(version: &str) -> &str {
    match version.match_indices('.').nth(1) {
        Some((i, _)) => &version[..i],
        None => version,
    }
}

/// "24.11.5" from "slurm 24.11.5" (or "slurm-wlm 24.11.5").
fn parse_version(text: &str) -> Option<String> {
    let word = text.split_whitespace().nth(1)?;
    let ok =
        word.split('.').count() >= 3 && word.split('.').take(3).all(|p| p.parse::<u32>().is_ok());
    ok.then(|| word.split('.').take(3).collect::<Vec<_>>().join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn versions() {
        assert_eq!(parse_version("slurm 24.11.5\n").as_deref(), Some("24.11.5"));
        assert_eq!(
            parse_version("slurm-wlm 22.05.8\n").as_deref(),
            Some("22.05.8")
        );
        assert_eq!(parse_version("slurm\n"), None);
        assert_eq!(major_minor("26.05.5"), "26.05");
    }
}
