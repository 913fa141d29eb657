//! `slurm-imex doctor`: runs the checks of the doctor crate and prints one
//! line each (or --json); exit 1 on any FAIL. It runs on a config that
//! fails to load too (with defaults), so that FAIL is one line among the rest.

use crate::args::Cli;
use crate::output::print_json;
use serde::Serialize;
use slurm_imex_core::error::Result;
use slurm_imex_doctor::{examine_within, Check, Status};
use slurm_imex_settings::Config;
use std::path::PathBuf;

#[derive(Serialize)]
struct Report<'a> {
    config: String,
    checks: &'a [Check],
    fail: usize,
    warn: usize,
}

pub fn doctor(cli: &Cli, cluster_only: bool) -> Result<u8> {
    let (path, _) = Config::path_to_load(cli.config.as_deref());
    let (config, loaded) = match Config::load(cli.config.as_deref()) {
        Ok((config, _)) => (config, Ok(())),
        Err(e) => (Config::default(), Err(e)),
    };
    let found = examine_within(
        config,
        path.clone(),
        loaded,
        sbin_dir(),
        cluster_only,
        slurm_imex_doctor::TIME_LIMIT,
    );
    let count = |v: Status| found.iter().filter(|f| f.verdict == v).count();
    let (fail, warn) = (count(Status::Fail), count(Status::Warn));
    if cli.json {
        let report = Report {
            config: path.display().to_string(),
            checks: &found,
            fail,
            warn,
        };
        print_json(&report)?;
    } else {
        for f in &found {
            out!("{}", f.line());
        }
        out!(
            "doctor: {} checks, {fail} FAIL, {warn} WARN ({})",
            found.len(),
            path.display()
        );
    }
    Ok(u8::from(fail > 0))
}

/// Where the prolog and epilog are installed beside this CLI: ../sbin of
/// its bin directory (/usr/bin -> /usr/sbin, /usr/local/bin -> /usr/local/sbin).
fn sbin_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("sbin")))
        .filter(|d| d.is_dir())
        .unwrap_or_else(|| PathBuf::from("/usr/sbin"))
}
