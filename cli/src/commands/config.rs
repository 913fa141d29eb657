//! `slurm-imex config`: load imex.toml as the hooks load it
//! (`Config::load_trusted`: every section, then the trust of what it names)
//! and say that it loads, or fail with its one line (exit 2, by `main`);
//! the package's install step runs it and prints that line as a warning
//! (docs/install.md, "A bad key in imex.toml"). `--reference` prints every
//! key's default and meaning instead (`slurm_imex_settings::reference`,
//! docs/settings.md).

use crate::args::Cli;
use crate::output::{self, print_json};
use serde::Serialize;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_settings::{reference, Config};

/// What `--json` prints (docs/json.md).
#[derive(Serialize)]
struct Loaded<'a> {
    config: String,
    present: bool,
    deprecations: &'a [String],
}

pub fn config(cli: &Cli, print_reference: bool) -> Result<u8> {
    if print_reference {
        if cli.json {
            return Err(Error::new("--reference prints Markdown: drop --json"));
        }
        output::lines(&reference::markdown())?;
        return Ok(0);
    }
    let (config, path) = Config::load_trusted(cli.config.as_deref())?;
    let loaded = Loaded {
        config: config
            .source
            .as_deref()
            .unwrap_or(&path)
            .display()
            .to_string(),
        present: config.source.is_some(),
        deprecations: &config.deprecations,
    };
    if cli.json {
        print_json(&loaded)?;
        return Ok(0);
    }
    match loaded.present {
        true => out!(
            "{}: loads; every key known and in range, and what it names trusted",
            loaded.config
        ),
        false => out!("no {}: every key at its default", loaded.config),
    }
    for line in loaded.deprecations {
        out!("note: {line}");
    }
    Ok(0)
}
