//! `slurm-imex config`: load imex.toml as the hooks load it
//! (`Config::load_trusted`: every section, then the trust of what it names)
//! and say that it loads, or fail with its one line (exit 2, by `main`);
//! the package's install step runs it and prints that line as a warning
//! (docs/install.md, "A bad key in imex.toml"). `--reference` prints every
//! key's default and meaning instead (`slurm_imex_settings::reference`,
//! docs/settings.md).

use crate::args::Cli;
use crate::output;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_settings::{reference, Config};

pub fn config(cli: &Cli, print_reference: bool) -> Result<u8> {
    if cli.json {
        return Err(Error::new(
            "config prints one line, or with --reference Markdown: drop --json",
        ));
    }
    if print_reference {
        output::lines(&reference::markdown())?;
        return Ok(0);
    }
    let (config, path) = Config::load_trusted(cli.config.as_deref())?;
    let loaded = match &config.source {
        Some(file) => format!(
            "{}: loads; every key known and in range, and what it names trusted",
            file.display()
        ),
        None => format!("no {}: every key at its default", path.display()),
    };
    out!("{loaded}");
    for line in &config.deprecations {
        out!("note: {line}");
    }
    Ok(0)
}
