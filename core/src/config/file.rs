//! The config file itself: found (an explicit path, `$SLURM_IMEX_CONFIG`,
//! or the default), held to the trust boundary, read without blocking and
//! bounded, and its text checked to be UTF-8. What it says is parsed by
//! `super`.

use super::{Config, CONFIG_ENV};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Largest config file read (the shipped example is about 7 KB).
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The config file found, and its text (None: the default path, absent).
pub struct ConfigFile {
    /// The path as given or found (error lines name it).
    pub path: PathBuf,
    /// The path made absolute, and the file's text.
    pub text: Option<(PathBuf, String)>,
}

impl ConfigFile {
    /// Find the file (an explicit path, which must exist, or else
    /// `$SLURM_IMEX_CONFIG`, which must, or else [`default_config_path`],
    /// which may be absent: defaults) and read it. It is held to the trust
    /// boundary ([`crate::trust`]) and read without blocking, so a FIFO in
    /// its place cannot hang anyone.
    pub fn read(explicit: Option<&Path>) -> Result<ConfigFile> {
        let (path, must_exist) = Config::path_to_load(explicit);
        if !must_exist && std::fs::symlink_metadata(&path).is_err() {
            return Ok(ConfigFile { path, text: None });
        }
        let absolute = if path.is_absolute() {
            path.clone()
        } else {
            std::env::current_dir()
                .map(|d| d.join(&path))
                .unwrap_or_else(|_| path.clone())
        };
        crate::trust::check(&absolute, crate::trust::Expect::File, "config").map_err(|e| {
            e.context("fix the file or the path given by config=, --config or $SLURM_IMEX_CONFIG")
        })?;
        let bytes = crate::fsutil::read_bounded(&absolute, MAX_CONFIG_BYTES).map_err(|e| {
            Error::of(
                e.kind(),
                format!("{e} (fix the path given by config=, --config or ${CONFIG_ENV})"),
            )
        })?;
        let text = utf8_config(bytes, &path)?;
        Ok(ConfigFile {
            path,
            text: Some((absolute, text)),
        })
    }
}

/// The config's text. TOML is UTF-8 by definition; a byte that is not is
/// named with its line, never replaced silently.
fn utf8_config(bytes: Vec<u8>, path: &Path) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let good = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = 1 + bytes[..good].iter().filter(|b| **b == b'\n').count();
        Error::invalid(format!(
            "bad config {}:{line}: byte {:#04x} is not UTF-8: save the file as UTF-8",
            path.display(),
            bytes[good]
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_that_is_not_utf8_is_refused_naming_the_line() {
        let e = utf8_config(
            b"[imex]\n# caf\xe9\nport_base = 1\n".to_vec(),
            Path::new("/e/imex.toml"),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "bad config /e/imex.toml:2: byte 0xe9 is not UTF-8: save the file as UTF-8"
        );
        assert_eq!(
            utf8_config(b"a = 1".to_vec(), Path::new("x")).unwrap(),
            "a = 1"
        );
    }
}
