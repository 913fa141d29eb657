//! The controller, asked through `scontrol` (`[slurm] scontrol`, bounded by
//! `[slurm] scontrol_timeout`), with an argument vector (never a shell).
//! Every call slurm-imex makes to slurmctld goes through [`Scontrol`]; the
//! calls themselves are its methods here and in `node` and `job`.

use crate::config::SlurmConfig;
use crate::error::{Error, Result};
use crate::process::{run_bounded, run_checked, Output};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The scontrol a program runs, and how long any one call may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scontrol {
    program: PathBuf,
    timeout: Duration,
}

impl Scontrol {
    /// The scontrol `[slurm]` names.
    pub fn of(cfg: &SlurmConfig) -> Scontrol {
        Scontrol::new(&cfg.scontrol, cfg.scontrol_timeout.0)
    }

    pub fn new(program: &Path, timeout: Duration) -> Scontrol {
        Scontrol {
            program: program.to_path_buf(),
            timeout,
        }
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// How long any one call may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `scontrol ARGS`; a non-zero exit is an error saying `<what> failed`.
    pub(super) fn run(&self, args: &[&str], what: &str) -> Result<Output> {
        run_checked(&self.program, args, self.timeout, what)
    }

    /// `scontrol ARGS` read line by line, with no cap on the answer's size.
    pub(super) fn run_streamed<T: Send + 'static>(
        &self,
        args: &[&str],
        what: &str,
        parse: fn(&str) -> Option<T>,
    ) -> Result<crate::process::Streamed<T>> {
        crate::process::run_streamed(&self.program, args, self.timeout, what, parse)
    }

    /// `scontrol ARGS`, whatever its exit status.
    pub(super) fn run_any(&self, args: &[&str]) -> Result<Output> {
        run_bounded(&self.program, args, self.timeout)
    }

    /// `scontrol version`: the client's own version ("24.11.5"), which
    /// needs no controller.
    pub fn version(&self) -> Result<String> {
        let out = self.run(&["version"], "scontrol version")?;
        parse_version(&out.stdout).ok_or_else(|| {
            Error::new(format!(
                "scontrol version printed no version: {}",
                out.one_line()
            ))
        })
    }

    /// `scontrol show config`: the values the controller runs with.
    pub fn show_config(&self) -> Result<String> {
        Ok(self
            .run(&["show", "config"], "scontrol show config")?
            .stdout)
    }

    /// `scontrol -o show partition`: every partition, one line each
    /// (`PartitionName=… OverSubscribe=…`), for the doctor.
    pub fn show_partitions(&self) -> Result<String> {
        Ok(self
            .run(&["-o", "show", "partition"], "scontrol show partition")?
            .stdout)
    }
}

/// "24.11.5" from "slurm 24.11.5" (or "slurm-wlm 24.11.5").
pub fn parse_version(text: &str) -> Option<String> {
    let word = text.split_whitespace().nth(1)?;
    let ok =
        word.split('.').count() >= 3 && word.split('.').take(3).all(|p| p.parse::<u32>().is_ok());
    ok.then(|| word.split('.').take(3).collect::<Vec<_>>().join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("slurm 24.11.5\n").as_deref(), Some("24.11.5"));
        assert_eq!(
            parse_version("slurm-wlm 22.05.8\n").as_deref(),
            Some("22.05.8")
        );
        assert_eq!(parse_version("slurm\n"), None);
    }
}
