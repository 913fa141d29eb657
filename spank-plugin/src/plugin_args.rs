//! The plugstack.conf arguments of the plugin (`config=/etc/slurm/imex.toml`)
//! and loading the config they point at.

use slurm_imex_core::config::Config;
use std::path::PathBuf;

#[derive(Debug, Default, Clone)]
pub(crate) struct PluginArgs {
    pub config_path: Option<PathBuf>,
    /// A bad argument; reported whenever the plugin has work to do.
    pub error: Option<String>,
}

impl PluginArgs {
    pub fn parse(argv: &[&str]) -> PluginArgs {
        let mut args = PluginArgs::default();
        for arg in argv {
            match arg.split_once('=') {
                Some(("config", path)) if !path.is_empty() => {
                    args.config_path = Some(PathBuf::from(path))
                }
                _ => {
                    args.error = Some(format!(
                        "unknown plugstack.conf argument \"{arg}\" for spank_imex.so \
                         (the only argument is config=/path/to/imex.toml)"
                    ))
                }
            }
        }
        args
    }

    /// The config, or the one line that says why it cannot be used (a
    /// String, as the plugin hands it to SPANK as is).
    pub fn load_config(&self) -> Result<Config, String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        Config::load(self.config_path.as_deref())
            .map(|(c, _)| c)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_config_argument_and_rejects_others() {
        let a = PluginArgs::parse(&["config=/etc/slurm/imex.toml"]);
        assert_eq!(a.config_path, Some(PathBuf::from("/etc/slurm/imex.toml")));
        assert!(a.error.is_none());
        let a = PluginArgs::parse(&["conf=/x"]);
        assert!(a.error.unwrap().contains("conf=/x"));
        let a = PluginArgs::parse(&["config="]);
        assert!(a.error.is_some());
        let a = PluginArgs::parse(&["config=/nonexistent/imex.toml"]);
        assert!(a
            .load_config()
            .unwrap_err()
            .contains("/nonexistent/imex.toml"));
    }
}
